package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	querypb "go.temporal.io/api/query/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/mocks"
	"go.temporal.io/sdk/temporal"

	"github.com/wop-dev/wop/packs"
	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

// jsonValue is a converter.EncodedValue holding a Go value.
type jsonValue struct{ v any }

func (j jsonValue) HasValue() bool { return j.v != nil }
func (j jsonValue) Get(ptr any) error {
	b, err := json.Marshal(j.v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, ptr)
}

// fakeRun is the state of one run the fake Temporal holds.
type fakeRun struct {
	snap    workflows.Snapshot
	events  []workflows.Event
	check   workflows.ResolveCheck
	input   workflows.RunInput
	opts    client.StartWorkflowOptions
	signals []any
	// onSignal runs when a signal arrives (e.g. to append events).
	onSignal func(r *fakeRun, name string, arg any)
	// eventsTimeouts makes that many EventsQuery calls fail the way a busy worker
	// makes Temporal fail a query: with the server's DeadlineExceeded.
	eventsTimeouts int
	// checkTimeouts does the same to that many ValidateResolveQuery calls.
	checkTimeouts int
	// checkCancels makes that many ValidateResolveQuery calls fail the way a query
	// handed to the poll of a stopping worker fails: Canceled, from the server.
	checkCancels int
	// outcomes is what the fake run did with each resolve signal, by request id: what
	// check said when the signal arrived (unless noOutcome).
	outcomes  map[string]workflows.ResolveOutcome
	noOutcome bool
	// open makes DescribeWorkflowExecution report the workflow running.
	open bool
	// stuck makes every query fail the way Temporal fails a query of a workflow whose
	// workflow task keeps failing; TerminateWorkflow ends that (closed with a
	// WorkflowExecutionTerminated event).
	stuck bool
	// eventQueries counts EventsQuery calls, snapQueries SnapshotQuery calls.
	eventQueries, snapQueries int
	// live makes the history long poll of the run wait for bump (one history event per
	// bump) instead of ending at once, as for a workflow that is still running.
	live  bool
	bumps int
	// execs, when set, splits the log over executions of the run (oldest first; each
	// holds its events from first on): EventsQuery answers as that execution, naming at
	// most links executions before it.
	execs []fakeExec
	links int
	// recorded makes the executions record their events in their histories (served
	// by the fake's WorkflowService, segments_test.go) and name a sparse index of older
	// ones; execQueries counts the queries of executions other than the current one,
	// and historyReads the history pages read.
	recorded     bool
	execQueries  int
	historyReads int
	// unrecorded, when set, are sequences missing from the records; gone are the
	// executions whose history Temporal no longer keeps.
	unrecorded map[int64]bool
	gone       map[string]bool
	// closed, when set, is the event that closed the run in Temporal (signals then
	// fail NotFound).
	closed *historypb.HistoryEvent
	// update, when set, answers the resolve update (with the fake's lock held), as a
	// worker with the handler does; nil rejects it as an unknown update.
	update func(r *fakeRun, updateID string, u workflows.ResolveUpdateRequest) (workflows.ResolveUpdateResult, error)
	// hold, when set, keeps every resolve update in flight until it is closed, after
	// telling entered (without the fake's lock held).
	hold, entered chan struct{}
	// decide, when set, makes Temporal accept every resolve update at once and answer
	// it (update runs) only once decide is closed, as for a request the run takes
	// behind a long model round; updateCalls counts the UpdateWorkflow calls.
	decide      chan struct{}
	updateCalls int
	// unanswered is how many resolve update calls Temporal leaves unanswered until the
	// call's context ends, as a server whose waiter was cleared answers only at its
	// long-poll interval; updateIDs are the Update IDs of every call, in order.
	unanswered int
	updateIDs  []string
	// decodeDelay is how long a handle that holds its outcome takes to decode it, as
	// the SDK's does on a saturated process.
	decodeDelay time.Duration
}

// fakeExec is one execution of a fake run that continued as new.
type fakeExec struct {
	runID string
	first int64
}

// bump appends events to a live run and wakes its history long polls.
func (ft *fakeTemporal) bump(id string, evs ...workflows.Event) {
	ft.mu.Lock()
	r := ft.runs[id]
	r.events = append(r.events, evs...)
	r.snap.LastSequence = int64(len(r.events)) - 1
	r.bumps++
	ft.mu.Unlock()
	ft.wake()
}

// wake wakes the waiting history iterators.
func (ft *fakeTemporal) wake() {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	if ft.changed != nil {
		close(ft.changed)
	}
	ft.changed = make(chan struct{})
}

// waitIterator is the history long poll of a live run: one event per bump.
type waitIterator struct {
	ctx  context.Context
	ft   *fakeTemporal
	id   string
	seen int
}

func (w *waitIterator) HasNext() bool {
	for {
		w.ft.mu.Lock()
		r := w.ft.runs[w.id]
		if w.ft.changed == nil {
			w.ft.changed = make(chan struct{})
		}
		ch := w.ft.changed
		more := r.bumps > w.seen
		w.ft.mu.Unlock()
		if more {
			return true
		}
		select {
		case <-ch:
		case <-w.ctx.Done():
			return false
		}
	}
}

func (w *waitIterator) Next() (*historypb.HistoryEvent, error) {
	w.seen++
	// Workflow code appends events in a workflow task: its completion wakes readers.
	return &historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED}, nil
}

// fakeTemporal answers the mock client's calls from in-memory runs.
type fakeTemporal struct {
	mu      sync.Mutex
	runs    map[string]*fakeRun
	starts  int
	changed chan struct{} // closed by wake
	// startErr, when set, is what every start answers.
	startErr error
}

func newFakeTemporal(t testing.TB) (*fakeTemporal, *mocks.Client) {
	ft := &fakeTemporal{runs: map[string]*fakeRun{}}
	mc := mocks.NewClient(t)
	mc.On("WorkflowService").Return(&fakeService{ft: ft}).Maybe()
	mc.On("QueryWorkflow", mock.Anything, mock.Anything, "", mock.Anything).Return(
		func(_ context.Context, id, _ string, q string, _ ...any) (converter.EncodedValue, error) {
			return ft.query(id, q, nil)
		}).Maybe()
	mc.On("QueryWorkflow", mock.Anything, mock.Anything, "", mock.Anything, mock.Anything).Return(
		func(_ context.Context, id, _ string, q string, args ...any) (converter.EncodedValue, error) {
			return ft.query(id, q, args)
		}).Maybe()
	mc.On("QueryWorkflow", mock.Anything, mock.Anything, mock.MatchedBy(func(rid string) bool { return rid != "" }), mock.Anything, mock.Anything).Return(
		func(_ context.Context, id, rid string, q string, args ...any) (converter.EncodedValue, error) {
			return ft.queryExec(id, rid, q, args)
		}).Maybe()
	mc.On("QueryWorkflowWithOptions", mock.Anything, mock.Anything).Return(
		func(_ context.Context, req *client.QueryWorkflowWithOptionsRequest) (*client.QueryWorkflowWithOptionsResponse, error) {
			return ft.queryWithOptions(req)
		}).Maybe()
	mc.On("TerminateWorkflow", mock.Anything, mock.Anything, "", mock.Anything).Return(
		func(_ context.Context, id, _ string, reason string, _ ...any) error {
			ft.mu.Lock()
			defer ft.mu.Unlock()
			if r := ft.runs[id]; r != nil {
				r.stuck = false
				r.closed = &historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED,
					Attributes: &historypb.HistoryEvent_WorkflowExecutionTerminatedEventAttributes{
						WorkflowExecutionTerminatedEventAttributes: &historypb.WorkflowExecutionTerminatedEventAttributes{Reason: reason}}}
			}
			return nil
		}).Maybe()
	mc.On("GetWorkflowHistory", mock.Anything, mock.Anything, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT).Return(
		func(_ context.Context, id, _ string, _ bool, _ enumspb.HistoryEventFilterType) client.HistoryEventIterator {
			return ft.closeIterator(id)
		}).Maybe()
	mc.On("ExecuteWorkflow", mock.Anything, mock.Anything, workflows.RunWorkflowName, mock.Anything).Return(
		func(_ context.Context, o client.StartWorkflowOptions, _ any, args ...any) (client.WorkflowRun, error) {
			return nil, ft.start(o, args[0].(workflows.RunInput))
		}).Maybe()
	mc.On("SignalWorkflow", mock.Anything, mock.Anything, "", mock.Anything, mock.Anything).Return(
		func(_ context.Context, id, _ string, name string, arg any) error {
			return ft.signal(id, name, arg)
		}).Maybe()
	mc.On("GetWorkflowHistory", mock.Anything, mock.Anything, "", true, mock.Anything).Return(
		func(ctx context.Context, id, _ string, _ bool, _ enumspb.HistoryEventFilterType) client.HistoryEventIterator {
			if r := ft.get(id); r != nil && r.live {
				return &waitIterator{ctx: ctx, ft: ft, id: id}
			}
			return endedIterator{}
		}).Maybe()
	mc.On("DescribeWorkflowExecution", mock.Anything, mock.Anything, "").Return(
		func(_ context.Context, id, _ string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
			r := ft.get(id)
			if r != nil && r.open && !r.stuck {
				return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{
					Status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING}}, nil
			}
			if r == nil || !r.stuck {
				return nil, serviceerror.NewNotFound("closed")
			}
			tenant, _ := converter.GetDefaultDataConverter().ToPayload(r.snap.Owner.Tenant)
			return &workflowservice.DescribeWorkflowExecutionResponse{
				WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{
					Status:           enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING,
					SearchAttributes: &commonpb.SearchAttributes{IndexedFields: map[string]*commonpb.Payload{workflows.SATenant.GetName(): tenant}},
				},
				PendingWorkflowTask: &workflowpb.PendingWorkflowTaskInfo{Attempt: 7},
			}, nil
		}).Maybe()
	mc.On("CheckHealth", mock.Anything, mock.Anything).Return(&client.CheckHealthResponse{}, nil).Maybe()
	// The fake runs answer resolves the way a worker without the resolve update does:
	// they reject it as unknown, and the API validates and signals.
	// A run with update set answers with it instead.
	mc.On("UpdateWorkflow", mock.Anything, mock.MatchedBy(func(o client.UpdateWorkflowOptions) bool {
		return o.UpdateName == workflows.ResolveUpdate
	})).Return(func(ctx context.Context, o client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error) {
		r := ft.get(o.WorkflowID)
		if r == nil || r.update == nil {
			return nil, unknownUpdateErr(workflows.ResolveUpdate)
		}
		if r.hold != nil {
			select {
			case r.entered <- struct{}{}:
			default: // a second update while one is held: the test fails on what it sees
			}
			select {
			case <-r.hold:
			case <-time.After(2 * time.Second):
			}
		}
		ft.mu.Lock()
		r.updateCalls++
		r.updateIDs = append(r.updateIDs, o.UpdateID)
		lost := r.unanswered > 0
		if lost {
			r.unanswered--
		}
		ft.mu.Unlock()
		if lost {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		if r.decide != nil && !isClosed(r.decide) {
			// Temporal answers at the acceptance; the SDK's handle polls for the outcome.
			return decidedLater{ft: ft, r: r, o: o}, nil
		}
		ft.mu.Lock()
		res, err := r.update(r, o.UpdateID, o.Args[0].(workflows.ResolveUpdateRequest))
		ft.mu.Unlock()
		return fakeUpdateHandle{res: res, err: err, delay: r.decodeDelay}, nil
	}).Maybe()
	return ft, mc
}

// queryWithOptions answers a query with a reject condition: a run the fake closed
// with a status other than Completed rejects NOT_COMPLETED_CLEANLY.
func (ft *fakeTemporal) queryWithOptions(req *client.QueryWorkflowWithOptionsRequest) (*client.QueryWorkflowWithOptionsResponse, error) {
	ft.mu.Lock()
	r := ft.runs[req.WorkflowID]
	ft.mu.Unlock()
	if r != nil && r.closed != nil && r.closed.GetEventType() != enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED &&
		req.QueryRejectCondition == enumspb.QUERY_REJECT_CONDITION_NOT_COMPLETED_CLEANLY {
		return &client.QueryWorkflowWithOptionsResponse{QueryRejected: &querypb.QueryRejected{Status: enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED}}, nil
	}
	v, err := ft.query(req.WorkflowID, req.QueryType, req.Args)
	if err != nil {
		return nil, err
	}
	return &client.QueryWorkflowWithOptionsResponse{QueryResult: v}, nil
}

// closeIterator yields the close event of a run the fake closed, else nothing.
func (ft *fakeTemporal) closeIterator(id string) client.HistoryEventIterator {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	if r := ft.runs[id]; r != nil && r.closed != nil {
		return &sliceIterator{evs: []*historypb.HistoryEvent{r.closed}}
	}
	return endedIterator{}
}

// sliceIterator yields the given events.
type sliceIterator struct{ evs []*historypb.HistoryEvent }

func (s *sliceIterator) HasNext() bool { return len(s.evs) > 0 }
func (s *sliceIterator) Next() (*historypb.HistoryEvent, error) {
	if len(s.evs) == 0 {
		return nil, io.EOF
	}
	ev := s.evs[0]
	s.evs = s.evs[1:]
	return ev, nil
}

// endedIterator is a history iterator of a closed workflow with nothing new.
type endedIterator struct{}

func (endedIterator) HasNext() bool { return false }
func (endedIterator) Next() (*historypb.HistoryEvent, error) {
	return nil, io.EOF
}

func (ft *fakeTemporal) add(r *fakeRun) *fakeRun {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	if r.snap.Owner.Tenant == "" {
		r.snap.Owner.Tenant = "default"
	}
	if r.snap.WorkflowID == "" {
		r.snap.WorkflowID = "conformance-noop"
	}
	r.snap.LastSequence = int64(len(r.events)) - 1
	ft.runs[r.snap.RunID] = r
	return r
}

func (ft *fakeTemporal) get(id string) *fakeRun {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	return ft.runs[id]
}

func (ft *fakeTemporal) query(id, q string, args []any) (converter.EncodedValue, error) {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	r, ok := ft.runs[id]
	if !ok {
		return nil, serviceerror.NewNotFound("workflow not found for ID: " + id)
	}
	if r == nil {
		return nil, fmt.Errorf("nil run %s in the fake", id)
	}
	if r.stuck {
		return nil, serviceerror.NewWorkflowNotReady("Unable to query workflow due to Workflow Task in failed state.")
	}
	switch q {
	case workflows.SnapshotQuery:
		r.snapQueries++
		return jsonValue{r.snap}, nil
	case workflows.RunBasisQuery:
		in := r.input
		return jsonValue{workflows.RunBasis{Definition: in.Definition, Definitions: in.Definitions, Packs: in.Packs, PackHashes: in.PackHashes, Limits: in.Limits}}, nil
	case workflows.EventsQuery:
		if r.eventsTimeouts > 0 {
			r.eventsTimeouts--
			return nil, serviceerror.NewDeadlineExceeded("context deadline exceeded")
		}
		r.eventQueries++
		req := args[0].(workflows.EventsRequest)
		if len(r.execs) > 0 {
			return jsonValue{r.execPage(len(r.execs)-1, req)}, nil
		}
		page := workflows.EventsPage{LastSequence: int64(len(r.events)) - 1, Tenant: r.snap.Owner.Tenant}
		size := 0
		for _, ev := range r.events {
			if ev.Sequence > req.After && !page.More {
				if size += workflows.EventBytes(&ev); len(page.Events) > 0 && size > req.MaxBytes {
					page.More = true
				} else {
					page.Events = append(page.Events, ev)
				}
			}
			if isTerminalEvent(ev.Type) {
				page.Terminal = true
			}
		}
		return jsonValue{page}, nil
	case workflows.ValidateResolveQuery:
		if r.checkTimeouts > 0 {
			r.checkTimeouts--
			return nil, serviceerror.NewDeadlineExceeded("context deadline exceeded")
		}
		if r.checkCancels > 0 {
			r.checkCancels--
			return nil, serviceerror.NewCanceled("context canceled")
		}
		check := r.check
		if req, ok := args[0].(workflows.ResolveRequest); ok {
			if o, seen := r.outcomes[req.RequestID]; seen {
				check = workflows.ResolveCheck{OK: o.Applied, Replayed: true, Outcome: &o, RunStatus: o.RunStatus}
			}
		}
		check.Tenant, check.CurrentStatus, check.LastSequence = r.snap.Owner.Tenant, r.snap.Status, int64(len(r.events))-1
		return jsonValue{check}, nil
	case workflows.OutcomesQuery:
		req := args[0].(workflows.OutcomesRequest)
		page := workflows.OutcomesPage{Outcomes: []workflows.ResolveOutcome{}, Status: r.snap.Status, Terminal: isTerminal(r.snap.Status)}
		for _, id := range req.RequestIDs {
			if o, ok := r.outcomes[id]; ok {
				page.Outcomes = append(page.Outcomes, o)
			}
		}
		return jsonValue{page}, nil
	}
	return nil, fmt.Errorf("unknown query %s", q)
}

func (ft *fakeTemporal) start(o client.StartWorkflowOptions, in workflows.RunInput) error {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	if _, ok := ft.runs[o.ID]; ok {
		return serviceerror.NewWorkflowExecutionAlreadyStarted("already started", "", "rid")
	}
	if ft.startErr != nil {
		return ft.startErr
	}
	ft.starts++
	ft.runs[o.ID] = &fakeRun{input: in, opts: o, snap: workflows.Snapshot{
		RunID: in.RunID, WorkflowID: in.Definition.ID, Status: protocol.StatusRunning,
		Owner: in.Owner, RequestDigest: in.RequestDigest, LastSequence: -1, Era: in.Era,
	}}
	return nil
}

func (ft *fakeTemporal) signal(id, name string, arg any) error {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	r, ok := ft.runs[id]
	if !ok || r.closed != nil {
		return serviceerror.NewNotFound("workflow not found")
	}
	r.signals = append(r.signals, arg)
	if req, ok := arg.(workflows.ResolveRequest); ok && name == workflows.ResolveSignal && !r.noOutcome {
		if r.outcomes == nil {
			r.outcomes = map[string]workflows.ResolveOutcome{}
		}
		o := workflows.ResolveOutcome{RequestID: req.RequestID, Applied: r.check.OK, RunStatus: r.check.RunStatus,
			Status: r.check.Status, Code: r.check.Code, Message: r.check.Message}
		if _, seen := r.outcomes[req.RequestID]; !seen {
			r.outcomes[req.RequestID] = o
		}
	}
	if r.onSignal != nil {
		r.onSignal(r, name, arg)
	}
	return nil
}

// ev builds an event of run id.
func ev(runID string, seq int64, typ string, payload string) workflows.Event {
	if payload == "" {
		payload = "{}"
	}
	return workflows.Event{
		EventID: fmt.Sprintf("evt-%s-%d", runID, seq), RunID: runID, Type: typ, Sequence: seq,
		Payload: json.RawMessage(payload), Timestamp: "2026-01-01T00:00:00Z",
	}
}

// Test keys.
const (
	fullKey    = "wop_full_secret"
	otherKey   = "wop_other_tenant"
	lowKey     = "wop_low_scope"
	tokenSecrt = "token-secret-for-tests"
)

type testEnv struct {
	t   testing.TB
	ft  *fakeTemporal
	mc  *mocks.Client
	srv *Server
	cat *fakeCatalog
	now time.Time
}

func newTestEnv(t testing.TB, mut ...func(*Config)) *testEnv {
	t.Helper()
	ft, mc := newFakeTemporal(t)
	cat := testCatalog(t)
	env := &testEnv{t: t, ft: ft, mc: mc, cat: cat, now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	cfg := Config{
		Keys: []Key{
			{ID: "full", Secret: fullKey, Tenant: "default", Scopes: AllScopes},
			{ID: "other", Secret: otherKey, Tenant: "tenant-b", Scopes: AllScopes},
			{ID: "low", Secret: lowKey, Tenant: "default", Scopes: []string{ScopeRunsRead}},
		},
		TokenSecret: []byte(tokenSecrt),
		PublicURL:   "http://host.test",
		Now:         func() time.Time { return env.now },
		KeepAlive:   50 * time.Millisecond,
	}
	for _, m := range mut {
		m(&cfg)
	}
	srv, err := newServer(cfg, mc, cat, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	env.srv = srv
	return env
}

// do sends a request through the handler. body may be a string or nil.
func (env *testEnv) do(method, path, key string, body string, hdr ...string) *httptest.ResponseRecorder {
	env.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, rd)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	env.srv.Handler().ServeHTTP(rec, req)
	return rec
}

// expectError asserts an error status and code, validating the envelope schema.
func (env *testEnv) expectError(rec *httptest.ResponseRecorder, status int, code string) envelope {
	env.t.Helper()
	if rec.Code != status {
		env.t.Fatalf("status = %d, want %d; body %s", rec.Code, status, rec.Body)
	}
	e := validateEnvelope(env.t, rec.Body.Bytes())
	if e.Error != code {
		env.t.Fatalf("error = %q, want %q; body %s", e.Error, code, rec.Body)
	}
	if e.Message == "" {
		env.t.Fatalf("empty message: %s", rec.Body)
	}
	return e
}

// fakeCatalog serves a few fixture-like definitions.
type fakeCatalog struct {
	defs  map[string]*workflows.Definition
	packs map[string]*packs.Pack
}

func (c *fakeCatalog) Definition(id string) (*workflows.Definition, bool) {
	d, ok := c.defs[id]
	return d, ok
}
func (c *fakeCatalog) Pack(id string) (*packs.Pack, bool) {
	p, ok := c.packs[id]
	return p, ok
}
func (c *fakeCatalog) PackIDs() []string            { return slices.Sorted(maps.Keys(c.packs)) }
func (c *fakeCatalog) Limits() workflows.TurnLimits { return workflows.TurnLimits{} }
func (c *fakeCatalog) Fixtures() []string {
	return []string{"conformance-approval", "conformance-identity", "conformance-noop"}
}

func (c *fakeCatalog) NewRunInput(req workflows.RunRequest) (*workflows.RunInput, error) {
	def, ok := c.defs[req.WorkflowID]
	if !ok {
		return nil, fmt.Errorf("unknown workflowId %q", req.WorkflowID)
	}
	return &workflows.RunInput{RunID: req.RunID, Definition: def, Inputs: req.Inputs, Owner: req.Owner, Tags: req.Tags,
		Metadata: req.Metadata, Configurable: req.Configurable, RequestDigest: req.RequestDigest, Era: req.Era}, nil
}

func testCatalog(t testing.TB) *fakeCatalog {
	t.Helper()
	def := func(id string, vars ...workflows.Variable) *workflows.Definition {
		return &workflows.Definition{ID: id, Name: id, Version: "1.0",
			Nodes: []workflows.Node{{ID: "a", TypeID: "core.noop", Name: "A", Position: json.RawMessage(`{"x":0,"y":0}`),
				Config: json.RawMessage(`{}`), Inputs: map[string]json.RawMessage{}}},
			Edges:     []workflows.Edge{},
			Triggers:  []json.RawMessage{json.RawMessage(`{"id":"manual","type":"manual","enabled":true}`)},
			Variables: vars, Metadata: json.RawMessage(`{}`), Settings: json.RawMessage(`{}`)}
	}
	return &fakeCatalog{defs: map[string]*workflows.Definition{
		"conformance-noop":       def("conformance-noop"),
		"conformance-approval":   def("conformance-approval"),
		"conformance-identity":   def("conformance-identity", workflows.Variable{Name: "payload", Type: "object", Required: true}),
		"conformance-idempotent": def("conformance-idempotent", workflows.Variable{Name: "nonce", Type: "string"}),
	}}
}

// queryExec answers a query addressed to one execution of a run (by its run id).
func (ft *fakeTemporal) queryExec(id, rid, q string, args []any) (converter.EncodedValue, error) {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	r := ft.runs[id]
	if r == nil || q != workflows.EventsQuery {
		return nil, serviceerror.NewNotFound("workflow not found for ID: " + id)
	}
	for i, x := range r.execs {
		if x.runID == rid {
			r.eventQueries++
			if i < len(r.execs)-1 {
				r.execQueries++
			}
			return jsonValue{r.execPage(i, args[0].(workflows.EventsRequest))}, nil
		}
	}
	return nil, serviceerror.NewNotFound("no execution " + rid)
}

// execPage is execution i's answer to an EventsQuery.
func (r *fakeRun) execPage(i int, req workflows.EventsRequest) workflows.EventsPage {
	x := r.execs[i]
	end := int64(len(r.events))
	if i+1 < len(r.execs) {
		end = r.execs[i+1].first
	}
	page := workflows.EventsPage{Events: []workflows.Event{}, LastSequence: end - 1, FirstSequence: x.first, Tenant: r.snap.Owner.Tenant}
	page.Earlier, page.Index = r.execLinks(i)
	if req.After+1 < x.first {
		return page
	}
	size := 0
	for s := req.After + 1; s < end; s++ {
		ev := r.events[s]
		if size += workflows.EventBytes(&ev); len(page.Events) > 0 && size > req.MaxBytes {
			page.More = true
			break
		}
		page.Events = append(page.Events, ev)
		page.Terminal = isTerminalEvent(ev.Type)
	}
	return page
}

// unknownUpdateErr is a worker's rejection of an update it has no handler for, as the
// client returns it.
func unknownUpdateErr(name string) error {
	return temporal.NewApplicationError(fmt.Sprintf("unknown update %s. KnownUpdates=[]", name), "")
}

// isClosed reports whether c is closed.
func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// decidedLater is an accepted update whose result waits for its run's decide: as the
// SDK's handle of an answer without an outcome, Get asks for it (a context already
// ended fails at once).
type decidedLater struct {
	ft *fakeTemporal
	r  *fakeRun
	o  client.UpdateWorkflowOptions
}

func (h decidedLater) WorkflowID() string { return h.o.WorkflowID }
func (h decidedLater) RunID() string      { return "" }
func (h decidedLater) UpdateID() string   { return h.o.UpdateID }
func (h decidedLater) Get(ctx context.Context, ptr any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case <-h.r.decide:
	case <-ctx.Done():
		return ctx.Err()
	}
	h.ft.mu.Lock()
	res, err := h.r.update(h.r, h.o.UpdateID, h.o.Args[0].(workflows.ResolveUpdateRequest))
	h.ft.mu.Unlock()
	return fakeUpdateHandle{res: res, err: err}.Get(ctx, ptr)
}

// fakeUpdateHandle is a completed update: its result or its failure, decoded in delay
// (whatever the context: the SDK's handle decodes what it holds without a call).
type fakeUpdateHandle struct {
	res   workflows.ResolveUpdateResult
	err   error
	delay time.Duration
}

func (h fakeUpdateHandle) WorkflowID() string { return "" }
func (h fakeUpdateHandle) RunID() string      { return "" }
func (h fakeUpdateHandle) UpdateID() string   { return "" }
func (h fakeUpdateHandle) Get(_ context.Context, ptr any) error {
	time.Sleep(h.delay)
	if h.err != nil {
		return h.err
	}
	*ptr.(*workflows.ResolveUpdateResult) = h.res
	return nil
}
