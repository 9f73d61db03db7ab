package api

import (
	"context"
	"fmt"
	"net/http"

	"github.com/wop-dev/wop/workflows"
)

// forkInput builds the RunInput of a replay fork of run sourceID. The fork runs on what
// the source run was started with (workflows.RunBasisQuery): its definitions, its
// packs by hash and its per-turn limits, whatever the packs folder holds now, so the
// replay can follow the recording. A source that recorded no definition falls back to
// the catalog's.
func (s *Server) forkInput(ctx context.Context, sourceID string, snap *workflows.Snapshot, req workflows.RunRequest) (*workflows.RunInput, error) {
	v, err := s.tc.QueryWorkflow(ctx, sourceID, "", workflows.RunBasisQuery)
	if err != nil {
		return nil, s.temporalErr(err, sourceID)
	}
	var basis workflows.RunBasis
	if err := v.Get(&basis); err != nil {
		return nil, fmt.Errorf("decoding the run basis of run %s: %w", sourceID, err)
	}
	if basis.Definition != nil {
		in, err := basis.ForkInput(req, s.cat.Limits())
		if err != nil {
			return nil, apiErr(http.StatusUnprocessableEntity, CodeValidation, "the source run cannot be replayed: %v", err)
		}
		return in, nil
	}
	if _, ok := s.cat.Definition(snap.WorkflowID); !ok {
		return nil, apiErr(http.StatusUnprocessableEntity, CodeValidation, "the source run's workflow %q is no longer served", snap.WorkflowID)
	}
	in, err := s.cat.NewRunInput(req)
	if err != nil {
		return nil, apiErr(http.StatusUnprocessableEntity, CodeValidation, "the source run cannot be replayed: %v", err)
	}
	return in, nil
}
