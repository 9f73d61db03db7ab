package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/wop-dev/wop/worker"
)

// The recovery workload: how long a conversation waits for its next turn when the
// worker process that holds its run is killed (SIGKILL: no word to Temporal). Two
// `wop worker` processes serve the bench pack on the bench's Temporal, the bench's own
// worker stopped meanwhile. Each round opens RecoveryConversations conversations, gives
// each a turn (so each is cached on one of the two workers), kills the worker holding
// more of them and at once sends the next turn of each of its conversations; the time
// from the kill to each reply is a sample. Then it starts a fresh process in place of
// the killed one. The figure to compare is worker.RecoveryOf's BetweenTurns.

// recoveryWorker is one `wop worker` child process.
type recoveryWorker struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// startRecoveryWorker starts `wop worker` against the bench's Temporal, serving the
// packs of dir with the scripted mock.
func (b *bench) startRecoveryWorker(dir string) (*recoveryWorker, error) {
	cmd := exec.Command(b.opts.WorkerCommand[0], append(b.opts.WorkerCommand[1:], "worker")...)
	cmd.Env = append(os.Environ(),
		"TEMPORAL_ADDRESS="+b.st.TemporalAddress(),
		"TEMPORAL_NAMESPACE="+b.st.Namespace(),
		"WOP_PACKS="+dir,
		"WOP_MODEL_PROVIDER=mock",
		"WOP_LOG_LEVEL=error",
		"WOP_WORKER_CACHE_SIZE="+strconv.Itoa(b.cacheSize()),
	)
	cmd.Stdout, cmd.Stderr = nil, os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start a worker process: %w", err)
	}
	w := &recoveryWorker{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(w.done) }()
	return w, nil
}

// identity is the Temporal identity the SDK gives the process by default ("pid@host@").
func (w *recoveryWorker) identity() string { return strconv.Itoa(w.cmd.Process.Pid) + "@" }

// kill ends the process with SIGKILL and waits for it to be gone.
func (w *recoveryWorker) kill() {
	_ = w.cmd.Process.Kill()
	<-w.done
}

// holder is the identity of the worker that completed the run's newest workflow task.
func (b *bench) holder(ctx context.Context, runID string) (string, error) {
	it := b.tc.GetWorkflowHistory(ctx, runID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var id string
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return "", fmt.Errorf("read the history of run %s: %w", runID, err)
		}
		if a := ev.GetWorkflowTaskCompletedEventAttributes(); a != nil {
			id = a.GetIdentity()
		}
	}
	return id, nil
}

func (b *bench) recovery(ctx context.Context, res *Result) error {
	if len(b.opts.WorkerCommand) == 0 {
		b.recoveryNote = "recovery: not run (it starts `wop worker` processes: run it with the wop binary)"
		return nil
	}
	dir := filepath.Join(b.tmp, "recovery-packs")
	if err := writePacks(dir, "bench-echo"); err != nil {
		return err
	}
	workers := make([]*recoveryWorker, 2)
	defer func() {
		for _, w := range workers {
			if w != nil {
				w.kill()
			}
		}
	}()
	for i := range workers {
		w, err := b.startRecoveryWorker(dir)
		if err != nil {
			return err
		}
		workers[i] = w
	}
	b.st.StopWorker()
	defer func() {
		if err := b.st.StartWorker(); err != nil {
			fmt.Fprintf(b.out, "restart the bench's worker: %v\n", err)
		}
	}()

	var samples []time.Duration
	for round := 0; round < b.opts.RecoveryKills; round++ {
		convs := make([]*conv, b.opts.RecoveryConversations)
		err := parallel(ctx, len(convs), 8, func(ctx context.Context, i int) error {
			c, err := b.openConv(ctx)
			if err != nil {
				return err
			}
			convs[i] = c
			// Two turns: the first one's model round is an activity any worker may
			// take; the second is the conversation's steady state.
			if err := warmTurn(ctx, c.exchange); err != nil {
				return err
			}
			return warmTurn(ctx, c.exchange)
		})
		if err != nil {
			return fmt.Errorf("recovery round %d: %w", round, err)
		}
		held := make([][]*conv, len(workers))
		for _, c := range convs {
			id, err := b.holder(ctx, c.runID)
			if err != nil {
				return err
			}
			for i, w := range workers {
				if strings.HasPrefix(id, w.identity()) {
					held[i] = append(held[i], c)
				}
			}
		}
		victim := 0
		if len(held[1]) > len(held[0]) {
			victim = 1
		}
		if len(held[victim]) == 0 {
			return fmt.Errorf("recovery round %d: no conversation is held by a worker process", round)
		}
		workers[victim].kill()
		killed := time.Now()
		var mu sync.Mutex
		err = parallel(ctx, len(held[victim]), len(held[victim]), func(ctx context.Context, i int) error {
			tctx, cancel := context.WithTimeout(ctx, turnTimeout)
			defer cancel()
			if _, err := held[victim][i].exchange(tctx); err != nil {
				return err
			}
			d := time.Since(killed)
			mu.Lock()
			samples = append(samples, d)
			mu.Unlock()
			return nil
		})
		if err != nil {
			return fmt.Errorf("recovery round %d, after the kill: %w", round, err)
		}
		w, err := b.startRecoveryWorker(dir)
		if err != nil {
			return err
		}
		workers[victim] = w
		for _, c := range convs {
			_ = c.closeConv(ctx)
		}
	}
	bound := worker.RecoveryOf(b.workerConfig())
	res.RecoveryKills, res.RecoveryTurns = b.opts.RecoveryKills, len(samples)
	res.RecoveryP50Ms, res.RecoveryMaxMs = percentile(samples, 50), percentile(samples, 100)
	res.RecoveryBoundMs = ms(bound.BetweenTurns())
	b.recoveryNote = fmt.Sprintf("recovery: %d kills of a worker process, %d turns of its conversations sent at the kill: answered p50 %.0f ms, max %.0f ms after it (bound %s: %s)",
		res.RecoveryKills, res.RecoveryTurns, res.RecoveryP50Ms, res.RecoveryMaxMs, bound.BetweenTurns(), bound)
	return nil
}
