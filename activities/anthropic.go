package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/wop-dev/wop/convo"
)

// DefaultAnthropicModel is the model of the anthropic provider when WOP_MODEL is unset.
const DefaultAnthropicModel = "claude-sonnet-4-5"

// DefaultAnthropicBaseURL is the Anthropic API's base URL.
const DefaultAnthropicBaseURL = "https://api.anthropic.com/"

// DefaultAnthropicMaxTokens is the max_tokens of a request whose prompt sets none
// (the messages API requires the field).
const DefaultAnthropicMaxTokens = 4096

// continueCue is the user message sent to Anthropic when a transcript has no user
// message to start with.
const continueCue = "(continue)"

// AnthropicProvider calls the messages API with tool use, through the official SDK.
// As for OpenAI, the SDK's own retries are disabled in favour of Temporal's.
type AnthropicProvider struct {
	Model      string
	BaseURL    string // empty: DefaultAnthropicBaseURL
	HTTPClient *http.Client

	apiKey string
	svc    anthropic.MessageService
}

// NewAnthropicProvider builds the provider. model and baseURL may be empty.
func NewAnthropicProvider(apiKey, model, baseURL string) *AnthropicProvider {
	if model == "" {
		model = DefaultAnthropicModel
	}
	if baseURL == "" {
		baseURL = DefaultAnthropicBaseURL
	}
	hc := &http.Client{}
	p := &AnthropicProvider{Model: model, BaseURL: baseURL, HTTPClient: hc, apiKey: apiKey}
	// WithoutEnvironmentDefaults: the SDK reads no key, profile or URL from the
	// process environment; the key comes only from the worker's configuration.
	client := anthropic.NewClient(
		option.WithoutEnvironmentDefaults(),
		option.WithAPIKey(apiKey),
		option.WithBaseURL(baseURL),
		option.WithHTTPClient(hc),
		option.WithMaxRetries(0),
	)
	p.svc = client.Messages
	return p
}

// Name implements Provider.
func (*AnthropicProvider) Name() string { return ProviderAnthropic }

// String describes the provider without its key.
func (p *AnthropicProvider) String() string {
	return fmt.Sprintf("anthropic(model=%s, baseURL=%s, key=%s)", p.Model, p.BaseURL, redactedKey(p.apiKey))
}

// LogValue implements slog.LogValuer without the key.
func (p *AnthropicProvider) LogValue() slog.Value {
	return slog.GroupValue(slog.String("provider", ProviderAnthropic), slog.String("model", p.Model),
		slog.String("baseURL", p.BaseURL), slog.String("key", redactedKey(p.apiKey)))
}

// Complete implements Provider. The message is streamed: each text delta goes to
// req.Stream as it arrives (text blocks after the first are preceded by the blank line
// that joins them in the result), and the result is assembled from the same events by
// the SDK's accumulator.
func (p *AnthropicProvider) Complete(ctx context.Context, req *Request) (*convo.ModelRoundResult, error) {
	params, opts, err := p.params(req)
	if err != nil {
		return nil, err
	}
	redact := redactor(p.apiKey)
	stream := p.svc.NewStreaming(ctx, params, opts...)
	defer stream.Close()
	var msg anthropic.Message
	texts := textJoiner{req: req}
	for stream.Next() {
		ev := stream.Current()
		if err := msg.Accumulate(ev); err != nil {
			return nil, badResponse(ProviderAnthropic, "the streamed events do not form a message: "+err.Error())
		}
		switch ev.Type {
		case "content_block_start":
			if ev.ContentBlock.Type == "text" {
				texts.text(int(ev.Index), ev.ContentBlock.Text)
			}
		case "content_block_delta":
			if ev.Delta.Type == "text_delta" {
				texts.text(int(ev.Index), ev.Delta.Text)
			}
		}
	}
	if err := stream.Err(); err != nil {
		var apiErr *anthropic.Error
		if errors.As(err, &apiErr) {
			return nil, classifyHTTP(httpFailure{
				provider: ProviderAnthropic, status: apiErr.StatusCode, header: responseHeader(apiErr.Response), message: apiErr.Message,
			}, redact)
		}
		return nil, classifyTransport(ctx, ProviderAnthropic, err, redact)
	}
	return p.result(req, &msg)
}

// textJoiner streams the text blocks of a message as result joins them: non-empty
// blocks separated by a blank line.
type textJoiner struct {
	req     *Request
	started map[int]bool
	any     bool
}

func (j *textJoiner) text(block int, text string) {
	if text == "" {
		return
	}
	if !j.started[block] {
		if j.started == nil {
			j.started = map[int]bool{}
		}
		j.started[block] = true
		if j.any {
			j.req.emit("\n\n")
		}
		j.any = true
	}
	j.req.emit(text)
}

func (p *AnthropicProvider) params(req *Request) (anthropic.MessageNewParams, []option.RequestOption, error) {
	in := req.Input
	params := anthropic.MessageNewParams{Model: anthropic.Model(p.Model), MaxTokens: DefaultAnthropicMaxTokens}

	// The messages API has no system role: the system prompt and any system messages
	// of the transcript become system blocks.
	if in.System != "" {
		params.System = append(params.System, anthropic.TextBlockParam{Text: in.System})
	}
	// Consecutive messages of one role are merged (tool results of one round, then
	// the next user text, form one user message), and empty text blocks are skipped:
	// the API rejects both.
	type turn struct {
		user   bool
		blocks []anthropic.ContentBlockParamUnion
	}
	var turns []turn
	add := func(user bool, blocks ...anthropic.ContentBlockParamUnion) {
		if len(blocks) == 0 {
			return
		}
		if n := len(turns); n > 0 && turns[n-1].user == user {
			turns[n-1].blocks = append(turns[n-1].blocks, blocks...)
			return
		}
		turns = append(turns, turn{user: user, blocks: blocks})
	}
	for i, m := range req.Messages {
		switch m.Role {
		case convo.RoleSystem:
			if m.Text != "" {
				params.System = append(params.System, anthropic.TextBlockParam{Text: m.Text})
			}
		case convo.RoleUser:
			if m.Text != "" {
				add(true, anthropic.NewTextBlock(m.Text))
			}
		case convo.RoleAssistant:
			var blocks []anthropic.ContentBlockParamUnion
			if m.Text != "" {
				blocks = append(blocks, anthropic.NewTextBlock(m.Text))
			}
			for _, c := range m.ToolCalls {
				args := c.Args
				if len(args) == 0 {
					args = json.RawMessage(`{}`)
				}
				blocks = append(blocks, anthropic.NewToolUseBlock(c.ID, args, c.Name))
			}
			add(false, blocks...)
		case convo.RoleTool:
			text := m.Text
			if text == "" {
				text = "{}"
			}
			add(true, anthropic.NewToolResultBlock(m.ToolCallID, text, m.IsError))
		default:
			return params, nil, nonRetryable(ErrTypeBadRequest, "transcript message %d has unknown role %q", i, m.Role)
		}
	}

	// The messages API needs at least one message and a user message first; a round
	// with an empty transcript (a terminal prompt after a context reset) or one that
	// opens with the agent's greeting gets a neutral user cue.
	if len(turns) == 0 || !turns[0].user {
		turns = append([]turn{{user: true, blocks: []anthropic.ContentBlockParamUnion{anthropic.NewTextBlock(continueCue)}}}, turns...)
	}
	for _, t := range turns {
		if t.user {
			params.Messages = append(params.Messages, anthropic.NewUserMessage(t.blocks...))
		} else {
			params.Messages = append(params.Messages, anthropic.NewAssistantMessage(t.blocks...))
		}
	}

	for _, t := range req.offeredTools() {
		schema, err := schemaObject(t.Name, t.Parameters)
		if err != nil {
			return params, nil, err
		}
		is := anthropic.ToolInputSchemaParam{Properties: schema["properties"], ExtraFields: map[string]any{}}
		if req, ok := schema["required"].([]any); ok {
			for _, r := range req {
				if s, ok := r.(string); ok {
					is.Required = append(is.Required, s)
				}
			}
		}
		for k, v := range schema {
			if k != "type" && k != "properties" && k != "required" {
				is.ExtraFields[k] = v
			}
		}
		tool := anthropic.ToolUnionParamOfTool(is, t.Name)
		if t.Description != "" {
			tool.OfTool.Description = anthropic.String(t.Description)
		}
		params.Tools = append(params.Tools, tool)
	}
	if len(params.Tools) > 0 {
		switch in.ToolChoice {
		case "required":
			params.ToolChoice.OfAny = &anthropic.ToolChoiceAnyParam{}
		case "auto":
			params.ToolChoice.OfAuto = &anthropic.ToolChoiceAutoParam{}
		}
	}

	sp, err := req.parameters()
	if err != nil {
		return params, nil, err
	}
	if sp.MaxTokens != nil && *sp.MaxTokens > 0 {
		params.MaxTokens = int64(*sp.MaxTokens)
	}
	// Sampling parameters are set on the request body directly: this SDK version
	// no longer types them, the API still accepts them.
	var opts []option.RequestOption
	if sp.Temperature != nil {
		opts = append(opts, option.WithJSONSet("temperature", *sp.Temperature))
	}
	if sp.TopP != nil {
		opts = append(opts, option.WithJSONSet("top_p", *sp.TopP))
	}
	if sp.TopK != nil {
		opts = append(opts, option.WithJSONSet("top_k", *sp.TopK))
	}
	// frequency_penalty and presence_penalty have no messages-API field; not sent.
	return params, opts, nil
}

func (p *AnthropicProvider) result(req *Request, msg *anthropic.Message) (*convo.ModelRoundResult, error) {
	if msg == nil {
		return nil, badResponse(ProviderAnthropic, "empty message")
	}
	res := &convo.ModelRoundResult{
		Provider:     ProviderAnthropic,
		Model:        msg.Model,
		FinishReason: string(msg.StopReason),
		Usage:        convo.Usage{InputTokens: int(msg.Usage.InputTokens), OutputTokens: int(msg.Usage.OutputTokens)},
	}
	if res.Model == "" {
		res.Model = p.Model
	}
	var texts []string
	for i, b := range msg.Content {
		switch b.Type {
		case "text":
			if b.Text != "" {
				texts = append(texts, b.Text)
			}
		case "tool_use":
			if strings.TrimSpace(b.Name) == "" {
				return nil, badResponse(ProviderAnthropic, fmt.Sprintf("tool_use block %d has no name", i))
			}
			id := b.ID
			if id == "" {
				id = callID(req.Input.Round, len(res.ToolCalls), b.Name)
			}
			res.ToolCalls = append(res.ToolCalls, convo.ToolCall{ID: id, Name: b.Name, Args: objectArgs(string(b.Input))})
		default:
			// thinking and server-tool blocks carry nothing the transcript keeps.
		}
	}
	if msg.Content == nil && msg.StopReason == "" {
		return nil, badResponse(ProviderAnthropic, "no content and no stop_reason")
	}
	res.Text = strings.Join(texts, "\n\n")
	return res, nil
}

// ModelName is the model the provider calls; a round applies the prompt's
// model_overrides entry of that name.
func (p *AnthropicProvider) ModelName() string { return p.Model }
