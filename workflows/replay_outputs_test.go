package workflows_test

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/packagent"
	"github.com/wop-dev/wop/webhooks"
	"github.com/wop-dev/wop/workflows"
)

// TestReplayOutputsUnchanged replays every recorded history (as TestReplayRecordedHistories
// does) and captures what the current workflow code produces on the way: the value of
// every side effect (the event records), every activity, local activity and child
// workflow it schedules with its options and input, every signal it sends, every search
// attribute it sets, every version it asks, the input it continues as new with (the
// carried state), its result, and, once the history is replayed, what its queries
// answer (the snapshot, every event of the execution, the run's basis). The capture of
// each history is compared, by its SHA-256, with testdata/replay-outputs.json, written
// by the code the histories were last checked against.
//
// Replay alone does not compare most of this: the SDK checks the commands' kinds and
// ids, not the payloads. This test does, so a change meant to leave behaviour alone
// (a refactor) shows that every byte a recorded run produces is what it was. A change
// that alters what recorded runs produce regenerates the file on purpose:
//
//	WOP_UPDATE_REPLAY_OUTPUTS=1 go test ./workflows -run TestReplayOutputsUnchanged
//
// and WOP_REPLAY_OUTPUTS_DIR=dir writes each capture there, to compare two versions of
// the code with diff.
func TestReplayOutputsUnchanged(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.history.json"))
	require.NoError(t, err)
	earlier, err := filepath.Glob(filepath.Join("testdata", "earlier", "*.history.json"))
	require.NoError(t, err)
	files = append(files, earlier...)
	require.NotEmpty(t, files)

	golden := filepath.Join("testdata", "replay-outputs.json")
	want := map[string]string{}
	update := os.Getenv("WOP_UPDATE_REPLAY_OUTPUTS") != ""
	if !update {
		b, err := os.ReadFile(golden)
		require.NoError(t, err, "no %s: write it with WOP_UPDATE_REPLAY_OUTPUTS=1", golden)
		require.NoError(t, json.Unmarshal(b, &want))
	}
	dir := os.Getenv("WOP_REPLAY_OUTPUTS_DIR")
	got := map[string]string{}
	for _, f := range files {
		name, _ := filepath.Rel("testdata", f)
		capture := &replayCapture{}
		r, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{
			Interceptors: []interceptor.WorkerInterceptor{&captureInterceptor{rec: capture}},
		})
		require.NoError(t, err)
		registerReplayWorkflows(r)
		require.NoError(t, r.ReplayWorkflowHistoryFromJSONFile(nil, f), name)
		capture.queryAll(t)
		out := capture.encode(t)
		sum := sha256.Sum256(out)
		got[name] = hex.EncodeToString(sum[:])
		if dir != "" {
			p := filepath.Join(dir, filepath.FromSlash(name)+".outputs")
			require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
			require.NoError(t, os.WriteFile(p, out, 0o644))
		}
		if !update {
			require.Equal(t, want[name], got[name], "%s: the current code produces other outputs for this recorded history than the code %s was written with (WOP_REPLAY_OUTPUTS_DIR shows them)", name, golden)
		}
	}
	if update {
		b, err := json.MarshalIndent(got, "", "  ")
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(golden, append(b, '\n'), 0o644))
		return
	}
	require.Len(t, got, len(want), "%s names histories that are gone", golden)
}

// registerReplayWorkflows registers the host's workflows on a replayer.
func registerReplayWorkflows(r worker.WorkflowReplayer) {
	packagent.Register()
	r.RegisterWorkflowWithOptions(workflows.Run, workflow.RegisterOptions{Name: workflows.RunWorkflowName})
	r.RegisterWorkflowWithOptions(webhooks.WebhookDispatcher, workflow.RegisterOptions{Name: webhooks.WebhookDispatcherWorkflowName})
	r.RegisterWorkflowWithOptions(webhooks.WebhookDelivery, workflow.RegisterOptions{Name: webhooks.WebhookDeliveryWorkflowName})
}

// replayCapture is what one replay produced, in order.
type replayCapture struct {
	records  []captured
	versions map[string]bool
	queries  map[string]any
}

type captured struct {
	Kind  string          `json:"kind"`
	Name  string          `json:"name,omitempty"`
	Value json.RawMessage `json:"value"`
}

func (c *replayCapture) add(kind, name string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal("marshal error: " + err.Error())
	}
	c.records = append(c.records, captured{Kind: kind, Name: name, Value: b})
}

// queryAll asks the replayed workflow's queries what they answer at the end of its
// history (the handlers read the workflow's state, which the replay left behind).
func (c *replayCapture) queryAll(t *testing.T) {
	t.Helper()
	call := func(name string, args ...any) []reflect.Value {
		h, ok := c.queries[name]
		if !ok {
			return nil
		}
		in := make([]reflect.Value, len(args))
		for i, a := range args {
			in[i] = reflect.ValueOf(a)
		}
		return reflect.ValueOf(h).Call(in)
	}
	result := func(kind string, out []reflect.Value) {
		if out == nil {
			return
		}
		var errText string
		if e, _ := out[len(out)-1].Interface().(error); e != nil {
			errText = e.Error()
		}
		c.add("query", kind, map[string]any{"result": out[0].Interface(), "error": errText})
	}
	result(workflows.SnapshotQuery, call(workflows.SnapshotQuery))
	result(workflows.RunBasisQuery, call(workflows.RunBasisQuery))
	result(webhooks.WebhookListQuery, call(webhooks.WebhookListQuery))
	if _, ok := c.queries[workflows.EventsQuery]; ok {
		after := int64(-1)
		for {
			out := call(workflows.EventsQuery, workflows.EventsRequest{After: after, MaxBytes: workflows.MaxEventsPageBytes})
			result(workflows.EventsQuery, out)
			page, _ := out[0].Interface().(workflows.EventsPage)
			if len(page.Events) == 0 {
				if page.FirstSequence > after+1 {
					after = page.FirstSequence - 1 // the events before this execution are not its own
					continue
				}
				break
			}
			after = page.Events[len(page.Events)-1].Sequence
			if !page.More {
				break
			}
		}
	}
}

// encode is the capture as JSON lines.
func (c *replayCapture) encode(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	for _, r := range c.records {
		line, err := json.Marshal(r)
		require.NoError(t, err)
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

type captureInterceptor struct {
	interceptor.WorkerInterceptorBase
	rec *replayCapture
}

func (i *captureInterceptor) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	in := &captureInbound{rec: i.rec}
	in.Next = next
	return in
}

type captureInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	rec *replayCapture
}

func (i *captureInbound) Init(outbound interceptor.WorkflowOutboundInterceptor) error {
	out := &captureOutbound{rec: i.rec}
	out.Next = outbound
	return i.Next.Init(out)
}

func (i *captureInbound) ExecuteWorkflow(ctx workflow.Context, in *interceptor.ExecuteWorkflowInput) (any, error) {
	res, err := i.Next.ExecuteWorkflow(ctx, in)
	switch {
	case err == nil:
		i.rec.add("result", "", res)
	case workflow.IsContinueAsNewError(err):
		// recorded by NewContinueAsNewError
	default:
		snap, _ := workflows.SnapshotFromError(err)
		i.rec.add("error", err.Error(), snap)
	}
	return res, err
}

type captureOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
	rec *replayCapture
}

func (o *captureOutbound) ExecuteActivity(ctx workflow.Context, typ string, args ...any) workflow.Future {
	o.rec.add("activity", typ, map[string]any{"options": workflow.GetActivityOptions(ctx), "args": args})
	return o.Next.ExecuteActivity(ctx, typ, args...)
}

func (o *captureOutbound) ExecuteLocalActivity(ctx workflow.Context, typ string, args ...any) workflow.Future {
	o.rec.add("local-activity", typ, map[string]any{"options": workflow.GetLocalActivityOptions(ctx), "args": args})
	return o.Next.ExecuteLocalActivity(ctx, typ, args...)
}

func (o *captureOutbound) ExecuteChildWorkflow(ctx workflow.Context, typ string, args ...any) workflow.ChildWorkflowFuture {
	o.rec.add("child", typ, map[string]any{"options": workflow.GetChildWorkflowOptions(ctx), "args": args})
	return o.Next.ExecuteChildWorkflow(ctx, typ, args...)
}

func (o *captureOutbound) SignalExternalWorkflow(ctx workflow.Context, workflowID, runID, name string, arg any) workflow.Future {
	o.rec.add("signal", name, map[string]any{"workflowId": workflowID, "runId": runID, "arg": arg})
	return o.Next.SignalExternalWorkflow(ctx, workflowID, runID, name, arg)
}

func (o *captureOutbound) SignalChildWorkflow(ctx workflow.Context, workflowID, name string, arg any) workflow.Future {
	o.rec.add("signal-child", name, map[string]any{"workflowId": workflowID, "arg": arg})
	return o.Next.SignalChildWorkflow(ctx, workflowID, name, arg)
}

func (o *captureOutbound) RequestCancelExternalWorkflow(ctx workflow.Context, workflowID, runID string) workflow.Future {
	o.rec.add("cancel-external", workflowID, runID)
	return o.Next.RequestCancelExternalWorkflow(ctx, workflowID, runID)
}

func (o *captureOutbound) UpsertTypedSearchAttributes(ctx workflow.Context, updates ...temporal.SearchAttributeUpdate) error {
	o.rec.add("search-attributes", "", searchAttributeUpdates(updates))
	return o.Next.UpsertTypedSearchAttributes(ctx, updates...)
}

func (o *captureOutbound) UpsertMemo(ctx workflow.Context, memo map[string]any) error {
	o.rec.add("memo", "", memo)
	return o.Next.UpsertMemo(ctx, memo)
}

func (o *captureOutbound) NewTimer(ctx workflow.Context, d time.Duration) workflow.Future {
	o.rec.add("timer", "", d.String())
	return o.Next.NewTimer(ctx, d)
}

func (o *captureOutbound) NewTimerWithOptions(ctx workflow.Context, d time.Duration, opts workflow.TimerOptions) workflow.Future {
	o.rec.add("timer", opts.Summary, d.String())
	return o.Next.NewTimerWithOptions(ctx, d, opts)
}

func (o *captureOutbound) GetVersion(ctx workflow.Context, changeID string, minSupported, maxSupported workflow.Version) workflow.Version {
	v := o.Next.GetVersion(ctx, changeID, minSupported, maxSupported)
	if !o.rec.versions[changeID] {
		// The first ask of each change id: later asks return the same and add nothing.
		if o.rec.versions == nil {
			o.rec.versions = map[string]bool{}
		}
		o.rec.versions[changeID] = true
		o.rec.add("version", changeID, v)
	}
	return v
}

func (o *captureOutbound) SideEffect(ctx workflow.Context, f func(workflow.Context) any) converter.EncodedValue {
	o.rec.add("side-effect", "", sideEffectValue(f(ctx)))
	return o.Next.SideEffect(ctx, f)
}

func (o *captureOutbound) SideEffectWithOptions(ctx workflow.Context, opts workflow.SideEffectOptions, f func(workflow.Context) any) converter.EncodedValue {
	o.rec.add("side-effect", opts.Summary, sideEffectValue(f(ctx)))
	return o.Next.SideEffectWithOptions(ctx, opts, f)
}

func (o *captureOutbound) SetQueryHandler(ctx workflow.Context, name string, handler any) error {
	if o.rec.queries == nil {
		o.rec.queries = map[string]any{}
	}
	o.rec.queries[name] = handler
	return o.Next.SetQueryHandler(ctx, name, handler)
}

func (o *captureOutbound) NewContinueAsNewError(ctx workflow.Context, wfn any, args ...any) error {
	name, _ := wfn.(string)
	o.rec.add("continue-as-new", name, args)
	return o.Next.NewContinueAsNewError(ctx, wfn, args...)
}

// markerTime stands for a time attribute the update left alone.
var markerTime = time.Date(1901, 1, 1, 0, 0, 0, 0, time.UTC)

// sideEffectValue is a side effect's value as JSON: an event record's events
// decompressed (the compressed bytes would hide which event changed).
func sideEffectValue(v any) any {
	b, ok := v.([]byte)
	if !ok || !bytes.HasPrefix(b, []byte(workflows.EventsRecordMagic)) {
		return v
	}
	zr, err := gzip.NewReader(bytes.NewReader(b[len(workflows.EventsRecordMagic):]))
	if err != nil {
		return fmt.Sprintf("unreadable event record: %v", err)
	}
	var rec json.RawMessage
	if err := json.NewDecoder(zr).Decode(&rec); err != nil {
		return fmt.Sprintf("unreadable event record: %v", err)
	}
	return map[string]any{"compressed": rec}
}

// searchAttributeUpdates describes updates by applying them to attributes that hold a
// marker value for every attribute of the host: what changed is set to its value, what
// was unset is null.
func searchAttributeUpdates(updates []temporal.SearchAttributeUpdate) map[string]any {
	const marker = "\x00untouched"
	var base []temporal.SearchAttributeUpdate
	names := make([]string, 0, len(workflows.SearchAttributes))
	for name := range workflows.SearchAttributes {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		switch workflows.SearchAttributes[name] {
		case enumspb.INDEXED_VALUE_TYPE_KEYWORD:
			base = append(base, temporal.NewSearchAttributeKeyKeyword(name).ValueSet(marker))
		case enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST:
			base = append(base, temporal.NewSearchAttributeKeyKeywordList(name).ValueSet([]string{marker}))
		case enumspb.INDEXED_VALUE_TYPE_DATETIME:
			base = append(base, temporal.NewSearchAttributeKeyTime(name).ValueSet(markerTime))
		}
	}
	sa := temporal.NewSearchAttributes(slices.Concat(base, updates)...)
	out := map[string]any{}
	for _, name := range names {
		var v any
		var ok bool
		switch workflows.SearchAttributes[name] {
		case enumspb.INDEXED_VALUE_TYPE_KEYWORD:
			v, ok = sa.GetKeyword(temporal.NewSearchAttributeKeyKeyword(name))
			if v == marker {
				continue
			}
		case enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST:
			var l []string
			l, ok = sa.GetKeywordList(temporal.NewSearchAttributeKeyKeywordList(name))
			if len(l) == 1 && l[0] == marker {
				continue
			}
			v = l
		case enumspb.INDEXED_VALUE_TYPE_DATETIME:
			var tm time.Time
			tm, ok = sa.GetTime(temporal.NewSearchAttributeKeyTime(name))
			if tm.Equal(markerTime) {
				continue
			}
			v = tm
		default:
			v, ok = fmt.Sprintf("unexpected type %v", workflows.SearchAttributes[name]), true
		}
		if !ok {
			v = nil
		}
		out[name] = v
	}
	return out
}
