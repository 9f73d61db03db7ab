package api

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"

	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

// Run listing is served from Temporal's visibility store, filtered by the Wop* search
// attributes the run workflow keeps current (workflows/searchattrs.go), so it costs one
// visibility call per page whatever the number of runs. It follows OpenWOP v2's
// listRuns (GET /runs, gated on the runList capability): {runs, nextCursor?}, a page
// never longer than runList.maxPageSize, an opaque cursor the host minted (any other is
// 400 validation_error), and exact filters. The order is visibility's: runs still open
// first, most recently started first, then closed runs, most recently closed first.

// Listing limits.
const (
	DefaultListPageSize = 50
	MaxListPageSize     = 100
)

// listFilters are the filters GET /v1/runs honours, as discovery advertises them.
var listFilters = []string{"status", "workflowId", "packId", "waiting", "createdAfter", "createdBefore"}

// runStatuses is the RunSnapshot status vocabulary.
var runStatuses = []string{
	protocol.StatusPending, protocol.StatusRunning, protocol.StatusWaitingApproval, protocol.StatusWaitingInput,
	protocol.StatusWaitingExternal, protocol.StatusCompleted, protocol.StatusFailed, protocol.StatusCancelling,
	protocol.StatusCancelled,
}

// RunSummary is one run of a listing: the RunSnapshot fields visibility knows (an open
// object, like the snapshot), plus what the run's pack and interrupt look like now.
type RunSummary struct {
	RunID         string      `json:"runId"`
	WorkflowID    string      `json:"workflowId"`
	Status        string      `json:"status"`
	Owner         RunOwner    `json:"owner"`
	StartedAt     string      `json:"startedAt,omitempty"`
	CompletedAt   string      `json:"completedAt,omitempty"`
	CurrentNodeID string      `json:"currentNodeId,omitempty"`
	PackID        string      `json:"packId,omitempty"`
	PackState     string      `json:"packState,omitempty"`
	WaitingOn     *WaitingOn  `json:"waitingOn,omitempty"`
	Temporal      RunTemporal `json:"temporal"`
}

// RunOwner is the owner block of a listed run.
type RunOwner struct {
	Tenant string `json:"tenant"`
}

// WaitingOn names what a waiting run waits on.
type WaitingOn struct {
	Kind          string `json:"kind"`          // waiting kind: approval, clarification, conversation, ...
	InterruptKind string `json:"interruptKind"` // the interrupt's own kind, e.g. conversation.exchange
	NodeID        string `json:"nodeId"`
}

// RunTemporal is where the run lives in Temporal, for operators.
type RunTemporal struct {
	WorkflowID string `json:"workflowId"`
	RunID      string `json:"runId"`
	Status     string `json:"status"`
}

// RunList is the body of GET /v1/runs.
type RunList struct {
	Runs       []RunSummary `json:"runs"`
	NextCursor string       `json:"nextCursor,omitempty"`
}

// parseRunListQuery reads the filters of GET /v1/runs into a visibility query for
// tenant. Every value is checked against its vocabulary or id syntax before it is
// quoted into the query.
// legacy adds the clauses of runs created before the tags (legacyattrs.go).
func parseRunListQuery(q func(string) string, tenant string, legacy bool) (string, error) {
	where := []string{
		"WorkflowType = " + quote(workflows.RunWorkflowName),
		"WopTenant = " + quote(tenant),
		"ExecutionStatus != 'ContinuedAsNew'",
	}
	if v := strings.TrimSpace(q("status")); v != "" {
		var any []string
		for _, st := range strings.Split(v, ",") {
			st = strings.TrimSpace(st)
			if !slices.Contains(runStatuses, st) {
				return "", badRequest("status %q is not a run status; use %s (comma-separated for several)", st, strings.Join(runStatuses, ", ")).with("field", "status")
			}
			any = append(any, statusClause(st))
		}
		where = append(where, "("+strings.Join(any, " OR ")+")")
	}
	for _, f := range []struct{ param, attr string }{{"workflowId", "WopWorkflowId"}, {"packId", "WopPackId"}} {
		if v := strings.TrimSpace(q(f.param)); v != "" {
			if err := validateID(f.param, v); err != nil {
				return "", err
			}
			where = append(where, f.attr+" = "+quote(v))
		}
	}
	if v := strings.TrimSpace(q("waiting")); v != "" {
		clause, err := waitingClause(v, legacy)
		if err != nil {
			return "", err
		}
		where = append(where, clause)
	}
	for _, f := range []struct{ param, op string }{{"createdAfter", ">"}, {"createdBefore", "<"}} {
		v := strings.TrimSpace(q(f.param))
		if v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return "", badRequest("%s %q must be an RFC 3339 time such as 2026-05-01T00:00:00Z", f.param, v).with("field", f.param)
		}
		// Visibility stores keep milliseconds (SQLite's): compare at that precision, so
		// a run created within the given millisecond is neither before nor after it.
		ts := quote(t.UTC().Truncate(time.Millisecond).Format(time.RFC3339Nano))
		// Runs started before WopCreatedAt existed have only Temporal's StartTime.
		where = append(where, fmt.Sprintf("(WopCreatedAt %s %s OR (WopCreatedAt IS NULL AND StartTime %s %s))", f.op, ts, f.op, ts))
	}
	return strings.Join(where, " AND "), nil
}

// statusClause selects runs in OpenWOP status st. A run still waiting or running must
// also be open in Temporal (an operator may have terminated it there); a run that
// Temporal terminated is cancelled, one that timed out or failed without its own
// ending is failed (closed.go reads them the same way).
func statusClause(st string) string {
	switch st {
	case protocol.StatusCompleted:
		return "WopStatus = " + quote(st)
	case protocol.StatusCancelled:
		return "(WopStatus = 'cancelled' OR ExecutionStatus = 'Terminated')"
	case protocol.StatusFailed:
		return "(WopStatus = 'failed' OR ExecutionStatus = 'TimedOut' OR ExecutionStatus = 'Failed')"
	}
	return "(WopStatus = " + quote(st) + " AND ExecutionStatus = 'Running')"
}

// waitingClause selects open runs that wait on kind ("any" for any kind): their
// WopTags hold its waitingKind tag. Runs created before the tags (legacyattrs.go) are
// matched by WopWaitingKind, and those whose last status change predates
// WopWaitingKind by WopWaitingOn's prefix, unless legacy is false.
func waitingClause(kind string, legacy bool) (string, error) {
	const open = "ExecutionStatus = 'Running' AND "
	if kind == "any" {
		or := []string{tagsIn(workflows.TagWaitingKind, workflows.WaitingKinds)}
		if legacy {
			or = append(or, legacyWaitingAny)
		}
		return "(" + open + "(" + strings.Join(or, " OR ") + "))", nil
	}
	prefixes := map[string][]string{
		workflows.WaitingApproval:      {"approval:", "low-confidence:"},
		workflows.WaitingClarification: {"clarification:"},
		workflows.WaitingConversation:  {"conversation."},
		workflows.WaitingExternal:      {"external-event:"},
		workflows.WaitingCustom:        {"custom:"},
	}[kind]
	if prefixes == nil {
		return "", badRequest("waiting %q is not a waiting kind; use any, %s", kind, strings.Join(workflows.WaitingKinds, ", ")).with("field", "waiting")
	}
	or := []string{"WopTags = " + quote(workflows.Tag(workflows.TagWaitingKind, kind))}
	if legacy {
		or = append(or, "WopWaitingKind = "+quote(kind))
		for _, p := range prefixes {
			or = append(or, "WopWaitingOn STARTS_WITH "+quote(p))
		}
	}
	return "(" + open + "(" + strings.Join(or, " OR ") + "))", nil
}

// quote renders s as a visibility query string literal. Callers pass values checked
// against an id syntax or a vocabulary; quotes are escaped all the same.
func quote(s string) string {
	return "'" + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), "'", `\'`) + "'"
}

// parseLimit reads ?limit= (default DefaultListPageSize, at most MaxListPageSize).
func parseLimit(v string) (int, error) {
	if v == "" {
		return DefaultListPageSize, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, badRequest("limit %q must be a positive integer", v).with("field", "limit")
	}
	return min(n, MaxListPageSize), nil
}

// cursorClaims is what a listing cursor carries: Temporal's page token and a digest
// of the listing it belongs to, so it cannot be replayed against other filters or
// another tenant.
type cursorClaims struct {
	Listing string `json:"l"`
	Token   []byte `json:"t"`
}

// mintCursor signs a cursor for the next page of the listing named by listing.
func (s *Server) mintCursor(listing string, token []byte) string {
	if len(token) == 0 {
		return ""
	}
	b, _ := json.Marshal(cursorClaims{Listing: listingDigest(listing), Token: token})
	payload := b64.EncodeToString(b)
	sum, _ := s.tokens.mac(s.tokens.kid, "cursor."+payload)
	return payload + "." + b64.EncodeToString(sum)
}

// readCursor verifies a cursor and returns its page token; the cursor must have been
// minted by this host for the same listing.
func (s *Server) readCursor(cursor, listing string) ([]byte, error) {
	bad := badRequest("cursor was not issued by this host for this listing; start again without a cursor").with("field", "cursor")
	if len(cursor) > 4096 {
		return nil, bad
	}
	payload, sig, ok := strings.Cut(cursor, ".")
	if !ok {
		return nil, bad
	}
	got, err := b64.DecodeString(sig)
	if err != nil {
		return nil, bad
	}
	valid := false
	for kid := range s.tokens.secrets {
		if want, ok := s.tokens.mac(kid, "cursor."+payload); ok && hmac.Equal(got, want) {
			valid = true
		}
	}
	if !valid {
		return nil, bad
	}
	raw, err := b64.DecodeString(payload)
	if err != nil {
		return nil, bad
	}
	var cl cursorClaims
	if json.Unmarshal(raw, &cl) != nil || cl.Listing != listingDigest(listing) || len(cl.Token) == 0 {
		return nil, bad
	}
	return cl.Token, nil
}

func listingDigest(listing string) string {
	sum := sha256.Sum256([]byte(listing))
	return base64.RawURLEncoding.EncodeToString(sum[:12])
}

// listPage runs one visibility page of query.
func (s *Server) listPage(ctx context.Context, query string, limit int, token []byte) ([]*workflowpb.WorkflowExecutionInfo, []byte, error) {
	resp, err := s.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		PageSize: int32(limit), NextPageToken: token, Query: query,
	})
	if err != nil {
		if isTransient(err) || ctx.Err() != nil {
			return nil, nil, &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: "Temporal's visibility store did not answer in time", Cause: err}
		}
		return nil, nil, fmt.Errorf("listing runs (%s): %w", query, err)
	}
	return resp.GetExecutions(), resp.GetNextPageToken(), nil
}

func (s *Server) handleListRuns(c echo.Context) error {
	p := principalOf(c)
	limit, err := parseLimit(c.QueryParam("limit"))
	if err != nil {
		return err
	}
	query, err := parseRunListQuery(c.QueryParam, p.Tenant, !s.cfg.NoLegacyAttributes)
	if err != nil {
		return err
	}
	var token []byte
	if cur := c.QueryParam("cursor"); cur != "" {
		if token, err = s.readCursor(cur, query); err != nil {
			return err
		}
	}
	execs, next, err := s.listPage(c.Request().Context(), query, limit, token)
	if err != nil {
		return err
	}
	if isV2(c) {
		return s.answerListV2(c, p, execs, s.mintCursor(query, next))
	}
	out := RunList{Runs: make([]RunSummary, 0, len(execs))}
	for _, e := range execs {
		out.Runs = append(out.Runs, summarize(e))
	}
	out.NextCursor = s.mintCursor(query, next)
	return c.JSON(http.StatusOK, out)
}

// summarize turns a visibility record into a RunSummary.
func summarize(e *workflowpb.WorkflowExecutionInfo) RunSummary {
	sa := e.GetSearchAttributes().GetIndexedFields()
	str := func(name string) string { return payloadString(sa[name]) }
	tags := runTags(sa)
	rs := RunSummary{
		RunID:      e.GetExecution().GetWorkflowId(),
		WorkflowID: str(workflows.SAWorkflowID.GetName()),
		Status:     str(workflows.SAStatus.GetName()),
		Owner:      RunOwner{Tenant: str(workflows.SATenant.GetName())},
		PackID:     str(workflows.SAPackID.GetName()),
		PackState:  workflows.TagValue(tags, workflows.TagPackState),
		Temporal: RunTemporal{
			WorkflowID: e.GetExecution().GetWorkflowId(), RunID: e.GetExecution().GetRunId(),
			Status: strings.TrimPrefix(e.GetStatus().String(), "WORKFLOW_EXECUTION_STATUS_"),
		},
	}
	if created := str(workflows.SACreatedAt.GetName()); created != "" {
		rs.StartedAt = created
	} else if st := e.GetStartTime(); st != nil {
		rs.StartedAt = st.AsTime().UTC().Format(time.RFC3339Nano)
	}
	open := e.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	if !open {
		if ct := e.GetCloseTime(); ct != nil {
			rs.CompletedAt = ct.AsTime().UTC().Format(time.RFC3339Nano)
		}
		if !isTerminal(rs.Status) {
			// Closed in Temporal without the run's own ending (terminated, timed out).
			rs.Status = closedStatus(e.GetStatus())
		}
	}
	if on := workflows.TagValue(tags, workflows.TagWaitingOn); on != "" && open {
		kind, node, _ := strings.Cut(on, ":")
		rs.WaitingOn = &WaitingOn{Kind: workflows.WaitingKind(kind), InterruptKind: kind, NodeID: node}
		rs.CurrentNodeID = node
	}
	return rs
}

func closedStatus(st enumspb.WorkflowExecutionStatus) string {
	switch st {
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		return protocol.StatusCompleted
	case enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED, enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED:
		return protocol.StatusCancelled
	}
	return protocol.StatusFailed
}

// payloadString decodes a string search attribute payload ("" when absent).
func payloadString(p *commonpb.Payload) string {
	var v string
	if p != nil {
		_ = converter.GetDefaultDataConverter().FromPayload(p, &v)
	}
	return v
}

// WorkflowSummary is one workflow of GET /v1/workflows.
type WorkflowSummary struct {
	WorkflowID  string `json:"workflowId"`
	Name        string `json:"name,omitempty"`
	Version     string `json:"version,omitempty"`
	Description string `json:"description,omitempty"`
	// Kind is "promptpack" for a pack served as a workflow, "fixture" for an OpenWOP
	// conformance fixture.
	Kind        string `json:"kind"`
	PackID      string `json:"packId,omitempty"`
	PackVersion string `json:"packVersion,omitempty"`
	PackHash    string `json:"packHash,omitempty"`
}

// workflowSummaries lists the catalog: packs first, then fixtures, each sorted by id.
func (s *Server) workflowSummaries() []WorkflowSummary {
	out := []WorkflowSummary{}
	for _, id := range s.cat.PackIDs() {
		p, _ := s.cat.Pack(id)
		def, _ := s.cat.Definition(id)
		ws := WorkflowSummary{WorkflowID: id, Kind: "promptpack", PackID: p.ID, PackVersion: p.Version, PackHash: p.Hash}
		if def != nil {
			ws.Name, ws.Version, ws.Description = def.Name, def.Version, def.Description
		}
		out = append(out, ws)
	}
	for _, id := range s.cat.Fixtures() {
		def, ok := s.cat.Definition(id)
		if !ok {
			continue
		}
		out = append(out, WorkflowSummary{WorkflowID: id, Name: def.Name, Version: def.Version, Description: def.Description, Kind: "fixture"})
	}
	return out
}

func (s *Server) handleListWorkflows(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]any{"workflows": s.workflowSummaries()})
}
