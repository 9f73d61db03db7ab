package api

// Bulk cancel (rest-endpoints.md §POST /v1/runs:bulk-cancel; v2 runs.md §Cancel):
// 1..100 run ids, each cancelled on its own as POST .../cancel would, the results in
// request order. The request answers 200 whenever it reached the host, even when every
// id fails: a failure is the entry's, never the request's. The v2 twin (POST
// /runs:bulk-cancel) shares bulkCancel and renders its entries per v2.

import (
	"context"
	"errors"
	"net/http"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/webhooks"
)

// MaxBulkCancelRunIDs bounds the ids of one bulk cancel (details.maxRunIds of the 400).
const MaxBulkCancelRunIDs = 100

// bulkCancelParallel bounds the cancels of one request in flight at a time.
const bulkCancelParallel = 8

// BulkCancelRequest is the closed body of POST /v1/runs:bulk-cancel.
type BulkCancelRequest struct {
	RunIDs []string `json:"runIds"`
	Reason string   `json:"reason,omitempty"`
}

// bulkOutcome is what became of one id of a bulk cancel.
type bulkOutcome struct {
	RunID  string // as the request named it
	Status string // cancelling or cancelled, when the run takes the cancel
	Err    *Error // why it did not
}

// decodeBulkCancel decodes and bounds a bulk cancel body.
func decodeBulkCancel(body []byte) (*BulkCancelRequest, error) {
	if body == nil {
		return nil, badRequest("request body is required: {\"runIds\": [\"...\"]}")
	}
	var req BulkCancelRequest
	if err := decodeStrict(body, &req); err != nil {
		return nil, err
	}
	if len(req.RunIDs) == 0 {
		return nil, badRequest("runIds must list 1 to %d run ids", MaxBulkCancelRunIDs).with("field", "runIds").with("maxRunIds", MaxBulkCancelRunIDs)
	}
	if len(req.RunIDs) > MaxBulkCancelRunIDs {
		return nil, badRequest("runIds lists %d run ids; a bulk cancel takes at most %d", len(req.RunIDs), MaxBulkCancelRunIDs).
			with("field", "runIds").with("maxRunIds", MaxBulkCancelRunIDs)
	}
	return &req, nil
}

// bulkCancel cancels each id for p, at most bulkCancelParallel at a time, and returns
// the outcomes in request order. resolve turns a requested id into the host's run id
// (a major's id rules) or refuses it; a run that has already ended is run_terminal,
// except one that is cancelled or cancelling, which is taken as cancelled again (a
// repeated bulk cancel is idempotent).
func (s *Server) bulkCancel(ctx context.Context, p *principal, ids []string, reason string, resolve func(string) (string, *Error)) []bulkOutcome {
	out := make([]bulkOutcome, len(ids))
	sem := make(chan struct{}, bulkCancelParallel)
	var wg sync.WaitGroup
	for i, raw := range ids {
		out[i].RunID = raw
		id, rerr := resolve(raw)
		if rerr == nil && webhooks.IsInternalWorkflowID(id) {
			// The host's own workflows are no tenant's runs (runParam).
			rerr = notFound("run %q not found", raw)
		}
		if rerr != nil {
			out[i].Err = rerr
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func(o *bulkOutcome, id string) {
			defer wg.Done()
			defer func() { <-sem }()
			status, ended, err := s.cancelRun(ctx, p, id, reason)
			switch {
			case err != nil:
				var ae *Error
				if !errors.As(err, &ae) {
					s.log.Error("Bulk cancel: cancelling a run failed", "runId", id, "error", err)
					ae = &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: "internal error"}
				}
				o.Err = ae
			case ended && status != protocol.StatusCancelled:
				o.Err = codeErr(protocol.CodeRunTerminal, "run %s has ended (%s)", raw, status).with("runStatus", status)
			default:
				o.Status = status
			}
		}(&out[i], id)
	}
	wg.Wait()
	return out
}

// handleBulkCancel serves POST /v1/runs:bulk-cancel: {results: [{runId, ok, status}
// | {runId, ok: false, error: {code, message}}]}.
func (s *Server) handleBulkCancel(c echo.Context) error {
	body, err := s.readBody(c)
	if err != nil {
		return err
	}
	req, err := decodeBulkCancel(body)
	if err != nil {
		return err
	}
	p := principalOf(c)
	if isV2(c) {
		return s.bulkCancelV2(c, p, req)
	}
	outcomes := s.bulkCancel(c.Request().Context(), p, req.RunIDs, req.Reason, func(id string) (string, *Error) {
		if err := validateID("runId", id); err != nil {
			var ae *Error
			errors.As(err, &ae)
			return "", ae
		}
		return id, nil
	})
	results := make([]map[string]any, len(outcomes))
	for i, o := range outcomes {
		if o.Err != nil {
			results[i] = map[string]any{"runId": o.RunID, "ok": false, "error": map[string]string{"code": o.Err.Code, "message": o.Err.Message}}
			continue
		}
		results[i] = map[string]any{"runId": o.RunID, "ok": true, "status": o.Status}
	}
	s.log.Info("Runs bulk-cancelled", "keyId", p.KeyID, "runs", len(outcomes))
	return c.JSON(http.StatusOK, map[string]any{"results": results})
}

// bulkCancelV2 serves POST /runs:bulk-cancel under major 2 (runs.md §Cancel): each id
// tenant-bound ("acme/r_…", a bare id read in the caller's tenant), authorised on its
// own, and each failed entry an error envelope {error, message, details?} with v2's
// code: id_tenant_mismatch for another tenant's id, run_forbidden when the key may not
// cancel runs, not_found, run_terminal. Entries echo the ids as requested.
func (s *Server) bulkCancelV2(c echo.Context, p *principal, req *BulkCancelRequest) error {
	results := make([]map[string]any, len(req.RunIDs))
	if !p.Scopes[ScopeRunsCancel] {
		for i, raw := range req.RunIDs {
			e := codeErr(protocol.CodeRunForbidden, "this API key lacks the %q scope", ScopeRunsCancel).with("scopeRequired", ScopeRunsCancel)
			results[i] = bulkEntryV2(raw, e)
		}
		s.log.Info("Runs bulk-cancel refused per entry", "keyId", p.KeyID, "runs", len(req.RunIDs))
		return c.JSON(http.StatusOK, map[string]any{"results": results})
	}
	outcomes := s.bulkCancel(c.Request().Context(), p, req.RunIDs, req.Reason, func(raw string) (string, *Error) {
		tenant, opaque, bound := protocol.SplitBoundID(raw)
		if bound && tenant != p.Tenant {
			return "", codeErr(protocol.CodeIDTenantMismatch, "the tenant segment of run %q is not the caller's tenant", raw)
		}
		if err := validateID("runId", opaque); err != nil {
			var ae *Error
			errors.As(err, &ae)
			return "", ae
		}
		return opaque, nil
	})
	for i, o := range outcomes {
		if o.Err != nil {
			results[i] = bulkEntryV2(o.RunID, o.Err)
			continue
		}
		results[i] = map[string]any{"runId": o.RunID, "ok": true, "status": o.Status}
	}
	s.log.Info("Runs bulk-cancelled", "keyId", p.KeyID, "runs", len(outcomes), "major", 2)
	return c.JSON(http.StatusOK, map[string]any{"results": results})
}

// bulkEntryV2 is a failed entry of a v2 bulk cancel: the entry's error is the error
// envelope (errors.md), its code v2's.
func bulkEntryV2(runID string, e *Error) map[string]any {
	v := v2Error(e)
	env := map[string]any{"error": v.Code, "message": v.Message}
	if len(v.Details) > 0 {
		env["details"] = v.Details
	}
	return map[string]any{"runId": runID, "ok": false, "error": env}
}
