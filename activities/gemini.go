package activities

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"cloud.google.com/go/auth"
	"cloud.google.com/go/auth/credentials"
	"cloud.google.com/go/auth/httptransport"
	"google.golang.org/genai"

	"github.com/wop-dev/wop/convo"
)

// DefaultGeminiModel is the model of the gemini and vertex providers when WOP_MODEL
// is unset.
const DefaultGeminiModel = "gemini-2.5-flash"

// geminiSkipSignature is the value Google documents for a function call whose thought
// signature was not kept (a call another provider made, a transcript from before
// signatures were kept): Gemini 3 models refuse a replayed call without a signature.
const geminiSkipSignature = "skip_thought_signature_validator"

// GeminiConfig configures the gemini provider (the Gemini API) or, with Vertex set,
// the vertex provider (Gemini on Vertex AI). Both go through google.golang.org/genai.
type GeminiConfig struct {
	// Model is the model rounds call (WOP_MODEL; default DefaultGeminiModel).
	Model string
	// APIKey is the Gemini API key (GEMINI_API_KEY or GOOGLE_API_KEY); gemini only.
	APIKey string
	// BaseURL replaces the API's base URL (GOOGLE_GEMINI_BASE_URL, for vertex
	// GOOGLE_VERTEX_BASE_URL): a proxy, a gateway, a test server.
	BaseURL string
	// Vertex selects the Vertex AI backend: Project and Location, authenticated with
	// Credentials.
	Vertex   bool
	Project  string // GOOGLE_CLOUD_PROJECT
	Location string // GOOGLE_CLOUD_LOCATION (default global)
	// Credentials authenticate Vertex requests; nil means Application Default
	// Credentials (GOOGLE_APPLICATION_CREDENTIALS, gcloud's, the metadata server).
	Credentials *auth.Credentials
	// Transport carries the requests (nil: http.DefaultTransport).
	Transport http.RoundTripper
	// NoStream asks for the whole reply at once (generateContent) instead of a stream
	// (streamGenerateContent?alt=sse), for gateways that buffer event streams; the reply
	// then reaches streaming readers as one chunk.
	NoStream bool
}

// GeminiProvider calls generateContent through the official Go SDK, streamed, with tool
// calling. The SDK's own retries and stream continuation are off: Temporal retries the
// activity. Function calls keep their thought signatures (convo.ToolCall.Signature),
// which Gemini needs back with them in later rounds.
type GeminiProvider struct {
	Model    string
	Vertex   bool
	BaseURL  string
	NoStream bool

	apiKey string
	client *genai.Client
}

// NewGeminiProvider builds the gemini or vertex provider. For Vertex without
// Credentials it looks up Application Default Credentials, and fails when there are
// none.
func NewGeminiProvider(ctx context.Context, cfg GeminiConfig) (*GeminiProvider, error) {
	if cfg.Model == "" {
		cfg.Model = DefaultGeminiModel
	}
	base := cfg.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	tap := &headerTap{base: base}
	cc := &genai.ClientConfig{HTTPOptions: genai.HTTPOptions{BaseURL: cfg.BaseURL}}
	name := ProviderGemini
	if cfg.Vertex {
		name = ProviderVertex
		if cfg.Project == "" {
			return nil, fmt.Errorf("vertex needs the Google Cloud project (%s)", EnvGoogleCloudProject)
		}
		if cfg.Location == "" {
			cfg.Location = "global"
		}
		creds := cfg.Credentials
		if creds == nil {
			var err error
			creds, err = credentials.DetectDefault(&credentials.DetectOptions{
				Scopes: []string{"https://www.googleapis.com/auth/cloud-platform"},
			})
			if err != nil {
				return nil, fmt.Errorf("vertex: no Application Default Credentials: %w "+
					"(set GOOGLE_APPLICATION_CREDENTIALS, run gcloud auth application-default login, or run on Google Cloud)", err)
			}
		}
		// The SDK builds this client itself when given none; it is built here so that
		// the response headers (Retry-After) reach the provider.
		hc, err := httptransport.NewClient(&httptransport.Options{Credentials: creds, BaseRoundTripper: tap})
		if err != nil {
			return nil, fmt.Errorf("vertex: build the authenticated HTTP client: %w", err)
		}
		cc.Backend, cc.Project, cc.Location, cc.HTTPClient = genai.BackendVertexAI, cfg.Project, cfg.Location, hc
	} else {
		if cfg.APIKey == "" {
			return nil, fmt.Errorf("gemini needs an API key (%s or %s)", EnvGeminiKey, EnvGoogleKey)
		}
		cc.Backend, cc.APIKey, cc.HTTPClient = genai.BackendGeminiAPI, cfg.APIKey, &http.Client{Transport: tap}
	}
	// Every field the SDK would read from the environment is set here, so what the
	// process environment holds besides does not change the client.
	client, err := genai.NewClient(ctx, cc)
	if err != nil {
		// The SDK's configuration errors print the whole config, key included.
		return nil, fmt.Errorf("%s: %s", name, redactor(cfg.APIKey)(err.Error()))
	}
	return &GeminiProvider{Model: cfg.Model, Vertex: cfg.Vertex, BaseURL: cfg.BaseURL, NoStream: cfg.NoStream,
		apiKey: cfg.APIKey, client: client}, nil
}

// Name implements Provider.
func (p *GeminiProvider) Name() string {
	if p.Vertex {
		return ProviderVertex
	}
	return ProviderGemini
}

// String describes the provider without its key.
func (p *GeminiProvider) String() string {
	return fmt.Sprintf("%s(model=%s, key=%s)", p.Name(), p.Model, redactedKey(p.apiKey))
}

// LogValue implements slog.LogValuer without the key.
func (p *GeminiProvider) LogValue() slog.Value {
	return slog.GroupValue(slog.String("provider", p.Name()), slog.String("model", p.Model), slog.String("key", redactedKey(p.apiKey)))
}

// ModelName is the model the provider calls; a round applies the prompt's
// model_overrides entry of that name.
func (p *GeminiProvider) ModelName() string { return p.Model }

// Complete implements Provider. Text parts go to req.Stream as they arrive (thoughts
// are not part of the reply); function calls arrive whole.
func (p *GeminiProvider) Complete(ctx context.Context, req *Request) (*convo.ModelRoundResult, error) {
	contents, config, err := p.request(req)
	if err != nil {
		return nil, err
	}
	resp := &tappedResponse{}
	ctx = context.WithValue(ctx, tapKey{}, resp)
	acc := geminiReply{provider: p.Name()}
	if p.NoStream {
		out, err := p.client.Models.GenerateContent(ctx, p.Model, contents, config)
		if err != nil {
			return nil, p.failure(ctx, err, resp)
		}
		acc.add(out, nil)
	} else {
		for out, err := range p.client.Models.GenerateContentStream(ctx, p.Model, contents, config) {
			if err != nil {
				return nil, p.failure(ctx, err, resp)
			}
			acc.add(out, req)
		}
	}
	res, err := acc.result(req, p.Model)
	if err == nil && !acc.streamed {
		req.emit(res.Text)
	}
	return res, err
}

// failure classifies an error of the SDK: an APIError by its HTTP status, with the
// response's headers (Retry-After) that the transport kept; anything else as a
// transport failure.
func (p *GeminiProvider) failure(ctx context.Context, err error, resp *tappedResponse) error {
	redact := redactor(p.apiKey)
	var apiErr genai.APIError
	if errors.As(err, &apiErr) && apiErr.Code != 0 {
		return classifyHTTP(httpFailure{provider: p.Name(), status: apiErr.Code, header: resp.header(), message: apiErr.Message}, redact)
	}
	var apiErrP *genai.APIError
	if errors.As(err, &apiErrP) && apiErrP.Code != 0 {
		return classifyHTTP(httpFailure{provider: p.Name(), status: apiErrP.Code, header: resp.header(), message: apiErrP.Message}, redact)
	}
	return classifyTransport(ctx, p.Name(), err, redact)
}

// request builds the contents and the config of a round.
func (p *GeminiProvider) request(req *Request) ([]*genai.Content, *genai.GenerateContentConfig, error) {
	in := req.Input
	off := false
	config := &genai.GenerateContentConfig{AutomaticContinuation: &off}
	var system []*genai.Part
	if in.System != "" {
		system = append(system, &genai.Part{Text: in.System})
	}
	// Gemini has two roles, user and model: system messages join the system
	// instruction, tool results are user parts, and consecutive messages of one role
	// are merged (the results of one round's calls form one content, as the API wants).
	var contents []*genai.Content
	add := func(role string, parts ...*genai.Part) {
		if len(parts) == 0 {
			return
		}
		if n := len(contents); n > 0 && contents[n-1].Role == role {
			contents[n-1].Parts = append(contents[n-1].Parts, parts...)
			return
		}
		contents = append(contents, &genai.Content{Role: role, Parts: parts})
	}
	signed := needsSignature(p.Model)
	names := map[string]string{} // tool-call id → tool name, for results that lack it
	for _, m := range req.Messages {
		for _, c := range m.ToolCalls {
			names[c.ID] = c.Name
		}
	}
	for i, m := range req.Messages {
		switch m.Role {
		case convo.RoleSystem:
			if m.Text != "" {
				system = append(system, &genai.Part{Text: m.Text})
			}
		case convo.RoleUser:
			if m.Text != "" {
				add(genai.RoleUser, &genai.Part{Text: m.Text})
			}
		case convo.RoleAssistant:
			var parts []*genai.Part
			if m.Text != "" {
				parts = append(parts, &genai.Part{Text: m.Text})
			}
			for j, c := range m.ToolCalls {
				var args map[string]any
				if len(c.Args) > 0 {
					if err := json.Unmarshal(c.Args, &args); err != nil {
						args = map[string]any{"_raw_arguments": string(c.Args)}
					}
				}
				part := &genai.Part{FunctionCall: &genai.FunctionCall{Name: c.Name, Args: args}}
				switch sig, err := base64.StdEncoding.DecodeString(c.Signature); {
				case c.Signature != "" && err == nil:
					part.ThoughtSignature = sig
				case j == 0 && signed:
					// Only the first call of a parallel batch carries a signature.
					part.ThoughtSignature = []byte(geminiSkipSignature)
				}
				parts = append(parts, part)
			}
			add(genai.RoleModel, parts...)
		case convo.RoleTool:
			key := "output"
			if m.IsError {
				key = "error"
			}
			var v any = m.Text
			if m.Text == "" {
				v = map[string]any{}
			} else if err := json.Unmarshal([]byte(m.Text), &v); err != nil {
				v = m.Text
			}
			name := m.Name
			if name == "" {
				name = names[m.ToolCallID]
			}
			add(genai.RoleUser, &genai.Part{FunctionResponse: &genai.FunctionResponse{Name: name, Response: map[string]any{key: v}}})
		default:
			return nil, nil, nonRetryable(ErrTypeBadRequest, "transcript message %d has unknown role %q", i, m.Role)
		}
	}
	// A request needs a content, and one that opens with the model's turn is refused.
	if len(contents) == 0 || contents[0].Role != genai.RoleUser {
		contents = append([]*genai.Content{{Role: genai.RoleUser, Parts: []*genai.Part{{Text: continueCue}}}}, contents...)
	}
	if len(system) > 0 {
		config.SystemInstruction = &genai.Content{Role: genai.RoleUser, Parts: system}
	}

	var decls []*genai.FunctionDeclaration
	for _, t := range req.offeredTools() {
		schema, err := schemaObject(t.Name, t.Parameters)
		if err != nil {
			return nil, nil, err
		}
		decls = append(decls, &genai.FunctionDeclaration{Name: t.Name, Description: t.Description, ParametersJsonSchema: schema})
	}
	if len(decls) > 0 {
		config.Tools = []*genai.Tool{{FunctionDeclarations: decls}}
		switch in.ToolChoice {
		case "required":
			config.ToolConfig = &genai.ToolConfig{FunctionCallingConfig: &genai.FunctionCallingConfig{Mode: genai.FunctionCallingConfigModeAny}}
		case "auto":
			config.ToolConfig = &genai.ToolConfig{FunctionCallingConfig: &genai.FunctionCallingConfig{Mode: genai.FunctionCallingConfigModeAuto}}
		}
	}

	sp, err := req.parameters()
	if err != nil {
		return nil, nil, err
	}
	f32 := func(v *float64) *float32 {
		if v == nil {
			return nil
		}
		f := float32(*v)
		return &f
	}
	config.Temperature, config.TopP = f32(sp.Temperature), f32(sp.TopP)
	config.FrequencyPenalty, config.PresencePenalty = f32(sp.FrequencyPenalty), f32(sp.PresencePenalty)
	if sp.TopK != nil {
		k := float32(*sp.TopK)
		config.TopK = &k
	}
	if sp.MaxTokens != nil && *sp.MaxTokens > 0 {
		config.MaxOutputTokens = int32(*sp.MaxTokens)
	}
	return contents, config, nil
}

// geminiModelMajor reads the major version of a Gemini model name
// (gemini-2.5-flash, models/gemini-3-pro-preview, publishers/google/models/gemini-3.1-pro).
var geminiModelMajor = regexp.MustCompile(`(?:^|/)gemini-(\d+)`)

// needsSignature reports whether the model refuses a replayed function call without a
// thought signature: Gemini 3 and later.
func needsSignature(model string) bool {
	m := geminiModelMajor.FindStringSubmatch(model)
	if m == nil {
		return false
	}
	major, err := strconv.Atoi(m[1])
	return err == nil && major >= 3
}

// geminiReply accumulates the responses of one round (the chunks of a stream, or one
// whole response).
type geminiReply struct {
	provider string
	text     strings.Builder
	calls    []*genai.Part
	finish   string
	model    string
	usage    *genai.GenerateContentResponseUsageMetadata
	blocked  string
	any      bool // a candidate arrived
	streamed bool // text went to req.Stream
}

// add takes one response; with req set, its text streams to req.Stream.
func (g *geminiReply) add(out *genai.GenerateContentResponse, req *Request) {
	if out == nil {
		return
	}
	if out.ModelVersion != "" {
		g.model = out.ModelVersion
	}
	if out.UsageMetadata != nil {
		g.usage = out.UsageMetadata
	}
	if pf := out.PromptFeedback; pf != nil && pf.BlockReason != "" {
		g.blocked = string(pf.BlockReason)
		if pf.BlockReasonMessage != "" {
			g.blocked += ": " + pf.BlockReasonMessage
		}
	}
	if len(out.Candidates) == 0 || out.Candidates[0] == nil {
		return
	}
	c := out.Candidates[0]
	g.any = true
	if c.FinishReason != "" {
		g.finish = string(c.FinishReason)
	}
	if c.Content == nil {
		return
	}
	for _, part := range c.Content.Parts {
		switch {
		case part == nil:
		case part.FunctionCall != nil:
			g.calls = append(g.calls, part)
		case part.Thought:
			// A thought summary is not part of the reply.
		case part.Text != "":
			g.text.WriteString(part.Text)
			if req != nil {
				req.emit(part.Text)
				g.streamed = true
			}
		}
	}
}

func (g *geminiReply) result(req *Request, model string) (*convo.ModelRoundResult, error) {
	if !g.any {
		if g.blocked != "" {
			return nil, nonRetryable(ErrTypeBadRequest, "%s blocked the prompt (%s)", g.provider, g.blocked)
		}
		return nil, badResponse(g.provider, "no candidate in the response")
	}
	res := &convo.ModelRoundResult{Text: g.text.String(), Provider: g.provider, Model: g.model, FinishReason: g.finish}
	if res.Model == "" {
		res.Model = model
	}
	if u := g.usage; u != nil {
		res.Usage = convo.Usage{InputTokens: int(u.PromptTokenCount + u.ToolUsePromptTokenCount),
			OutputTokens: int(u.CandidatesTokenCount + u.ThoughtsTokenCount)}
	}
	for i, part := range g.calls {
		fc := part.FunctionCall
		if strings.TrimSpace(fc.Name) == "" {
			return nil, badResponse(g.provider, fmt.Sprintf("function call %d has no name", i))
		}
		args := json.RawMessage(`{}`)
		if fc.Args != nil {
			b, err := json.Marshal(fc.Args)
			if err != nil {
				return nil, badResponse(g.provider, fmt.Sprintf("function call %d: arguments: %v", i, err))
			}
			args = b
		}
		id := fc.ID
		if id == "" {
			id = callID(req.Input.Round, i, fc.Name)
		}
		call := convo.ToolCall{ID: id, Name: fc.Name, Args: args}
		if len(part.ThoughtSignature) > 0 {
			call.Signature = base64.StdEncoding.EncodeToString(part.ThoughtSignature)
		}
		res.ToolCalls = append(res.ToolCalls, call)
	}
	return res, nil
}

// headerTap is a RoundTripper that keeps the status and headers of the response of a
// request whose context carries a *tappedResponse: the SDKs' error values drop them,
// and Retry-After is in them.
type headerTap struct{ base http.RoundTripper }

type tapKey struct{}

// tappedResponse holds what headerTap kept of the latest response of a call.
type tappedResponse struct {
	mu     sync.Mutex
	status int
	h      http.Header
}

func (t *tappedResponse) header() http.Header {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.h
}

func (t *headerTap) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if keep, ok := r.Context().Value(tapKey{}).(*tappedResponse); ok && resp != nil {
		keep.mu.Lock()
		keep.status, keep.h = resp.StatusCode, resp.Header.Clone()
		keep.mu.Unlock()
	}
	return resp, err
}
