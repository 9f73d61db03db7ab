package agentclient

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

// childSeen is what the stand-in run workflow saw of its start.
type childSeen struct {
	ID, Parent, Tenant string
	Created            time.Time
	Input              map[string]any
}

// TestStartAndSendInTheWorkflow drives Start, Send and Outcome in the SDK's test
// environment with stand-ins for the host's activities and run: the child starts with
// the prepared id, input and search attributes (its memo is checked end to end); each message gets an id of its own;
// a failed run comes back as *Error with its code.
func TestStartAndSendInTheWorkflow(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	created := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	env.RegisterActivityWithOptions(func(_ context.Context, req PrepareRequest) (*PrepareResult, error) {
		if req.WorkflowID != "desk" || req.Owner != (Owner{Tenant: "acme", Subject: "caller"}) || string(req.Inputs) != `{"message":"hello"}` || req.Key == "" {
			return nil, temporal.NewNonRetryableApplicationError("unexpected "+string(req.Inputs), "validation_error", nil)
		}
		return &PrepareResult{
			RunID: "r_TEST", WorkflowType: "StandInRun", Input: json.RawMessage(`{"runId":"r_TEST","pack":"desk"}`), NodeID: "agent",
			SearchAttributes: []SearchAttribute{{Name: "WopTenant", Type: TypeKeyword, Value: "acme"}, {Name: "WopCreatedAt", Type: TypeDatetime, Value: created.Format(time.RFC3339Nano)}},
			Memo:             map[string]json.RawMessage{"openwop.eventLogSchemaVersion": json.RawMessage("2")},
		}, nil
	}, activity.RegisterOptions{Name: PrepareActivity})
	var sent []SendRequest
	env.RegisterActivityWithOptions(func(_ context.Context, req SendRequest) (*Reply, error) {
		sent = append(sent, req)
		if req.Text == "refused" {
			return nil, temporal.NewNonRetryableApplicationError("a tool call waits", "approval_pending", nil)
		}
		return &Reply{RunID: req.RunID, Text: "re: " + req.Text}, nil
	}, activity.RegisterOptions{Name: SendActivity})
	var seen childSeen
	env.RegisterWorkflowWithOptions(func(ctx workflow.Context, in map[string]any) (*Outcome, error) {
		info := workflow.GetInfo(ctx)
		seen.ID, seen.Parent, seen.Input = info.WorkflowExecution.ID, info.ParentWorkflowExecution.ID, in
		seen.Tenant, _ = workflow.GetTypedSearchAttributes(ctx).GetKeyword(temporal.NewSearchAttributeKeyKeyword("WopTenant"))
		seen.Created, _ = workflow.GetTypedSearchAttributes(ctx).GetTime(temporal.NewSearchAttributeKeyTime("WopCreatedAt"))
		return nil, temporal.NewNonRetryableApplicationError("the run failed", "budget_exhausted", nil, map[string]string{"runId": "r_TEST", "status": "failed"})
	}, workflow.RegisterOptions{Name: "StandInRun"})

	type result struct {
		RunID, First string
		Replies      []string
		RefusedCode  string
		OutcomeCode  string
		Status       string
	}
	env.ExecuteWorkflow(func(ctx workflow.Context) (*result, error) {
		conv, err := Start(ctx, StartOptions{Pack: "desk", Message: "hello", Owner: Owner{Tenant: "acme", Subject: "caller"}})
		if err != nil {
			return nil, err
		}
		res := &result{RunID: conv.RunID(), First: conv.FirstReply().Text}
		for _, m := range []string{"one", "two"} {
			r, err := conv.Send(ctx, m)
			if err != nil {
				return nil, err
			}
			res.Replies = append(res.Replies, r.Text)
		}
		var e *Error
		if _, err := conv.Send(ctx, "refused"); errors.As(err, &e) {
			res.RefusedCode = e.Code
		}
		if _, err := conv.Outcome(ctx); errors.As(err, &e) {
			res.OutcomeCode, res.Status = e.Code, e.Status
		}
		return res, nil
	})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var res result
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.RunID != "r_TEST" || res.First != "re: " || len(res.Replies) != 2 || res.Replies[1] != "re: two" {
		t.Errorf("conversation: %+v", res)
	}
	if res.RefusedCode != "approval_pending" || res.OutcomeCode != "budget_exhausted" || res.Status != "failed" {
		t.Errorf("codes: %+v", res)
	}
	if seen.ID != "r_TEST" || seen.Parent == "" || seen.Tenant != "acme" || !seen.Created.Equal(created) || seen.Input["pack"] != "desk" {
		t.Errorf("the child's start: %+v", seen)
	}
	if len(sent) != 4 || sent[0].MessageID != "" || sent[0].Text != "" {
		t.Fatalf("the first send waits for the reply to the start's message: %+v", sent)
	}
	ids := map[string]bool{}
	for _, s := range sent[1:] {
		if s.NodeID != "agent" || s.Owner.Tenant != "acme" || len(s.MessageID) != 36 || ids[s.MessageID] {
			t.Errorf("send %+v", s)
		}
		ids[s.MessageID] = true
	}
}

// TestStartRefusesWithoutOwner: the tenant is required, before anything runs.
func TestStartRefusesWithoutOwner(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.ExecuteWorkflow(func(ctx workflow.Context) (string, error) {
		_, err := Start(ctx, StartOptions{Pack: "desk", ParentClosePolicy: enumspb.PARENT_CLOSE_POLICY_ABANDON})
		var e *Error
		if !errors.As(err, &e) {
			return "", err
		}
		return e.Code, nil
	})
	var code string
	if err := env.GetWorkflowResult(&code); err != nil || code != "validation_error" {
		t.Fatalf("want validation_error, got %q %v", code, err)
	}
}
