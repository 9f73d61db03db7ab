package api

// listRuns at major 2 (runs.md §List, RFC 0182): the page is visibility's, as at v1 (the
// same filters, order, page bound and cursors), and each run on it is the full v2
// RunSnapshot its GET answers, read with the run's snapshot query (listParallel at a
// time). A run whose query fails (its workflow task keeps failing, Temporal answers
// late) is listed with what visibility and its memo know, marked
// extensions["wop.host"].unread; a run gone between the page and its query is left
// out.

import (
	"context"
	"errors"
	"net/http"
	"sync"

	"github.com/labstack/echo/v4"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/converter"

	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

// listParallel bounds the snapshot queries of one v2 page in flight at a time.
const listParallel = 8

func (s *Server) answerListV2(c echo.Context, p *principal, execs []*workflowpb.WorkflowExecutionInfo, cursor string) error {
	ctx := c.Request().Context()
	w := s.wireOf(c, p.Tenant)
	docs := make([]map[string]any, len(execs))
	sem := make(chan struct{}, listParallel)
	var wg sync.WaitGroup
	for i, e := range execs {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int, e *workflowpb.WorkflowExecutionInfo) {
			defer wg.Done()
			defer func() { <-sem }()
			docs[i] = s.listedSnapshot(ctx, c, w, p, e)
		}(i, e)
	}
	wg.Wait()
	out := map[string]any{"runs": compactDocs(docs)}
	if cursor != "" {
		out["nextCursor"] = cursor
	}
	return c.JSON(http.StatusOK, out)
}

// listedSnapshot is the v2 snapshot of one listed run (nil when the run is gone).
func (s *Server) listedSnapshot(ctx context.Context, c echo.Context, w wire, p *principal, e *workflowpb.WorkflowExecutionInfo) map[string]any {
	id := e.GetExecution().GetWorkflowId()
	snap, err := s.snapshot(ctx, p, id)
	if err == nil {
		s.decorate(c, snap)
		return w.snapshotV2(snap)
	}
	var ae *Error
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) || errors.As(err, &ae) && ae.Status == http.StatusNotFound {
		return nil
	}
	s.log.Warn("Run list: a run's snapshot could not be read; listed from visibility", "runId", id, "error", err)
	return w.visibilitySnapshotV2(e, s.dc)
}

// visibilitySnapshotV2 is the v2 snapshot of a listed run built from its visibility
// record and memo (read with dc): what a listing knows of a run it could not query.
func (w wire) visibilitySnapshotV2(e *workflowpb.WorkflowExecutionInfo, dc converter.DataConverter) map[string]any {
	rs := summarize(e)
	era, subject := protocol.EraV1, protocol.LegacySubject(rs.Owner.Tenant, "")
	fields := e.GetMemo().GetFields()
	if pl := fields[workflows.MemoEra]; pl != nil {
		_ = dc.FromPayload(pl, &era)
	}
	if pl := fields[workflows.MemoSubject]; pl != nil {
		var sub protocol.Subject
		if dc.FromPayload(pl, &sub) == nil && sub.Issuer != "" {
			subject = &sub
		}
	}
	snap := &workflows.Snapshot{
		RunID: rs.RunID, WorkflowID: rs.WorkflowID, Status: rs.Status, CurrentNodeID: rs.CurrentNodeID,
		StartedAt: rs.StartedAt, CompletedAt: rs.CompletedAt, Era: era,
		Owner: workflows.Owner{Tenant: rs.Owner.Tenant, Subject: subject}, LastSequence: -1,
	}
	doc := w.snapshotV2(snap)
	ext := doc["extensions"].(map[string]any)[hostExtension].(map[string]any)
	delete(ext, "lastSequence")
	ext["unread"] = "the run's snapshot could not be read; this entry is what Temporal's visibility store and the run's memo hold"
	if rs.WaitingOn != nil {
		ext["waitingOn"] = rs.WaitingOn
	}
	ext["temporal"] = rs.Temporal
	return doc
}

func compactDocs(docs []map[string]any) []map[string]any {
	out := make([]map[string]any, 0, len(docs))
	for _, d := range docs {
		if d != nil {
			out = append(out, d)
		}
	}
	return out
}
