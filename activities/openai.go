package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/wop-dev/wop/convo"
)

// DefaultOpenAIModel is the model of the openai provider when WOP_MODEL is unset.
const DefaultOpenAIModel = "gpt-4o-mini"

// DefaultOpenAIBaseURL is the OpenAI API's base URL.
const DefaultOpenAIBaseURL = "https://api.openai.com/v1/"

// OpenAIProvider calls the chat completions API with tool calling, through the
// official SDK. With Compatible set it speaks to any OpenAI-compatible endpoint
// (Ollama, vLLM, LiteLLM) at BaseURL, where the key is optional and the token limit
// is sent as max_tokens (the field those servers know) instead of
// max_completion_tokens.
//
// The SDK's own retries are disabled: Temporal retries the activity, so every attempt
// is visible in the run's history and honours the RetryPolicy (and Retry-After).
type OpenAIProvider struct {
	Model      string
	BaseURL    string // empty: DefaultOpenAIBaseURL
	Compatible bool   // an OpenAI-compatible endpoint rather than OpenAI itself
	HTTPClient *http.Client

	apiKey string
	svc    openai.ChatCompletionService
	name   string // canonical id when not openai / openai-compatible (azure-openai)
}

// NewOpenAIProvider builds the provider for OpenAI itself.
func NewOpenAIProvider(apiKey, model, baseURL string) *OpenAIProvider {
	return newOpenAI(apiKey, model, baseURL, false, nil)
}

// NewOpenAICompatibleProvider builds the provider for an OpenAI-compatible endpoint at
// baseURL (for Ollama: http://localhost:11434/v1). apiKey may be empty.
func NewOpenAICompatibleProvider(apiKey, model, baseURL string) *OpenAIProvider {
	return newOpenAI(apiKey, model, baseURL, true, nil)
}

func newOpenAI(apiKey, model, baseURL string, compatible bool, hc *http.Client) *OpenAIProvider {
	if model == "" && !compatible {
		model = DefaultOpenAIModel
	}
	if baseURL == "" {
		baseURL = DefaultOpenAIBaseURL
	}
	if hc == nil {
		hc = &http.Client{}
	}
	p := &OpenAIProvider{Model: model, BaseURL: baseURL, Compatible: compatible, HTTPClient: hc, apiKey: apiKey}
	// NewChatCompletionService, unlike openai.NewClient, reads nothing from the
	// process environment: the key and URL come only from the worker's configuration.
	opts := []option.RequestOption{
		option.WithBaseURL(baseURL),
		option.WithHTTPClient(hc),
		option.WithMaxRetries(0),
	}
	if apiKey != "" {
		opts = append(opts, option.WithAPIKey(apiKey))
	}
	p.svc = openai.NewChatCompletionService(opts...)
	return p
}

// Name implements Provider.
func (p *OpenAIProvider) Name() string {
	if p.name != "" {
		return p.name
	}
	if p.Compatible {
		return ProviderOpenAICompatible
	}
	return ProviderOpenAI
}

// String describes the provider without its key.
func (p *OpenAIProvider) String() string {
	return fmt.Sprintf("%s(model=%s, baseURL=%s, key=%s)", p.Name(), p.Model, p.BaseURL, redactedKey(p.apiKey))
}

// LogValue implements slog.LogValuer without the key.
func (p *OpenAIProvider) LogValue() slog.Value {
	return slog.GroupValue(slog.String("provider", p.Name()), slog.String("model", p.Model),
		slog.String("baseURL", p.BaseURL), slog.String("key", redactedKey(p.apiKey)))
}

// Complete implements Provider. The completion is streamed (stream: true, with
// stream_options.include_usage for the token counts): each content delta goes to
// req.Stream as it arrives, and the result is assembled from the same chunks by the
// SDK's accumulator, so it is the completion a non-streamed call would have returned.
func (p *OpenAIProvider) Complete(ctx context.Context, req *Request) (*convo.ModelRoundResult, error) {
	params, err := p.params(req)
	if err != nil {
		return nil, err
	}
	params.StreamOptions.IncludeUsage = openai.Bool(true)
	redact := redactor(p.apiKey)
	var plain plainReply
	stream := p.svc.NewStreaming(ctx, params, option.WithMiddleware(plain.keep))
	defer stream.Close()
	var acc openai.ChatCompletionAccumulator
	streamed, chunks := false, 0
	for stream.Next() {
		chunks++
		chunk := stream.Current()
		if !acc.AddChunk(chunk) {
			return nil, badResponse(p.Name(), "a streamed chunk does not fit the completion streamed so far")
		}
		for _, c := range chunk.Choices {
			if c.Index != 0 {
				continue
			}
			req.emit(c.Delta.Content)
			streamed = streamed || c.Delta.Content != ""
		}
	}
	if err := stream.Err(); err != nil {
		var apiErr *openai.Error
		if errors.As(err, &apiErr) {
			return nil, classifyHTTP(httpFailure{
				provider: p.Name(), status: apiErr.StatusCode, header: responseHeader(apiErr.Response), message: apiErr.Message,
			}, redact)
		}
		return nil, classifyTransport(ctx, p.Name(), err, redact)
	}
	completion := &acc.ChatCompletion
	if chunks == 0 && plain.tooBig {
		return nil, badResponse(p.Name(), fmt.Sprintf("the completion, answered as plain JSON, is over %d bytes", maxPlainReply))
	}
	if chunks == 0 && plain.body != nil {
		// The server ignored stream: true and answered with the whole completion.
		completion = &openai.ChatCompletion{}
		if err := json.Unmarshal(plain.body, completion); err != nil {
			return nil, badResponse(p.Name(), "the completion is not JSON: "+redact(err.Error()))
		}
	}
	res, err := p.result(req, completion)
	if err == nil && !streamed {
		req.emit(res.Text) // a refusal, or a completion answered as plain JSON, arrives whole
	}
	return res, err
}

// plainReply keeps the body of a streamed request's answer that is plain JSON rather
// than an event stream: some OpenAI-compatible servers ignore stream: true. The SDK's
// stream then sees an empty body, and Complete reads the completion from body.
type plainReply struct {
	body   []byte
	tooBig bool // the body passed maxPlainReply and was dropped
}

func (p *plainReply) keep(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	resp, err := next(r)
	if err != nil || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/json" {
		return resp, nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxPlainReply+1))
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	if len(body) > maxPlainReply {
		p.tooBig = true
	} else {
		p.body = body
	}
	resp.Body = io.NopCloser(bytes.NewReader(nil))
	return resp, nil
}

// maxPlainReply bounds a completion answered as plain JSON (a streamed one is bounded by
// the SDK's line buffer and the round's own limits).
const maxPlainReply = 16 << 20

func (p *OpenAIProvider) params(req *Request) (openai.ChatCompletionNewParams, error) {
	in := req.Input
	var params openai.ChatCompletionNewParams
	params.Model = shared.ChatModel(p.Model)

	if in.System != "" {
		params.Messages = append(params.Messages, openai.SystemMessage(in.System))
	}
	for i, m := range req.Messages {
		switch m.Role {
		case convo.RoleSystem:
			params.Messages = append(params.Messages, openai.SystemMessage(m.Text))
		case convo.RoleUser:
			params.Messages = append(params.Messages, openai.UserMessage(m.Text))
		case convo.RoleAssistant:
			if m.Text == "" && len(m.ToolCalls) == 0 {
				continue // the API rejects an assistant message with neither content nor tool calls
			}
			var a openai.ChatCompletionAssistantMessageParam
			if m.Text != "" {
				a.Content.OfString = openai.String(m.Text)
			}
			for _, c := range m.ToolCalls {
				args := string(c.Args)
				if args == "" {
					args = "{}"
				}
				a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
						ID:       c.ID,
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.Name, Arguments: args},
					},
				})
			}
			params.Messages = append(params.Messages, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		case convo.RoleTool:
			params.Messages = append(params.Messages, openai.ToolMessage(toolResultText(m), m.ToolCallID))
		default:
			return params, nonRetryable(ErrTypeBadRequest, "transcript message %d has unknown role %q", i, m.Role)
		}
	}

	for _, t := range req.offeredTools() {
		schema, err := schemaObject(t.Name, t.Parameters)
		if err != nil {
			return params, err
		}
		fn := shared.FunctionDefinitionParam{Name: t.Name, Parameters: shared.FunctionParameters(schema)}
		if t.Description != "" {
			fn.Description = openai.String(t.Description)
		}
		params.Tools = append(params.Tools, openai.ChatCompletionFunctionTool(fn))
	}
	if len(params.Tools) > 0 && (in.ToolChoice == "auto" || in.ToolChoice == "required") {
		params.ToolChoice.OfAuto = openai.String(in.ToolChoice)
	}

	sp, err := req.parameters()
	if err != nil {
		return params, err
	}
	if sp.Temperature != nil {
		params.Temperature = openai.Float(*sp.Temperature)
	}
	if sp.TopP != nil {
		params.TopP = openai.Float(*sp.TopP)
	}
	if sp.FrequencyPenalty != nil {
		params.FrequencyPenalty = openai.Float(*sp.FrequencyPenalty)
	}
	if sp.PresencePenalty != nil {
		params.PresencePenalty = openai.Float(*sp.PresencePenalty)
	}
	if sp.MaxTokens != nil {
		if p.Compatible {
			params.MaxTokens = openai.Int(int64(*sp.MaxTokens))
		} else {
			params.MaxCompletionTokens = openai.Int(int64(*sp.MaxTokens))
		}
	}
	// top_k has no chat-completions field; it is not sent.
	return params, nil
}

func (p *OpenAIProvider) result(req *Request, resp *openai.ChatCompletion) (*convo.ModelRoundResult, error) {
	if resp == nil || len(resp.Choices) == 0 {
		return nil, badResponse(p.Name(), "no choices in the chat completion")
	}
	choice := resp.Choices[0]
	res := &convo.ModelRoundResult{
		Text:         choice.Message.Content,
		Provider:     p.Name(),
		Model:        resp.Model,
		FinishReason: choice.FinishReason,
		Usage:        convo.Usage{InputTokens: int(resp.Usage.PromptTokens), OutputTokens: int(resp.Usage.CompletionTokens)},
	}
	if res.Model == "" {
		res.Model = p.Model
	}
	if res.Text == "" && choice.Message.Refusal != "" {
		res.Text = choice.Message.Refusal
	}
	for i, c := range choice.Message.ToolCalls {
		if c.Type != "" && c.Type != "function" {
			return nil, badResponse(p.Name(), fmt.Sprintf("tool call %d has unsupported type %q", i, c.Type))
		}
		if strings.TrimSpace(c.Function.Name) == "" {
			return nil, badResponse(p.Name(), fmt.Sprintf("tool call %d has no function name", i))
		}
		id := c.ID
		if id == "" {
			id = callID(req.Input.Round, i, c.Function.Name)
		}
		res.ToolCalls = append(res.ToolCalls, convo.ToolCall{ID: id, Name: c.Function.Name, Args: objectArgs(c.Function.Arguments)})
	}
	return res, nil
}

// responseHeader returns the headers of a response, or nil.
func responseHeader(r *http.Response) http.Header {
	if r == nil {
		return nil
	}
	return r.Header
}

// redactedKey shows whether a key is set, never any of it.
func redactedKey(k string) string {
	if k == "" {
		return "unset"
	}
	return "[REDACTED]"
}

// ModelName is the model the provider calls; a round applies the prompt's
// model_overrides entry of that name.
func (p *OpenAIProvider) ModelName() string { return p.Model }
