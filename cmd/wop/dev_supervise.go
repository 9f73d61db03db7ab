//go:build !nodev

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// devSupervisedEnv marks the `wop dev` process a supervisor started.
const devSupervisedEnv = "WOP_DEV_SUPERVISED"

// superviseDev is `wop dev --conformance-seams`: it runs argv (the same `wop dev`) as a
// child process with env and starts it again, after supervisorRestartDelay, whenever a
// signal ended it (the kill seam's SIGKILL, or a kill from outside); a child that exits
// on its own ends the supervisor with its exit code. Cancelling ctx (Ctrl-C, SIGTERM)
// stops the child with SIGTERM and waits for it.
func superviseDev(ctx context.Context, argv, env []string, stdout, stderr io.Writer) int {
	for restarts := 0; ; restarts++ {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(env[:len(env):len(env)], devSupervisedEnv+"=1")
		cmd.Stdout, cmd.Stderr = stdout, stderr
		if err := cmd.Start(); err != nil {
			return fail(stderr, "dev", fmt.Errorf("start the supervised process: %w", err))
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		var err error
		select {
		case <-ctx.Done():
			_ = cmd.Process.Signal(syscall.SIGTERM)
			<-done
			return 0
		case err = <-done:
		}
		var exit *exec.ExitError
		switch {
		case err == nil:
			return 0
		case !errors.As(err, &exit):
			return fail(stderr, "dev", err)
		case exit.ExitCode() != -1: // exited on its own (-1: a signal ended it)
			return exit.ExitCode()
		}
		fmt.Fprintf(stderr, "wop dev: the supervised process (pid %d) was killed (%v); starting it again (restart %d)\n", cmd.Process.Pid, exit, restarts+1)
		select {
		case <-ctx.Done():
			return 0
		case <-time.After(supervisorRestartDelay):
		}
	}
}

// killSelf ends this process as a lost machine ends: SIGKILL, no deferred cleanup, no
// worker shutdown call to Temporal.
func killSelf() {
	p, err := os.FindProcess(os.Getpid())
	if err == nil {
		err = p.Kill()
	}
	if err != nil {
		os.Exit(137)
	}
}
