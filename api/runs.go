package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/internal/telemetry"
	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/webhooks"
	"github.com/wop-dev/wop/workflows"
)

// Header names of the protocol.
const (
	HeaderIdempotencyKey    = "Idempotency-Key"
	HeaderIdempotentReplay  = "openwop-Idempotent-Replay"
	maxIdempotencyKeyLength = 255
)

// CreateRunRequest is the closed body of POST /v1/runs.
type CreateRunRequest struct {
	WorkflowID   string          `json:"workflowId"`
	Inputs       json.RawMessage `json:"inputs,omitempty"`
	TenantID     string          `json:"tenantId,omitempty"`
	ScopeID      string          `json:"scopeId,omitempty"`
	CallbackURL  string          `json:"callbackUrl,omitempty"`
	Configurable json.RawMessage `json:"configurable,omitempty"`
	Tags         []string        `json:"tags,omitempty"`
	Metadata     json.RawMessage `json:"metadata,omitempty"`
}

// CreateRunResponse is the body of a 201 from POST /v1/runs.
type CreateRunResponse struct {
	RunID     string `json:"runId"`
	Status    string `json:"status"`
	EventsURL string `json:"eventsUrl"`
	StatusURL string `json:"statusUrl"`
	// CallbackSecret signs the deliveries to the run's callbackUrl (webhooks.md's
	// scheme), returned only when the request named one.
	CallbackSecret            string `json:"callbackSecret,omitempty"`
	CallbackSecretFingerprint string `json:"callbackSecretFingerprint,omitempty"`
}

// withCallback adds the callback secret of run runID when the request named a
// callbackUrl.
func (s *Server) withCallback(r CreateRunResponse, tenant, runID string, req *CreateRunRequest) CreateRunResponse {
	if req.CallbackURL != "" && s.webhooksEnabled() {
		r.CallbackSecret = activities.CallbackSecret(s.cfg.WebhookSecret, tenant, runID)
		r.CallbackSecretFingerprint = activities.SecretFingerprint(r.CallbackSecret)
	}
	return r
}

// decodeCreateRun decodes and validates a POST /v1/runs body without consulting the
// catalog, under the default guards. It is the fuzzed entry point of request decoding.
func decodeCreateRun(body []byte) (*CreateRunRequest, error) {
	return decodeCreateRunWith(body, GuardConfig{}.withDefaults())
}

// decodeCreateBody decodes a create body of either major strictly into req and checks
// the workflowId it names (*workflowID, a field of req).
func decodeCreateBody(body []byte, req any, workflowID *string) error {
	if body == nil {
		return badRequest("request body is required: {\"workflowId\": \"...\"}")
	}
	if err := decodeStrict(body, req); err != nil {
		return err
	}
	if *workflowID == "" {
		return badRequest("workflowId is required").with("field", "workflowId")
	}
	return validateID("workflowId", *workflowID)
}

// decodeCreateRunWith is decodeCreateRun under the guards g (limits on tags and
// metadata).
func decodeCreateRunWith(body []byte, g GuardConfig) (*CreateRunRequest, error) {
	var req CreateRunRequest
	if err := decodeCreateBody(body, &req, &req.WorkflowID); err != nil {
		return nil, err
	}
	for _, f := range []struct {
		name string
		raw  json.RawMessage
	}{{"inputs", req.Inputs}, {"configurable", req.Configurable}, {"metadata", req.Metadata}} {
		if len(f.raw) > 0 && !bytes.Equal(bytes.TrimSpace(f.raw), []byte("null")) && !isJSONObject(f.raw) {
			return nil, badRequest("%s must be a JSON object", f.name).with("field", f.name)
		}
	}
	if len(req.Tags) > g.MaxTags {
		return nil, badRequest("%d tags are more than the %d a run may carry", len(req.Tags), g.MaxTags).with("field", "tags").with("limit", g.MaxTags)
	}
	for i, t := range req.Tags {
		if t == "" || len(t) > g.MaxTagBytes {
			return nil, badRequest("tags[%d] must be a non-empty string of at most %d bytes", i, g.MaxTagBytes).with("field", fmt.Sprintf("tags[%d]", i))
		}
	}
	if n := len(compactJSON(req.Metadata)); n > g.MaxMetadataBytes {
		return nil, badRequest("metadata is %d bytes; a run's metadata may hold at most %d", n, g.MaxMetadataBytes).with("field", "metadata").with("limit", g.MaxMetadataBytes)
	}
	if req.CallbackURL != "" && !strings.HasPrefix(req.CallbackURL, "https://") && !strings.HasPrefix(req.CallbackURL, "http://") {
		return nil, badRequest("callbackUrl must be an http(s) URL").with("field", "callbackUrl")
	}
	if len(req.CallbackURL) > 2048 {
		return nil, badRequest("callbackUrl is longer than 2048 characters").with("field", "callbackUrl")
	}
	return &req, nil
}

// validateInputs checks inputs against the definition's declared variables: required
// variables present, declared types respected.
func validateInputs(def *workflows.Definition, raw json.RawMessage) error {
	inputs := map[string]json.RawMessage{}
	if len(raw) > 0 && !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		if err := json.Unmarshal(raw, &inputs); err != nil {
			return badRequest("inputs must be a JSON object").with("field", "inputs")
		}
	}
	for _, v := range def.Variables {
		val, ok := inputs[v.Name]
		if !ok || bytes.Equal(bytes.TrimSpace(val), []byte("null")) {
			if v.Required && len(v.DefaultValue) == 0 {
				return badRequest("inputs.%s is required by workflow %q", v.Name, def.ID).with("field", "inputs."+v.Name)
			}
			continue
		}
		if got := jsonType(val); v.Type != "" && !typeMatches(v.Type, got) {
			return badRequest("inputs.%s must be of type %s, got %s", v.Name, v.Type, got).with("field", "inputs."+v.Name)
		}
	}
	return nil
}

func jsonType(raw json.RawMessage) string {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return "null"
	}
	switch t[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

func typeMatches(want, got string) bool {
	switch want {
	case "string", "object", "array", "boolean", "number":
		return want == got
	case "integer":
		return got == "number"
	}
	return true // unknown declared types are not enforced
}

// requestDigest is the digest of a create request kept in the run for Idempotency-Key
// comparisons: SHA-256 of the re-encoded request (field order fixed by the struct,
// objects compacted) and the endpoint it was sent to (createEndpoint).
func requestDigestAt(endpoint, tenant string, req *CreateRunRequest) string {
	canon := *req
	canon.Inputs = compactJSON(req.Inputs)
	canon.Configurable = compactJSON(req.Configurable)
	canon.Metadata = compactJSON(req.Metadata)
	b, _ := json.Marshal(canon)
	h := sha256.New()
	h.Write([]byte("openwop:" + endpoint + "\x00" + tenant + "\x00"))
	h.Write(b)
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// requestDigest is requestDigestAt of the v1 create endpoint.
func requestDigest(tenant string, req *CreateRunRequest) string {
	return requestDigestAt(createEndpoint(protocol.Major1), tenant, req)
}

// createEndpoint names the create endpoint of a major in idempotency records: /v1/runs
// and /runs are two endpoints (idempotency.md: the record is keyed by tenant, endpoint
// and key), so one key used on both creates two runs.
func createEndpoint(major int) string {
	if major == protocol.Major2 {
		return "POST /runs"
	}
	return "POST /v1/runs"
}

// compactJSON re-encodes raw with sorted object keys, so key order does not change a digest.
func compactJSON(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return raw
	}
	b, err := json.Marshal(v) // encoding/json sorts map keys
	if err != nil {
		return raw
	}
	return b
}

// baseURL is the base of the URLs the API hands out: Config.PublicURL, else the
// request's own origin when Guards.AllowedHosts lists its Host. It is "" for any other
// Host, which a client can set to anything: callback URLs then are omitted (they carry
// live tokens) and links are relative.
func (s *Server) baseURL(c echo.Context) string {
	if s.cfg.PublicURL != "" {
		return s.cfg.PublicURL
	}
	host := strings.ToLower(c.Request().Host)
	for _, h := range s.cfg.Guards.AllowedHosts {
		if h == host {
			scheme := "http"
			// A forwarded proto may only upgrade the scheme, never downgrade it.
			if c.Request().TLS != nil || strings.EqualFold(c.Request().Header.Get("X-Forwarded-Proto"), "https") {
				scheme = "https"
			}
			return scheme + "://" + host
		}
	}
	return ""
}

func (s *Server) handleGetWorkflow(c echo.Context) error {
	id := c.Param("workflowId")
	if err := validateID("workflowId", id); err != nil {
		return err
	}
	def, ok := s.cat.Definition(id)
	if !ok {
		return notFound("workflow %q not found", id)
	}
	return c.JSONBlob(http.StatusOK, definitionJSON(def))
}

// definitionJSON renders a definition with the members the closed schema requires on
// every node (position, config, inputs), which Go's omitempty would otherwise drop.
func definitionJSON(def *workflows.Definition) []byte {
	b, err := json.Marshal(def)
	if err != nil {
		return b
	}
	var doc map[string]any
	if json.Unmarshal(b, &doc) != nil {
		return b
	}
	nodes, _ := doc["nodes"].([]any)
	for _, n := range nodes {
		m, ok := n.(map[string]any)
		if !ok {
			continue
		}
		defaults := map[string]any{"position": map[string]any{"x": 0, "y": 0}, "config": map[string]any{}, "inputs": map[string]any{}}
		for k, v := range defaults {
			if _, ok := m[k]; !ok {
				m[k] = v
			}
		}
	}
	for _, k := range []string{"edges", "triggers", "variables"} {
		if doc[k] == nil {
			doc[k] = []any{}
		}
	}
	for _, k := range []string{"metadata", "settings"} {
		if doc[k] == nil {
			doc[k] = map[string]any{}
		}
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return b
	}
	return out
}

func (s *Server) handleCreateRun(c echo.Context) error {
	p := principalOf(c)
	major := majorOf(c)
	idemKey := c.Request().Header.Get(HeaderIdempotencyKey)
	if major == protocol.Major2 && idemKey != "" {
		if err := checkIdempotencyKeyV2(idemKey); err != nil {
			return err
		}
	}
	body, err := s.readBody(c)
	if err != nil {
		return err
	}
	var req *CreateRunRequest
	if major == protocol.Major2 {
		req, err = decodeCreateRunV2(body, s.cfg.Guards)
	} else {
		req, err = decodeCreateRunWith(body, s.cfg.Guards)
	}
	if err != nil {
		return err
	}
	if req.TenantID != "" && req.TenantID != p.Tenant {
		return codeErr(CodeForbidden, "tenantId %q does not match the API key's tenant", req.TenantID).with("field", "tenantId")
	}
	def, ok := s.cat.Definition(req.WorkflowID)
	if !ok {
		return badRequest("unknown workflowId %q", req.WorkflowID).with("field", "workflowId")
	}
	if err := validateInputs(def, req.Inputs); err != nil {
		return err
	}
	own, field := req.Configurable, "configurable"
	if major == protocol.Major2 {
		own, field = hostConfigurable(req.Configurable), "configurable.extensions."+protocol.Org
	}
	if len(own) > 0 && len(def.ConfigurableSchema) == 0 && !bytes.Equal(compactJSON(own), []byte("{}")) {
		return badRequest("workflow %q declares no configurableSchema, so %s must be empty", def.ID, field).with("field", field)
	}
	if len(idemKey) > maxIdempotencyKeyLength {
		return badRequest("Idempotency-Key is longer than %d characters", maxIdempotencyKeyLength)
	}
	digest := ""
	runID := newRunID(s.cfg.Now())
	if idemKey != "" {
		digest = requestDigestAt(createEndpoint(major), p.Tenant, req)
		runID = derivedRunID(sha256.Sum256([]byte("openwop:idempotency\x00" + p.Tenant + "\x00" + createEndpoint(major) + "\x00" + idemKey)))
	}
	if req.CallbackURL != "" {
		if err := s.callbackRun(c.Request().Context(), p.Tenant, req.CallbackURL); err != nil {
			return err
		}
	}
	in, err := s.cat.NewRunInput(workflows.RunRequest{
		RunID: runID, WorkflowID: def.ID, Inputs: req.Inputs, Owner: ownerOf(p),
		Tags: req.Tags, Metadata: req.Metadata, Configurable: req.Configurable, RequestDigest: digest,
		CallbackURL: req.CallbackURL, Era: protocol.EraV2,
	})
	var roster *workflows.RosterExceededError
	if errors.As(err, &roster) {
		return codeErr(protocol.CodeConversationRosterExceeded, "%v", err).with("maxParticipants", workflows.MaxParticipants).with("nodeId", roster.NodeID)
	}
	if err != nil {
		return runInputError(err)
	}
	_, err = s.startRun(c.Request().Context(), *in)
	var already *serviceerror.WorkflowExecutionAlreadyStarted
	if idemKey != "" && errors.As(err, &already) {
		return s.idempotentReplay(c, p, runID, digest, req)
	}
	if err != nil {
		return fmt.Errorf("starting run %s of %s: %w", runID, def.ID, err)
	}
	s.log.Info("Run started", "runId", runID, "workflowId", def.ID, "tenant", p.Tenant)
	return c.JSON(http.StatusCreated, s.withCallback(s.createdResponse(c, p.Tenant, runID), p.Tenant, runID, req))
}

// runInputError is the 400 of a run the catalog refuses to build; a pack's refusal
// (workflows.PackRunError) names the fields in details.fields.
func runInputError(err error) error {
	e := badRequest("%v", err)
	var pe *workflows.PackRunError
	if errors.As(err, &pe) {
		e = e.with("pack", pe.Pack)
		if len(pe.Fields) > 0 {
			e = e.with("fields", pe.Fields)
		}
	}
	return e
}

// ownerOf is the owner of a run the principal p creates: its tenant, its key and that
// key's Subject (v2's owner).
func ownerOf(p *principal) workflows.Owner {
	return workflows.Owner{Tenant: p.Tenant, Principal: p.KeyID, Subject: protocol.APIKeySubject(p.Tenant, p.KeyID)}
}

// startRun starts the run workflow. With an Idempotency-Key the start fails with
// WorkflowExecutionAlreadyStarted when the derived runId exists (running or closed),
// and the caller compares digests. (USE_EXISTING would hide whether the run is new:
// the SDK does not surface the server's "started" flag.)
func (s *Server) startRun(ctx context.Context, in workflows.RunInput) (client.WorkflowRun, error) {
	telemetry.NoteRunInput(&in)
	noteSpanRun(ctx, func(n *spanRun) {
		n.runID = in.RunID
		if in.Fork != nil {
			n.forkSource = in.Fork.SourceRunID
		}
	})
	opts := client.StartWorkflowOptions{
		ID:                                       in.RunID,
		TaskQueue:                                s.cfg.TaskQueue,
		WorkflowTaskTimeout:                      workflows.RunWorkflowTaskTimeout,
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		StaticSummary:                            workflows.RunSummary(&in),
		TypedSearchAttributes:                    workflows.StartSearchAttributes(in, s.cfg.Now()),
		Memo:                                     workflows.StartMemo(in),
	}
	return s.tc.ExecuteWorkflow(ctx, opts, workflows.RunWorkflowName, in)
}

// idempotentReplay answers a create whose derived runId already exists: with the
// response the first request got (201 and the same body; it depends only on the
// runId, the base URL and the callback), and openwop-Idempotent-Replay: true.
func (s *Server) idempotentReplay(c echo.Context, p *principal, runID, digest string, req *CreateRunRequest) error {
	snap, err := s.snapshot(c.Request().Context(), p, runID)
	if err != nil {
		return err
	}
	if snap.RequestDigest != digest {
		return codeErr(CodeIdempotencyMismatch,
			"Idempotency-Key was already used with a different request body")
	}
	c.Response().Header().Set(HeaderIdempotentReplay, "true")
	return c.JSON(http.StatusCreated, s.withCallback(s.createdResponse(c, p.Tenant, runID), p.Tenant, runID, req))
}

// createdResponse is the body of a 201 from POST /v1/runs (POST /runs: the id bound,
// the links projected).
func (s *Server) createdResponse(c echo.Context, tenant, runID string) CreateRunResponse {
	w := s.wireOf(c, tenant)
	return CreateRunResponse{
		RunID: w.id(runID), Status: protocol.StatusPending,
		EventsURL: w.runLink(runID, "/events"), StatusURL: w.runLink(runID, ""),
	}
}

// snapshot queries the run's snapshot (querySnapshot: a run Temporal closed without its
// terminal event reports a status read from Temporal) and enforces tenant isolation: a
// run of another tenant is reported exactly like an unknown run.
func (s *Server) snapshot(ctx context.Context, p *principal, runID string) (*workflows.Snapshot, error) {
	snap, err := s.querySnapshot(ctx, runID)
	if err != nil {
		return nil, err
	}
	if p != nil && snap.Owner.Tenant != p.Tenant {
		return nil, notFound("run %q not found", runID)
	}
	return snap, nil
}

// terminateReasonPrefix starts the reason of a termination the API's cancel fallback
// asked for, so the run reads as cancelled afterwards.
const terminateReasonPrefix = "openwop: cancelled"

// temporalErr maps Temporal client errors: unknown workflow → 404; the rest are
// internal and logged by the error handler with a correlation id.
func (s *Server) temporalErr(err error, runID string) error {
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return notFound("run %q not found", runID)
	}
	var inv *serviceerror.InvalidArgument
	if errors.As(err, &inv) {
		return notFound("run %q not found", runID)
	}
	var qf *serviceerror.QueryFailed
	if errors.As(err, &qf) && strings.Contains(qf.Error(), "unknown queryType") {
		// A workflow of the namespace that is not a run (another application's, or
		// one of the host's own) answers no run query: it is no run of any tenant.
		return notFound("run %q not found", runID)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || isTransient(err) {
		return &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: "Temporal did not answer in time", Cause: err}
	}
	var nr *serviceerror.WorkflowNotReady
	if errors.As(err, &nr) {
		return &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Cause: err,
			Message: fmt.Sprintf("run %s cannot answer: its Temporal workflow task keeps failing (%s); cancel the run to end it", runID, nr.Error())}
	}
	return fmt.Errorf("run %s: %w", runID, err)
}

// isTransient reports whether a Temporal call failed in a way a retry can mend: the
// server's own deadline (a query the worker did not answer in time under load), an
// unavailable or overloaded frontend, or the server cancelling a query whose worker
// went away (the caller's own cancellation is checked by the caller).
func isTransient(err error) bool {
	var de *serviceerror.DeadlineExceeded
	var un *serviceerror.Unavailable
	var re *serviceerror.ResourceExhausted
	var ca *serviceerror.Canceled
	return errors.As(err, &de) || errors.As(err, &un) || errors.As(err, &re) || errors.As(err, &ca)
}

// runAndBody reads what every mutation on a run starts with: the validated run id and
// the request body (nil when empty).
func (s *Server) runAndBody(c echo.Context) (string, []byte, error) {
	id, err := s.runParam(c)
	if err != nil {
		return "", nil, err
	}
	body, err := s.readBody(c)
	if err != nil {
		return "", nil, err
	}
	return id, body, nil
}

// runParam is the run of the request's path: the Temporal workflow id, under major 2
// decoded from its tenant-bound form with the tenant checked (boundParam).
func (s *Server) runParam(c echo.Context) (string, error) {
	id, err := s.boundParam(c, "runId")
	if err != nil {
		return "", err
	}
	if webhooks.IsInternalWorkflowID(id) {
		// The host's own workflows (webhook dispatchers, deliveries) are no tenant's
		// runs: unknown, like any id that names no run.
		return "", notFound("run %q not found", c.Param("runId"))
	}
	return id, nil
}

// decorate adds what the API owns to a snapshot: interrupt tokens (issued to the
// reader, resolve tokens only to a reader whose key may resolve) and callback URLs,
// which resolve by token in the reader's path space.
func (s *Server) decorate(c echo.Context, snap *workflows.Snapshot) {
	defer func() {
		if !isV2(c) {
			return
		}
		w := s.wireOf(c, snap.Owner.Tenant)
		for _, pi := range append([]*workflows.PendingInterrupt{snap.Interrupt}, pointers(snap.Interrupts)...) {
			if pi != nil && pi.CallbackURL != "" {
				pi.CallbackURL = w.base + w.tokenPath(pi.InterruptToken)
			}
		}
	}()
	base := s.baseURL(c)
	p, intent := principalOf(c), IntentInspect
	if p != nil && p.Scopes[ScopeApprovalsRespond] {
		intent = IntentResolve
	}
	for i := range snap.Interrupts {
		s.addToken(base, snap.RunID, p, intent, &snap.Interrupts[i])
	}
	if snap.Interrupt != nil {
		s.addToken(base, snap.RunID, p, intent, snap.Interrupt)
	}
}

// pointers are pointers to the elements of list.
func pointers(list []workflows.PendingInterrupt) []*workflows.PendingInterrupt {
	out := make([]*workflows.PendingInterrupt, len(list))
	for i := range list {
		out[i] = &list[i]
	}
	return out
}

func (s *Server) handleGetRun(c echo.Context) error {
	id, err := s.runParam(c)
	if err != nil {
		return err
	}
	snap, err := s.snapshot(c.Request().Context(), principalOf(c), id)
	if err != nil {
		return err
	}
	if isV2(c) {
		// The snapshot's validator names the log position and status it reflects
		// (runs.md §Snapshot): a client that has seen them gets 304.
		etag := fmt.Sprintf(`"s%d-%s"`, snap.LastSequence, snap.Status)
		c.Response().Header().Set("ETag", etag)
		if etagMatches(c.Request().Header.Get("If-None-Match"), etag) {
			return c.NoContent(http.StatusNotModified)
		}
	}
	s.decorate(c, snap)
	return c.JSON(http.StatusOK, s.publicSnapshot(c, snap))
}

// publicSnapshot is the snapshot a reader is served: v1's shape (publicV1Snapshot),
// or the closed v2 RunSnapshot.
func (s *Server) publicSnapshot(c echo.Context, snap *workflows.Snapshot) any {
	if isV2(c) {
		return s.wireOf(c, snap.Owner.Tenant).snapshotV2(snap)
	}
	publicV1Snapshot(snap)
	return snap
}

// CancelRequestBody is the closed body of the cancel endpoints.
type CancelRequestBody struct {
	Reason string `json:"reason,omitempty"`
}

func isTerminal(status string) bool {
	return status == protocol.StatusCompleted || status == protocol.StatusFailed || status == protocol.StatusCancelled
}

func (s *Server) handleCancel(c echo.Context) error {
	id, body, err := s.runAndBody(c)
	if err != nil {
		return err
	}
	var req CancelRequestBody
	if body != nil {
		if err := decodeStrict(body, &req); err != nil {
			return err
		}
	}
	p := principalOf(c)
	status, ended, err := s.cancelRun(c.Request().Context(), p, id, req.Reason)
	if err != nil {
		return err
	}
	if ended && isV2(c) {
		// v2 (runs.md §Cancel): a run that has ended is not cancelled again; v1 answers
		// 200 with its status.
		return codeErr(protocol.CodeRunTerminal, "run %s has ended (%s); it cannot be cancelled", s.wireOf(c, p.Tenant).id(id), status).
			with("runStatus", status)
	}
	return c.JSON(http.StatusOK, map[string]string{"runId": s.wireOf(c, p.Tenant).id(id), "status": status})
}

// cancelRun cancels run id for p (reason "" is "cancelled") and returns the run's
// status after: cancelling or cancelled, or, with ended set, the terminal status the
// run had already reached (nothing was sent). A run that cannot take the cancel signal
// (its workflow task keeps failing) is terminated in Temporal (terminateStuck).
func (s *Server) cancelRun(ctx context.Context, p *principal, id, reason string) (status string, ended bool, err error) {
	if reason == "" {
		reason = "cancelled"
	}
	snap, err := s.snapshot(ctx, p, id)
	var nr *serviceerror.WorkflowNotReady
	if errors.As(err, &nr) {
		// The workflow cannot even answer a query: it cannot take the signal either.
		status, err := s.terminateStuck(ctx, p, id, reason)
		return status, false, err
	}
	if err != nil {
		return "", false, err
	}
	if isTerminal(snap.Status) {
		return snap.Status, true, nil
	}
	err = s.tc.SignalWorkflow(ctx, id, "", workflows.CancelSignal, workflows.CancelRequest{Reason: reason, CancelledBy: p.KeyID})
	var nf *serviceerror.NotFound
	if err != nil && !errors.As(err, &nf) {
		return "", false, s.temporalErr(err, id)
	}
	// NotFound here means the workflow closed between the query and the signal.
	after, qerr := s.snapshot(ctx, p, id)
	status = protocol.StatusCancelling
	if qerr == nil && (isTerminal(after.Status) || after.Status == protocol.StatusCancelling) {
		status = after.Status
	}
	if errors.As(qerr, &nr) || !isTerminal(status) && s.taskFailing(ctx, id) {
		status, err := s.terminateStuck(ctx, p, id, reason)
		return status, false, err
	}
	s.log.Info("Run cancel requested", "runId", id, "keyId", p.KeyID)
	return status, false, nil
}

// taskFailing reports whether the run's workflow task has failed and is being retried:
// the workflow cannot process the cancel signal until that changes.
func (s *Server) taskFailing(ctx context.Context, runID string) bool {
	d, err := s.tc.DescribeWorkflowExecution(ctx, runID, "")
	if err != nil {
		return false
	}
	return d.GetPendingWorkflowTask().GetAttempt() > 1
}

// terminateStuck is :cancel's fallback for a run whose workflow cannot process the
// cancel signal (its workflow task keeps failing): the API checks the run's tenant
// from its search attributes and terminates it in Temporal; the run then reads as
// cancelled (terminatedStatus).
func (s *Server) terminateStuck(ctx context.Context, p *principal, runID, reason string) (string, error) {
	d, err := s.tc.DescribeWorkflowExecution(ctx, runID, "")
	if err != nil {
		return "", s.temporalErr(err, runID)
	}
	info := d.GetWorkflowExecutionInfo()
	var tenant string
	if pl := info.GetSearchAttributes().GetIndexedFields()[workflows.SATenant.GetName()]; pl != nil {
		_ = converter.GetDefaultDataConverter().FromPayload(pl, &tenant)
	}
	if tenant != p.Tenant {
		return "", notFound("run %q not found", runID)
	}
	if info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		why := fmt.Sprintf("%s by %s (%s); the workflow could not process the cancel signal, its workflow task keeps failing", terminateReasonPrefix, p.KeyID, reason)
		if err := s.tc.TerminateWorkflow(ctx, runID, "", why); err != nil {
			var nf *serviceerror.NotFound
			if !errors.As(err, &nf) {
				return "", s.temporalErr(err, runID)
			}
		}
		s.log.Warn("Run terminated: its workflow could not process the cancel", "runId", runID, "keyId", p.KeyID)
	}
	snap, err := s.snapshot(ctx, p, runID)
	status := protocol.StatusCancelled
	if err == nil {
		status = snap.Status
	}
	return status, nil
}

// ForkRequest is the closed body of POST /v1/runs/{runId}:fork.
type ForkRequest struct {
	Mode              string          `json:"mode"`
	FromSeq           *int64          `json:"fromSeq,omitempty"`
	RunOptionsOverlay json.RawMessage `json:"runOptionsOverlay,omitempty"`
	// Inputs, when set, replace the source's inputs (a host extension): the recorded
	// decisions are replayed against them, and the fork writes replay.diverged after
	// its run.started when they differ from the source's.
	Inputs json.RawMessage `json:"inputs,omitempty"`
}

func (s *Server) handleFork(c echo.Context) error {
	id, body, err := s.runAndBody(c)
	if err != nil {
		return err
	}
	var req ForkRequest
	if body != nil {
		if err := decodeStrict(body, &req); err != nil {
			return err
		}
	}
	switch req.Mode {
	case "replay":
	case "":
		return badRequest("mode is required; this host supports \"replay\"").with("field", "mode")
	case "branch":
		return badRequest("fork mode \"branch\" is not supported by this host; supported: [\"replay\"]").with("field", "mode").with("supported", []string{"replay"})
	default:
		return badRequest("unknown fork mode %q; supported: [\"replay\"]", req.Mode).with("field", "mode").with("supported", []string{"replay"})
	}
	if ov := compactJSON(req.RunOptionsOverlay); len(ov) > 0 && string(ov) != "{}" && string(ov) != "null" {
		return badRequest("runOptionsOverlay must be absent in replay mode").with("field", "runOptionsOverlay")
	}
	var from int64
	if req.FromSeq != nil {
		if *req.FromSeq < 0 {
			return badRequest("fromSeq must be >= 0").with("field", "fromSeq")
		}
		from = *req.FromSeq
	}
	p := principalOf(c)
	ctx := c.Request().Context()
	snap, err := s.snapshot(ctx, p, id)
	if err != nil {
		return err
	}
	events, last, err := s.forkSource(ctx, id)
	if err != nil {
		return err
	}
	if isV2(c) && from > last {
		// v2 (replay.md): a fork point must be an event of the source's log.
		return codeErr(protocol.CodeForkPointInvalid, "fromSeq %d is not in the source's log (last sequence %d)", from, last).with("field", "fromSeq")
	}
	if from > last+1 {
		return apiErr(http.StatusUnprocessableEntity, CodeValidation, "fromSeq %d is beyond the source log (last sequence %d)", from, last).with("field", "fromSeq")
	}
	owner := ownerOf(p)
	if isV2(c) {
		// v2 (identity.md §1.3): the fork's owner is the source's, copied verbatim; a
		// source that recorded no subject gives the fork its legacy stamp.
		owner = snap.Owner
		if owner.Subject == nil {
			owner.Subject = protocol.LegacySubject(owner.Tenant, owner.Principal)
		}
	}
	inputs := runInputsOf(events)
	if ov := compactJSON(req.Inputs); len(ov) > 0 && string(ov) != "null" {
		if ov[0] != '{' {
			return badRequest("inputs must be an object").with("field", "inputs")
		}
		inputs = ov
	}
	in, err := s.forkInput(ctx, id, snap, workflows.RunRequest{
		RunID: newRunID(s.cfg.Now()), WorkflowID: snap.WorkflowID, Inputs: inputs,
		Owner: owner, Tags: snap.Tags, Metadata: snap.Metadata, Configurable: snap.Configurable, Era: protocol.EraV2,
	})
	if err != nil {
		return err
	}
	in.Fork = &workflows.ForkSource{SourceRunID: id, FromSeq: from, Events: events}
	if _, err := s.startRun(ctx, *in); err != nil {
		return fmt.Errorf("starting fork of %s: %w", id, err)
	}
	s.log.Info("Run forked", "runId", in.RunID, "sourceRunId", id, "fromSeq", from)
	w := s.wireOf(c, p.Tenant)
	return c.JSON(http.StatusCreated, map[string]any{
		"runId": w.id(in.RunID), "sourceRunId": w.id(id), "fromSeq": from, "mode": "replay",
		"status": protocol.StatusPending, "eventsUrl": w.runLink(in.RunID, "/events"),
	})
}

// maxForkSourceBytes bounds the log a replay fork takes from its source: the fork's
// workflow input carries it, and Temporal rejects an input over 2 MB.
const maxForkSourceBytes = 1 << 20

// forkSource reads the source run's whole log, page by page, refusing one larger than
// maxForkSourceBytes. The fork's input carries it in v1 vocabulary whatever the
// source's era, as the workflow's fork code reads it (workflows/fork.go,
// packagent/pack_replay.go); the fork writes its own log in its own era's.
func (s *Server) forkSource(ctx context.Context, runID string) ([]workflows.Event, int64, error) {
	var events []workflows.Event
	size, after, last := 0, int64(-1), int64(-1)
	for {
		res, err := s.readEvents(ctx, runID, after)
		if err != nil {
			return nil, 0, err
		}
		last = res.Last
		for i := range res.Events {
			size += workflows.EventBytes(&res.Events[i])
		}
		if size > maxForkSourceBytes {
			return nil, 0, apiErr(http.StatusUnprocessableEntity, CodePayloadTooLarge,
				"the source run's log is larger than the %d bytes a replay fork can take", maxForkSourceBytes).
				with("limit", "forkSourceLogBytes").with("maxBytes", maxForkSourceBytes)
		}
		page, err := eventsV1(res.Events)
		if err != nil {
			return nil, 0, err
		}
		events = append(events, page...)
		if len(res.Events) == 0 || !res.More {
			return events, last, nil
		}
		after = res.Events[len(res.Events)-1].Sequence
	}
}

// runInputsOf returns run.started's payload.inputs from a log.
func runInputsOf(events []workflows.Event) json.RawMessage {
	for _, ev := range events {
		if ev.Type == protocol.EvRunStarted {
			var p struct {
				Inputs json.RawMessage `json:"inputs"`
			}
			if json.Unmarshal(ev.Payload, &p) == nil {
				return p.Inputs
			}
		}
	}
	return nil
}
