package workflows

import (
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/activities"
)

// Register registers every workflow and activity of the host on r. Both a real
// worker.Worker and the SDK's TestWorkflowEnvironment satisfy worker.Registry, so the
// worker process, unit tests and end-to-end tests share this one function.
func Register(r worker.Registry, acts *activities.Activities) {
	r.RegisterWorkflowWithOptions(Run, workflow.RegisterOptions{Name: RunWorkflowName})
	r.RegisterWorkflowWithOptions(WebhookDispatcher, workflow.RegisterOptions{Name: WebhookDispatcherWorkflowName})
	r.RegisterWorkflowWithOptions(WebhookDelivery, workflow.RegisterOptions{Name: WebhookDeliveryWorkflowName})
	if acts != nil {
		r.RegisterActivity(acts)
	}
}
