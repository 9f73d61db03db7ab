package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	workflowpb "go.temporal.io/api/workflow/v1"

	"github.com/wop-dev/wop/packs"
	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

// GET /v1/interrupts lists the interrupts the caller may resolve: those pending in the
// runs of the caller's tenant (found through visibility: open runs whose waitingKind tag is
// set), read from each run's snapshot, with the signed token of each. With
// Accept: text/event-stream it streams the list instead, a new `interrupts` event
// whenever it changes; the approvals inbox (/inbox) reads that stream.
//
// It holds operator work: approvals, questions, external decisions, custom interrupts,
// and the conversations a person other than the end user is meant to answer (a pack
// state annotated wop.answered_by: operator, packs.AnsweredBy). A chat waiting for its
// end user is not work for the people at the inbox; ?answeredBy=user lists those
// instead and ?answeredBy=any both. Each waiting thing is listed once: while a run's
// node waits on a decision (an external event, a tool call's approval) beside its open
// conversation, the decision is listed, with the conversation's last turns, and the
// conversation is not.

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
	// AnsweredBy is who is meant to answer: "operator" (the people at the inbox) or
	// "user" (a conversation's end user).
	AnsweredBy string `json:"answeredBy"`
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

// Who an item is for (PendingItem.AnsweredBy, the answeredBy filter).
const (
	AnsweredByOperator = packs.AnsweredByOperator
	AnsweredByUser     = packs.AnsweredByUser
	answeredByAny      = "any"
)

// parseAnsweredBy reads ?answeredBy= (default operator).
func parseAnsweredBy(v string) (string, error) {
	switch v {
	case "":
		return AnsweredByOperator, nil
	case AnsweredByOperator, AnsweredByUser, answeredByAny:
		return v, nil
	}
	return "", badRequest("answeredBy %q: use operator (the default: approvals, questions, decisions and conversations staff answer), user (conversations waiting for their end user) or any", v).with("field", "answeredBy")
}

// pendingQuery is the visibility query of the runs of tenant that wait, optionally on
// one waiting kind, for whom answeredBy says. Visibility names the newest interrupt a
// run waits on (WopWaitingKind), which is a run's decision when one waits beside its
// conversation; a run that waits only on its conversation can be operator work only
// when its pack has a state an operator answers (operatorPacks), so the other chats do
// not fill the operators' pages. The snapshots decide the rest (pendingItems).
func pendingQuery(tenant, kind, answeredBy string, operatorPacks []string, legacy bool) (string, error) {
	where := []string{
		"WorkflowType = " + quote(workflows.RunWorkflowName),
		"WopTenant = " + quote(tenant),
	}
	if kind == "" {
		kind = "any"
	}
	clause, err := waitingClause(kind, legacy)
	if err != nil {
		return "", err
	}
	where = append(where, clause)
	switch answeredBy {
	case AnsweredByOperator:
		operator := slices.DeleteFunc(slices.Clone(workflows.WaitingKinds), func(k string) bool { return k == workflows.WaitingConversation })
		or := []string{tagsIn(workflows.TagWaitingKind, operator)}
		if legacy {
			or = append(or, "(WopTags IS NULL AND (WopWaitingKind IS NULL OR WopWaitingKind != "+quote(workflows.WaitingConversation)+"))")
		}
		if len(operatorPacks) > 0 {
			ids := make([]string, len(operatorPacks))
			for i, id := range operatorPacks {
				ids[i] = quote(id)
			}
			or = append(or, "WopPackId IN ("+strings.Join(ids, ", ")+")")
		}
		where = append(where, "("+strings.Join(or, " OR ")+")")
	case AnsweredByUser:
		conv, _ := waitingClause(workflows.WaitingConversation, legacy)
		where = append(where, conv)
	}
	return strings.Join(where, " AND "), nil
}

// operatorPacks are the served packs with a state an operator answers, sorted.
func (s *Server) operatorPacks() []string {
	var out []string
	for _, id := range s.cat.PackIDs() {
		if p, ok := s.cat.Pack(id); ok && p.OperatorAnswered() {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// answeredBy says who is meant to answer interrupt pi of snap: an operator, except for
// a conversation, which its end user answers unless the run's pack (as this API
// serves it) says an operator answers its current state. A conversation of an OpenWOP
// workflow (core.conversationGate) is its caller's.
func (s *Server) answeredBy(snap *workflows.Snapshot, pi workflows.PendingInterrupt) string {
	if workflows.WaitingKind(pi.Kind) != workflows.WaitingConversation {
		return AnsweredByOperator
	}
	if snap.Pack != nil && snap.Pack.NodeID == pi.NodeID {
		if p, ok := s.cat.Pack(snap.Pack.PackID); ok {
			return p.AnsweredBy(snap.Pack.State)
		}
	}
	return AnsweredByUser
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
	sa := e.GetSearchAttributes().GetIndexedFields()
	h.Write([]byte(payloadString(sa[workflows.SAStatus.GetName()]) + "\x00"))
	for _, t := range runTags(sa) {
		h.Write([]byte(t + "\x00"))
	}
	return string(h.Sum(nil))
}

// pending builds one page of the caller's pending interrupts that f keeps.
// A page holds the items of at most limit runs (after the filter, maybe fewer). cache
// may be nil (every snapshot is read afresh).
func (s *Server) pending(ctx context.Context, p *principal, base, query string, f pendingFilter, limit int, token []byte, cache *snapshotCache) (*PendingList, []byte, error) {
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
		out.Interrupts = append(out.Interrupts, s.pendingItems(p, base, snap, summarize(execs[i]), f)...)
	}
	return out, next, nil
}

// waitingThings returns the interrupts of snap that wait on someone, each waiting thing
// once: a conversation whose node also waits on something else (a pack's external
// decision, a tool call's approval) is left out, because that decision is what the run
// waits for and the conversation's last turns come with it.
func waitingThings(snap *workflows.Snapshot) []workflows.PendingInterrupt {
	decided := map[string]bool{}
	for _, pi := range snap.Interrupts {
		if workflows.WaitingKind(pi.Kind) != workflows.WaitingConversation {
			decided[pi.NodeID] = true
		}
	}
	var out []workflows.PendingInterrupt
	for _, pi := range snap.Interrupts {
		if workflows.WaitingKind(pi.Kind) == workflows.WaitingConversation && decided[pi.NodeID] {
			continue
		}
		out = append(out, pi)
	}
	return out
}

// pendingFilter is what a listing asks for: a waiting kind ("" or "any": every kind)
// and whom the items are for (answeredBy values).
type pendingFilter struct {
	kind, answeredBy string
}

func (f pendingFilter) keeps(kind, answeredBy string) bool {
	return (f.kind == "" || f.kind == "any" || f.kind == kind) && (f.answeredBy == answeredByAny || f.answeredBy == answeredBy)
}

// pendingItems lists the waiting things of snap that p may resolve and f keeps. An
// approval with an approvers list is the listed approvers' only.
func (s *Server) pendingItems(p *principal, base string, snap *workflows.Snapshot, rs RunSummary, f pendingFilter) []PendingItem {
	var out []PendingItem
	turns := recentTurns(snap)
	packID, packState := rs.PackID, rs.PackState
	if snap.Pack != nil {
		// The snapshot is the run's own word; visibility may lag a state change.
		packID, packState = snap.Pack.PackID, snap.Pack.State
	}
	for _, pi := range waitingThings(snap) {
		who, kind := s.answeredBy(snap, pi), workflows.WaitingKind(pi.Kind)
		if !f.keeps(kind, who) || !mayResolve(p, pi) {
			continue
		}
		s.addToken(base, snap.RunID, p, IntentResolve, &pi)
		out = append(out, PendingItem{
			RunID: snap.RunID, WorkflowID: snap.WorkflowID, RunStatus: snap.Status, StartedAt: rs.StartedAt,
			PackID: packID, PackState: packState, WaitingKind: kind, AnsweredBy: who,
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
	if pi.Kind != protocol.KindApproval || json.Unmarshal(pi.Data, &d) != nil || len(d.ApproversList) == 0 {
		return true
	}
	return slices.Contains(d.ApproversList, p.KeyID)
}

// recentTurns returns the last turns of the snapshot's conversation channel.
func recentTurns(snap *workflows.Snapshot) []json.RawMessage {
	raw, ok := snap.Channels["conversation"]
	if !ok {
		for _, name := range slices.Sorted(maps.Keys(snap.Channels)) {
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
	answeredBy, err := parseAnsweredBy(strings.TrimSpace(c.QueryParam("answeredBy")))
	if err != nil {
		return err
	}
	f := pendingFilter{kind: strings.TrimSpace(c.QueryParam("waiting")), answeredBy: answeredBy}
	query, err := pendingQuery(p.Tenant, f.kind, f.answeredBy, s.operatorPacks(), !s.cfg.NoLegacyAttributes)
	if err != nil {
		return err
	}
	limit, err := parseLimit(c.QueryParam("limit"))
	if err != nil {
		return err
	}
	base := s.baseURL(c)
	if !wantsJSON(c.Request().Header.Get(echo.HeaderAccept)) && strings.Contains(c.Request().Header.Get(echo.HeaderAccept), "text/event-stream") {
		return s.streamPending(c, p, base, query, f, limit)
	}
	var token []byte
	if cur := c.QueryParam("cursor"); cur != "" {
		if token, err = s.readCursor(cur, "interrupts\x00"+answeredBy+"\x00"+query); err != nil {
			return err
		}
	}
	list, next, err := s.pending(c.Request().Context(), p, base, query, f, limit, token, nil)
	if err != nil {
		return err
	}
	list.NextCursor = s.mintCursor("interrupts\x00"+answeredBy+"\x00"+query, next)
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
func (s *Server) streamPending(c echo.Context, p *principal, base, query string, f pendingFilter, limit int) error {
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
		list, next, err := s.pending(ctx, p, base, query, f, limit, nil, cache)
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
