package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	historypb "go.temporal.io/api/history/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// The witness's exactly-once verdict: every accepted turn "message 1..sent" once, one
// reply per turn.
func TestCheckTranscriptCountsLostAndDuplicatedTurns(t *testing.T) {
	for _, c := range []struct {
		name            string
		users           []string
		replies, sent   int
		lost, duplicate int
	}{
		{"every turn once", []string{"message 1", "message 2", "message 3"}, 3, 3, 0, 0},
		{"a turn missing and its reply", []string{"message 1", "message 3"}, 2, 3, 1, 0},
		{"a turn twice, answered twice", []string{"message 1", "message 2", "message 2"}, 3, 2, 0, 2},
		{"a text never sent", []string{"message 1", "message 9"}, 2, 1, 0, 2},
		{"a turn without its reply", []string{"message 1", "message 2"}, 1, 2, 1, 0},
		{"nothing arrived", nil, 0, 2, 2, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			lost, dup := checkTranscript(c.users, c.replies, c.sent)
			assert.Equal(t, c.lost, lost, "lost")
			assert.Equal(t, c.duplicate, dup, "duplicated")
		})
	}
}

// historyOf builds a run's history from fixtures: each event gets the next id and the
// time kill+ms, and a timed-out task points at the newest WorkflowTaskStarted.
type historyOf struct {
	kill   time.Time
	events []*historypb.HistoryEvent
}

func (h *historyOf) add(ms int, typ enumspb.EventType, set func(*historypb.HistoryEvent)) {
	ev := &historypb.HistoryEvent{EventId: int64(len(h.events) + 1), EventType: typ,
		EventTime: timestamppb.New(h.kill.Add(time.Duration(ms) * time.Millisecond))}
	set(ev)
	h.events = append(h.events, ev)
}

func (h *historyOf) scheduled(ms int, queue enumspb.TaskQueueKind) *historyOf {
	h.add(ms, enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, func(ev *historypb.HistoryEvent) {
		ev.Attributes = &historypb.HistoryEvent_WorkflowTaskScheduledEventAttributes{WorkflowTaskScheduledEventAttributes: &historypb.WorkflowTaskScheduledEventAttributes{
			TaskQueue: &taskqueuepb.TaskQueue{Name: "q", Kind: queue}}}
	})
	return h
}

func (h *historyOf) started(ms int, identity string) *historyOf {
	h.add(ms, enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED, func(ev *historypb.HistoryEvent) {
		ev.Attributes = &historypb.HistoryEvent_WorkflowTaskStartedEventAttributes{WorkflowTaskStartedEventAttributes: &historypb.WorkflowTaskStartedEventAttributes{
			ScheduledEventId: ev.EventId - 1, Identity: identity}}
	})
	return h
}

func (h *historyOf) completed(ms int, identity string) *historyOf {
	h.add(ms, enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, func(ev *historypb.HistoryEvent) {
		ev.Attributes = &historypb.HistoryEvent_WorkflowTaskCompletedEventAttributes{WorkflowTaskCompletedEventAttributes: &historypb.WorkflowTaskCompletedEventAttributes{
			StartedEventId: ev.EventId - 1, Identity: identity}}
	})
	return h
}

func (h *historyOf) timedOut(ms int, timeout enumspb.TimeoutType) *historyOf {
	var startedID int64
	if timeout == enumspb.TIMEOUT_TYPE_START_TO_CLOSE {
		startedID = int64(len(h.events))
	}
	h.add(ms, enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT, func(ev *historypb.HistoryEvent) {
		ev.Attributes = &historypb.HistoryEvent_WorkflowTaskTimedOutEventAttributes{WorkflowTaskTimedOutEventAttributes: &historypb.WorkflowTaskTimedOutEventAttributes{
			ScheduledEventId: ev.EventId - 1, StartedEventId: startedID, TimeoutType: timeout}}
	})
	return h
}

// roundAttempt writes a model round's ActivityTaskStarted as Temporal writes a retried
// activity's (one event, at the last attempt's start): attempt, its worker, and the
// timeout that lost the attempt before it (none on attempt 1).
func (h *historyOf) roundAttempt(ms int, identity string, attempt int32, lostBy enumspb.TimeoutType) *historyOf {
	h.add(ms, enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED, func(ev *historypb.HistoryEvent) {
		a := &historypb.ActivityTaskStartedEventAttributes{ScheduledEventId: ev.EventId - 1, Identity: identity, Attempt: attempt}
		if lostBy != enumspb.TIMEOUT_TYPE_UNSPECIFIED {
			a.LastFailure = &failurepb.Failure{Message: "activity timeout", FailureInfo: &failurepb.Failure_TimeoutFailureInfo{
				TimeoutFailureInfo: &failurepb.TimeoutFailureInfo{TimeoutType: lostBy}}}
		}
		ev.Attributes = &historypb.HistoryEvent_ActivityTaskStartedEventAttributes{ActivityTaskStartedEventAttributes: a}
	})
	return h
}

// A turn sent at a kill, traced from its run's history as Temporal 1.32.1 writes it.
// The timed-out speculative task of an update (every turn's) is written with its
// WorkflowTaskStarted naming nobody: a task the killed worker's sticky poll took right
// after the kill is handed to the dead poll, not an unknown worker's task nor an error.
func TestTraceKillReadsTimedOutTasks(t *testing.T) {
	const victim, other = "101@host@wop", "202@host@wop"
	kill := time.Date(2026, 12, 4, 6, 0, 0, 0, time.UTC)
	// before is the turn answered by the victim before the kill.
	before := func() *historyOf {
		return (&historyOf{kill: kill}).scheduled(-900, enumspb.TASK_QUEUE_KIND_STICKY).started(-899, victim).completed(-880, victim)
	}
	// inRound is a turn whose workflow task (on the victim) scheduled its model round
	// 300 ms before the kill; the round then ran on the victim.
	inRound := func() *historyOf {
		return before().scheduled(-320, enumspb.TASK_QUEUE_KIND_STICKY).started(-319, victim).completed(-300, victim)
	}
	for _, c := range []struct {
		name    string
		history *historyOf
		path    killPath
		err     string
		// resumedMs, when set, is the resumption's time from the kill (otherwise
		// the other worker's last workflow task start).
		resumedMs int
	}{
		{"a model round lost at its heartbeat timeout, its next attempt on the other worker, then the sticky timeout",
			inRound().roundAttempt(1020, other, 2, enumspb.TIMEOUT_TYPE_HEARTBEAT).
				scheduled(2030, enumspb.TASK_QUEUE_KIND_STICKY).timedOut(3030, enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START).
				scheduled(3030, enumspb.TASK_QUEUE_KIND_NORMAL).started(3100, other).completed(3140, other),
			pathInRound, "", 1020},
		{"a model round the other worker ran: only the sticky timeout",
			inRound().roundAttempt(-290, other, 1, enumspb.TIMEOUT_TYPE_UNSPECIFIED).
				scheduled(700, enumspb.TASK_QUEUE_KIND_STICKY).timedOut(1700, enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START).
				scheduled(1700, enumspb.TASK_QUEUE_KIND_NORMAL).started(1750, other).completed(1790, other),
			pathStickyTimeout, "", 0},
		{"a round retried after a provider's error is not a lost one",
			inRound().roundAttempt(1500, other, 2, enumspb.TIMEOUT_TYPE_UNSPECIFIED).
				scheduled(2030, enumspb.TASK_QUEUE_KIND_NORMAL).started(2100, other).completed(2140, other),
			pathDirect, "", 0},
		{"the lost round's next attempt on the killed worker",
			inRound().roundAttempt(1020, victim, 2, enumspb.TIMEOUT_TYPE_HEARTBEAT),
			0, "started by the killed worker", 0},
		{"the sticky queue timed out, the shared queue's task went to the other worker",
			before().scheduled(2, enumspb.TASK_QUEUE_KIND_STICKY).timedOut(1002, enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START).
				scheduled(1002, enumspb.TASK_QUEUE_KIND_NORMAL).started(1150, other).completed(1190, other),
			pathStickyTimeout, "", 0},
		{"the speculative task handed to the dead sticky poll, written with no identity",
			before().scheduled(3, enumspb.TASK_QUEUE_KIND_STICKY).started(4, "").timedOut(10004, enumspb.TIMEOUT_TYPE_START_TO_CLOSE).
				scheduled(10004, enumspb.TASK_QUEUE_KIND_NORMAL).started(10200, other).completed(10250, other),
			pathDeadPoll, "", 0},
		{"a normal task handed to the dead poll, written with its identity",
			before().scheduled(3, enumspb.TASK_QUEUE_KIND_NORMAL).started(4, victim).timedOut(10004, enumspb.TIMEOUT_TYPE_START_TO_CLOSE).
				scheduled(10004, enumspb.TASK_QUEUE_KIND_NORMAL).started(10200, other).completed(10250, other),
			pathDeadPoll, "", 0},
		{"a sticky timeout, then the shared queue's task handed to the dead poll",
			before().scheduled(2, enumspb.TASK_QUEUE_KIND_STICKY).timedOut(1002, enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START).
				scheduled(1002, enumspb.TASK_QUEUE_KIND_NORMAL).started(1003, "").timedOut(11003, enumspb.TIMEOUT_TYPE_START_TO_CLOSE).
				scheduled(11003, enumspb.TASK_QUEUE_KIND_NORMAL).started(11100, other).completed(11150, other),
			pathDeadPoll, "", 0},
		{"no timeout: the run's task went to the other worker at once",
			before().scheduled(2, enumspb.TASK_QUEUE_KIND_NORMAL).started(20, other).completed(60, other),
			pathDirect, "", 0},
		{"a timeout before the kill is another turn's",
			(&historyOf{kill: kill}).scheduled(-5000, enumspb.TASK_QUEUE_KIND_STICKY).timedOut(-4000, enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START).
				scheduled(-4000, enumspb.TASK_QUEUE_KIND_NORMAL).started(-3990, victim).completed(-3980, victim).
				scheduled(2, enumspb.TASK_QUEUE_KIND_NORMAL).started(20, other).completed(60, other),
			pathDirect, "", 0},
		{"a task another live worker started timed out",
			before().scheduled(3, enumspb.TASK_QUEUE_KIND_NORMAL).started(4, other).timedOut(10004, enumspb.TIMEOUT_TYPE_START_TO_CLOSE).
				scheduled(10004, enumspb.TASK_QUEUE_KIND_NORMAL).started(10200, other).completed(10250, other),
			0, "started by 202@host@wop, not the killed worker", 0},
		{"a turn's speculative task the killed worker was running at the kill, written with no identity",
			before().scheduled(-300, enumspb.TASK_QUEUE_KIND_STICKY).started(-299, "").timedOut(9701, enumspb.TIMEOUT_TYPE_START_TO_CLOSE).
				scheduled(9701, enumspb.TASK_QUEUE_KIND_NORMAL).started(9800, other).completed(9850, other),
			pathInTask, "", 0},
		{"a normal task the killed worker was running at the kill, written with its identity",
			before().scheduled(-300, enumspb.TASK_QUEUE_KIND_NORMAL).started(-299, victim).timedOut(9701, enumspb.TIMEOUT_TYPE_START_TO_CLOSE).
				scheduled(9701, enumspb.TASK_QUEUE_KIND_NORMAL).started(9800, other).completed(9850, other),
			pathInTask, "", 0},
		{"running at the kill outweighs a later task handed to the dead poll",
			before().scheduled(-300, enumspb.TASK_QUEUE_KIND_STICKY).started(-299, "").timedOut(9701, enumspb.TIMEOUT_TYPE_START_TO_CLOSE).
				scheduled(9701, enumspb.TASK_QUEUE_KIND_NORMAL).started(9702, "").timedOut(19702, enumspb.TIMEOUT_TYPE_START_TO_CLOSE).
				scheduled(19702, enumspb.TASK_QUEUE_KIND_NORMAL).started(19800, other).completed(19850, other),
			pathInTask, "", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr, err := traceKill(c.history.events, victim, kill)
			if c.err != "" {
				assert.ErrorContains(t, err, c.err)
				return
			}
			if assert.NoError(t, err) {
				assert.Equal(t, c.path.String(), tr.path.String())
				assert.Equal(t, other, tr.completedBy)
				if c.resumedMs != 0 {
					assert.Equal(t, kill.Add(time.Duration(c.resumedMs)*time.Millisecond), tr.resumedAt)
					return
				}
				// The resumption is the other worker's first task start after the kill.
				if assert.False(t, tr.resumedAt.IsZero()) {
					last := c.history.events[len(c.history.events)-2]
					assert.Equal(t, last.GetEventTime().AsTime(), tr.resumedAt)
				}
			}
		})
	}
}
