package worker

import (
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/packagent"
	"github.com/wop-dev/wop/webhooks"
	"github.com/wop-dev/wop/workflows"
)

// Register registers every workflow and activity of the host on r: the run workflow
// (package workflows) with the pack agent its pack nodes converse with (package
// packagent), the webhook dispatcher and delivery workflows (package webhooks) and,
// when acts is not nil, the activities. Both a real worker and the SDK's
// TestWorkflowEnvironment satisfy worker.Registry, so the worker process and the tests
// assemble the host with this one function.
func Register(r sdkworker.Registry, acts *activities.Activities) {
	packagent.Register()
	r.RegisterWorkflowWithOptions(workflows.Run, workflow.RegisterOptions{Name: workflows.RunWorkflowName})
	r.RegisterWorkflowWithOptions(webhooks.WebhookDispatcher, workflow.RegisterOptions{Name: webhooks.WebhookDispatcherWorkflowName})
	r.RegisterWorkflowWithOptions(webhooks.WebhookDelivery, workflow.RegisterOptions{Name: webhooks.WebhookDeliveryWorkflowName})
	if acts != nil {
		r.RegisterActivity(acts)
	}
}
