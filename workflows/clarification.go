package workflows

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/wop-dev/wop/protocol"
)

type clarificationData struct {
	Questions   []protocol.ClarificationQuestion `json:"questions"`
	ContextType string                           `json:"contextType,omitempty"`
}

type clarificationConfig struct {
	clarificationData
	TimeoutMs int64 `json:"timeoutMs,omitempty"`
}

// normalizeAnswers accepts {answers:{id:value}} and {answers:[{id,answer}]}.
func normalizeAnswers(raw json.RawMessage) (map[string]json.RawMessage, error) {
	var v struct {
		Answers json.RawMessage `json:"answers"`
	}
	if err := json.Unmarshal(raw, &v); err != nil || len(v.Answers) == 0 {
		return nil, fmt.Errorf("resumeValue must be an object with answers")
	}
	obj := map[string]json.RawMessage{}
	if json.Unmarshal(v.Answers, &obj) == nil {
		return obj, nil
	}
	var arr []struct {
		ID     string          `json:"id"`
		Answer json.RawMessage `json:"answer"`
	}
	if err := json.Unmarshal(v.Answers, &arr); err != nil {
		return nil, fmt.Errorf("answers must be an object keyed by question id or an array of {id, answer}")
	}
	for _, a := range arr {
		if a.ID == "" {
			return nil, fmt.Errorf("every answer needs an id")
		}
		obj[a.ID] = a.Answer
	}
	return obj, nil
}

func (r *runner) checkClarification(it *interrupt, req ResolveRequest) (json.RawMessage, ResolveCheck) {
	answers, err := normalizeAnswers(req.ResumeValue)
	if err == nil {
		var d clarificationData
		_ = json.Unmarshal(it.Data, &d) // the run encoded it.Data from a clarificationData: it decodes
		for _, q := range d.Questions {
			a, ok := answers[q.ID]
			if !ok {
				err = fmt.Errorf("question %q is not answered", q.ID)
				break
			}
			if verr := r.validateAgainst(q.Schema, a); verr != nil {
				err = fmt.Errorf("answer to %q: %v", q.ID, verr)
				break
			}
		}
	}
	if err != nil {
		return nil, ResolveCheck{Code: protocol.CodeValidation, Message: err.Error()}
	}
	return mustJSON(answers), ResolveCheck{OK: true}
}

// execClarificationGate suspends on a clarification interrupt.
func execClarificationGate(r *runner, n *Node, _ map[string]json.RawMessage) (map[string]json.RawMessage, error) {
	var cfg clarificationConfig
	if len(n.Config) > 0 {
		if err := json.Unmarshal(n.Config, &cfg); err != nil {
			return nil, failNode(protocol.CodeValidation, "core.clarificationGate config: %v", err)
		}
	}
	return runClarification(r, n, cfg.clarificationData, cfg.TimeoutMs)
}

func runClarification(r *runner, n *Node, d clarificationData, timeoutMs int64) (map[string]json.RawMessage, error) {
	if len(d.Questions) == 0 {
		return nil, failNode(protocol.CodeValidation, "clarification at node %q declares no questions", n.ID)
	}
	qs := make([]string, 0, len(d.Questions))
	for _, q := range d.Questions {
		qs = append(qs, fmt.Sprintf("%s: %q", q.ID, q.Question))
	}
	it := r.raise(n.ID, interruptSpec{Kind: protocol.KindClarification, Data: d, TimeoutMs: timeoutMs, Describe: "Questions " + strings.Join(qs, "; ") + "."})
	r.emit(protocol.EvClarificationRequested, n.ID, protocol.ClarificationRequested{NodeID: n.ID, InterruptID: it.InterruptID, Questions: d.Questions}, it.requestedEvent)
	req, _, answers, timedOut, err := r.nextResolve(n.ID)
	if err != nil {
		return nil, err
	}
	if timedOut != nil {
		r.settle(it)
		return nil, failNode(protocol.CodeInterruptTimeout, "clarification at node %q timed out after %d ms", n.ID, timeoutMs)
	}
	r.settle(it)
	resolved := r.emitResolved(it, req, req.ResumeValue)
	cr := r.emit(protocol.EvClarificationResolved, n.ID, protocol.ClarificationResolved{NodeID: n.ID, Answers: answers, AnsweredBy: req.ResolvedBy}, resolved)
	r.emitResumed(it, req.ResumeValue, cr)
	return map[string]json.RawMessage{"answers": answers}, nil
}
