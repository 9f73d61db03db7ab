package workflows

// Agent turns at OpenWOP v2 (RFC 0205 §B, RFC 0109): every agent turn of a run created
// with RunInput.TurnShape 1 carries, beside its content (which stays as it was, for
// readers of the content), its text as A2A parts ([{"text": …}]; a content with no text
// is one data part), and agent{agentId, model{provider, model}}: the speaker, and the
// model that answered the turn's latest round when a model did (identifiers only;
// a pack turn that ran no round, or a host agent such as the conformance gate's echo,
// names no model). Runs created before carry neither (GateTurnParts is not asked).

import (
	"encoding/json"
	"fmt"

	"github.com/wop-dev/wop/protocol"
)

// shapeAgentTurn adds parts and agent to the agent turn t of reply rep.
func (r *runner) shapeAgentTurn(t *protocol.Turn, rep AgentReply) {
	if r.in.TurnShape < 1 || !r.changed(GateTurnParts) {
		return
	}
	t.Parts = turnParts(rep.Text, t.Content)
	t.Agent = &protocol.TurnAgent{AgentID: t.SpeakerID, Model: rep.Model}
}

// checkParts is why a client turn's parts are not A2A Parts ("" when they are): a
// non-empty array, each part exactly one of text, raw, url and data.
func checkParts(parts []protocol.Part) string {
	if len(parts) == 0 {
		return "must be a non-empty array of A2A parts"
	}
	for i, p := range parts {
		n := 0
		for _, set := range []bool{p.Text != "", p.Raw != "", p.URL != "", len(p.Data) > 0} {
			if set {
				n++
			}
		}
		if n != 1 {
			return fmt.Sprintf("[%d] must have exactly one of text, raw, url and data", i)
		}
	}
	return ""
}

// turnParts is content as A2A parts: its text (text, else content's "text" field), or
// the content itself as a data part when it is an object without text.
func turnParts(text string, content json.RawMessage) []protocol.Part {
	var body map[string]json.RawMessage
	isObject := json.Unmarshal(content, &body) == nil && body != nil
	if text == "" && isObject {
		_ = json.Unmarshal(body["text"], &text) // a text that is not a string is none
	}
	if text != "" {
		return []protocol.Part{{Text: text}}
	}
	if isObject {
		return []protocol.Part{{Data: content}}
	}
	return nil
}
