package api

// OpenWOP's webhook surface (spec/v1/webhooks.md): POST /v1/webhooks registers a
// subscription, DELETE /v1/webhooks/{webhookId} removes it, GET /v1/webhooks lists the
// tenant's subscriptions and dead letters. All three need webhooks:manage. The
// subscriptions live in the tenant's webhook dispatcher workflow (package workflows,
// webhooks.go); the API starts it on first use and talks to it with updates and a
// query, so any API process answers the same. A subscription's secret is derived from
// the host's webhook key (Config.WebhookSecret) and returned once, at registration.
//
// The surface exists, and discovery advertises it, only when the host has a webhook
// key: without one nothing could be signed.

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/webhooks"
	"github.com/wop-dev/wop/workflows"
)

// ScopeWebhooksManage allows registering, listing and removing webhooks.
const ScopeWebhooksManage = "webhooks:manage"

// Error codes of the webhook surface.
const (
	CodeWebhookURLRejected        = protocol.CodeWebhookURLRejected
	CodeWebhookEndpointUnverified = protocol.CodeWebhookEndpointUnverified
	CodeSubscriptionNotFound      = protocol.CodeSubscriptionNotFound
	CodeTooManyWebhooks           = protocol.CodeTooManyWebhooks
)

// maxWebhookTags bounds a subscription's tag filter.
const maxWebhookTags = 50

// RegisterWebhookRequest is the closed body of POST /v1/webhooks.
type RegisterWebhookRequest struct {
	URL      string   `json:"url"`
	Events   []string `json:"events"`
	TenantID string   `json:"tenantId,omitempty"`
	Tags     []string `json:"tags,omitempty"`
	// SignatureAlgorithms and Secret are v2 only (decodeRegisterWebhookV2): a Standard
	// Webhooks opt-in's schemes as listed, and the subscriber's secret (an opt-in's,
	// or a v1-signed subscription's own).
	SignatureAlgorithms []string `json:"-"`
	Secret              string   `json:"-"`
}

// RegisterWebhookResponse is the body of a 201 from POST /v1/webhooks.
type RegisterWebhookResponse struct {
	WebhookID          string   `json:"webhookId"`
	Secret             string   `json:"secret"`
	SecretFingerprint  string   `json:"secretFingerprint"`
	SignatureAlgorithm string   `json:"signatureAlgorithm"`
	URL                string   `json:"url"`
	Events             []string `json:"events"`
	Tags               []string `json:"tags,omitempty"`
	TenantID           string   `json:"tenantId"`
}

// webhooksEnabled reports whether this host delivers webhooks.
func (s *Server) webhooksEnabled() bool { return len(s.cfg.WebhookSecret) > 0 }

// webhookRoutes are the routes of the webhook surface (none without a webhook key).
func (s *Server) webhookRoutes() []route {
	if !s.webhooksEnabled() {
		return nil
	}
	scopes := []string{ScopeWebhooksManage}
	return []route{
		{Method: http.MethodPost, Path: "/v1/webhooks", Scopes: scopes, Summary: "Register a webhook: signed deliveries of run events", Handler: s.handleRegisterWebhook, Body: "RegisterWebhookRequest", OK: 201, V2: true},
		{Method: http.MethodGet, Path: "/v1/webhooks", Scopes: scopes, Summary: "List the tenant's webhooks and dead letters", Handler: s.handleListWebhooks, OK: 200},
		{Method: http.MethodDelete, Path: "/v1/webhooks/{webhookId}", Scopes: scopes, Summary: "Remove a webhook", Handler: s.handleDeleteWebhook, OK: 204, V2: true},
		{Method: http.MethodGet, Path: "/v1/webhooks/{webhookId}/dead-letters", Scopes: scopes, Summary: "A webhook's dead-lettered deliveries, newest first", Handler: s.handleDeadLetters, OK: 200, V2: true},
	}
}

// webhookSchemesV2 are the signature schemes a v2 registration may list: v1 always,
// Standard Webhooks 1.0.0 as an opt-in (RFC 0201). /v1/webhooks signs with v1 only.
var webhookSchemesV2 = []string{activities.WebhookSignatureAlgoV1, activities.WebhookSignatureAlgoStandard}

// webhookDiscovery is the discovery document's webhooks family: the v1 document's, and
// at v2 the host's own (extensions["wop.host"]), which lists the schemes of v2
// registrations.
func (s *Server) webhookDiscovery(v2 bool) map[string]any {
	schemes, events := []string{activities.WebhookSignatureAlgoV1}, workflows.WebhookEventTypesV1
	if v2 {
		schemes, events = webhookSchemesV2, workflows.WebhookEventTypes
	}
	return map[string]any{"supported": true, "signatureAlgorithms": schemes, "events": events,
		"deadLetter": webhookDeadLetterFacet()}
}

func webhookDeadLetterFacet() map[string]any {
	return map[string]any{"retentionDays": DeadLetterRetentionDays, "maxPageSize": maxDeadLetterPage}
}

// webhooksRecord is the v2 root's webhooks family record (spec/v2/facets/
// webhooks.schema.json): the schemes a registration may list, the delivery
// dead-letter sink GET /webhooks/{webhookId}/dead-letters reads, and the retry policy
// when attempts are counted (WOP_WEBHOOK_MAX_ATTEMPTS; the default policy is bounded
// by time, WOP_WEBHOOK_RETRY_FOR, which the facet cannot carry). No secretRotation
// (rotate-secret is not served).
func (s *Server) webhooksRecord(record func(string, map[string]any) map[string]any) map[string]any {
	facets := map[string]any{"signatureAlgorithms": webhookSchemesV2, "deadLetter": webhookDeadLetterFacet()}
	if n := s.cfg.WebhookDelivery.MaxAttempts; n > 0 {
		// Each retry waits twice as long as the one before (webhooks.WebhookDelivery).
		facets["retryPolicy"] = map[string]any{"maxAttempts": n, "backoff": "exponential"}
	}
	return record("witnessable-gated", facets)
}

// RelaxationPrivateDestinations is the obligation this host relaxes when private
// webhook destinations are allowed (security-defaults.md §Relaxations).
const RelaxationPrivateDestinations = "webhooks.ssrf.private-destinations"

// relaxationsDoc is what this host declares relaxed (RFC 0173 §A.2: obligation,
// durability, reason), in discovery's extensions["wop.host"].relaxations, so a
// certification run can carry it as host.relaxations[]: an open egress guard
// (WOP_WEBHOOK_ALLOW_PRIVATE), and nothing otherwise.
func (s *Server) relaxationsDoc() []map[string]any {
	if !s.cfg.WebhookAllowPrivate || !s.webhooksEnabled() {
		return nil
	}
	return []map[string]any{{"obligation": RelaxationPrivateDestinations, "durability": "deployment",
		"reason": "WOP_WEBHOOK_ALLOW_PRIVATE=true: webhook and callback destinations may be loopback, localhost and private (RFC 1918, IPv6 ULA) addresses, over plain http:// too; link-local and cloud-metadata destinations stay refused, and so does plain http:// to any other"}}
}

// checkWebhookURL maps a refused destination to webhook_url_rejected and a URL that is
// not one to validation_error.
func (s *Server) checkWebhookURL(field, raw string) error {
	if err := activities.CheckWebhookURL(raw, s.cfg.WebhookAllowPrivate); err != nil {
		var ue *activities.WebhookURLError
		if errors.As(err, &ue) {
			return codeErr(CodeWebhookURLRejected, "%s: %s", field, ue.Reason).with("field", field)
		}
		return badRequest("%s: %v", field, err).with("field", field)
	}
	return nil
}

func (s *Server) handleRegisterWebhook(c echo.Context) error {
	p := principalOf(c)
	body, err := s.readBody(c)
	if err != nil {
		return err
	}
	if body == nil {
		return badRequest("request body is required: {\"url\": \"https://...\", \"events\": [\"run.completed\"]}")
	}
	var req RegisterWebhookRequest
	if isV2(c) {
		r, err := decodeRegisterWebhookV2(body)
		if err != nil {
			return err
		}
		req = *r
	} else if err := decodeStrict(body, &req); err != nil {
		return err
	}
	if req.URL == "" {
		return badRequest("url is required").with("field", "url")
	}
	if err := s.checkWebhookURL("url", req.URL); err != nil {
		return err
	}
	types := workflows.WebhookEventTypesV1 // node events: v2 subscriptions only
	if isV2(c) {
		types = workflows.WebhookEventTypes
	}
	if len(req.Events) == 0 {
		return badRequest("events is required: one or more of %s", strings.Join(types, ", ")).with("field", "events")
	}
	seen := map[string]bool{}
	for i, e := range req.Events {
		if !slices.Contains(types, e) {
			return badRequest("events[%d]: %q is not delivered by this host; it delivers %s", i, e, strings.Join(types, ", ")).with("field", fmt.Sprintf("events[%d]", i))
		}
		if seen[e] {
			return badRequest("events[%d]: %q is listed twice", i, e).with("field", fmt.Sprintf("events[%d]", i))
		}
		seen[e] = true
	}
	if len(req.Tags) > maxWebhookTags {
		return badRequest("tags may list at most %d tags", maxWebhookTags).with("field", "tags")
	}
	for i, t := range req.Tags {
		if t == "" || len(t) > 256 {
			return badRequest("tags[%d] must be a non-empty string of at most 256 characters", i).with("field", fmt.Sprintf("tags[%d]", i))
		}
	}
	if err := webhooks.CheckSubscriptionSize(req.URL, req.Tags); err != nil {
		return badRequest("%v", err).with("field", "url").with("maxBytes", webhooks.MaxSubscriptionBytes)
	}
	if req.TenantID != "" && req.TenantID != p.Tenant {
		return codeErr(CodeForbidden, "tenantId %q is not the API key's tenant", req.TenantID).with("field", "tenantId")
	}
	ctx := c.Request().Context()
	idemKey := c.Request().Header.Get(HeaderIdempotencyKey)
	if idemKey != "" && isV2(c) {
		if err := checkIdempotencyKeyV2(idemKey); err != nil {
			return err
		}
	}
	if len(idemKey) > maxIdempotencyKeyLength {
		return badRequest("Idempotency-Key is longer than %d characters", maxIdempotencyKeyLength)
	}
	id := newWebhookID(p.Tenant, idemKey)
	if isV2(c) && idemKey != "" {
		// Another endpoint than /v1/webhooks: the same key registers another webhook.
		id = newWebhookID(p.Tenant, "v2\x00"+idemKey)
	}
	digest := webhookDigest(req, s.cfg.WebhookSecret)
	major := 0 // a v1 registration stores no major, as before
	if isV2(c) {
		major = protocol.Major2
	}
	secret := activities.WebhookSecret(s.cfg.WebhookSecret, p.Tenant, id)
	reg := webhooks.WebhookRegistration{
		Subscription: webhooks.WebhookSubscription{ID: id, URL: req.URL, Events: req.Events, Tags: req.Tags,
			SecretFingerprint: activities.SecretFingerprint(secret), CreatedBy: p.KeyID, Digest: digest, Major: major},
		Config: &s.cfg.WebhookDelivery,
	}
	if req.Secret != "" {
		// A supplied secret is kept sealed; with the Standard Webhooks opt-in the
		// endpoint answers its verification before anything is stored.
		if len(req.SignatureAlgorithms) > 0 {
			if err := s.verifyWebhookEndpoint(ctx, p.Tenant, id, req); err != nil {
				return err
			}
		}
		sealed, err := activities.SealWebhookSecret(s.cfg.WebhookSecret, p.Tenant, id, req.Secret)
		if err != nil {
			return fmt.Errorf("seal the secret of webhook %s: %w", id, err)
		}
		reg.Subscription.SealedSecret, reg.Subscription.SignatureAlgorithms = sealed, req.SignatureAlgorithms
		reg.Subscription.SecretFingerprint = activities.SecretFingerprint(req.Secret)
	}
	if err := s.ensureDispatcher(ctx, p.Tenant); err != nil {
		return err
	}
	var got webhooks.WebhookRegistered
	if err := s.updateDispatcher(ctx, p.Tenant, webhooks.WebhookRegisterUpdate, reg, &got); err != nil {
		return err
	}
	status := http.StatusCreated
	if got.Replayed {
		c.Response().Header().Set(HeaderIdempotentReplay, "true")
	}
	s.log.Info("Webhook registered", "tenant", p.Tenant, "webhookId", id, "secretFingerprint", reg.Subscription.SecretFingerprint, "events", len(req.Events))
	if isV2(c) {
		// v2 (webhooks.md, RFC 0221): the bound id, the schemes applied and the
		// generated secret, returned here only; a supplied secret is never echoed.
		out := map[string]any{"webhookId": s.wireOf(c, p.Tenant).id(id), "signatureAlgorithms": []string{activities.WebhookSignatureAlgoV1}}
		if len(got.Subscription.SignatureAlgorithms) > 0 {
			out["signatureAlgorithms"] = got.Subscription.SignatureAlgorithms
		}
		if got.Subscription.SealedSecret == "" {
			out["secret"] = secret
		}
		return c.JSON(status, out)
	}
	return c.JSON(status, RegisterWebhookResponse{
		WebhookID: id, Secret: secret, SecretFingerprint: reg.Subscription.SecretFingerprint, SignatureAlgorithm: activities.WebhookSignatureAlgoV1,
		URL: got.Subscription.URL, Events: got.Subscription.Events, Tags: got.Subscription.Tags, TenantID: p.Tenant,
	})
}

func (s *Server) handleDeleteWebhook(c echo.Context) error {
	p := principalOf(c)
	id, err := s.boundParam(c, "webhookId")
	if err != nil {
		return err
	}
	if t := c.QueryParam("tenantId"); t != "" && t != p.Tenant {
		return codeErr(CodeSubscriptionNotFound, "no webhook %q in tenant %q for this key", id, t)
	}
	if err := s.updateDispatcher(c.Request().Context(), p.Tenant, webhooks.WebhookUnregisterUpdate, id, nil); err != nil {
		return err
	}
	s.log.Info("Webhook removed", "tenant", p.Tenant, "webhookId", id)
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) handleListWebhooks(c echo.Context) error {
	p := principalOf(c)
	v, err := s.tc.QueryWorkflow(c.Request().Context(), protocol.WebhookDispatcherID(p.Tenant), "", webhooks.WebhookListQuery)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return c.JSON(http.StatusOK, map[string]any{"webhooks": []any{}, "deadLetters": []any{}})
	}
	if err != nil {
		return fmt.Errorf("list the webhooks of tenant %s: %w", p.Tenant, err)
	}
	var list webhooks.WebhookList
	if err := v.Get(&list); err != nil {
		return fmt.Errorf("decode the webhooks of tenant %s: %w", p.Tenant, err)
	}
	for i := range list.Subscriptions {
		list.Subscriptions[i].Digest, list.Subscriptions[i].SealedSecret = "", ""
	}
	return c.JSON(http.StatusOK, map[string]any{"webhooks": list.Subscriptions, "deadLetters": list.DeadLetters})
}

// RegisterWebhookRequestV2 is the closed body of POST /webhooks (webhooks.md): no
// tenantId (the credential's tenant is the subscription's), an optional secret and
// signature schemes.
type RegisterWebhookRequestV2 struct {
	URL                 string   `json:"url"`
	Events              []string `json:"events"`
	Secret              *string  `json:"secret,omitempty"`
	Tags                []string `json:"tags,omitempty"`
	SignatureAlgorithms []string `json:"signatureAlgorithms,omitempty"`
}

// decodeRegisterWebhookV2 decodes a v2 registration into v1's request. Without an
// opt-in the host derives the subscription's secret unless the subscriber supplies
// one (RFC 0221: checkSuppliedSecretV1); the Standard Webhooks opt-in,
// signatureAlgorithms ["v1", "standard-webhooks-1"], requires the subscriber's whsec_
// secret (RFC 0201 §B).
func decodeRegisterWebhookV2(body []byte) (*RegisterWebhookRequest, error) {
	var req RegisterWebhookRequestV2
	if err := decodeStrict(body, &req); err != nil {
		return nil, err
	}
	algs, err := webhookSchemes(req.SignatureAlgorithms, req.SignatureAlgorithms != nil)
	if err != nil {
		return nil, err
	}
	optIn := slices.Contains(algs, activities.WebhookSignatureAlgoStandard)
	var secret string
	switch {
	case optIn && req.Secret == nil:
		return nil, badRequest("secret is required with %q: a whsec_ secret of 24 to 64 bytes", activities.WebhookSignatureAlgoStandard).with("field", "secret")
	case optIn:
		if _, err := activities.DecodeWhsec(*req.Secret); err != nil {
			return nil, badRequest("secret: %v", err).with("field", "secret")
		}
		secret = *req.Secret
	case req.Secret != nil:
		// A v1-signed subscription with the subscriber's own secret (RFC 0221): kept
		// sealed like an opt-in's, never echoed, no endpoint verification.
		if err := checkSuppliedSecretV1(*req.Secret); err != nil {
			return nil, err
		}
		secret, algs = *req.Secret, nil
	default:
		algs = nil // v1 alone: stored as before
	}
	events := make([]string, len(req.Events))
	for i, e := range req.Events {
		// The events delivered keep their names at v2; a type v2 renamed is read back
		// to the v1 name the subscription matches on.
		if v1, ok := protocol.EventTypeV1(e); ok {
			e = v1
		}
		events[i] = e
	}
	return &RegisterWebhookRequest{URL: req.URL, Events: events, Tags: req.Tags, SignatureAlgorithms: algs, Secret: secret}, nil
}

// Bounds of a secret a v1-signed subscription supplies: at least as strong as a
// Standard Webhooks key, and no longer than the longest whsec_ secret, so its sealed
// form fits what a dispatcher keeps of a subscription.
const (
	minSuppliedSecret = 24
	maxSuppliedSecret = 94
)

// checkSuppliedSecretV1 checks the secret of a v1-signed subscription: 24 to 94
// printable ASCII characters, no spaces. The refusal never repeats the secret.
func checkSuppliedSecretV1(secret string) error {
	if len(secret) < minSuppliedSecret || len(secret) > maxSuppliedSecret {
		return badRequest("secret must be %d to %d characters (got %d)", minSuppliedSecret, maxSuppliedSecret, len(secret)).with("field", "secret")
	}
	for _, r := range secret {
		if r <= ' ' || r > '~' {
			return badRequest("secret must be printable ASCII without spaces").with("field", "secret")
		}
	}
	return nil
}

// webhookSchemes checks a registration's signatureAlgorithms (given: the field was
// sent): each a scheme of webhookSchemesV2, none twice, v1 among them.
func webhookSchemes(algs []string, given bool) ([]string, error) {
	if given && len(algs) == 0 {
		return nil, badRequest("signatureAlgorithms must list %q", activities.WebhookSignatureAlgoV1).with("field", "signatureAlgorithms")
	}
	for i, a := range algs {
		field := fmt.Sprintf("signatureAlgorithms[%d]", i)
		if !slices.Contains(webhookSchemesV2, a) {
			return nil, badRequest("%s: %q is not a scheme this host signs with; it signs with %s", field, a, strings.Join(webhookSchemesV2, ", ")).with("field", field)
		}
		if slices.Index(algs, a) < i {
			return nil, badRequest("%s: %q is listed twice", field, a).with("field", field)
		}
	}
	if given && !slices.Contains(algs, activities.WebhookSignatureAlgoV1) {
		return nil, badRequest("signatureAlgorithms must list %q (RFC 0201: every subscription is v1-signed)", activities.WebhookSignatureAlgoV1).with("field", "signatureAlgorithms")
	}
	return algs, nil
}

// verifyWebhookEndpoint runs a Standard Webhooks opt-in's endpoint verification: a
// refused destination is webhook_url_rejected, an endpoint that does not echo its
// challenge webhook_endpoint_unverified.
func (s *Server) verifyWebhookEndpoint(ctx context.Context, tenant, id string, req RegisterWebhookRequest) error {
	err := activities.VerifyWebhookEndpoint(ctx, req.URL, s.cfg.WebhookAllowPrivate, protocol.BindID(tenant, id), req.Secret)
	var ue *activities.WebhookURLError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ue):
		return codeErr(CodeWebhookURLRejected, "url: %s", ue.Reason).with("field", "url")
	case errors.Is(err, activities.ErrWebhookEndpointUnverified):
		return codeErr(CodeWebhookEndpointUnverified, "url: %v; a %q subscription is registered only once its endpoint answers the verification POST {\"type\": %q, \"challenge\": ...} with 200 {\"challenge\": ...}",
			err, activities.WebhookSignatureAlgoStandard, activities.WebhookVerificationType).with("field", "url")
	}
	return fmt.Errorf("verify the endpoint of webhook %s: %w", id, err)
}

// newWebhookID is a new webhook id, or, with an Idempotency-Key, the id the key
// derives, so the same registration repeated registers once.
func newWebhookID(tenant, idemKey string) string {
	if idemKey != "" {
		sum := sha256.Sum256([]byte("openwop:idempotency\x00" + tenant + "\x00POST /v1/webhooks\x00" + idemKey))
		return "wh_" + hex.EncodeToString(sum[:10])
	}
	var b [10]byte
	_, _ = rand.Read(b[:])
	return "wh_" + hex.EncodeToString(b[:])
}

// webhookDigest is the digest of a registration, compared under one Idempotency-Key.
// A supplied secret adds its schemes and the secret's keyed digest under the host's
// webhook key (activities.SecretDigest) to what is digested: the digest is all the
// dispatcher keeps of the request, and it lives in Temporal's history, where a plain
// hash of a subscriber's chosen secret could be checked against guesses offline.
func webhookDigest(req RegisterWebhookRequest, webhookKey []byte) string {
	b, _ := json.Marshal(req)
	if req.Secret != "" {
		b = append(b, "\x00"+strings.Join(req.SignatureAlgorithms, ",")+"\x00"+activities.SecretDigest(webhookKey, req.Secret)...)
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// ensureDispatcher starts the tenant's webhook dispatcher unless it runs.
func (s *Server) ensureDispatcher(ctx context.Context, tenant string) error {
	opts := client.StartWorkflowOptions{
		ID:                       protocol.WebhookDispatcherID(tenant),
		TaskQueue:                s.cfg.TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		StaticSummary:            "Webhooks of tenant " + tenant,
		TypedSearchAttributes:    temporal.NewSearchAttributes(workflows.SATenant.ValueSet(tenant)),
	}
	in := webhooks.WebhookDispatcherInput{Tenant: tenant, Config: s.cfg.WebhookDelivery}
	if _, err := s.tc.ExecuteWorkflow(ctx, opts, webhooks.WebhookDispatcherWorkflowName, in); err != nil {
		return fmt.Errorf("start the webhook dispatcher of tenant %s: %w", tenant, err)
	}
	return nil
}

// updateDispatcher sends an update to the tenant's dispatcher and maps its refusals.
func (s *Server) updateDispatcher(ctx context.Context, tenant, name string, arg, result any) error {
	h, err := s.tc.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: protocol.WebhookDispatcherID(tenant), UpdateName: name, Args: []any{arg},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		err = h.Get(ctx, result)
	}
	if err == nil {
		return nil
	}
	var nf *serviceerror.NotFound
	var appErr *temporal.ApplicationError
	switch {
	case errors.As(err, &nf):
		if name == webhooks.WebhookUnregisterUpdate {
			return codeErr(CodeSubscriptionNotFound, "no webhook %q in tenant %s", arg, tenant)
		}
	case errors.As(err, &appErr):
		switch appErr.Type() {
		case webhooks.ErrTypeSubscriptionNotFound:
			return codeErr(CodeSubscriptionNotFound, "%s", appErr.Message())
		case webhooks.ErrTypeIdempotencyMismatch:
			return codeErr(CodeIdempotencyMismatch, "Idempotency-Key was already used with a different request body")
		case webhooks.ErrTypeTooManyWebhooks:
			return codeErr(CodeTooManyWebhooks, "%s", appErr.Message())
		case CodeValidation:
			return badRequest("%s", appErr.Message())
		}
	}
	return fmt.Errorf("webhooks of tenant %s (%s): %w", tenant, name, err)
}

// callbackRun checks a run's callbackUrl and makes sure its tenant's dispatcher runs:
// the run's events go to that URL, signed with the run's callback secret.
func (s *Server) callbackRun(ctx context.Context, tenant, callbackURL string) error {
	if !s.webhooksEnabled() {
		return badRequest("callbackUrl needs webhook delivery, which this host has not configured (WOP_WEBHOOK_SECRET)").with("field", "callbackUrl")
	}
	if err := s.checkWebhookURL("callbackUrl", callbackURL); err != nil {
		return err
	}
	return s.ensureDispatcher(ctx, tenant)
}

// Dead letters (RFC 0188): GET /webhooks/{webhookId}/dead-letters reads the delivery
// dead-letter sink of one subscription, newest first, cursor-paged, content-free.
const (
	// DeadLetterRetentionDays is how long a dead letter stays readable
	// (webhooks.DeadLetterRetention).
	DeadLetterRetentionDays = int(webhooks.DeadLetterRetention / (24 * time.Hour))
	// maxDeadLetterPage is the page size limit clamps to (webhooks.deadLetter.maxPageSize).
	maxDeadLetterPage     = 100
	defaultDeadLetterPage = 20
)

// DeadLetteredDelivery is one record of a dead-letter page.
type DeadLetteredDelivery struct {
	DeliveryID     string `json:"deliveryId"`
	WebhookID      string `json:"webhookId"`
	RunID          string `json:"runId"`
	EventID        string `json:"eventId"`
	EventType      string `json:"eventType"`
	Attempts       int32  `json:"attempts"`
	DeadLetteredAt string `json:"deadLetteredAt"`
	ExpiresAt      string `json:"expiresAt"`
	Reason         string `json:"reason"`
	LastStatus     int    `json:"lastStatus,omitempty"`
}

// deadLetterCursor is the opaque continuation of a dead-letter page: the offset into
// the subscription's letters, newest first, bound to the tenant and the subscription.
type deadLetterCursor struct {
	Tenant    string `json:"t"`
	WebhookID string `json:"w"`
	Offset    int    `json:"o"`
}

var lastStatusRe = regexp.MustCompile(`answered HTTP (\d{3})`)

func (s *Server) handleDeadLetters(c echo.Context) error {
	p := principalOf(c)
	id, err := s.boundParam(c, "webhookId")
	if err != nil {
		return err
	}
	limit := defaultDeadLetterPage
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return badRequest("limit must be a positive integer").with("field", "limit")
		}
		limit = min(n, maxDeadLetterPage)
	}
	offset := 0
	if v := c.QueryParam("cursor"); v != "" {
		var cur deadLetterCursor
		raw, err := base64.RawURLEncoding.DecodeString(v)
		if err != nil || json.Unmarshal(raw, &cur) != nil || cur.Tenant != p.Tenant || cur.WebhookID != id || cur.Offset < 0 {
			return badRequest("cursor is not a cursor of this subscription's dead letters").with("field", "cursor")
		}
		offset = cur.Offset
	}
	ctx := c.Request().Context()
	v, err := s.tc.QueryWorkflow(ctx, protocol.WebhookDispatcherID(p.Tenant), "", webhooks.WebhookListQuery)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return codeErr(CodeSubscriptionNotFound, "no webhook %q in tenant %s", id, p.Tenant)
	}
	if err != nil {
		return fmt.Errorf("read the dead letters of tenant %s: %w", p.Tenant, err)
	}
	var list webhooks.WebhookList
	if err := v.Get(&list); err != nil {
		return fmt.Errorf("decode the webhooks of tenant %s: %w", p.Tenant, err)
	}
	if !slices.ContainsFunc(list.Subscriptions, func(sub webhooks.WebhookSubscription) bool { return sub.ID == id }) {
		return codeErr(CodeSubscriptionNotFound, "no webhook %q in tenant %s", id, p.Tenant)
	}
	var mine []webhooks.DeadLetter
	for i := len(list.DeadLetters) - 1; i >= 0; i-- { // newest first
		if list.DeadLetters[i].WebhookID == id {
			mine = append(mine, list.DeadLetters[i])
		}
	}
	// The dispatcher keeps them as their signals arrived; two deliveries that gave up
	// together may arrive in the other order than their deadLetteredAt.
	slices.SortStableFunc(mine, func(a, b webhooks.DeadLetter) int { return strings.Compare(b.At, a.At) })
	w := s.wireOf(c, p.Tenant)
	page := []DeadLetteredDelivery{}
	for _, dl := range mine[min(offset, len(mine)):min(offset+limit, len(mine))] {
		page = append(page, s.deadLetteredDelivery(ctx, w, dl))
	}
	out := map[string]any{"deliveries": page}
	if offset+limit < len(mine) {
		raw, _ := json.Marshal(deadLetterCursor{Tenant: p.Tenant, WebhookID: id, Offset: offset + limit})
		out["nextCursor"] = base64.RawURLEncoding.EncodeToString(raw)
	}
	return c.JSON(http.StatusOK, out)
}

// deadLetteredDelivery renders one dead letter: the attempts its delivery workflow
// made (its history's last ActivityTaskStarted), the status its last answer had.
func (s *Server) deadLetteredDelivery(ctx context.Context, w wire, dl webhooks.DeadLetter) DeadLetteredDelivery {
	sum := sha256.Sum256([]byte(dl.DeliveryWorkflowID))
	typ := dl.EventType
	if w.v2() {
		if v2, ok := protocol.EventTypeV2(typ); ok {
			typ = v2
		}
	}
	out := DeadLetteredDelivery{
		DeliveryID: w.id("dlv_" + hex.EncodeToString(sum[:13])), WebhookID: w.id(dl.WebhookID), RunID: w.id(dl.RunID),
		EventID: dl.EventID, EventType: typ, Attempts: 1, DeadLetteredAt: dl.At, Reason: "retries_exhausted",
	}
	if at, err := time.Parse(time.RFC3339Nano, dl.At); err == nil {
		out.ExpiresAt = workflows.FormatTime(at.Add(webhooks.DeadLetterRetention))
	}
	if strings.HasPrefix(dl.Error, activities.WebhookUnprojectable) {
		out.Reason = "payload_unprojectable"
	}
	if m := lastStatusRe.FindStringSubmatch(dl.Error); m != nil {
		out.LastStatus, _ = strconv.Atoi(m[1])
	}
	it := s.tc.GetWorkflowHistory(ctx, dl.DeliveryWorkflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			break // the record stands with what the dead letter says
		}
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil {
			out.Attempts = max(out.Attempts, a.GetAttempt())
		}
	}
	return out
}
