// Command temporal-caller is a team's own Temporal program that calls an agent of a
// running wop host: it runs a worker of its own with the workflows of package caller,
// holds one conversation as a child workflow (package agentclient) and one through the
// host's Nexus endpoint, prints each agent's reply on a line of its own and cancels the
// conversations (they would wait for the next message otherwise).
//
//	go run ./cmd/wop dev                      # in another terminal
//	go run ./examples/temporal-caller --address 127.0.0.1:7233 --namespace default \
//	    --pack support --message "Hi, where is my order ORD-1042?"
//
// prints
//
//	child: <the agent's reply>
//	nexus: <the agent's reply>
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/agentclient"
	"github.com/wop-dev/wop/examples/temporal-caller/caller"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "temporal-caller:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("temporal-caller", flag.ContinueOnError)
	address := fs.String("address", "127.0.0.1:7233", "the Temporal frontend `host:port` (wop dev's)")
	namespace := fs.String("namespace", "default", "the Temporal `namespace`")
	pack := fs.String("pack", "support", "the `pack` to talk to")
	message := fs.String("message", "Hi!", "the `message` to send")
	tenant := fs.String("tenant", "default", "the OpenWOP `tenant` the child conversation belongs to")
	hostQueue := fs.String("host-task-queue", agentclient.DefaultTaskQueue, "the host's `task queue` (WOP_TASK_QUEUE)")
	endpoint := fs.String("endpoint", agentclient.DefaultNexusEndpoint, "the host's Nexus `endpoint`")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up after this `duration`")
	keys := fs.String("payload-keys", os.Getenv("WOP_PAYLOAD_KEYS_FILE"), "the host's payload keys `file`, when it seals payloads")
	if err := fs.Parse(args); err != nil {
		return err
	}
	quiet := sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	dc, err := agentclient.DataConverter(*keys)
	if err != nil {
		return err
	}
	c, err := client.Dial(client.Options{HostPort: *address, Namespace: *namespace, Logger: quiet, DataConverter: dc})
	if err != nil {
		return fmt.Errorf("connect to Temporal at %s: %w", *address, err)
	}
	defer c.Close()
	// The caller's own worker, on a task queue of its own.
	var b [4]byte
	_, _ = rand.Read(b[:])
	queue := "temporal-caller-" + hex.EncodeToString(b[:])
	w := worker.New(c, queue, worker.Options{})
	w.RegisterWorkflowWithOptions(caller.Converse, workflow.RegisterOptions{Name: caller.WorkflowName})
	w.RegisterWorkflowWithOptions(caller.ConverseNexus, workflow.RegisterOptions{Name: caller.NexusWorkflowName})
	if err := w.Start(); err != nil {
		return err
	}
	defer w.Stop()

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	msgs := []string{*message}
	for _, call := range []struct {
		label, workflow string
		input           any
	}{
		{"child", caller.WorkflowName, caller.Input{Pack: *pack, Tenant: *tenant, HostTaskQueue: *hostQueue, Messages: msgs, Cancel: true}},
		{"nexus", caller.NexusWorkflowName, caller.NexusInput{Endpoint: *endpoint, Pack: *pack, Messages: msgs, Cancel: true}},
	} {
		r, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: queue + "-" + call.label, TaskQueue: queue}, call.workflow, call.input)
		if err != nil {
			return err
		}
		var res caller.Result
		if err := r.Get(ctx, &res); err != nil {
			return fmt.Errorf("%s: %w", call.label, err)
		}
		if len(res.Replies) == 0 {
			return fmt.Errorf("%s: no reply (run %s ended %s: %s %s)", call.label, res.RunID, res.Status, res.Code, res.Message)
		}
		if res.Code != "" && res.Code != agentclient.CodeCancelled {
			return errors.New(call.label + ": " + res.Code + ": " + res.Message)
		}
		fmt.Fprintf(stdout, "%s: %s\n", call.label, res.Replies[0].Text)
	}
	return nil
}
