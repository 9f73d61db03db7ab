package activities

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/grpc"

	"github.com/wop-dev/wop/convo"
)

// stickyClient is a WorkflowClient whose WorkflowService records sticky resets.
type stickyClient struct {
	WorkflowClient // not called
	svc            *stickyService
}

func (c *stickyClient) WorkflowService() workflowservice.WorkflowServiceClient { return c.svc }

type stickyService struct {
	workflowservice.WorkflowServiceClient // not called
	mu                                    sync.Mutex
	resets                                []*workflowservice.ResetStickyTaskQueueRequest
}

func (s *stickyService) ResetStickyTaskQueue(_ context.Context, req *workflowservice.ResetStickyTaskQueueRequest, _ ...grpc.CallOption) (*workflowservice.ResetStickyTaskQueueResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resets = append(s.resets, req)
	return &workflowservice.ResetStickyTaskQueueResponse{}, nil
}

// flakyProvider fails its first call with a retryable error, then answers.
type flakyProvider struct {
	mu    sync.Mutex
	calls int
}

func (p *flakyProvider) Name() string { return ProviderOpenAI }
func (p *flakyProvider) Complete(context.Context, *Request) (*convo.ModelRoundResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.calls++; p.calls == 1 {
		return nil, temporal.NewApplicationError("openai is unavailable (HTTP 503)", ErrTypeUnavailable)
	}
	return &convo.ModelRoundResult{Text: "ok", Model: "m"}, nil
}

// A round's second attempt has Temporal forget its run's sticky queue, once, before it
// reads the transcript; the first attempt does not.
func TestRetriedModelRoundResetsTheRunsStickyQueue(t *testing.T) {
	svc := &stickyService{}
	p := &flakyProvider{}
	acts, err := New(Config{Transcripts: &fakeTranscripts{}, Providers: map[string]Provider{DefaultProviderKey: p},
		Workflows: &stickyClient{svc: svc}})
	require.NoError(t, err)
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterActivityWithOptions(acts.ModelRound, activity.RegisterOptions{Name: "ModelRound"})
	env.RegisterWorkflowWithOptions(func(ctx workflow.Context) (string, error) {
		ctx = workflow.WithActivityOptions(ctx, ModelRoundOptions(ProviderOpenAI))
		var res convo.ModelRoundResult
		err := workflow.ExecuteActivity(ctx, "ModelRound", convo.ModelRoundInput{RunID: "r_1", PackID: "p", Round: 1}).Get(ctx, &res)
		return res.Text, err
	}, workflow.RegisterOptions{Name: "round"})
	env.ExecuteWorkflow("round")
	require.NoError(t, env.GetWorkflowError())
	var text string
	require.NoError(t, env.GetWorkflowResult(&text))
	assert.Equal(t, "ok", text)
	assert.Equal(t, 2, p.calls)
	svc.mu.Lock()
	defer svc.mu.Unlock()
	require.Len(t, svc.resets, 1, "only the second attempt resets")
	assert.Equal(t, "default-test-workflow-id", svc.resets[0].GetExecution().GetWorkflowId())
	assert.NotEmpty(t, svc.resets[0].GetNamespace())
}
