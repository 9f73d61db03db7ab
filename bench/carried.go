package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/convo"
	"github.com/wop-dev/wop/packagent"
	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/worker"
	"github.com/wop-dev/wop/workflows"
)

// The carried workload measures what a run carries across continue-as-new as its
// conversation grows: the size of the continue-as-new input (the next execution's
// RunInput, carried state included) right after turn CarriedEarlyTurn and right after
// turn CarriedTurns of one bench-echo conversation whose messages and replies are
// carriedMessageBytes long. It runs the real run workflow and pack engine in the SDK's
// workflow test environment: the ModelRound activity answers a reply of that size
// without a model, and the run continues as new after the early turn and then every
// carriedSegmentTurns turns, as often as Temporal's suggestion (4,096 history events,
// about 12 a turn) makes a busy conversation do. No Temporal server is involved: the
// figure is the input the workflow hands Temporal, byte for byte.
const (
	carriedMessageBytes = 2 << 10
	carriedSegmentTurns = 300
	// eventsOpening is what a pack conversation logs before its first turn
	// (run.started … conversation.opened), eventsPerTurn what each echo turn logs
	// (the user turn, agent.decided, provider.usage, the agent turn).
	eventsOpening = 5
	eventsPerTurn = 4
)

// carried runs the carried workload.
func (b *bench) carried(ctx context.Context, r *Result) error {
	early, late, err := carriedBytes(ctx, b.opts.CarriedEarlyTurn, b.opts.CarriedTurns)
	if err != nil {
		return err
	}
	r.CarriedBytesTurn10, r.CarriedBytesTurn2000 = int64(early), int64(late)
	return nil
}

// carriedBytes drives one conversation to turn late and returns the continue-as-new
// input size after turn early and after turn late.
func carriedBytes(ctx context.Context, early, late int) (int, int, error) {
	tmp, err := os.MkdirTemp("", "wop-bench-carried-")
	if err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(tmp)
	dir := filepath.Join(tmp, "packs")
	if err := writePacks(dir, ""); err != nil {
		return 0, 0, err
	}
	loaded, err := worker.LoadPacks(dir, nil)
	if err != nil {
		return 0, 0, err
	}
	cat, err := worker.LoadCatalog(loaded, false, worker.DefaultTurnLimits())
	if err != nil {
		return 0, 0, err
	}
	in, err := cat.NewRunInput(workflows.RunRequest{RunID: "bench-carried-" + randomHex(4), WorkflowID: PackID, Owner: workflows.Owner{Tenant: "bench", Principal: "bench"}})
	if err != nil {
		return 0, 0, err
	}
	var sizes []int
	turn := 0
	for _, end := range carriedSegments(early, late) {
		in.ContinueAsNewAfterEvents = eventsPerTurn * (end - turn)
		if turn == 0 {
			in.ContinueAsNewAfterEvents += eventsOpening
		}
		next, size, err := carriedExecution(ctx, *in, turn, end)
		if err != nil {
			return 0, 0, fmt.Errorf("turns %d to %d: %w", turn+1, end, err)
		}
		sizes = append(sizes, size)
		in, turn = next, end
	}
	return sizes[0], sizes[len(sizes)-1], nil
}

// carriedSegments are the turns after which the run continues as new: early, then
// every carriedSegmentTurns turns, and late.
func carriedSegments(early, late int) []int {
	ends := []int{early}
	for t := early + carriedSegmentTurns; t < late; t += carriedSegmentTurns {
		ends = append(ends, t)
	}
	return append(ends, late)
}

// carriedExecution runs one execution of the run: turns from+1 to to, then the
// continue-as-new the knob asks for. It returns the next execution's input and the
// size of that input as Temporal receives it.
func carriedExecution(ctx context.Context, in workflows.RunInput, from, to int) (*workflows.RunInput, int, error) {
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := suite.NewTestWorkflowEnvironment()
	env.SetTestTimeout(5 * time.Minute)
	// A busy machine must not pass for a stuck workflow.
	env.SetWorkerOptions(sdkworker.Options{DeadlockDetectionTimeout: time.Minute})
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: in.RunID, TaskQueue: workflows.TaskQueue})
	packagent.Register()
	env.RegisterWorkflowWithOptions(workflows.Run, workflow.RegisterOptions{Name: workflows.RunWorkflowName})
	// The run signals its tenant's webhook dispatcher; the bench tenant has none, and a
	// run carries on when the signal finds no dispatcher.
	env.OnSignalExternalWorkflow(mock.Anything, protocol.WebhookDispatcherID(in.Owner.Tenant), mock.Anything, workflows.WebhookEventsSignal, mock.Anything).
		Return(errors.New("no webhook dispatcher")).Maybe()
	reply := strings.Repeat("r", carriedMessageBytes)
	answer := func() *convo.ModelRoundResult {
		return &convo.ModelRoundResult{Text: reply, Provider: activities.ProviderMock, Model: activities.MockModel,
			Usage: convo.Usage{InputTokens: 1, OutputTokens: carriedMessageBytes / 4}, FinishReason: "stop"}
	}
	env.RegisterActivityWithOptions(func(_ context.Context, _ convo.ModelRoundInput) (*convo.ModelRoundResult, error) {
		return answer(), nil
	}, activity.RegisterOptions{Name: "ModelRound"})
	// Rounds after one the mock answered run as the local activity, as on the host.
	env.RegisterActivityWithOptions(func(_ context.Context, _ activities.LocalModelRoundInput) (*convo.ModelRoundResult, error) {
		return answer(), nil
	}, activity.RegisterOptions{Name: "ModelRoundLocal"})
	for t := from + 1; t <= to; t++ {
		text := fmt.Sprintf("message %d %s", t, strings.Repeat("m", carriedMessageBytes))
		req := workflows.ResolveRequest{RequestID: fmt.Sprintf("req-%d", t), NodeID: workflows.ServedPackNodeID,
			ResumeValue: mustJSON(map[string]string{"text": text}), ResolvedBy: "bench", ReceivedAtMs: int64(t), Via: "rest"}
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(workflows.ResolveSignal, req) }, time.Duration(t-from)*time.Minute)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		env.ExecuteWorkflow(workflows.RunWorkflowName, in)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	}
	var can *workflow.ContinueAsNewError
	if !errors.As(env.GetWorkflowError(), &can) {
		return nil, 0, fmt.Errorf("the run did not continue as new after turn %d: %v", to, env.GetWorkflowError())
	}
	var next workflows.RunInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		return nil, 0, err
	}
	var st struct {
		Convs []struct {
			TurnCount int `json:"turnCount"`
		} `json:"convs"`
	}
	if err := json.Unmarshal(next.Carried, &st); err != nil || len(st.Convs) != 1 || st.Convs[0].TurnCount != 1+2*to {
		return nil, 0, fmt.Errorf("the carried state after turn %d does not hold %d turns (%v)", to, 1+2*to, err)
	}
	return &next, can.Input.Size(), nil
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}
