package engine

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wop-dev/wop/convo"
	"github.com/wop-dev/wop/packs"
)

// scriptRuntime plays a pack's <pack>.mock.yaml the way the strict mock provider does:
// packs.MockScript.Play over the rounds of the whole transcript, failing a round that is
// off script, and answering tool calls from tool_results.
type scriptRuntime struct {
	*fakeRuntime
	script *packs.MockScript
}

func (s *scriptRuntime) Model(in convo.ModelRoundInput) (*convo.ModelRoundResult, error) {
	s.rounds = append(s.rounds, snapshot{In: in, Messages: s.m.Transcript(in.Transcript.From, in.Transcript.To)})
	var seen []packs.MockSeen
	var cur packs.MockSeen
	for _, m := range s.m.Transcript(0, in.Transcript.To) {
		switch m.Role {
		case convo.RoleUser:
			cur.User, cur.HasUser = m.Text, true
		case convo.RoleAssistant:
			seen = append(seen, packs.MockSeen{State: m.State, User: cur.User, HasUser: cur.HasUser})
		}
	}
	cur.State = in.State
	ans := s.script.Play(append(seen, cur))
	switch {
	case ans.Exhausted:
		return text(s.script.Default), nil
	case ans.Round == nil:
		return nil, fmt.Errorf("round %d (line %d): %s", in.Round, ans.Line, ans.OffScript)
	}
	e := ans.Round
	out := &convo.ModelRoundResult{Text: e.Text, Provider: "mock", Model: "scripted-mock"}
	for i, c := range e.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, convo.ToolCall{ID: fmt.Sprintf("call_%d_%d_%s", in.Round, i, c.Name), Name: c.Name, Args: c.Args})
	}
	return out, nil
}

func (s *scriptRuntime) Tools(calls []convo.ToolCallInput) ([]*convo.ToolCallResult, error) {
	s.toolCalls = append(s.toolCalls, calls)
	out := make([]*convo.ToolCallResult, len(calls))
	for i, c := range calls {
		res, ok := s.script.ToolResults[c.Tool]
		if !ok {
			return nil, fmt.Errorf("no scripted result for %s", c.Tool)
		}
		out[i] = &convo.ToolCallResult{Content: res}
	}
	return out, nil
}

func loadExample(t *testing.T, name string) (*Machine, *scriptRuntime) {
	t.Helper()
	l, diags, err := packs.LoadFile(filepath.Join("..", "packs", name+".yaml"))
	if err != nil {
		t.Fatalf("load %s: %v\n%s", name, err, diags)
	}
	if l.Mock == nil {
		t.Fatalf("%s has no mock script", name)
	}
	rt := &scriptRuntime{fakeRuntime: newFake(t), script: l.Mock}
	m, err := Start(Config{RunID: "r", NodeID: "chat", Pack: l.Pack}, t0)
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	rt.m = m
	return m, rt
}

func TestSupportPack(t *testing.T) {
	m, rt := loadExample(t, "support")
	res := mustTurn(t, m, rt, "Hi, I have a question about my account.")
	if res.Status != StatusAwaitingUser || res.State != "verifying" || !strings.HasPrefix(res.Reply, "Hello, and welcome") {
		t.Fatalf("turn 1 = %+v", res)
	}
	res = mustTurn(t, m, rt, "It's ACC-12345. What's my balance?")
	if res.Status != StatusCompleted || res.State != "resolution" || res.Reply != "Let me check that account.\n\nYour balance is $42.00." {
		t.Fatalf("turn 2 = %+v", res)
	}
	st := m.State()
	if st.ModelRounds != 6 || st.TotalToolCalls != 4 || st.TotalVisits != 3 || st.VisitCounts["triage"] != 1 {
		t.Errorf("state = %+v", st)
	}
	// triage is transient: its round sees only the copied user message, and the
	// hand-over through {{workflow_context}}.
	tri := rt.rounds[3]
	if tri.In.State != "triage" || len(tri.Messages) != 1 || !strings.Contains(tri.In.System, "the customer wants their current balance") ||
		tri.In.ToolChoice != "required" {
		t.Errorf("triage round = %+v with %d messages", tri.In, len(tri.Messages))
	}
	if !strings.Contains(rt.rounds[0].In.System, "virtual assistant of Acme Bank") {
		t.Errorf("verifying system = %q", rt.rounds[0].In.System)
	}
}

func TestRefundPack(t *testing.T) {
	m, rt := loadExample(t, "refund")
	mustTurn(t, m, rt, "Hi, I'd like a refund, my jacket arrived torn.")
	res := mustTurn(t, m, rt, "It's order ORD-1042.")
	if res.Status != StatusAwaitingEvent || res.Awaiting == nil || res.Awaiting.State != "awaiting_approval" ||
		strings.Join(res.Awaiting.Events, ",") != "Approved,Rejected" {
		t.Fatalf("turn 2 = %+v", res)
	}
	rt.now = t0.Add(14 * 24 * time.Hour)
	res, err := m.Inject(rt, "Approved", "Approved 89.90 USD, ref APR-7731")
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != StatusCompleted || !strings.HasPrefix(res.Reply, "Good news: your refund of $89.90") {
		t.Fatalf("inject = %+v", res)
	}
	var args map[string]string
	_ = json.Unmarshal(rt.toolCalls[1][0].Args, &args)
	if rt.toolCalls[1][0].Tool != "issue_refund" || args["approval_reference"] != "APR-7731" {
		t.Errorf("refund call = %+v", rt.toolCalls[1])
	}
}
