// Package bench is `wop bench`: it measures what a conversation turn costs on this
// host against what the same turn costs on bare Temporal, on the same server, in the
// same process and the same run.
//
// It starts the whole host in-process through internal/stack (or uses the Temporal
// server at TEMPORAL_ADDRESS), serves one pack of its own, bench-echo, whose every turn
// is one scripted mock model round, and runs these workloads:
//
//   - floor: a minimal workflow on its own task queue (same server, same client) that
//     receives a signal, runs one no-op local activity (the host runs the scripted
//     mock's rounds as local activities) and makes the result visible to a query;
//     timed from the signal to the visible result. Its reader waits the way the API's
//     event reader waits: a query, then the history long poll, then a query on every
//     wake. The activity floor is the same with an activity task, what a turn on a
//     real model costs Temporal.
//   - exchange: one turn through the API: POST of an exchange to
//     /v1/runs/{id}/interrupts/agent until the agent's reply event is read from the
//     long poll GET /v1/runs/{id}/events/poll.
//   - breakdown: turns of the floor and of the host, each alone, step by step: the
//     event times of the workflow's history and the embedded server's own timers.
//   - throughput of both with Concurrency conversations for a fixed time.
//   - history: the bytes of Temporal history (HistorySizeBytes of
//     DescribeWorkflowExecution, read when the workflow has nothing pending) that turn 5
//     and the last turn of one long conversation add.
//   - idle: RSS growth of this process after opening IdleRuns conversations that then
//     wait for a human. It runs first, so the other workloads have not grown the heap
//     it is measured against; its conversations stay open while they run.
//   - carried: the continue-as-new input of one conversation of 2 KB messages after
//     turn CarriedEarlyTurn and after turn CarriedTurns, in the SDK's workflow test
//     environment (carried.go).
//   - longread: reads of a run's events (first page, the poll from its start, a page
//     from the middle) on a conversation of 10 turns and one of 1,000, and their ratio
//     (longread.go).
//
// It prints a table and, as its last line, one JSON object (Result).
package bench

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/wop-dev/wop/internal/devserver"
	"go.temporal.io/sdk/client"
	"go.temporal.io/server/common/metrics"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/api"
	"github.com/wop-dev/wop/internal/stack"
	"github.com/wop-dev/wop/worker"
)

// PackID is the id of the pack the bench talks to.
const PackID = "bench-echo"

//go:embed testdata/packs
var packFiles embed.FS

// Options configure Run. Zero counts take the defaults of the full or quick run.
type Options struct {
	// Quick uses the small counts of QuickOptions for the zero fields.
	Quick bool
	// Samples is the number of timed turns of each latency workload.
	Samples int
	// Warmup turns of each workload run before timing starts.
	Warmup int
	// TurnsPerConversation rotates the latency workloads onto a fresh conversation
	// (and a fresh floor workflow) after this many turns, so the latency figures are of
	// conversations of realistic length rather than of one ever-growing one.
	TurnsPerConversation int
	// Concurrency is the number of concurrent conversations of the throughput workloads;
	// Concurrencies, when set, are several such numbers, run one after the other
	// (Concurrency is then the first).
	Concurrency   int
	Concurrencies []int
	// Duration is how long each throughput workload runs.
	Duration time.Duration
	// HistoryTurns is the length of the long conversation; the bench reports the
	// history added by turn HistoryEarlyTurn and by turn HistoryTurns.
	HistoryTurns     int
	HistoryEarlyTurn int
	// IdleRuns is the number of conversations opened for the idle-memory workload.
	IdleRuns int
	// BreakdownTurns is the number of turns of each kind the breakdown workload times.
	BreakdownTurns int
	// CarriedTurns is the length of the conversation of the carried workload; it
	// reports the continue-as-new input after turn CarriedEarlyTurn and after the last.
	CarriedTurns     int
	CarriedEarlyTurn int
	// DataDir holds the embedded server's SQLite file. Empty uses a temporary folder
	// (removed afterwards), as `wop dev` uses a file; Memory keeps it in memory instead.
	DataDir string
	Memory  bool
	// DynamicConfig overrides the embedded server's dynamic config by key (A/B runs of
	// a setting; see `wop bench --dynamic-config`).
	DynamicConfig map[string]any
	// TemporalAddress and Namespace, when set, use that Temporal server instead of the
	// embedded one; TemporalClient carries its TLS and credentials (as `wop worker`
	// reads them from the environment: worker.ClientOptionsFromEnv).
	TemporalAddress string
	Namespace       string
	TemporalClient  client.Options
	// CPUProcesses are other processes of this machine (a Temporal server, its
	// database) whose CPU time per turn the throughput workload reports, by name.
	CPUProcesses map[string]int
	// ResolveWait, when set, is how long the API waits for a resolve's outcome before it
	// answers 202 (api.GuardConfig.ResolveWait; the API's default otherwise).
	ResolveWait time.Duration
	// WorkerCommand runs `wop` (the recovery workload starts `wop worker` processes
	// with it; `wop bench` sets it to its own binary). Empty skips that workload.
	WorkerCommand []string
	// RecoveryKills and RecoveryConversations are the recovery workload's rounds and the
	// conversations each opens.
	RecoveryKills         int
	RecoveryConversations int
	// ClusterAPIs are the base URLs of the `wop api` processes of a cluster on
	// TemporalAddress and ClusterAPIKey their key: the multi-instance workload drives
	// its conversations through them and kills that cluster's `wop worker` processes
	// (deploy/cluster/up.sh). MultiKills and MultiConversations are its rounds (one
	// kill each) and its conversations. MultiKillDelay is how long after each kill it
	// sends the turns of the killed worker's conversations (0: at once), so the race
	// between a turn and Temporal noticing the killed worker's closed connection can
	// be measured. MultiKillInTurn, instead, sends those turns first and kills the worker
	// that long after, while they run on it (its scripted mock's round delay must be
	// longer): each turn then waits for its workflow task to time out on the dead worker.
	ClusterAPIs        []string
	ClusterAPIKey      string
	MultiKills         int
	MultiConversations int
	MultiKillDelay     time.Duration
	MultiKillInTurn    time.Duration
	// MockRoundDelay holds each round of the bench's own scripted mock this long
	// (activities.MockProvider.RoundDelay): a held round stands in for a provider that
	// takes its time, and runs as the ModelRound activity, heartbeating, as a real
	// provider's does. The throughput workload then shows what those heartbeats cost.
	MockRoundDelay time.Duration
	// CPUProfile and MemProfile, when set, receive a pprof CPU profile of the whole run
	// and a heap profile taken at its end.
	CPUProfile string
	MemProfile string
	// WorkerCacheSize, when > 0, sets the SDK's sticky workflow cache size (process-wide)
	// of the bench's workers: how many workflows they keep in memory between their
	// workflow tasks (default worker.DefaultWorkflowCacheSize). A smaller cache trades
	// idle memory for replays when an evicted conversation gets its next turn.
	WorkerCacheSize int
	// StreamSamples is the number of timed turns of the stream workload.
	StreamSamples int
	// StreamChunkDelay is the fake provider's delay before each piece of its reply in
	// the stream workload (default 50ms, a model writing 20 tokens a second).
	StreamChunkDelay time.Duration
	// LongReadTurns and LongReadEarlyTurn are the lengths of the two conversations
	// the longread workload reads; LongReadSamples how many reads of each kind it times
	// on each.
	LongReadTurns     int
	LongReadEarlyTurn int
	LongReadSamples   int
	// Only, when non-empty, runs just these workloads (latency, throughput, history,
	// idle, carried, stream, longread); the figures of the others stay zero. For
	// profiling one workload.
	Only []string
	// Logger receives the host's logs (nil discards them).
	Logger *slog.Logger
}

// DefaultStreamChunkDelay is the stream workload's default delay per piece.
const DefaultStreamChunkDelay = 50 * time.Millisecond

// FullOptions are the counts of a full run.
func FullOptions() Options {
	return Options{Samples: 200, Warmup: 10, TurnsPerConversation: 25, Concurrency: 50,
		Duration: 30 * time.Second, HistoryTurns: 200, HistoryEarlyTurn: 5, IdleRuns: 1000, BreakdownTurns: 30,
		CarriedTurns: 2000, CarriedEarlyTurn: 10, StreamSamples: 50,
		LongReadTurns: 1000, LongReadEarlyTurn: 10, LongReadSamples: 30, RecoveryKills: 20, RecoveryConversations: 10,
		MultiKills: 20, MultiConversations: 6}
}

// QuickOptions are the counts of a --quick run (about two minutes on 2 cores), on a
// SQLite file like the full run.
func QuickOptions() Options {
	return Options{Quick: true, Samples: 40, Warmup: 3, TurnsPerConversation: 25, Concurrency: 50,
		Duration: 5 * time.Second, HistoryTurns: 40, HistoryEarlyTurn: 5, IdleRuns: 200, BreakdownTurns: 20,
		CarriedTurns: 2000, CarriedEarlyTurn: 10, StreamSamples: 10,
		LongReadTurns: 1000, LongReadEarlyTurn: 10, LongReadSamples: 10, RecoveryKills: 5, RecoveryConversations: 10,
		MultiKills: 20, MultiConversations: 6}
}

// withDefaults fills the zero counts from the quick or full defaults.
func (o Options) withDefaults() Options {
	d := FullOptions()
	if o.Quick {
		d = QuickOptions()
	}
	set := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	set(&o.Samples, d.Samples)
	set(&o.Warmup, d.Warmup)
	set(&o.TurnsPerConversation, d.TurnsPerConversation)
	set(&o.Concurrency, d.Concurrency)
	set(&o.HistoryTurns, d.HistoryTurns)
	set(&o.HistoryEarlyTurn, d.HistoryEarlyTurn)
	set(&o.IdleRuns, d.IdleRuns)
	set(&o.CarriedTurns, d.CarriedTurns)
	set(&o.CarriedEarlyTurn, d.CarriedEarlyTurn)
	set(&o.StreamSamples, d.StreamSamples)
	set(&o.LongReadTurns, d.LongReadTurns)
	set(&o.LongReadEarlyTurn, d.LongReadEarlyTurn)
	set(&o.LongReadSamples, d.LongReadSamples)
	if o.Duration <= 0 {
		o.Duration = d.Duration
	}
	if len(o.Concurrencies) == 0 {
		o.Concurrencies = []int{o.Concurrency}
	}
	o.Concurrency = o.Concurrencies[0]
	set(&o.BreakdownTurns, d.BreakdownTurns)
	set(&o.RecoveryKills, d.RecoveryKills)
	set(&o.RecoveryConversations, d.RecoveryConversations)
	set(&o.MultiKills, d.MultiKills)
	set(&o.MultiConversations, d.MultiConversations)
	if o.StreamChunkDelay <= 0 {
		o.StreamChunkDelay = DefaultStreamChunkDelay
	}
	if o.HistoryEarlyTurn > o.HistoryTurns {
		o.HistoryEarlyTurn = o.HistoryTurns
	}
	if o.CarriedEarlyTurn > o.CarriedTurns {
		o.CarriedEarlyTurn = o.CarriedTurns
	}
	if o.LongReadEarlyTurn > o.LongReadTurns {
		o.LongReadEarlyTurn = o.LongReadTurns
	}
	return o
}

// The targets the table marks as met or missed (no test asserts them). The latency
// targets are for the embedded server on a SQLite file, 2 cores; the ratio is to the
// floor measured in the same run with the same settings.
const (
	TargetHostP50Ms = 40.0 // host turn p50
	TargetRatio     = 1.1  // host turn p50 / floor turn p50
	TargetTurnsPerS = 60.0 // host turns per second with Concurrency (50) conversations
	// TargetRatioUpdateFloor bounds the host's turn p50 over the fair floor's (an update
	// whose handler runs a no-op local activity, what a resolve is).
	TargetRatioUpdateFloor = 1.05
	// TargetThroughputRatio is the least host throughput, as a share of the update
	// floor's with as many conversations, at every level.
	TargetThroughputRatio = 0.9
	// TargetLongReadRatio bounds a read of a run at turn LongReadTurns against the same
	// read at turn LongReadEarlyTurn.
	TargetLongReadRatio = 2.0
)

// Result is the JSON object printed as the last line.
type Result struct {
	FloorP50Ms         float64 `json:"floor_p50_ms"`
	FloorP99Ms         float64 `json:"floor_p99_ms"`
	FloorActivityP50Ms float64 `json:"floor_activity_p50_ms"`
	FloorActivityP99Ms float64 `json:"floor_activity_p99_ms"`
	ExchangeP50Ms      float64 `json:"exchange_p50_ms"`
	ExchangeP99Ms      float64 `json:"exchange_p99_ms"`
	RatioP50           float64 `json:"ratio_p50"`
	TurnsPerS          float64 `json:"turns_per_s"`
	FloorTurnsPerS     float64 `json:"floor_turns_per_s"`
	// UpdateFloorP50Ms and UpdateFloorP99Ms are the fair floor's turn (one Workflow
	// Update whose handler runs a no-op local activity: the host's own primitive), and
	// RatioUpdateFloorP50 the host's p50 over it; UpdateFloorTurnsPerS its throughput at
	// the first level. Throughput holds every level of the throughput workload.
	UpdateFloorP50Ms     float64           `json:"update_floor_p50_ms"`
	UpdateFloorP99Ms     float64           `json:"update_floor_p99_ms"`
	RatioUpdateFloorP50  float64           `json:"ratio_update_floor_p50"`
	UpdateFloorTurnsPerS float64           `json:"update_floor_turns_per_s"`
	Throughput           []ThroughputLevel `json:"throughput"`
	// FirstTurnP50Ms is the p50 of the latency workload's conversations' first turns
	// (FirstTurns of them, after the warm-up), LaterTurnP50Ms of their other turns.
	FirstTurns     int     `json:"first_turns"`
	FirstTurnP50Ms float64 `json:"first_turn_p50_ms"`
	LaterTurnP50Ms float64 `json:"later_turn_p50_ms"`
	// The recovery workload: kills of a worker process, the turns sent at each kill to
	// the conversations it held, the time from the kill to their replies, and the bound
	// the configured timeouts imply (worker.Recovery.BetweenTurns).
	RecoveryKills       int     `json:"recovery_kills,omitempty"`
	RecoveryTurns       int     `json:"recovery_turns,omitempty"`
	RecoveryP50Ms       float64 `json:"recovery_p50_ms,omitempty"`
	RecoveryMaxMs       float64 `json:"recovery_max_ms,omitempty"`
	RecoveryBoundMs     float64 `json:"recovery_bound_ms,omitempty"`
	HistoryBytesTurn5   int64   `json:"history_bytes_turn5"`
	HistoryBytesTurn200 int64   `json:"history_bytes_turn200"`
	IdleRuns            int     `json:"idle_runs"`
	IdleRSSMB           float64 `json:"idle_rss_mb"`
	// IdleMarginalKB is the RSS growth per conversation over the second half of the
	// idle workload's conversations: what one more waiting conversation costs, the
	// warm-up of the process's pools and caches excluded.
	IdleMarginalKB float64 `json:"idle_marginal_kb"`
	// CarriedBytesTurn10 and CarriedBytesTurn2000 are the continue-as-new input after
	// turn 10 and turn 2000 of a conversation of 2 KB messages (the carried workload).
	CarriedBytesTurn10   int64 `json:"carried_bytes_turn10"`
	CarriedBytesTurn2000 int64 `json:"carried_bytes_turn2000"`
	// FirstChunkP50Ms and FirstChunkP99Ms are the time from sending a turn to the first
	// ai.message.chunk of its streamed reply read from the run's SSE stream, with a
	// fake provider that waits StreamChunkDelay before each piece (the stream workload);
	// ProviderFirstChunkP50Ms is that provider's own time to its first piece, and
	// StreamedReplyP50Ms the time to the durable reply event of the same turns.
	FirstChunkP50Ms         float64 `json:"first_chunk_p50_ms"`
	FirstChunkP99Ms         float64 `json:"first_chunk_p99_ms"`
	ProviderFirstChunkP50Ms float64 `json:"provider_first_chunk_p50_ms"`
	StreamedReplyP50Ms      float64 `json:"streamed_reply_p50_ms"`
	// LongRead* are the p50 times of reading a run's events (the longread workload) on
	// a conversation of LongReadEarlyTurn turns (Short, "turn10") and one of
	// LongReadTurns turns (Long, "turn1000"): its first page (the JSON read) and the
	// long poll from its start on the bench's API (1 MiB pages); and, as LongReadPaged*,
	// the same and a page from the middle of the log on an API of 32 KiB pages, where
	// every page read is full at both lengths.
	LongReadFirstPageP50MsShort   float64 `json:"longread_first_page_p50_ms_turn10"`
	LongReadFirstPageP50MsLong    float64 `json:"longread_first_page_p50_ms_turn1000"`
	LongReadPollP50MsShort        float64 `json:"longread_poll_p50_ms_turn10"`
	LongReadPollP50MsLong         float64 `json:"longread_poll_p50_ms_turn1000"`
	LongReadPagedFirstP50MsShort  float64 `json:"longread_32k_first_page_p50_ms_turn10"`
	LongReadPagedFirstP50MsLong   float64 `json:"longread_32k_first_page_p50_ms_turn1000"`
	LongReadPagedPollP50MsShort   float64 `json:"longread_32k_poll_p50_ms_turn10"`
	LongReadPagedPollP50MsLong    float64 `json:"longread_32k_poll_p50_ms_turn1000"`
	LongReadPagedMiddleP50MsShort float64 `json:"longread_32k_middle_page_p50_ms_turn10"`
	LongReadPagedMiddleP50MsLong  float64 `json:"longread_32k_middle_page_p50_ms_turn1000"`
	// The multi-instance workload, present only when it ran.
	*MultiInstance
}

// MultiInstance is the multi-instance workload's result: kills of the worker process
// holding conversations of a 2 + 2 cluster, the turns sent at each kill and resumed by
// another worker, the time from the kill to their replies (overall and by the path each
// turn took, read from its run's history), the bounds the timeouts imply, and the
// transcripts' accepted, lost and duplicated turns.
type MultiInstance struct {
	MultiKills int `json:"multi_instance_kills,omitempty"`
	// MultiKillDelayMs is Options.MultiKillDelay: the turns were sent that long after
	// each kill. Every time is from the kill, and every bound includes it.
	MultiKillDelayMs float64 `json:"multi_instance_kill_delay_ms"`
	// MultiKillInTurnMs is Options.MultiKillInTurn: the turns were sent that long
	// before each kill, and ran on the killed worker when it died.
	MultiKillInTurnMs float64 `json:"multi_instance_kill_in_turn_ms,omitempty"`
	MultiTurns        int     `json:"multi_instance_turns,omitempty"`
	MultiP50Ms        float64 `json:"multi_instance_p50_ms,omitempty"`
	MultiMaxMs        float64 `json:"multi_instance_max_ms,omitempty"`
	MultiAccepted     int     `json:"multi_instance_accepted_turns,omitempty"`
	MultiLost         int     `json:"multi_instance_lost_turns"`
	MultiDuplicated   int     `json:"multi_instance_duplicated_turns"`
	// MultiSticky* are the turns whose workflow task waited on the killed worker's
	// sticky queue until the sticky schedule-to-start timeout (bound
	// MultiStickyBoundMs, worker.Recovery.BetweenTurns).
	MultiStickyTurns   int     `json:"multi_instance_sticky_timeout_turns"`
	MultiStickyP50Ms   float64 `json:"multi_instance_sticky_timeout_p50_ms,omitempty"`
	MultiStickyMaxMs   float64 `json:"multi_instance_sticky_timeout_max_ms,omitempty"`
	MultiStickyBoundMs float64 `json:"multi_instance_sticky_timeout_bound_ms,omitempty"`
	// MultiDeadPoll* are the turns whose workflow task Temporal handed to a poll of
	// the killed worker: they waited out the workflow task timeout (bound
	// MultiDeadPollBoundMs, worker.Recovery.InWorkflowTask).
	MultiDeadPollTurns   int     `json:"multi_instance_dead_poll_turns"`
	MultiDeadPollP50Ms   float64 `json:"multi_instance_dead_poll_p50_ms,omitempty"`
	MultiDeadPollMaxMs   float64 `json:"multi_instance_dead_poll_max_ms,omitempty"`
	MultiDeadPollBoundMs float64 `json:"multi_instance_dead_poll_bound_ms,omitempty"`
	// MultiInTask* are the turns whose workflow task the killed worker had started
	// before it died: they waited out the workflow task timeout from that start (bound
	// MultiInTaskBoundMs, worker.Recovery.InWorkflowTask).
	MultiInTaskTurns   int     `json:"multi_instance_in_task_turns"`
	MultiInTaskP50Ms   float64 `json:"multi_instance_in_task_p50_ms,omitempty"`
	MultiInTaskMaxMs   float64 `json:"multi_instance_in_task_max_ms,omitempty"`
	MultiInTaskBoundMs float64 `json:"multi_instance_in_task_bound_ms,omitempty"`
	// MultiInTaskResumed* are those turns' times from the kill to their resumption
	// (another worker starts the run's workflow task), which the bound holds; the
	// reply (MultiInTaskP50Ms) follows by the turn's own work run again.
	MultiInTaskResumedP50Ms float64 `json:"multi_instance_in_task_resumed_p50_ms,omitempty"`
	MultiInTaskResumedMaxMs float64 `json:"multi_instance_in_task_resumed_max_ms,omitempty"`
	// MultiInRound* are the turns whose model round ran as an activity on the killed
	// worker: the attempt was lost at its heartbeat timeout and another worker started
	// the next one (MultiInRoundResumed*, bound MultiInRoundBoundMs,
	// worker.Recovery.InModelRound); the reply (MultiInRoundP50Ms) follows by the
	// round run again and the workflow task that records it.
	MultiInRoundTurns        int     `json:"multi_instance_in_round_turns"`
	MultiInRoundP50Ms        float64 `json:"multi_instance_in_round_p50_ms,omitempty"`
	MultiInRoundMaxMs        float64 `json:"multi_instance_in_round_max_ms,omitempty"`
	MultiInRoundBoundMs      float64 `json:"multi_instance_in_round_bound_ms,omitempty"`
	MultiInRoundResumedP50Ms float64 `json:"multi_instance_in_round_resumed_p50_ms,omitempty"`
	MultiInRoundResumedMaxMs float64 `json:"multi_instance_in_round_resumed_max_ms,omitempty"`
	// MultiInRoundLaterAttempts counts those rounds whose next attempt was lost too
	// (Temporal handed it to the killed worker's dead poll): a third or later attempt
	// resumed them.
	MultiInRoundLaterAttempts int `json:"multi_instance_in_round_later_attempts"`
	// MultiDirect* are the turns no workflow task timeout delayed (their run was not on
	// the killed worker's sticky queue).
	MultiDirectTurns int     `json:"multi_instance_direct_turns"`
	MultiDirectP50Ms float64 `json:"multi_instance_direct_p50_ms,omitempty"`
	MultiDirectMaxMs float64 `json:"multi_instance_direct_max_ms,omitempty"`
}

// bench is one run's state.
type bench struct {
	opts  Options
	out   io.Writer
	st    *stack.Stack
	tc    client.Client
	api   *apiClient
	runID string // prefix of the floor workflow ids
	// openRuns are the host runs and floor workflows to end when the server is external.
	mu       sync.Mutex
	openRuns []string
	stopFns  []func()
	rpcs     *rpcCounter
	// watch reads the CPU time of the processes named by Options.CPUProcesses.
	watch        *procWatch
	idleNote     string
	recoveryNote string
	multiNote    string
	// tmp is the bench's temporary folder; wcfg the configuration of its worker.
	tmp  string
	wcfg worker.Config
	// metrics records the embedded server's metrics (nil with an external server);
	// breakdowns are what the breakdown workload found.
	metrics    *serverMetrics
	breakdowns []*kindBreakdown
	// streamModel is the fake provider of the stream workload.
	streamModel *streamModel
	// longReadNote says what the longread workload read.
	longReadNote string
}

// Run starts the stack, runs every workload, prints the table and the JSON line to
// stdout, and stops the stack.
func Run(ctx context.Context, opts Options, stdout io.Writer) (err error) {
	opts = opts.withDefaults()
	if opts.CPUProfile != "" {
		f, err := os.Create(opts.CPUProfile)
		if err != nil {
			return fmt.Errorf("create CPU profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("start CPU profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	if opts.MemProfile != "" {
		// A finer sampling than the default 512 KB, so small per-run allocations show.
		runtime.MemProfileRate = 4096
	}
	b := &bench{opts: opts, out: stdout, runID: randomHex(4), rpcs: newRPCCounter(), watch: &procWatch{pids: opts.CPUProcesses}}
	if err := b.start(ctx); err != nil {
		return err
	}
	defer b.stop()

	mode := "full"
	if opts.Quick {
		mode = "quick"
	}
	fmt.Fprintf(stdout, "wop bench (%s): Temporal %s, %d CPUs, GOMAXPROCS %d, load average %s\n",
		mode, b.where(), runtime.NumCPU(), runtime.GOMAXPROCS(0), loadAverage())
	if opts.TemporalAddress == "" {
		fmt.Fprintf(stdout, "worker cache: %d workflows; embedded server cache: %d workflows\n", b.cacheSize(), devserver.HistoryCacheSize)
		for _, k := range slices.Sorted(maps.Keys(opts.DynamicConfig)) {
			fmt.Fprintf(stdout, "dynamic config: %s = %v\n", k, opts.DynamicConfig[k])
		}
	} else {
		fmt.Fprintf(stdout, "worker cache: %d workflows\n", b.cacheSize())
	}
	fmt.Fprintf(stdout, "counts: %d latency samples (+%d warm-up, %d turns per conversation), %v concurrent conversations for %s, history at turns %d and %d, %d idle runs, %d streamed turns (%s per piece), %d reads at turns %d and %d\n\n",
		opts.Samples, opts.Warmup, opts.TurnsPerConversation, opts.Concurrencies, opts.Duration, opts.HistoryEarlyTurn, opts.HistoryTurns, opts.IdleRuns,
		opts.StreamSamples, opts.StreamChunkDelay, opts.LongReadSamples, opts.LongReadEarlyTurn, opts.LongReadTurns)

	var res Result
	steps := []struct {
		name string
		run  func(context.Context, *Result) error
	}{
		{"idle", b.idle},
		{"latency", b.latency},
		{"breakdown", b.breakdown},
		{"throughput", b.throughput},
		{"history", b.history},
		{"carried", b.carried},
		{"stream", b.stream},
		{"longread", b.longRead},
		{"recovery", b.recovery},
		{"multi-instance", b.multiInstance},
	}
	for _, s := range steps {
		if len(opts.Only) > 0 && !slices.Contains(opts.Only, s.name) {
			continue
		}
		t0 := time.Now()
		if err := s.run(ctx, &res); err != nil {
			return fmt.Errorf("bench %s: %w", s.name, err)
		}
		fmt.Fprintf(stdout, "%-10s done in %5.1fs: %s\n", s.name, time.Since(t0).Seconds(), progress(s.name, &res))
	}
	fmt.Fprintln(stdout)
	if res.FloorP50Ms > 0 {
		res.RatioP50 = round(res.ExchangeP50Ms/res.FloorP50Ms, 3)
	}
	if res.UpdateFloorP50Ms > 0 {
		res.RatioUpdateFloorP50 = round(res.ExchangeP50Ms/res.UpdateFloorP50Ms, 3)
	}
	if opts.MemProfile != "" {
		if err := writeHeapProfile(opts.MemProfile); err != nil {
			return err
		}
	}
	b.table(&res)
	printBreakdown(stdout, b.breakdowns)
	printThroughput(stdout, res.Throughput)
	line, err := json.Marshal(res)
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	fmt.Fprintf(stdout, "%s\n", line)
	return nil
}

// loadAverage is the 1-minute load average of the machine ("?" where unknown): figures
// taken on a machine busy with other work are not comparable.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	if f := strings.Fields(string(data)); len(f) > 0 {
		return f[0]
	}
	return "?"
}

// progress is the one-line summary of a finished step.
func progress(step string, r *Result) string {
	switch step {
	case "latency":
		return fmt.Sprintf("floor p50 %.1f ms, update floor p50 %.1f ms, host p50 %.1f ms, activity floor p50 %.1f ms", r.FloorP50Ms, r.UpdateFloorP50Ms, r.ExchangeP50Ms, r.FloorActivityP50Ms)
	case "breakdown":
		return "printed below the table"
	case "throughput":
		return fmt.Sprintf("%d levels", len(r.Throughput))
	case "history":
		return fmt.Sprintf("%d and %d bytes", r.HistoryBytesTurn5, r.HistoryBytesTurn200)
	case "idle":
		return fmt.Sprintf("%.1f MB for %d runs", r.IdleRSSMB, r.IdleRuns)
	case "carried":
		return fmt.Sprintf("%d and %d bytes", r.CarriedBytesTurn10, r.CarriedBytesTurn2000)
	case "stream":
		return fmt.Sprintf("first chunk p50 %.1f ms (provider %.1f ms)", r.FirstChunkP50Ms, r.ProviderFirstChunkP50Ms)
	case "recovery":
		return fmt.Sprintf("%d turns after %d kills: p50 %.0f ms, max %.0f ms", r.RecoveryTurns, r.RecoveryKills, r.RecoveryP50Ms, r.RecoveryMaxMs)
	case "multi-instance":
		if r.MultiInstance == nil {
			return "did not run"
		}
		return fmt.Sprintf("%d turns after %d kills: p50 %.0f ms, max %.0f ms; %d lost, %d duplicated of %d", r.MultiTurns, r.MultiKills, r.MultiP50Ms, r.MultiMaxMs, r.MultiLost, r.MultiDuplicated, r.MultiAccepted)
	case "longread":
		return fmt.Sprintf("32 KiB pages: first p50 %.1f and %.1f ms, poll p50 %.1f and %.1f ms", r.LongReadPagedFirstP50MsShort, r.LongReadPagedFirstP50MsLong,
			r.LongReadPagedPollP50MsShort, r.LongReadPagedPollP50MsLong)
	}
	return ""
}

// writeHeapProfile writes the heap profile to path and the goroutine profile beside
// it (path + ".goroutine"), which shows what every waiting run keeps running.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create heap profile: %w", err)
	}
	defer f.Close()
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		return fmt.Errorf("write heap profile: %w", err)
	}
	g, err := os.Create(path + ".goroutine")
	if err != nil {
		return fmt.Errorf("create goroutine profile: %w", err)
	}
	defer g.Close()
	if err := pprof.Lookup("goroutine").WriteTo(g, 1); err != nil {
		return fmt.Errorf("write goroutine profile: %w", err)
	}
	return nil
}

// cacheSize is the sticky workflow cache the bench's workers run with: wop worker's
// default, or more when the throughput workload keeps more conversations busy at once
// than it holds (the README's advice to a host serving that many: every turn of a
// conversation the cache has dropped replays the run's history first, the floors' as
// the host's, since the cache is the process's).
func (b *bench) cacheSize() int {
	if b.opts.WorkerCacheSize > 0 {
		return b.opts.WorkerCacheSize
	}
	return max(worker.DefaultWorkflowCacheSize, slices.Max(b.opts.Concurrencies)+cacheHeadroom)
}

// cacheHeadroom is the sticky cache kept beyond the throughput workload's conversations:
// the latency and breakdown workloads' conversations and floors.
const cacheHeadroom = 64

func (b *bench) where() string {
	if b.opts.TemporalAddress != "" {
		return "at " + b.opts.TemporalAddress
	}
	if b.opts.Memory {
		return "embedded (SQLite in memory)"
	}
	return "embedded (SQLite file)"
}

// start writes the bench pack to a folder of its own and starts the stack and the
// floor worker.
func (b *bench) start(ctx context.Context) error {
	tmp, err := os.MkdirTemp("", "wop-bench-")
	if err != nil {
		return fmt.Errorf("create a temporary folder: %w", err)
	}
	cleanupTmp := func() { _ = os.RemoveAll(tmp) }
	packsDir := filepath.Join(tmp, "packs")
	if err := writePacks(packsDir, ""); err != nil {
		cleanupTmp()
		return err
	}
	dataDir := b.opts.DataDir
	if dataDir == "" && !b.opts.Memory && b.opts.TemporalAddress == "" {
		dataDir = filepath.Join(tmp, "data")
	}
	if b.opts.Memory {
		dataDir = ""
	}
	key := randomHex(16)
	wcfg := worker.DefaultConfig()
	wcfg.WorkflowCacheSize = b.cacheSize()
	wcfg.PacksDir = packsDir
	wcfg.ShutdownTimeout = time.Second
	wcfg.MockRoundDelay = b.opts.MockRoundDelay
	b.tmp, b.wcfg = tmp, wcfg
	model := startStreamModel(b.opts.StreamChunkDelay)
	wcfg.Providers = map[string]activities.Provider{
		activities.DefaultProviderKey: &activities.MockProvider{},
		StreamProvider:                model.provider(),
	}
	logger := b.opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	copts := b.opts.TemporalClient
	copts.ConnectionOptions.DialOptions = append(slices.Clip(copts.ConnectionOptions.DialOptions), b.rpcs.dialOption())
	var serverMetrics metrics.Handler
	if b.opts.TemporalAddress == "" {
		b.metrics = newServerMetrics()
		serverMetrics = b.metrics.handler()
	}
	st, err := stack.Start(sctx, stack.Options{
		ServerMetrics:       serverMetrics,
		ServerDynamicConfig: b.opts.DynamicConfig,
		TemporalClient:      copts,
		DataDir:             dataDir,
		TemporalAddress:     b.opts.TemporalAddress,
		Namespace:           b.opts.Namespace,
		API: api.Config{
			Keys:        []api.Key{{ID: "bench", Secret: key, Tenant: "bench", Scopes: api.AllScopes}},
			TokenSecret: []byte(randomHex(32)),
			// The per-key rate limit protects a shared API; here it would cap the
			// throughput measured, so the bench's own key is not limited in practice.
			RateLimitPerSecond: 1e6,
			RateLimitBurst:     1e6,
			Guards:             api.GuardConfig{ResolveWait: b.opts.ResolveWait},
		},
		Worker:         wcfg,
		Logger:         logger,
		ServerLogLevel: slog.LevelError,
	})
	if err != nil {
		model.close()
		cleanupTmp()
		return fmt.Errorf("start the host: %w", err)
	}
	fw, err := startFloorWorker(st.Client())
	if err != nil {
		st.Stop()
		model.close()
		cleanupTmp()
		return err
	}
	b.st, b.tc, b.streamModel = st, st.Client(), model
	b.api = newAPIClient(st.APIURL(), key, slices.Max(b.opts.Concurrencies)+8)
	b.stopFns = append(b.stopFns, fw.Stop, b.api.close, st.Stop, model.close, cleanupTmp)
	return nil
}

// workerConfig is the configuration of the bench's worker.
func (b *bench) workerConfig() worker.Config { return b.wcfg }

// writePacks copies the embedded bench packs into dir: every one, or only the files of
// pack only.
func writePacks(dir, only string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create packs folder: %w", err)
	}
	return fs.WalkDir(packFiles, "testdata/packs", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if only != "" && !strings.HasPrefix(d.Name(), only+".") {
			return nil
		}
		data, err := packFiles.ReadFile(p)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, d.Name()), data, 0o644); err != nil {
			return fmt.Errorf("write bench pack %s: %w", d.Name(), err)
		}
		return nil
	})
}
