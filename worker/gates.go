package worker

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/wop-dev/wop/workflows"
)

// GateOpenRuns is one gate of the registry with the open runs that may still take its
// earlier path.
type GateOpenRuns struct {
	workflows.Gate
	// Query is the visibility query that finds those runs (RetirementQuery).
	Query string `json:"query"`
	// OpenRuns is how many runs it finds; 0 means the gate may retire, if it retires by
	// date (MayRetire).
	OpenRuns int64 `json:"openRuns"`
	// MayRetire is set when OpenRuns is 0 and the gate retires by date (Gate.ByDate).
	MayRetire bool `json:"mayRetire"`
	// Attributes are the search attributes that retire with the gate.
	Attributes []string `json:"attributes,omitempty"`
}

// RetirementQuery is the visibility query of the open runs created before the gate
// added on day added (YYYY-MM-DD) may have been deployed: created before the next day,
// by WopCreatedAt (which continue-as-new keeps, so a run counts whatever execution it
// is in) or, for runs created before WopCreatedAt existed, by StartTime. A gate may
// retire when it finds none.
func RetirementQuery(added string) (string, error) {
	day, err := time.Parse(time.DateOnly, added)
	if err != nil {
		return "", fmt.Errorf("gate date %q: %w", added, err)
	}
	cut := "'" + day.AddDate(0, 0, 1).UTC().Format(time.RFC3339) + "'"
	return fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running' AND (%s < %s OR (%s IS NULL AND StartTime < %s))",
		workflows.RunWorkflowName, workflows.SACreatedAt.GetName(), cut, workflows.SACreatedAt.GetName(), cut), nil
}

// CountGateRuns counts, for each of gates, the open runs of namespace ns that may still
// take its earlier path, through Temporal's visibility API.
func CountGateRuns(ctx context.Context, c client.Client, ns string, gates []workflows.Gate) ([]GateOpenRuns, error) {
	out := make([]GateOpenRuns, 0, len(gates))
	for _, g := range gates {
		q, err := RetirementQuery(g.Added)
		if err != nil {
			return nil, fmt.Errorf("gate %s: %w", g.ID, err)
		}
		resp, err := c.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: ns, Query: q})
		if err != nil {
			return nil, fmt.Errorf("counting the open runs of gate %s (%s): %w", g.ID, q, err)
		}
		out = append(out, GateOpenRuns{Gate: g, Query: q, OpenRuns: resp.GetCount(), MayRetire: resp.GetCount() == 0 && g.ByDate(), Attributes: workflows.GateAttributes[g.ID]})
	}
	return out, nil
}
