package api

import "sync"

// updateGate lets one resolve update per run be in flight from this process at a
// time (its call, updatecall.go); a resolve that finds one already in flight for its
// run validates and signals (resolve.go), as against a worker without the update.
//
// The server admits at most ten updates in flight per workflow
// (history.maxInFlightUpdates) and refuses the rest as resource-exhausted for the
// client to retry, and under load it aborted admitted ones as retryable too; a hundred
// exchanges sent at once to one run as updates kept the API answering past 30 s while
// the same hundred as signals are answered in turn. A run applies its requests one at
// a time anyway, and a second update while one is in flight gains nothing the signal
// does not give: the update's events are carried only for a lone request.
type updateGate struct {
	mu   sync.Mutex
	busy map[string]*updateCall
}

// enter reports whether call, a resolve update of runID, may go now; a true answer is
// followed by leave.
func (g *updateGate) enter(runID string, call *updateCall) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.busy[runID] != nil {
		return false
	}
	if g.busy == nil {
		g.busy = map[string]*updateCall{}
	}
	g.busy[runID] = call
	return true
}

// call is the resolve update of runID in flight, or nil.
func (g *updateGate) call(runID string) *updateCall {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.busy[runID]
}

// leave ends the update entered for runID.
func (g *updateGate) leave(runID string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.busy, runID)
}
