package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	workflowpb "go.temporal.io/api/workflow/v1"

	"github.com/wop-dev/wop/internal/mapkeys"
	"github.com/wop-dev/wop/workflows"
)

// GET /v1/interrupts lists the interrupts the caller may resolve: those pending in the
// runs of the caller's tenant (found through visibility: open runs whose WopWaitingOn is
// set), read from each run's snapshot, with the signed token of each. With
// Accept: text/event-stream it streams the list instead, a new `interrupts` event
// whenever it changes; the approvals inbox (/inbox) reads that stream.

// PendingItem is one interrupt the caller may resolve, with what the run shows of
// itself. Its interrupt fields are those of the snapshot's interrupts[].
type PendingItem struct {
	RunID       string `json:"runId"`
	WorkflowID  string `json:"workflowId"`
	RunStatus   string `json:"runStatus"`
	StartedAt   string `json:"startedAt,omitempty"`
	PackID      string `json:"packId,omitempty"`
	PackState   string `json:"packState,omitempty"`
	WaitingKind string `json:"waitingKind"`
	workflows.PendingInterrupt
	// RecentTurns are the last turns of the run's conversation, when it has one: what
	// the person answering needs to read first.
	RecentTurns []json.RawMessage `json:"recentTurns,omitempty"`
}

// PendingList is the body of GET /v1/interrupts and the data of its stream events.
type PendingList struct {
	Interrupts []PendingItem `json:"interrupts"`
	NextCursor string        `json:"nextCursor,omitempty"`
}

// recentTurnCount bounds PendingItem.RecentTurns.
const recentTurnCount = 4

// snapshotFanOut bounds the snapshot queries a listing page runs at once.
const snapshotFanOut = 8

// pendingQuery is the visibility query of the runs of tenant that wait, optionally on
// one waiting kind.
func pendingQuery(tenant, kind string) (string, error) {
	where := []string{
		"WorkflowType = " + quote(workflows.RunWorkflowName),
		"WopTenant = " + quote(tenant),
	}
	if kind == "" {
		kind = "any"
	}
	clause, err := waitingClause(kind)
	if err != nil {
		return "", err
	}
	return strings.Join(append(where, clause), " AND "), nil
}

// snapshotCache keeps the snapshots one inbox stream read, by run, while the run's
// visibility record is unchanged and for at most ttl.
type snapshotCache struct {
	ttl     time.Duration
	entries map[string]cachedSnapshot
}

type cachedSnapshot struct {
	fingerprint string
	snap        *workflows.Snapshot
	at          time.Time
}

// fingerprint summarises what visibility shows of a run; a change means the snapshot
// must be read again.
func fingerprint(e *workflowpb.WorkflowExecutionInfo) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%d\x00%d\x00", e.GetExecution().GetRunId(), e.GetHistoryLength(), e.GetStateTransitionCount())
	for _, name := range []string{workflows.SAStatus.GetName(), workflows.SAWaitingOn.GetName(), workflows.SAPackState.GetName()} {
		h.Write([]byte(payloadString(e.GetSearchAttributes().GetIndexedFields()[name]) + "\x00"))
	}
	return string(h.Sum(nil))
}

// pending builds one page of the caller's pending interrupts. cache may be nil (every
// snapshot is read afresh).
func (s *Server) pending(ctx context.Context, p *principal, base, query string, limit int, token []byte, cache *snapshotCache) (*PendingList, []byte, error) {
	execs, next, err := s.listPage(ctx, query, limit, token)
	if err != nil {
		return nil, nil, err
	}
	snaps := make([]*workflows.Snapshot, len(execs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, snapshotFanOut)
	now := time.Now()
	for i, e := range execs {
		id, fp := e.GetExecution().GetWorkflowId(), fingerprint(e)
		if cache != nil {
			if c, ok := cache.entries[id]; ok && c.fingerprint == fp && now.Sub(c.at) < cache.ttl {
				snaps[i] = c.snap
				continue
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			snap, err := s.snapshot(ctx, p, id)
			if err != nil {
				// Closed or gone since the listing, or not answering: left out of this page.
				s.log.Debug("Pending interrupts: run skipped", "runId", id, "error", err)
				return
			}
			snaps[i] = snap
		}()
	}
	wg.Wait()
	if cache != nil {
		fresh := map[string]cachedSnapshot{}
		for i, e := range execs {
			id := e.GetExecution().GetWorkflowId()
			if c, ok := cache.entries[id]; ok && snaps[i] == c.snap {
				fresh[id] = c
			} else if snaps[i] != nil {
				fresh[id] = cachedSnapshot{fingerprint: fingerprint(e), snap: snaps[i], at: now}
			}
		}
		cache.entries = fresh
	}
	out := &PendingList{Interrupts: []PendingItem{}}
	for i, snap := range snaps {
		if snap == nil {
			continue
		}
		out.Interrupts = append(out.Interrupts, s.pendingItems(p, base, snap, summarize(execs[i]))...)
	}
	return out, next, nil
}

// pendingItems lists the interrupts of snap that p may resolve. An approval with an
// approvers list is the listed approvers' only.
func (s *Server) pendingItems(p *principal, base string, snap *workflows.Snapshot, rs RunSummary) []PendingItem {
	var out []PendingItem
	turns := recentTurns(snap)
	for _, pi := range snap.Interrupts {
		if !mayResolve(p, pi) {
			continue
		}
		s.addToken(base, snap.RunID, p, IntentResolve, &pi)
		out = append(out, PendingItem{
			RunID: snap.RunID, WorkflowID: snap.WorkflowID, RunStatus: snap.Status, StartedAt: rs.StartedAt,
			PackID: rs.PackID, PackState: rs.PackState, WaitingKind: workflows.WaitingKind(pi.Kind),
			PendingInterrupt: pi, RecentTurns: turns,
		})
	}
	return out
}

func mayResolve(p *principal, pi workflows.PendingInterrupt) bool {
	if !p.Scopes[ScopeApprovalsRespond] {
		return false
	}
	var d struct {
		ApproversList []string `json:"approversList"`
	}
	if pi.Kind != "approval" || json.Unmarshal(pi.Data, &d) != nil || len(d.ApproversList) == 0 {
		return true
	}
	return slices.Contains(d.ApproversList, p.KeyID)
}

// recentTurns returns the last turns of the snapshot's conversation channel.
func recentTurns(snap *workflows.Snapshot) []json.RawMessage {
	raw, ok := snap.Channels["conversation"]
	if !ok {
		for _, name := range mapkeys.Sorted(snap.Channels) {
			raw = snap.Channels[name]
			break
		}
	}
	var turns []json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &turns) != nil {
		return nil
	}
	return turns[max(0, len(turns)-recentTurnCount):]
}

func (s *Server) handleListInterrupts(c echo.Context) error {
	p := principalOf(c)
	query, err := pendingQuery(p.Tenant, strings.TrimSpace(c.QueryParam("waiting")))
	if err != nil {
		return err
	}
	limit, err := parseLimit(c.QueryParam("limit"))
	if err != nil {
		return err
	}
	base := s.baseURL(c)
	if !wantsJSON(c.Request().Header.Get(echo.HeaderAccept)) && strings.Contains(c.Request().Header.Get(echo.HeaderAccept), "text/event-stream") {
		return s.streamPending(c, p, base, query, limit)
	}
	var token []byte
	if cur := c.QueryParam("cursor"); cur != "" {
		if token, err = s.readCursor(cur, "interrupts\x00"+query); err != nil {
			return err
		}
	}
	list, next, err := s.pending(c.Request().Context(), p, base, query, limit, token, nil)
	if err != nil {
		return err
	}
	list.NextCursor = s.mintCursor("interrupts\x00"+query, next)
	return c.JSON(http.StatusOK, list)
}

// Inbox stream timing: how often the stream looks for changes, and how long it trusts
// a run's snapshot while visibility shows no change to the run.
const (
	pendingPoll     = time.Second
	pendingSnapshot = 10 * time.Second
)

// withoutTokens is what a frame of the inbox stream says apart from the tokens it
// carries, which are minted afresh on every read: the stream compares these to know
// whether the list changed.
func withoutTokens(list *PendingList, truncated bool) []byte {
	items := make([]PendingItem, len(list.Interrupts))
	for i, it := range list.Interrupts {
		it.InterruptToken, it.CallbackURL = "", ""
		items[i] = it
	}
	b, _ := json.Marshal(struct {
		Interrupts []PendingItem `json:"interrupts"`
		Truncated  bool          `json:"truncated"`
	}{items, truncated})
	return b
}

// streamPending serves the caller's pending interrupts as SSE: an `interrupts` event
// with the first page (PendingList, plus truncated when more exist) on connect and
// whenever it changes, keepalive comments in between. A frame's tokens are fresh, and
// a list that did not change is not sent again until its tokens have lived half of
// Config.TokenTTL, so a quiet inbox costs a keepalive now and then.
func (s *Server) streamPending(c echo.Context, p *principal, base, query string, limit int) error {
	s.wg.Add(1)
	defer s.wg.Done()
	ctx, cancel := context.WithCancel(c.Request().Context())
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()
	s.streamDeadlines(c)

	w := openSSE(c)

	cache := &snapshotCache{ttl: pendingSnapshot, entries: map[string]cachedSnapshot{}}
	var last []byte // withoutTokens of the last frame sent
	var sentAt time.Time
	poll := time.NewTicker(pendingPoll)
	defer poll.Stop()
	keep := time.NewTicker(s.cfg.KeepAlive)
	defer keep.Stop()
	seq := 0
	for {
		list, next, err := s.pending(ctx, p, base, query, limit, nil, cache)
		if err == nil {
			now := s.cfg.Now()
			if same := withoutTokens(list, len(next) > 0); !bytes.Equal(same, last) || now.Sub(sentAt) >= s.cfg.TokenTTL/2 {
				last, sentAt = same, now
				body, _ := json.Marshal(struct {
					*PendingList
					Truncated bool `json:"truncated"`
				}{list, len(next) > 0})
				seq++
				if _, err := fmt.Fprintf(w, "id: %d\nevent: interrupts\ndata: %s\n\n", seq, body); err != nil {
					return nil
				}
				w.Flush()
			}
		} else if ctx.Err() == nil {
			s.log.Warn("Pending interrupts stream: listing failed; trying again", "error", err)
		}
		for waiting := true; waiting; {
			select {
			case <-ctx.Done():
				return nil
			case <-keep.C:
				if _, err := fmt.Fprint(w, ":keepalive\n\n"); err != nil {
					return nil
				}
				w.Flush()
			case <-poll.C:
				waiting = false
			}
		}
	}
}
