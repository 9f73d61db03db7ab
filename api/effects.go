package api

// The effect seams (OpenWOP replay.md, idempotency.md; RFC 0173 §C):
//
//   - GET /host/effect-seams is the manifest: one row per outbound effect path the
//     host's node runtime can reach (model providers, tool calls by binding kind,
//     webhook and callback deliveries), each with the mechanism that keeps a replay
//     fork from performing it again. A path this build cannot reach in a given
//     deployment is listed all the same: the manifest is of the build.
//   - GET /runs/{runId}/effects is the run's effect ledger, read from the records the
//     activities already keep: the run's Temporal history (every execution of it). Each
//     model round and tool call the run scheduled as an activity is one row, with its
//     idempotency identity (the activity recipe: the tool call's idempotency key, the
//     model round's logical invocation) and its outcome. A fork replay takes recorded
//     results without scheduling anything, so what a source performed appears once,
//     in the source's ledger, and never in its fork's. Local activities are no effect:
//     the host's routing, the scripted mock's rounds (ModelRoundLocal refuses a real
//     provider) and the notices to its own webhook dispatcher stay in the worker.

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/debug"
	"sync"

	"github.com/labstack/echo/v4"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/convo"
	"github.com/wop-dev/wop/protocol"
)

// EffectSeamsPath is the effect-seam manifest's path (replay.effectSeamsManifest).
const EffectSeamsPath = "/host/effect-seams"

// EffectSeam is one row of the manifest (sdks/effect-seam-manifest.schema.json).
type EffectSeam struct {
	Seam      string `json:"seam"`
	Kind      string `json:"kind"`
	Guarded   bool   `json:"guarded"`
	GuardedBy string `json:"guardedBy"`
	Note      string `json:"note,omitempty"`
}

// Mechanisms of the manifest's rows.
const (
	guardModel   = "a fork replay answers every recorded model round from the source's agent.decided, keyed by (sourceRunId, nodeId, round), and calls no provider for it (packagent/pack_replay.go, replayedModel)"
	guardTool    = "a fork replay answers every recorded tool call from the source's agent.toolReturned, keyed by (sourceRunId, nodeId, callId), before the call is routed; a call the source made without recording its outcome fails the turn closed with replay_source_missing, and one the recording does not lead to is a divergence (replay.diverged); neither runs (packagent/pack_replay.go, replayedTool)"
	guardWebhook = "a replay fork notifies no webhook dispatcher, so its re-emitted history is delivered to nobody (workflows/notify.go, RunInput.Notices)"
)

// effectSeams is the manifest's rows: every provider this build speaks, every tool
// binding kind, and the webhook deliveries.
func effectSeams() []EffectSeam {
	var out []EffectSeam
	for _, p := range []string{activities.ProviderOpenAI, activities.ProviderAnthropic, activities.ProviderOpenAICompatible,
		activities.ProviderGemini, activities.ProviderVertex, activities.ProviderBedrock, activities.ProviderAzureOpenAI} {
		out = append(out, EffectSeam{Seam: "provider." + p + ".model-round", Kind: "provider-sdk", Guarded: true, GuardedBy: guardModel,
			Note: "the ModelRound activity"})
	}
	out = append(out,
		EffectSeam{Seam: "tool.http.call", Kind: "http", Guarded: true, GuardedBy: guardTool,
			Note: "an http binding: the ToolCall activity POSTs the arguments, with the call's Idempotency-Key"},
		EffectSeam{Seam: "tool.mcp.call", Kind: "http", Guarded: true, GuardedBy: guardTool,
			Note: "an mcp binding: the ToolCall activity calls a tool of an MCP server (streamable HTTP, or a process the worker starts)"},
		EffectSeam{Seam: "tool.activity.call", Kind: "queue", Guarded: true, GuardedBy: guardTool,
			Note: "an activity binding: the run schedules the binding's Temporal activity on its task queue, ActivityID = the call's idempotency key"},
		EffectSeam{Seam: "tool.go.call", Kind: "queue", Guarded: true, GuardedBy: guardTool,
			Note: "a Go function registered on the worker, run by the ToolCall activity from the host's task queue"},
		EffectSeam{Seam: "conformance.side-effect", Kind: "queue", Guarded: true,
			GuardedBy: "a replay fork takes the source's n-th recorded outcome of the node, keyed (sourceRunId, nodeId, n), or fails it closed with replay_source_missing (workflows/effectnode.go)",
			Note:      "core.conformance.side-effect: the ConformanceEffect activity, on the host's task queue"},
		EffectSeam{Seam: "conformance.durability-effect", Kind: "http", Guarded: true,
			GuardedBy: "a replay fork carries no conformance seam, so it stages no effect; a second delivery of the work returns the outcome its first recorded in the activity's heartbeat (activities/durability_effect.go)",
			Note:      "the kill seam's duplicate-delivery work, served only with --conformance-seams: the DurabilityEffect activity POSTs once to the given effectUrl, with an Idempotency-Key"},
		EffectSeam{Seam: "webhook.delivery", Kind: "webhook-fanout", Guarded: true, GuardedBy: guardWebhook,
			Note: "signed POSTs to the tenant's subscriptions (the OpenWOPWebhookDelivery workflows)"},
		EffectSeam{Seam: "webhook.callback", Kind: "webhook-fanout", Guarded: true, GuardedBy: guardWebhook,
			Note: "signed POSTs to a run's callbackUrl; a fork inherits none"},
	)
	return out
}

// buildIdentity is the manifest's host.build: the VCS revision the binary was built
// from, else the SHA-256 of the executable.
var buildIdentity = sync.OnceValue(func() map[string]string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && s.Value != "" {
				return map[string]string{"kind": "commit", "id": s.Value}
			}
		}
	}
	id := "unknown"
	if exe, err := os.Executable(); err == nil {
		if f, err := os.Open(exe); err == nil {
			h := sha256.New()
			if _, err := io.Copy(h, f); err == nil {
				id = "sha256:" + hex.EncodeToString(h.Sum(nil))
			}
			f.Close()
		}
	}
	return map[string]string{"kind": "artifact-sha256", "id": id}
})

func (s *Server) handleEffectSeams(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]any{
		"manifestVersion": "1",
		"host":            map[string]any{"name": "wop", "build": buildIdentity()},
		"seams":           effectSeams(),
	})
}

// Effect is one row of a run's effect ledger (sdks/effect-ledger-projection.schema.json).
type Effect struct {
	EffectID     string `json:"effectId"`
	NodeID       string `json:"nodeId"`
	Attempt      int32  `json:"attempt"`
	InvocationID string `json:"invocationId,omitempty"`
	Keying       string `json:"keying"`
	ProviderKey  string `json:"providerKey,omitempty"`
	State        string `json:"state"`
	At           string `json:"at"`
}

// maxLedgerExecutions bounds the executions of a run the ledger reads.
const maxLedgerExecutions = 64

func (s *Server) handleRunEffects(c echo.Context) error {
	id, err := s.runParam(c)
	if err != nil {
		return err
	}
	p := principalOf(c)
	ctx := c.Request().Context()
	snap, err := s.snapshot(ctx, p, id)
	if err != nil {
		return err
	}
	effects, err := s.runEffects(ctx, id)
	if err != nil {
		return err
	}
	var nodes map[string]string
	for i := range effects {
		if effects[i].NodeID != "" {
			continue
		}
		if nodes == nil {
			if nodes, err = s.callNodes(ctx, snap.Owner.Tenant, id); err != nil {
				return err
			}
		}
		effects[i].NodeID = cmp.Or(nodes[effects[i].InvocationID], "unknown")
	}
	w := s.wireOf(c, snap.Owner.Tenant)
	for i := range effects {
		effects[i].EffectID = w.id(effects[i].EffectID)
	}
	return c.JSON(http.StatusOK, map[string]any{"runId": w.id(id), "effects": effects})
}

// runEffects reads the effects of run id from its Temporal history, oldest execution
// first.
func (s *Server) runEffects(ctx context.Context, id string) ([]Effect, error) {
	var chain [][]Effect
	execution := ""
	for range maxLedgerExecutions {
		effects, previous, err := s.executionEffects(ctx, id, execution)
		if err != nil {
			return nil, err
		}
		chain = append(chain, effects)
		if previous == "" {
			break
		}
		execution = previous
	}
	out := []Effect{}
	for i := len(chain) - 1; i >= 0; i-- {
		out = append(out, chain[i]...)
	}
	return out, nil
}

// hostActivities are the activities a run schedules that perform no outbound effect.
var hostActivities = map[string]bool{"Yield": true, "ModelOutagePolicy": true, "RouteTools": true, "NotifyDispatcher": true, "DurabilityHold": true}

// executionEffects reads one execution's effects, and the execution it continued.
func (s *Server) executionEffects(ctx context.Context, id, execution string) ([]Effect, string, error) {
	it := s.tc.GetWorkflowHistory(ctx, id, execution, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var order []int64
	byScheduled := map[int64]*Effect{}
	previous := ""
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return nil, "", s.temporalErr(err, id)
		}
		at := ev.GetEventTime().AsTime().UTC().Format("2006-01-02T15:04:05.000Z")
		if a := ev.GetWorkflowExecutionStartedEventAttributes(); a != nil {
			previous = a.GetContinuedExecutionRunId()
			if execution == "" {
				execution = ev.GetWorkflowExecutionStartedEventAttributes().GetOriginalExecutionRunId()
			}
		}
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			if e, ok := scheduledEffect(a, s.payloadData); ok {
				sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%d", id, execution, ev.GetEventId()))
				e.EffectID, e.Keying, e.State, e.At, e.Attempt = "eff_"+hex.EncodeToString(sum[:13]), "activity-recipe", "claimed", at, 1
				byScheduled[ev.GetEventId()] = &e
				order = append(order, ev.GetEventId())
			}
			continue
		}
		settle := func(scheduled int64, state string) {
			if e := byScheduled[scheduled]; e != nil {
				e.State, e.At = state, at
			}
		}
		switch {
		case ev.GetActivityTaskStartedEventAttributes() != nil:
			a := ev.GetActivityTaskStartedEventAttributes()
			if e := byScheduled[a.GetScheduledEventId()]; e != nil {
				e.Attempt = max(a.GetAttempt(), 1)
			}
		case ev.GetActivityTaskCompletedEventAttributes() != nil:
			settle(ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId(), "completed")
		case ev.GetActivityTaskFailedEventAttributes() != nil:
			settle(ev.GetActivityTaskFailedEventAttributes().GetScheduledEventId(), "released")
		case ev.GetActivityTaskTimedOutEventAttributes() != nil:
			settle(ev.GetActivityTaskTimedOutEventAttributes().GetScheduledEventId(), "released")
		case ev.GetActivityTaskCanceledEventAttributes() != nil:
			settle(ev.GetActivityTaskCanceledEventAttributes().GetScheduledEventId(), "released")
		}
	}
	out := make([]Effect, 0, len(order))
	for _, n := range order {
		out = append(out, *byScheduled[n])
	}
	return out, previous, nil
}

// scheduledEffect reads the effect an activity of a run performs from its scheduling:
// a model round (ModelRound), a tool call (ToolCall), the conformance node's effect
// (ConformanceEffect), the kill seam's duplicate-delivery effect (DurabilityEffect),
// or a tool's activity binding
// (any other type; its input is the call's arguments, its ActivityID the call's
// idempotency key, and its node the summary's). It reads identities only, never the
// arguments or the prompt.
func scheduledEffect(a *historypb.ActivityTaskScheduledEventAttributes, data func(*commonpb.Payload) []byte) (Effect, bool) {
	typ := a.GetActivityType().GetName()
	if hostActivities[typ] {
		return Effect{}, false
	}
	var raw []byte
	if ps := a.GetInput().GetPayloads(); len(ps) > 0 {
		raw = data(ps[0])
	}
	switch typ {
	case "ModelRound":
		var in struct {
			RunID    string `json:"runId"`
			NodeID   string `json:"nodeId"`
			Round    int    `json:"round"`
			Provider string `json:"provider"`
		}
		_ = json.Unmarshal(raw, &in) // an input the workflow encoded; without it the row names less
		return Effect{NodeID: in.NodeID, InvocationID: fmt.Sprintf("model:%s:%s:%d", in.RunID, in.NodeID, in.Round),
			ProviderKey: "provider:" + cmp.Or(in.Provider, activities.DefaultProviderKey)}, true
	case "ToolCall":
		var in convo.ToolCallInput
		_ = json.Unmarshal(raw, &in) // as above
		return Effect{NodeID: in.NodeID, InvocationID: in.IdempotencyKey, ProviderKey: "tool:" + in.Tool}, true
	case "ConformanceEffect":
		var in activities.ConformanceEffectInput
		_ = json.Unmarshal(raw, &in) // as above
		return Effect{NodeID: in.NodeID, InvocationID: fmt.Sprintf("conformance:%s:%s:%d", in.RunID, in.NodeID, in.Ordinal),
			ProviderKey: "conformance:side-effect"}, true
	case "DurabilityEffect":
		var in activities.DurabilityEffectInput
		_ = json.Unmarshal(raw, &in) // as above
		return Effect{NodeID: in.NodeID, InvocationID: in.Key, ProviderKey: "conformance:durability-effect"}, true
	}
	return Effect{InvocationID: a.GetActivityId(), ProviderKey: "activity:" + typ}, true // the node: callNodes
}

// payloadData is the data of a payload of a history, opened when the host seals its
// payloads (Config.PayloadCodec); nil when it cannot be.
func (s *Server) payloadData(p *commonpb.Payload) []byte {
	if s.cfg.PayloadCodec == nil {
		return p.GetData()
	}
	out, err := s.cfg.PayloadCodec.Decode([]*commonpb.Payload{p})
	if err != nil || len(out) != 1 {
		return nil
	}
	return out[0].GetData()
}

// callNodes maps the idempotency key of each tool call in run id's log
// (agent.toolCalled) to its node, for the rows of activity bindings, whose input
// names no node.
func (s *Server) callNodes(ctx context.Context, tenant, id string) (map[string]string, error) {
	events, _, err := s.forkSource(ctx, id)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, e := range events {
		if e.Type != protocol.EvAgentToolCalled {
			continue
		}
		var p struct {
			Tool   string `json:"toolName"`
			CallID string `json:"callId"`
			Round  int    `json:"round"`
		}
		if json.Unmarshal(e.Payload, &p) == nil {
			key := activities.ToolIdempotencyKey(tenant, convo.ToolCallInput{RunID: id, NodeID: e.NodeID, Round: p.Round, CallID: p.CallID, Tool: p.Tool})
			out[key] = e.NodeID
		}
	}
	return out, nil
}
