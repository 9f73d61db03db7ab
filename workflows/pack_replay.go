package workflows

import (
	"encoding/json"
	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/activities"
)

// ---- fork replay ----

// packReplay holds what a source run recorded for a pack node: its model rounds
// (agent.decided) and tool results (agent.toolReturned), and the order of the user
// turns and injected events that drove it.
type packReplay struct {
	rounds map[int]*activities.ModelRoundResult
	tools  map[string]*activities.ToolCallResult
	src    []Event
	cursor int // next source event to fold into the engine
}

func newPackReplay(src []Event) *packReplay {
	pr := &packReplay{rounds: map[int]*activities.ModelRoundResult{}, tools: map[string]*activities.ToolCallResult{}, src: src}
	for _, e := range src {
		switch e.Type {
		case "agent.decided":
			var p struct {
				Decision packRoundRecord `json:"decision"`
			}
			if json.Unmarshal(e.Payload, &p) != nil || p.Decision.Kind != "model_round" {
				continue
			}
			d := p.Decision
			pr.rounds[d.Round] = &activities.ModelRoundResult{
				Text: d.Text, ToolCalls: d.ToolCalls, Provider: d.Provider, Model: d.Model, Usage: d.Usage, FinishReason: d.FinishReason,
			}
		case "agent.toolReturned":
			var p struct {
				CallID  string          `json:"callId"`
				Outcome json.RawMessage `json:"outcome"`
				Status  string          `json:"status"`
				System  bool            `json:"system"`
			}
			if json.Unmarshal(e.Payload, &p) != nil || p.CallID == "" {
				continue
			}
			pr.tools[p.CallID] = &activities.ToolCallResult{Content: p.Outcome, IsError: p.Status == "error"}
		}
	}
	return pr
}

func (pr *packReplay) model(round int) (*activities.ModelRoundResult, bool) {
	r, ok := pr.rounds[round]
	if !ok {
		return nil, false
	}
	cp := *r
	return &cp, true
}

func (pr *packReplay) tool(callID string) (*activities.ToolCallResult, bool) {
	r, ok := pr.tools[callID]
	return r, ok
}

// Observe implements turnObserver: on a fork replay the host re-folds the recorded
// turns without calling Reply; the pack folds the same user turns and injected events
// into its engine, answering every model round and tool call from the source run's
// records, so its state matches the source and no model is called again.
func (a *packAgent) Observe(ctx workflow.Context, c *conversation, t Turn) {
	pr := a.replay
	if pr == nil {
		return
	}
	for pr.cursor < len(pr.src) {
		e := pr.src[pr.cursor]
		pr.cursor++
		switch e.Type {
		case EvConversationExchanged:
			var p struct {
				Turn Turn `json:"turn"`
			}
			if json.Unmarshal(e.Payload, &p) != nil {
				continue
			}
			if p.Turn.Role == RoleUser && !a.m.Closed() {
				if _, err := a.m.Turn(a.runtime(ctx, c), turnText(p.Turn.Content)); err != nil {
					workflow.GetLogger(ctx).Warn("Fork replay: the pack could not fold a recorded user turn", "node", a.nodeID, "error", err)
				}
			}
			if p.Turn.MessageID == t.MessageID {
				a.publish(c)
				return
			}
		case EvInterruptResolved:
			var p struct {
				ResumeValue json.RawMessage `json:"resumeValue"`
			}
			if json.Unmarshal(e.Payload, &p) != nil {
				continue
			}
			var ev InjectedEvent
			if json.Unmarshal(p.ResumeValue, &ev) != nil || ev.Event == "" || a.m.CanInject(ev.Event) != nil {
				continue
			}
			if _, err := a.m.Inject(a.runtime(ctx, c), ev.Event, injectedContext(ev.Context)); err != nil {
				workflow.GetLogger(ctx).Warn("Fork replay: the pack could not fold a recorded event", "node", a.nodeID, "error", err)
			}
		case EvConversationClosed:
			a.publish(c)
			return
		}
	}
	a.publish(c)
}
