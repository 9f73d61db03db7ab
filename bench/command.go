package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/wop-dev/wop/worker"
)

// Command is `wop bench`: it parses args, runs the bench and returns the exit code
// (0 on success, 1 when a workload fails, 2 on bad flags). --address (TEMPORAL_ADDRESS)
// and --namespace (TEMPORAL_NAMESPACE) select an external Temporal server, with TLS and
// an API key from the variables `wop worker` reads.
func Command(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("wop bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: wop bench [--quick] [flags]")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "Measures a conversation turn through this host against Temporal's own floor on the")
		fmt.Fprintln(stderr, "same server, with the scripted mock model, and prints a table and one JSON line.")
		fmt.Fprintln(stderr)
		fs.PrintDefaults()
	}
	var o Options
	fs.BoolVar(&o.Quick, "quick", false, "small counts: finishes in about two minutes on 2 cores")
	fs.IntVar(&o.Samples, "samples", 0, "timed turns per latency workload (default 200, quick 40)")
	fs.Func("concurrency", "concurrent conversations of the throughput workload, or several `counts` run one after the other (50,200,500; default 50)", func(v string) error {
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n <= 0 {
				return fmt.Errorf("want positive counts separated by commas, got %q", v)
			}
			o.Concurrencies = append(o.Concurrencies, n)
		}
		return nil
	})
	address := os.Getenv("TEMPORAL_ADDRESS")
	namespace := os.Getenv("TEMPORAL_NAMESPACE")
	fs.StringVar(&address, "address", address, "use the Temporal frontend at `host:port` instead of an embedded server (env TEMPORAL_ADDRESS; TLS and API key from the --tls* flags or the environment, as wop worker reads them; the namespace is created if missing)")
	fs.StringVar(&namespace, "namespace", namespace, "Temporal `namespace` of --address (env TEMPORAL_NAMESPACE; default default)")
	fs.Func("cpu-process", "report the CPU time per turn of another process of this machine and its children, as `NAME=PID` (a Temporal server, its database; repeatable)", func(v string) error {
		name, pid, err := parseCPUProcess(v)
		if err != nil {
			return err
		}
		if o.CPUProcesses == nil {
			o.CPUProcesses = map[string]int{}
		}
		o.CPUProcesses[name] = pid
		return nil
	})
	fs.DurationVar(&o.ResolveWait, "resolve-wait", 0, "how long the API waits for a turn's outcome before it answers 202 (default the API's, 10s)")
	clientFlags := worker.RegisterClientFlags(fs)
	fs.DurationVar(&o.Duration, "duration", 0, "length of each throughput workload (default 30s, quick 5s)")
	fs.IntVar(&o.HistoryTurns, "turns", 0, "turns of the long conversation whose history is measured (default 200, quick 40)")
	fs.IntVar(&o.IdleRuns, "idle", 0, "waiting conversations of the memory workload (default 1000, quick 200)")
	fs.StringVar(&o.DataDir, "data", "", "keep the embedded server's SQLite file in this `folder` (default: a temporary one)")
	fs.BoolVar(&o.Memory, "memory", false, "keep the embedded server's database in memory instead of a file")
	fs.IntVar(&o.StreamSamples, "stream-samples", 0, "timed turns of the stream workload (default 50, quick 10)")
	fs.DurationVar(&o.StreamChunkDelay, "stream-delay", 0, "the stream workload's fake provider waits this long before each piece of its reply (default 50ms)")
	fs.IntVar(&o.WorkerCacheSize, "worker-cache", 0, "sticky workflow cache size of the workers (default 256, as wop worker)")
	fs.StringVar(&o.CPUProfile, "cpuprofile", "", "write a pprof CPU profile of the run to `file`")
	fs.StringVar(&o.MemProfile, "memprofile", "", "write a pprof heap profile at the end of the run to `file`")
	fs.IntVar(&o.LongReadTurns, "longread-turns", 0, "turns of the long conversation the longread workload reads (default 1000)")
	fs.IntVar(&o.LongReadSamples, "longread-samples", 0, "timed reads of each kind per conversation of the longread workload (default 30, quick 10)")
	only := fs.String("only", "", "run only these `workloads` (comma-separated: latency, breakdown, throughput, history, idle, carried, stream, longread, recovery, multi-instance)")
	fs.Func("dynamic-config", "override the embedded server's dynamic config: `key=value` (a number, true/false, a duration such as 10ms, or text; repeatable)", func(kv string) error {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("want key=value, got %q", kv)
		}
		if o.DynamicConfig == nil {
			o.DynamicConfig = map[string]any{}
		}
		o.DynamicConfig[k] = dynamicValue(v)
		return nil
	})
	apis := os.Getenv("WOP_CLUSTER_APIS")
	fs.StringVar(&apis, "apis", apis, "the multi-instance workload's `wop api` base `URLs`, comma-separated, of a cluster on --address whose key is WOP_API_KEY (env WOP_CLUSTER_APIS; deploy/cluster/up.sh sets both)")
	fs.IntVar(&o.MultiKills, "kills", 0, "worker processes the multi-instance workload kills, one per round (default 20)")
	fs.DurationVar(&o.MultiKillDelay, "kill-delay", 0, "the multi-instance workload sends the killed worker's conversations their turns this long after each kill (default 0: at once), to measure the race between a turn and Temporal noticing the dead worker's connection")
	fs.DurationVar(&o.MultiKillInTurn, "kill-in-turn", 0, "the multi-instance workload sends the conversations of the worker holding the most their turns first and kills that worker this long after, while the turns run on it (the workers' scripted mock needs a longer WOP_MOCK_ROUND_DELAY); not with --kill-delay")
	fs.DurationVar(&o.MockRoundDelay, "round-delay", 0, "hold each round of the bench's scripted mock this long: a held round runs as the ModelRound activity and heartbeats, as a real provider's does (the throughput workload's turns then cost its heartbeats)")
	verbose := fs.Bool("v", false, "log the host's warnings and errors to stderr")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if o.MockRoundDelay < 0 {
		fmt.Fprintln(stderr, "wop bench: --round-delay must not be negative")
		return 2
	}
	if o.MultiKillInTurn < 0 || o.MultiKillDelay < 0 || o.MultiKillInTurn > 0 && o.MultiKillDelay > 0 {
		fmt.Fprintln(stderr, "wop bench: --kill-in-turn and --kill-delay are durations of which at most one is set: the turns are sent before the kill or after it")
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "wop bench: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *only != "" {
		for _, w := range strings.Split(*only, ",") {
			w = strings.TrimSpace(w)
			if !slices.Contains([]string{"latency", "breakdown", "throughput", "history", "idle", "carried", "stream", "longread", "recovery", "multi-instance"}, w) {
				fmt.Fprintf(stderr, "wop bench: unknown workload %q in --only (latency, breakdown, throughput, history, idle, carried, stream, longread, recovery, multi-instance)\n", w)
				return 2
			}
			o.Only = append(o.Only, w)
		}
	}
	o.TemporalAddress, o.Namespace = address, namespace
	if apis != "" {
		for _, u := range strings.Split(apis, ",") {
			if u = strings.TrimSpace(u); u != "" {
				o.ClusterAPIs = append(o.ClusterAPIs, u)
			}
		}
		o.ClusterAPIKey = os.Getenv("WOP_API_KEY")
	}
	// The recovery workload starts `wop worker` processes of this very binary.
	if exe, err := os.Executable(); err == nil {
		o.WorkerCommand = []string{exe}
	}
	if *verbose {
		o.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	if o.TemporalAddress != "" {
		env, err := clientFlags.Env(os.Getenv)
		if err != nil {
			fmt.Fprintf(stderr, "wop bench: %v\n", err)
			return 2
		}
		copts, err := worker.ClientOptionsFromEnv(env, o.Logger)
		if err != nil {
			fmt.Fprintf(stderr, "wop bench: %v\n", err)
			return 2
		}
		o.TemporalClient = copts
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := Run(ctx, o, stdout); err != nil {
		fmt.Fprintf(stderr, "wop bench: %v\n", err)
		return 1
	}
	return 0
}

// dynamicValue reads a --dynamic-config value: an integer, a float, a bool, a
// duration, or else the text itself.
func dynamicValue(v string) any {
	if i, err := strconv.Atoi(v); err == nil {
		return i
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		return f
	}
	if b, err := strconv.ParseBool(v); err == nil {
		return b
	}
	if d, err := time.ParseDuration(v); err == nil {
		return d
	}
	return v
}
