package packs

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// A pack without a workflow runs as a conversation with one of its prompts: a
// one-state workflow whose state is named after the prompt, runs it and holds the
// conversation (control: user). The state never ends the run by itself, unlike a
// workflow state without on_event (which is terminal, RFC 0005), and offers no
// transition. Tools, validators, variables and the mock script work as in any state.
//
// Which prompt: the run's inputs.prompt (PromptInput) when given; else the pack's
// DefaultPrompt.

// PromptInput is the run input that chooses the prompt of a pack without a workflow.
const PromptInput = "prompt"

// Conversational reports whether the pack runs as a conversation with one prompt: it
// declares no workflow.
func (p *Pack) Conversational() bool { return p.Workflow == nil }

// DefaultPrompt is the prompt a run of a pack without a workflow holds when its inputs
// choose none: the agents entry (RFC 0007) when the pack declares one, else the first
// prompt of the file (the first in key order for a pack decoded without its source,
// such as one carried in a run's input).
func (p *Pack) DefaultPrompt() string {
	if e := p.AgentsEntry(); e != "" && p.Prompts[e] != nil {
		return e
	}
	for _, k := range p.promptOrder {
		if p.Prompts[k] != nil {
			return k
		}
	}
	if keys := p.PromptKeys(); len(keys) > 0 {
		return keys[0]
	}
	return ""
}

// AgentsEntry is the agents block's entry prompt (RFC 0007), or "".
func (p *Pack) AgentsEntry() string {
	var a struct {
		Entry string `json:"entry"`
	}
	if len(p.Agents) == 0 || json.Unmarshal(p.Agents, &a) != nil {
		return ""
	}
	return a.Entry
}

// AgentMembers is the set of the agents block's member keys (RFC 0007).
func (p *Pack) AgentMembers() map[string]bool {
	var a struct {
		Members map[string]json.RawMessage `json:"members"`
	}
	out := map[string]bool{}
	if len(p.Agents) > 0 && json.Unmarshal(p.Agents, &a) == nil {
		for k := range a.Members {
			out[k] = true
		}
	}
	return out
}

// ChoosePrompt returns the prompt a conversation of the pack holds: choice when it is
// one of the pack's prompts, the DefaultPrompt when choice is empty. An unknown choice
// is an error naming the pack's prompts.
func (p *Pack) ChoosePrompt(choice string) (string, error) {
	if choice == "" {
		return p.DefaultPrompt(), nil
	}
	if p.Prompts[choice] == nil {
		msg := fmt.Sprintf("pack %q has no prompt %q; its prompts are %s", p.ID, choice, strings.Join(quoteEach(p.PromptKeys()), ", "))
		if s := suggest(choice, p.PromptKeys()); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", s)
		}
		return "", &PromptChoiceError{Prompt: choice, msg: msg}
	}
	return choice, nil
}

// PromptChoiceError is an inputs.prompt that names no prompt of the pack.
type PromptChoiceError struct {
	Prompt string
	msg    string
}

func (e *PromptChoiceError) Error() string { return e.msg }

// AsConversation returns the pack as it runs when it has no workflow: a shallow copy
// whose Workflow is the one-state conversation with prompt (a key of Prompts). A pack
// with a workflow is returned as it is.
func (p *Pack) AsConversation(prompt string) *Pack {
	if p.Workflow != nil {
		return p
	}
	c := *p
	c.Workflow = &Workflow{Version: 1, Entry: prompt, States: map[string]*State{
		prompt: {PromptTask: prompt, Control: ControlUser, conversation: true},
	}}
	return &c
}

// ConversationState reports whether the state is the one state of a pack run as a
// conversation (AsConversation).
func (s *State) ConversationState() bool { return s.conversation }

// promptKeysInOrder returns the keys of the source's prompts in file order.
func promptKeysInOrder(root *node) []string {
	n := root.get("prompts")
	if n == nil {
		return nil
	}
	keys := make([]string, 0, len(n.fields))
	for _, f := range n.fields {
		if !slices.Contains(keys, f.key) {
			keys = append(keys, f.key)
		}
	}
	return keys
}

// AgentTools returns the members (RFC 0007) that prompt promptKey calls as tools: the
// names of its tools that are agents members, neither declared tools nor the prompt
// itself nor blocklisted, in the prompt's order.
func (p *Pack) AgentTools(promptKey string) []string {
	pr := p.Prompts[promptKey]
	if pr == nil {
		return nil
	}
	members := p.AgentMembers()
	var out []string
	for _, name := range pr.Tools {
		if members[name] && p.Tools[name] == nil && name != promptKey && p.Prompts[name] != nil &&
			!slices.Contains(out, name) && (pr.ToolPolicy == nil || !slices.Contains(pr.ToolPolicy.Blocklist, name)) {
			out = append(out, name)
		}
	}
	return out
}

// IsAgentTool reports whether name is a member agent prompt promptKey calls as a tool.
func (p *Pack) IsAgentTool(promptKey, name string) bool {
	return slices.Contains(p.AgentTools(promptKey), name)
}

// AgentDescription is what a caller reads of member: its agents entry's description,
// else its prompt's description, else its prompt's name.
func (p *Pack) AgentDescription(member string) string {
	var a struct {
		Members map[string]struct {
			Description string `json:"description"`
		} `json:"members"`
	}
	if len(p.Agents) > 0 && json.Unmarshal(p.Agents, &a) == nil && a.Members[member].Description != "" {
		return a.Members[member].Description
	}
	if pr := p.Prompts[member]; pr != nil {
		if pr.Description != "" {
			return pr.Description
		}
		return pr.Name
	}
	return member
}

// AsAgentCall returns the pack as it runs for one call of its member agent: a shallow
// copy without agents (a called agent calls no further agents) whose workflow is, for a
// member with a state (RFC 0011), the pack's own workflow entered at that state, else one
// terminal state named after the member's prompt. Either way the run answers the call's
// message and completes (engine.Config.OneTurn).
func (p *Pack) AsAgentCall(member string) *Pack {
	c := *p
	c.Agents = nil
	if st := p.AgentState(member); st != "" && p.Workflow != nil && p.Workflow.States[st] != nil {
		wf := *p.Workflow
		wf.Entry = st
		c.Workflow = &wf
		return &c
	}
	c.Workflow = &Workflow{Version: 1, Entry: member, States: map[string]*State{
		member: {PromptTask: member, Terminal: true},
	}}
	return &c
}

// AgentState is the state member's agents entry starts at (RFC 0011), or "".
func (p *Pack) AgentState(member string) string {
	var a struct {
		Members map[string]struct {
			State string `json:"state"`
		} `json:"members"`
	}
	if len(p.Agents) == 0 || json.Unmarshal(p.Agents, &a) != nil {
		return ""
	}
	return a.Members[member].State
}
