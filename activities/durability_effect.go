package activities

// DurabilityEffect is the staged work of the conformance kill seam's duplicate-delivery
// mode (RFC 0158 §C, docs/api.md "Conformance seams"): one outbound effect, a POST to
// the suite's receiver, delivered twice, which must reach the receiver once.
//
// The effect's outcome is recorded where Temporal keeps an activity's progress, its
// heartbeat details, before the attempt that performed it goes on; an attempt that
// finds a recorded outcome returns it and does not call out. The first attempt POSTs,
// records the outcome (the SDK sends an attempt's first heartbeat before it returns,
// so the record is in the server when the next line runs), then asks its process to
// die (Config.DurabilityKill) and holds until it does. Temporal notices the missing
// heartbeat after DurabilityHoldHeartbeat and delivers the same work again; that
// attempt, on whichever worker takes it, reads the record and returns its outcome.
//
// What this cannot close, and no ledger beside a destination can: a process that dies
// after the destination answered and before the record reached the server leaves no
// record, and the next attempt calls out again. Every attempt therefore sends the same
// Idempotency-Key (DurabilityEffectKey), which a destination that honours it uses to
// answer the second call from the first.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// ErrTypeSeamEffectRefused fails the seam's effect whose destination refused it (a
// 4xx answer, or a URL the egress guard refuses): another attempt would be refused the
// same way.
const ErrTypeSeamEffectRefused = "ConformanceSeamEffectRefused"

// durabilityEffectTimeout bounds the effect's POST.
const durabilityEffectTimeout = 10 * time.Second

// DurabilityEffectOptions are the activity options of DurabilityEffect: the hold's
// heartbeat timeout and retries, so the redelivery comes as soon as it would for
// DurabilityHold and the recovery class of the hold bounds it.
func DurabilityEffectOptions() workflow.ActivityOptions {
	opts := DurabilityHoldOptions()
	opts.RetryPolicy.NonRetryableErrorTypes = append(opts.RetryPolicy.NonRetryableErrorTypes, ErrTypeSeamEffectRefused)
	return opts
}

// DurabilityEffectInput names the run and node of the effect, its destination and
// its idempotency key (DurabilityEffectKey).
type DurabilityEffectInput struct {
	RunID  string `json:"runId"`
	NodeID string `json:"nodeId"`
	URL    string `json:"url"`
	Key    string `json:"key"`
}

// DurabilityEffectResult is the effect's outcome as the attempt that returns knows it:
// its number and incarnation, the attempt and incarnation that performed the effect
// (the same attempt when no earlier one recorded it), and the destination's status.
type DurabilityEffectResult struct {
	Attempt             int    `json:"attempt"`
	Incarnation         string `json:"incarnation"`
	ReplacedIncarnation string `json:"replacedIncarnation,omitempty"`
	PerformedAttempt    int    `json:"performedAttempt"`
	Status              int    `json:"status"`
}

// DurabilityEffectRecord is the heartbeat that records the effect's outcome.
type DurabilityEffectRecord struct {
	Attempt     int    `json:"attempt"`
	Incarnation string `json:"incarnation"`
	Status      int    `json:"status"`
}

// DurabilityEffectKey is the effect's idempotency key, the same for every attempt:
// base64url(sha256("openwop:activity:v2" \0 tenant \0 runId \0 nodeId \0
// "conformance:durability-effect")), the shape of ToolIdempotencyKey.
func DurabilityEffectKey(tenant, runID, nodeID string) string {
	h := sha256.New()
	for i, part := range []string{"openwop:activity:v2", tenant, runID, nodeID, "conformance:durability-effect"} {
		if i > 0 {
			h.Write([]byte{0})
		}
		h.Write([]byte(part))
	}
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// DurabilityEffect performs the seam's effect at most once per recorded outcome.
func (a *Activities) DurabilityEffect(ctx context.Context, in DurabilityEffectInput) (*DurabilityEffectResult, error) {
	attempt := int(activity.GetInfo(ctx).Attempt)
	if activity.HasHeartbeatDetails(ctx) {
		var rec DurabilityEffectRecord
		if err := activity.GetHeartbeatDetails(ctx, &rec); err == nil && rec.Status != 0 {
			res := &DurabilityEffectResult{Attempt: max(attempt, rec.Attempt+1), Incarnation: a.incarnation,
				ReplacedIncarnation: rec.Incarnation, PerformedAttempt: rec.Attempt, Status: rec.Status}
			a.logger.Warn("Conformance seam: the effect was delivered again; its recorded outcome answers it", "runId", in.RunID,
				"nodeId", in.NodeID, "attempt", res.Attempt, "performedAttempt", rec.Attempt, "replacedIncarnation", rec.Incarnation)
			return res, nil
		}
	}
	if a.durabilityKill == nil {
		return nil, temporal.NewApplicationErrorWithOptions("conformance seams are off: this worker's process may not be killed, so it performs no staged effect",
			ErrTypeSeamsOff, temporal.ApplicationErrorOptions{NonRetryable: true})
	}
	status, err := a.postSeamEffect(ctx, in)
	if err != nil {
		return nil, err
	}
	rec := DurabilityEffectRecord{Attempt: attempt, Incarnation: a.incarnation, Status: status}
	activity.RecordHeartbeat(ctx, rec)
	if attempt > 1 {
		// An earlier attempt died before it performed the effect, or before its record
		// reached the server: this one performed it, and the work is not delivered again.
		return &DurabilityEffectResult{Attempt: attempt, Incarnation: a.incarnation, PerformedAttempt: attempt, Status: status}, nil
	}
	a.logger.Warn("Conformance seam: effect performed and recorded; killing the process so the work is delivered again",
		"runId", in.RunID, "nodeId", in.NodeID, "status", status, "incarnation", a.incarnation)
	return nil, a.killAndHold(ctx, rec)
}

// postSeamEffect POSTs the effect to in.URL through the webhook client (the egress
// guard of webhook destinations) and returns the destination's 2xx status.
func (a *Activities) postSeamEffect(ctx context.Context, in DurabilityEffectInput) (int, error) {
	if err := CheckWebhookURL(in.URL, a.webhookAllowPrivate); err != nil {
		return 0, temporal.NewApplicationErrorWithOptions(err.Error(), ErrTypeSeamEffectRefused, temporal.ApplicationErrorOptions{NonRetryable: true})
	}
	body, _ := json.Marshal(map[string]string{"runId": in.RunID, "nodeId": in.NodeID, "idempotencyKey": in.Key})
	ctx, cancel := context.WithTimeout(ctx, durabilityEffectTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, in.URL, bytes.NewReader(body))
	if err != nil {
		return 0, temporal.NewApplicationErrorWithOptions(err.Error(), ErrTypeSeamEffectRefused, temporal.ApplicationErrorOptions{NonRetryable: true})
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", in.Key)
	resp, err := a.webhookClient().Do(req)
	if err != nil {
		return 0, fmt.Errorf("the seam's effect POST to its destination failed: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return resp.StatusCode, nil
	case resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests:
		return 0, temporal.NewApplicationErrorWithOptions(fmt.Sprintf("the seam's effect destination answered %d", resp.StatusCode),
			ErrTypeSeamEffectRefused, temporal.ApplicationErrorOptions{NonRetryable: true})
	}
	return 0, fmt.Errorf("the seam's effect destination answered %d", resp.StatusCode)
}
