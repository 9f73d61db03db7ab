package workflows

import (
	"cmp"
	"encoding/json"
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/convo"
	"github.com/wop-dev/wop/protocol"
)

// gateConfig is core.conversationGate's config.
type gateConfig struct {
	// Lifecycle "open-exchange-close" with MockAutoResume runs the whole conversation
	// host-side (the conformance mock).
	Lifecycle      string                 `json:"lifecycle,omitempty"`
	MockAutoResume bool                   `json:"mockAutoResume,omitempty"`
	Title          string                 `json:"title,omitempty"`
	InitialPrompt  string                 `json:"initialPrompt,omitempty"`
	AgentID        string                 `json:"agentId,omitempty"`
	Participants   []protocol.Participant `json:"participants,omitempty"`
	Schema         json.RawMessage        `json:"schema,omitempty"`
	TimeoutMs      int64                  `json:"timeoutMs,omitempty"`
	// Reply "echo" answers every user turn with {"text": "echo: <text>"}; the default
	// records client turns only.
	Reply   string `json:"reply,omitempty"`
	Channel string `json:"channel,omitempty"`
}

// gateAgent is core.conversationGate's simple agent.
type gateAgent struct {
	cfg gateConfig
}

func init() {
	RegisterAgent("core.conversationGate", func(_ workflow.Context, c *Conversation, n *Node, _ json.RawMessage) (ConversationAgent, error) {
		var cfg gateConfig
		if len(n.Config) > 0 {
			if err := json.Unmarshal(n.Config, &cfg); err != nil {
				return nil, fmt.Errorf("core.conversationGate config: %w", err)
			}
		}
		if cfg.Channel != "" {
			c.Channel = cfg.Channel
		}
		return &gateAgent{cfg: cfg}, nil
	})
}

// Open implements ConversationAgent.
func (g *gateAgent) Open(_ workflow.Context, c *Conversation) (Opening, error) {
	op := Opening{
		AgentID:      cmp.Or(g.cfg.AgentID, "host:"+c.NodeID),
		Title:        g.cfg.Title,
		InitialText:  cmp.Or(g.cfg.InitialPrompt, "Conversation opened."),
		Participants: g.cfg.Participants,
		Schema:       g.cfg.Schema,
		TimeoutMs:    g.cfg.TimeoutMs,
	}
	if g.cfg.MockAutoResume {
		op.AutoResume = true
		op.AutoReply = AgentReply{Text: "Mock reply from the host.", Close: &CloseRequest{
			Outcome:   mustJSON(map[string]string{"summary": "mock conversation completed"}),
			FinalText: "Conversation closed by the host mock.",
		}}
	}
	return op, nil
}

// Reply implements ConversationAgent.
func (g *gateAgent) Reply(_ workflow.Context, _ *Conversation, user protocol.Turn) (AgentReply, error) {
	if g.cfg.Reply != "echo" {
		return AgentReply{Silent: true}, nil
	}
	var body struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(user.Content, &body) != nil || body.Text == "" {
		var s string
		if json.Unmarshal(user.Content, &s) == nil {
			body.Text = s
		} else {
			body.Text = string(user.Content)
		}
	}
	return AgentReply{Text: "echo: " + body.Text}, nil
}

// CheckInject implements ConversationAgent: the gate raises no interrupt of its own.
func (g *gateAgent) CheckInject(*Conversation, InjectedEvent) error {
	return fmt.Errorf("core.conversationGate accepts no injected events")
}

// MisroutedEvent implements ConversationAgent: the gate takes every value as a
// message.
func (g *gateAgent) MisroutedEvent(*Conversation, json.RawMessage) *ResolveCheck { return nil }

// ApprovesToolCalls implements ConversationAgent: the gate calls no tools.
func (g *gateAgent) ApprovesToolCalls() bool { return false }

// Inject implements ConversationAgent.
func (g *gateAgent) Inject(workflow.Context, *Conversation, InjectedEvent) (AgentReply, error) {
	return AgentReply{Silent: true}, nil
}

// TranscriptPage implements ConversationAgent: the gate keeps no model transcript.
func (g *gateAgent) TranscriptPage(activities.TranscriptPageRequest) (activities.TranscriptPage, error) {
	return activities.TranscriptPage{Messages: []convo.Message{}}, nil
}

// Status implements ConversationAgent.
func (g *gateAgent) Status() *PackStatus { return nil }

// Save implements ConversationAgent: the gate is stateless beyond its config.
func (g *gateAgent) Save() (json.RawMessage, error) { return nil, nil }
