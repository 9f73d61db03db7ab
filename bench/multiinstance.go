package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/worker"
	"github.com/wop-dev/wop/workflows"
)

// The multi-instance workload: the witness that another worker process resumes the turn
// of a worker process killed under it, on a cluster of two `wop worker` and two `wop api`
// processes on one Temporal server (deploy/cluster/up.sh stands it up; the bench's own
// worker is stopped meanwhile). It drives MultiConversations conversations of the bench
// pack through both APIs, each call of a turn on the other API than the last one's. Each
// round gives every conversation a turn, then reads from each run's history which
// worker process holds it (the Temporal identity that completed its last workflow task,
// whose sticky queue its next workflow task goes to: "PID@host@queue"), SIGKILLs the
// process holding the most of them and at once (or MultiKillDelay later) sends each of
// those conversations its next turn; with MultiKillInTurn it sends those turns first and
// kills the process while they run on it (its scripted mock holds each round
// WOP_MOCK_ROUND_DELAY). A turn's resumption is its reply, read through the
// API, whose workflow task another identity completed (checked in the history: a reply
// completed by the killed identity fails the workload); the time from the kill to the
// reply is the sample, counted by the path the turn took (traceKill). The cluster starts a fresh process in place of the killed one (as compose's
// restart policy does); the next round waits until two live worker processes poll.
// After the last round every conversation's events are read through the API: each user
// turn the API accepted must appear exactly once, with one reply each, or the workload
// fails (0 lost, 0 duplicated).

// multiEvent is the part of a conversation.exchanged event the transcript check reads.
type multiEvent struct {
	Type     string `json:"type"`
	Sequence int64  `json:"sequence"`
	Payload  struct {
		Turn struct {
			Role    string `json:"role"`
			Content struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"turn"`
	} `json:"payload"`
}

// workerPID is the process id and host of a Temporal identity "PID@host@…", the SDK's
// default worker identity, which `wop worker` keeps unless it serves streams.
func workerPID(identity string) (int, string, bool) {
	f := strings.SplitN(identity, "@", 3)
	if len(f) < 2 {
		return 0, "", false
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil || pid <= 0 {
		return 0, "", false
	}
	return pid, f[1], true
}

// isLiveWorker tells whether pid is a running (not exited) `wop worker` process of this
// machine.
func isLiveWorker(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses: "pid (comm) S ...".
	if i := strings.LastIndexByte(string(stat), ')'); i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' || stat[i+2] == 'X' {
		return false
	}
	cmd, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	args := strings.Split(strings.TrimRight(string(cmd), "\x00"), "\x00")
	return len(args) >= 2 && args[1] == "worker"
}

// liveWorkers are the identities polling the host's workflow task queue that belong to
// live `wop worker` processes of this machine (Temporal lists a dead poller for a while).
func (b *bench) liveWorkers(ctx context.Context, host string) ([]string, error) {
	q := b.wcfg.TaskQueue
	if q == "" {
		q = workflows.TaskQueue
	}
	d, err := b.tc.DescribeTaskQueue(ctx, q, enumspb.TASK_QUEUE_TYPE_WORKFLOW)
	if err != nil {
		return nil, fmt.Errorf("describe task queue %s: %w", q, err)
	}
	var ids []string
	for _, p := range d.GetPollers() {
		pid, h, ok := workerPID(p.GetIdentity())
		if ok && h == host && pid != os.Getpid() && isLiveWorker(pid) && !slices.Contains(ids, p.GetIdentity()) {
			ids = append(ids, p.GetIdentity())
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// awaitWorkers waits until at least two live worker processes poll, other than gone.
func (b *bench) awaitWorkers(ctx context.Context, host, gone string) ([]string, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		ids, err := b.liveWorkers(ctx, host)
		if err != nil {
			return nil, err
		}
		ids = slices.DeleteFunc(ids, func(id string) bool { return id == gone })
		if len(ids) >= 2 {
			return ids, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("after a minute %d live `wop worker` processes poll the task queue (%v), want 2: is the cluster restarting killed workers?", len(ids), ids)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// killPath is the way a turn sent at a kill reached a live worker, as its run's history
// tells it.
type killPath int

const (
	// pathDirect: no workflow task of the run timed out after the kill; the turn's
	// task went to a live worker at once (the run was not on the killed worker's
	// sticky queue).
	pathDirect killPath = iota
	// pathStickyTimeout: the task waited on the killed worker's sticky queue, which
	// nobody polled any more, until the sticky schedule-to-start timeout
	// (WorkflowTaskTimedOut SCHEDULE_TO_START), then went to the shared queue.
	pathStickyTimeout
	// pathDeadPoll: Temporal handed the task to a poll of the killed worker it had not
	// yet seen die (the poll of a connection the kill closed), so the task timed out
	// after the workflow task timeout (WorkflowTaskTimedOut START_TO_CLOSE) before
	// another worker got it.
	pathDeadPoll
	// pathInTask: the killed worker had started the turn's workflow task before it
	// died (the turn ran on it), so the task timed out after the workflow task timeout
	// from that start (WorkflowTaskTimedOut START_TO_CLOSE) before another worker got it.
	pathInTask
	// pathInRound: the turn's model round ran as an activity on the killed worker (a
	// held scripted mock's, as a real provider's): Temporal counted the attempt lost at
	// its heartbeat timeout and another worker started the next one (ActivityTaskStarted
	// with attempt > 1, its last failure that heartbeat timeout).
	pathInRound
)

func (p killPath) String() string {
	switch p {
	case pathStickyTimeout:
		return "sticky timeout"
	case pathDeadPoll:
		return "handed to the dead poll"
	case pathInTask:
		return "running on the killed worker"
	case pathInRound:
		return "in a model round on the killed worker"
	}
	return "direct"
}

// killTrace is what traceKill reads of a turn sent at a kill.
type killTrace struct {
	// completedBy is the identity that completed the run's newest workflow task.
	completedBy string
	path        killPath
	// resumedAt is when another worker first started a workflow task of the run after
	// the kill (RFC 0158 §B.4's resumption, which the reply follows by the turn's own
	// work), or, on pathInRound, the next attempt of the lost round; zero when the
	// history names none.
	resumedAt time.Time
	// roundAttempt is, on pathInRound, the attempt of the round that another worker
	// started: 2, unless Temporal handed an attempt to the killed worker's dead poll.
	roundAttempt int32
}

// afterKill reads the run's history and traces the turn sent at the kill (traceKill).
func (b *bench) afterKill(ctx context.Context, runID, victim string, since time.Time) (killTrace, error) {
	it := b.tc.GetWorkflowHistory(ctx, runID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var events []*historypb.HistoryEvent
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return killTrace{}, fmt.Errorf("read the history of run %s: %w", runID, err)
		}
		events = append(events, ev)
	}
	tr, err := traceKill(events, victim, since)
	if err != nil {
		return killTrace{}, fmt.Errorf("run %s: %w", runID, err)
	}
	return tr, nil
}

// traceKill reads a run's history events for the turn sent after the kill of the worker
// identity victim at since: who completed its newest workflow task, and the path the
// turn took (a timeout of a workflow task since the kill; a task handed to the dead
// poll outweighs a sticky timeout, it is the longer wait). A workflow task that timed
// out at its start-to-close timeout must have been started by the killed worker: its
// WorkflowTaskStarted names victim, or names nobody, which is how Temporal (1.32.1)
// writes a speculative workflow task (an update's, so every turn's) that timed out,
// whoever took it. Started at or after the kill, only the dead poll took it and never
// answered; started before, the killed worker was running it when it died (a turn sent
// before the kill). Any other timed-out task is an error, not a guess. A model round
// attempt that Temporal counted lost at its heartbeat timeout after the kill, and that
// another worker then started again, puts the turn on pathInRound (which outweighs the
// sticky timeout the task recording its result then waits out): it ran on the killed
// worker.
func traceKill(events []*historypb.HistoryEvent, victim string, since time.Time) (killTrace, error) {
	var tr killTrace
	var roundResumed time.Time
	var roundAttempt int32
	started := map[int64]*historypb.HistoryEvent{}
	for _, ev := range events {
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil && a.GetAttempt() > 1 {
			by, at := a.GetIdentity(), ev.GetEventTime().AsTime()
			lost := a.GetLastFailure().GetTimeoutFailureInfo().GetTimeoutType() == enumspb.TIMEOUT_TYPE_HEARTBEAT
			if lost && !at.Before(since) && roundResumed.IsZero() {
				if by == victim {
					return killTrace{}, fmt.Errorf("the next attempt of a model round lost at the kill (event %d) was started by the killed worker %s", ev.GetEventId(), victim)
				}
				roundResumed, roundAttempt = at, a.GetAttempt()
			}
		}
		if a := ev.GetWorkflowTaskStartedEventAttributes(); a != nil {
			started[ev.GetEventId()] = ev
			if by, at := a.GetIdentity(), ev.GetEventTime().AsTime(); tr.resumedAt.IsZero() && by != "" && by != victim && !at.Before(since) {
				tr.resumedAt = at
			}
		}
		if a := ev.GetWorkflowTaskCompletedEventAttributes(); a != nil {
			tr.completedBy = a.GetIdentity()
		}
		a := ev.GetWorkflowTaskTimedOutEventAttributes()
		if a == nil || ev.GetEventTime().AsTime().Before(since) {
			continue
		}
		switch a.GetTimeoutType() {
		case enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START:
			if tr.path == pathDirect {
				tr.path = pathStickyTimeout
			}
		case enumspb.TIMEOUT_TYPE_START_TO_CLOSE:
			st := started[a.GetStartedEventId()]
			if st == nil {
				return killTrace{}, fmt.Errorf("workflow task timed out at event %d: its WorkflowTaskStarted (event %d) is not in the history", ev.GetEventId(), a.GetStartedEventId())
			}
			by, at := st.GetWorkflowTaskStartedEventAttributes().GetIdentity(), st.GetEventTime().AsTime()
			if by != victim && by != "" {
				return killTrace{}, fmt.Errorf("a workflow task started by %s, not the killed worker %s, timed out after the kill", by, victim)
			}
			if at.Before(since) {
				tr.path = pathInTask
			} else if tr.path != pathInTask {
				tr.path = pathDeadPoll
			}
		}
	}
	if !roundResumed.IsZero() && (tr.path == pathDirect || tr.path == pathStickyTimeout) {
		tr.path, tr.resumedAt, tr.roundAttempt = pathInRound, roundResumed, roundAttempt
	}
	return tr, nil
}

// transcript reads every event of the run through api and returns the texts of its user
// turns and its number of agent replies.
func transcript(ctx context.Context, api *apiClient, runID string) (users []string, replies int, err error) {
	after := int64(-1)
	for {
		var page struct {
			Events  []multiEvent `json:"events"`
			HasMore bool         `json:"hasMore"`
		}
		path := fmt.Sprintf("/v1/runs/%s/events?afterSequence=%d", runID, after)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, api.base+path, nil)
		if err != nil {
			return nil, 0, err
		}
		req.Header.Set("Authorization", "Bearer "+api.key)
		req.Header.Set("Accept", "application/json")
		resp, err := api.http.Do(req)
		if err != nil {
			return nil, 0, fmt.Errorf("GET %s: %w", path, err)
		}
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, 0, fmt.Errorf("GET %s: %w", path, err)
		}
		if resp.StatusCode != http.StatusOK {
			return nil, 0, fmt.Errorf("GET %s: status %d: %.300s", path, resp.StatusCode, raw)
		}
		if err := json.Unmarshal(raw, &page); err != nil {
			return nil, 0, fmt.Errorf("GET %s: decode: %w", path, err)
		}
		for _, e := range page.Events {
			if e.Type != protocol.EvConversationExchanged {
				continue
			}
			switch e.Payload.Turn.Role {
			case "user":
				users = append(users, e.Payload.Turn.Content.Text)
			case "agent":
				replies++
			}
		}
		if !page.HasMore || len(page.Events) == 0 {
			return users, replies, nil
		}
		after = page.Events[len(page.Events)-1].Sequence
	}
}

// checkTranscript counts the accepted turns 1..sent (texts "message N") missing from
// users and the ones found more than once; texts the bench never sent count as
// duplicated too. The replies must match the user turns one for one.
func checkTranscript(users []string, replies, sent int) (lost, duplicated int) {
	seen := map[string]int{}
	for _, u := range users {
		seen[u]++
	}
	for n := 1; n <= sent; n++ {
		text := "message " + strconv.Itoa(n)
		switch c := seen[text]; {
		case c == 0:
			lost++
		case c > 1:
			duplicated += c - 1
		}
		delete(seen, text)
	}
	for _, c := range seen {
		duplicated += c
	}
	if replies < sent-lost {
		lost += sent - lost - replies
	} else if replies > sent {
		duplicated += replies - sent
	}
	return lost, duplicated
}

func (b *bench) multiInstance(ctx context.Context, res *Result) error {
	if len(b.opts.ClusterAPIs) < 2 || b.opts.TemporalAddress == "" || b.opts.ClusterAPIKey == "" {
		if slices.Contains(b.opts.Only, "multi-instance") {
			return errors.New("it needs a cluster: --address, --apis with two `wop api` URLs and their key in WOP_API_KEY (deploy/cluster/up.sh stands one up and deploy/cluster/witness.sh runs this)")
		}
		b.multiNote = "multi-instance: not run (it needs --address and --apis of a cluster: deploy/cluster/witness.sh)"
		return nil
	}
	host, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("host name: %w", err)
	}
	apis := make([]*apiClient, len(b.opts.ClusterAPIs))
	for i, u := range b.opts.ClusterAPIs {
		apis[i] = newAPIClient(strings.TrimRight(u, "/"), b.opts.ClusterAPIKey, b.opts.MultiConversations+4)
		defer apis[i].close()
	}
	b.st.StopWorker()
	defer func() {
		if err := b.st.StartWorker(); err != nil {
			fmt.Fprintf(b.out, "restart the bench's worker: %v\n", err)
		}
	}()
	if _, err := b.awaitWorkers(ctx, host, ""); err != nil {
		return err
	}

	// Every call of a conversation's turn goes to the API after the one of its last turn.
	calls := 0
	var callsMu sync.Mutex
	nextAPI := func() *apiClient {
		callsMu.Lock()
		defer callsMu.Unlock()
		calls++
		return apis[calls%len(apis)]
	}
	convs := make([]*conv, b.opts.MultiConversations)
	if err := parallel(ctx, len(convs), len(convs), func(ctx context.Context, i int) error {
		c, err := openConv(ctx, apis[i%len(apis)], PackID)
		convs[i] = c
		return err
	}); err != nil {
		return err
	}
	defer func() {
		for _, c := range convs {
			if c != nil {
				_ = c.closeConv(ctx)
			}
		}
	}()
	turn := func(ctx context.Context, c *conv) error {
		tctx, cancel := context.WithTimeout(ctx, turnTimeout)
		defer cancel()
		c.api = nextAPI()
		_, err := c.exchange(tctx)
		return err
	}

	// samples are the times from the kill to the replies of the turns sent at it;
	// byPath the same by the path each turn took (traceKill).
	inTurn := b.opts.MultiKillInTurn > 0
	var samples []time.Duration
	byPath := map[killPath][]time.Duration{}
	// resumedInTask are the times from the kill to the resumption of the turns that ran
	// on the killed worker: their reply follows by the re-run of the turn's work (its
	// model round, WOP_MOCK_ROUND_DELAY), which the bound does not hold.
	var resumedInTask []time.Duration
	// resumedInRound are the same for the turns whose model round ran on the killed
	// worker: from the kill to the next attempt's start on another worker.
	var resumedInRound []time.Duration
	// laterAttempts counts the rounds whose first attempt after the kill was lost too
	// (handed to the killed worker's dead poll), so a later one resumed them.
	laterAttempts := 0
	resumers := map[string]int{}
	for k := 0; k < b.opts.MultiKills; k++ {
		if err := parallel(ctx, len(convs), len(convs), func(ctx context.Context, i int) error { return turn(ctx, convs[i]) }); err != nil {
			return fmt.Errorf("round %d, before the kill: %w", k, err)
		}
		held := map[string][]*conv{}
		for _, c := range convs {
			id, err := b.holder(ctx, c.runID)
			if err != nil {
				return err
			}
			held[id] = append(held[id], c)
		}
		victim := ""
		for _, id := range slices.Sorted(maps.Keys(held)) {
			if len(held[id]) > len(held[victim]) {
				victim = id
			}
		}
		pid, h, ok := workerPID(victim)
		if !ok || h != host || !isLiveWorker(pid) {
			return fmt.Errorf("round %d: the identity holding %d conversations, %q, is not a live `wop worker` process of this machine", k, len(held[victim]), victim)
		}
		// resumed sends each conversation of the victim its turn and records the time
		// from the kill (once it has happened) to the reply, by the path the turn took.
		var (
			mu     sync.Mutex
			killed time.Time
			kill   = make(chan struct{})
		)
		resumed := func() error {
			return parallel(ctx, len(held[victim]), len(held[victim]), func(ctx context.Context, i int) error {
				c := held[victim][i]
				if err := turn(ctx, c); err != nil {
					return err
				}
				select {
				case <-kill:
				case <-ctx.Done():
					return ctx.Err()
				}
				d := time.Since(killed)
				tr, err := b.afterKill(ctx, c.runID, victim, killed)
				if err != nil {
					return err
				}
				if tr.completedBy == victim {
					if inTurn {
						return fmt.Errorf("run %s: turn %d, sent %s before the kill, is completed by the killed worker %s: its scripted mock answered first (give the workers a WOP_MOCK_ROUND_DELAY longer than --kill-in-turn)", c.runID, c.turns, b.opts.MultiKillInTurn, victim)
					}
					return fmt.Errorf("run %s: turn %d after the kill is completed by the killed worker's identity %s", c.runID, c.turns, victim)
				}
				mu.Lock()
				samples = append(samples, d)
				byPath[tr.path] = append(byPath[tr.path], d)
				if tr.path == pathInTask && !tr.resumedAt.IsZero() {
					resumedInTask = append(resumedInTask, tr.resumedAt.Sub(killed))
				}
				if tr.path == pathInRound {
					resumedInRound = append(resumedInRound, tr.resumedAt.Sub(killed))
					if tr.roundAttempt > 2 {
						laterAttempts++
					}
				}
				resumers[tr.completedBy]++
				mu.Unlock()
				return nil
			})
		}
		sigkill := func() error {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				return fmt.Errorf("round %d: kill worker %d: %w", k, pid, err)
			}
			killed = time.Now()
			close(kill)
			return nil
		}
		var err error
		if inTurn {
			done := make(chan error, 1)
			go func() { done <- resumed() }()
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(b.opts.MultiKillInTurn):
			}
			if err := sigkill(); err != nil {
				return err
			}
			err = <-done
		} else {
			if err := sigkill(); err != nil {
				return err
			}
			if d := b.opts.MultiKillDelay; d > 0 {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(d):
				}
			}
			err = resumed()
		}
		if err != nil {
			return fmt.Errorf("round %d, after killing worker %d: %w", k, pid, err)
		}
		if _, err := b.awaitWorkers(ctx, host, victim); err != nil {
			return fmt.Errorf("round %d: %w", k, err)
		}
	}

	sent, lost, duplicated := 0, 0, 0
	for i, c := range convs {
		users, replies, err := transcript(ctx, apis[(i+1)%len(apis)], c.runID)
		if err != nil {
			return err
		}
		l, d := checkTranscript(users, replies, c.turns)
		sent, lost, duplicated = sent+c.turns, lost+l, duplicated+d
	}
	bound := worker.RecoveryOf(b.workerConfig())
	res.MultiInstance = &MultiInstance{}
	res.MultiKills, res.MultiTurns = b.opts.MultiKills, len(samples)
	res.MultiP50Ms, res.MultiMaxMs = percentile(samples, 50), percentile(samples, 100)
	res.MultiAccepted, res.MultiLost, res.MultiDuplicated = sent, lost, duplicated
	st, dp, di := byPath[pathStickyTimeout], byPath[pathDeadPoll], byPath[pathDirect]
	res.MultiStickyTurns, res.MultiStickyP50Ms, res.MultiStickyMaxMs = len(st), percentile(st, 50), percentile(st, 100)
	res.MultiDeadPollTurns, res.MultiDeadPollP50Ms, res.MultiDeadPollMaxMs = len(dp), percentile(dp, 50), percentile(dp, 100)
	res.MultiDirectTurns, res.MultiDirectP50Ms, res.MultiDirectMaxMs = len(di), percentile(di, 50), percentile(di, 100)
	it := byPath[pathInTask]
	res.MultiInTaskTurns, res.MultiInTaskP50Ms, res.MultiInTaskMaxMs = len(it), percentile(it, 50), percentile(it, 100)
	res.MultiInTaskResumedP50Ms, res.MultiInTaskResumedMaxMs = percentile(resumedInTask, 50), percentile(resumedInTask, 100)
	ir := byPath[pathInRound]
	res.MultiInRoundTurns, res.MultiInRoundP50Ms, res.MultiInRoundMaxMs = len(ir), percentile(ir, 50), percentile(ir, 100)
	res.MultiInRoundResumedP50Ms, res.MultiInRoundResumedMaxMs = percentile(resumedInRound, 50), percentile(resumedInRound, 100)
	res.MultiInRoundBoundMs = ms(bound.InModelRound())
	res.MultiInRoundLaterAttempts = laterAttempts
	delay := b.opts.MultiKillDelay
	res.MultiKillDelayMs, res.MultiKillInTurnMs = ms(delay), ms(b.opts.MultiKillInTurn)
	res.MultiStickyBoundMs = ms(delay + bound.BetweenTurns())
	res.MultiDeadPollBoundMs = ms(delay + bound.InWorkflowTask())
	// A task started before the kill times out one workflow task timeout after its start.
	res.MultiInTaskBoundMs = ms(bound.InWorkflowTask())
	sentAt := fmt.Sprintf("%s after the kills", delay)
	if inTurn {
		sentAt = fmt.Sprintf("%s before the kills, running on the killed worker", b.opts.MultiKillInTurn)
	}
	b.multiNote = fmt.Sprintf("multi-instance: %d `wop api` and 2 `wop worker` processes (%d worker identities resumed turns); %d SIGKILLs of the worker holding the conversations, %d turns sent %s and resumed by another worker: reply p50 %.0f ms, max %.0f ms after the kill; %d waited out the killed worker's sticky queue (p50 %.0f ms, max %.0f ms, bound %s), %d had their workflow task handed to the killed worker's poll and waited out the workflow task timeout (p50 %.0f ms, max %.0f ms, bound %s), %d were running on the killed worker and waited out the workflow task timeout (resumed p50 %.0f ms, max %.0f ms, bound %s; replied p50 %.0f ms, max %.0f ms), %d were in a model round on the killed worker and waited out its heartbeat timeout (resumed p50 %.0f ms, max %.0f ms, bound %s; replied p50 %.0f ms, max %.0f ms; %d resumed by a third or later attempt), %d went to a live worker at once; transcripts: %d accepted turns, %d lost, %d duplicated",
		len(apis), len(resumers), res.MultiKills, res.MultiTurns, sentAt, res.MultiP50Ms, res.MultiMaxMs,
		len(st), res.MultiStickyP50Ms, res.MultiStickyMaxMs, delay+bound.BetweenTurns(),
		len(dp), res.MultiDeadPollP50Ms, res.MultiDeadPollMaxMs, delay+bound.InWorkflowTask(),
		len(it), res.MultiInTaskResumedP50Ms, res.MultiInTaskResumedMaxMs, bound.InWorkflowTask(), res.MultiInTaskP50Ms, res.MultiInTaskMaxMs,
		len(ir), res.MultiInRoundResumedP50Ms, res.MultiInRoundResumedMaxMs, bound.InModelRound(), res.MultiInRoundP50Ms, res.MultiInRoundMaxMs, laterAttempts, len(di), sent, lost, duplicated)
	if lost > 0 || duplicated > 0 {
		return fmt.Errorf("%d of %d accepted turns lost and %d duplicated in the transcripts", lost, sent, duplicated)
	}
	return nil
}
