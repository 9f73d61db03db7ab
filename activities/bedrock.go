package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/document"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/aws/smithy-go"

	"github.com/wop-dev/wop/convo"
)

// BedrockConfig configures the bedrock provider.
type BedrockConfig struct {
	// Model is the model id or inference profile rounds call (WOP_MODEL), e.g.
	// anthropic.claude-sonnet-4-20250514-v1:0 or us.amazon.nova-pro-v1:0. Required.
	Model string
	// Region overrides the region of the SDK's configuration (AWS_REGION).
	Region string
	// Endpoint replaces the service endpoint (AWS_ENDPOINT_URL_BEDROCK_RUNTIME): a VPC
	// endpoint, a proxy, a test server.
	Endpoint string
	// AWS is the SDK configuration (credentials, region, HTTP client). Nil: the SDK's
	// default configuration chain (environment, shared config and credentials files,
	// SSO, web identity, container and instance roles).
	AWS *aws.Config
	// NoStream asks for the whole reply at once (Converse) instead of a stream
	// (ConverseStream). Without it, a model that cannot stream a round (some models
	// cannot stream tool use) is asked with Converse from then on.
	NoStream bool
}

// BedrockProvider calls Bedrock's Converse API through aws-sdk-go-v2: ConverseStream,
// or Converse for a model that cannot stream. The SDK's retryer is off: Temporal
// retries the activity.
type BedrockProvider struct {
	Model    string
	Region   string
	Endpoint string

	noStream atomic.Bool
	client   *bedrockruntime.Client
}

// NewBedrockProvider builds the bedrock provider, loading the SDK's default
// configuration when cfg.AWS is nil. It needs a region.
func NewBedrockProvider(ctx context.Context, cfg BedrockConfig) (*BedrockProvider, error) {
	if cfg.Model == "" {
		return nil, fmt.Errorf("bedrock needs the model id or inference profile (%s), e.g. anthropic.claude-sonnet-4-20250514-v1:0", EnvModel)
	}
	var ac aws.Config
	if cfg.AWS != nil {
		ac = cfg.AWS.Copy()
	} else {
		var opts []func(*awsconfig.LoadOptions) error
		if cfg.Region != "" {
			opts = append(opts, awsconfig.WithRegion(cfg.Region))
		}
		loaded, err := awsconfig.LoadDefaultConfig(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("bedrock: load the AWS configuration: %w", err)
		}
		ac = loaded
	}
	if cfg.Region != "" {
		ac.Region = cfg.Region
	}
	if ac.Region == "" {
		return nil, fmt.Errorf("bedrock needs a region (%s, or region in the AWS config file)", EnvAWSRegion)
	}
	client := bedrockruntime.NewFromConfig(ac, func(o *bedrockruntime.Options) {
		o.Retryer = aws.NopRetryer{}
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
	})
	p := &BedrockProvider{Model: cfg.Model, Region: ac.Region, Endpoint: cfg.Endpoint, client: client}
	p.noStream.Store(cfg.NoStream)
	return p, nil
}

// Name implements Provider.
func (*BedrockProvider) Name() string { return ProviderBedrock }

// Check implements Checker: the SDK's credential chain must yield credentials.
func (p *BedrockProvider) Check(ctx context.Context) error {
	creds := p.client.Options().Credentials
	if creds == nil {
		return errors.New("bedrock: the AWS SDK found no credentials (environment, shared files, SSO, web identity, container or instance role)")
	}
	if _, err := creds.Retrieve(ctx); err != nil {
		return fmt.Errorf("bedrock: the AWS SDK's credential chain found no usable credentials: %w", err)
	}
	return nil
}

// String describes the provider (it holds no secret: credentials stay in the SDK).
func (p *BedrockProvider) String() string {
	return fmt.Sprintf("bedrock(model=%s, region=%s)", p.Model, p.Region)
}

// LogValue implements slog.LogValuer.
func (p *BedrockProvider) LogValue() slog.Value {
	return slog.GroupValue(slog.String("provider", ProviderBedrock), slog.String("model", p.Model), slog.String("region", p.Region))
}

// ModelName is the model the provider calls; a round applies the prompt's
// model_overrides entry of that name.
func (p *BedrockProvider) ModelName() string { return p.Model }

// Complete implements Provider. With ConverseStream, text deltas go to req.Stream as
// they arrive (text blocks after the first preceded by the blank line that joins them);
// tool use arrives as JSON fragments, assembled per block.
func (p *BedrockProvider) Complete(ctx context.Context, req *Request) (*convo.ModelRoundResult, error) {
	msgs, system, tools, inference, err := p.request(req)
	if err != nil {
		return nil, err
	}
	if !p.noStream.Load() {
		res, err := p.stream(ctx, req, &bedrockruntime.ConverseStreamInput{
			ModelId: aws.String(p.Model), Messages: msgs, System: system, ToolConfig: tools, InferenceConfig: inference,
		})
		if !cannotStream(err) {
			return res, err
		}
		// The model refused to stream this round: ask it whole, and from now on.
		p.noStream.Store(true)
	}
	out, err := p.client.Converse(ctx, &bedrockruntime.ConverseInput{
		ModelId: aws.String(p.Model), Messages: msgs, System: system, ToolConfig: tools, InferenceConfig: inference,
	})
	if err != nil {
		return nil, p.failure(ctx, err)
	}
	reply := bedrockReply{}
	msg, ok := out.Output.(*types.ConverseOutputMemberMessage)
	if !ok {
		return nil, badResponse(ProviderBedrock, "the Converse output holds no message")
	}
	for i, b := range msg.Value.Content {
		switch b := b.(type) {
		case *types.ContentBlockMemberText:
			reply.text(i, b.Value)
		case *types.ContentBlockMemberToolUse:
			var input []byte
			if b.Value.Input != nil {
				if input, err = b.Value.Input.MarshalSmithyDocument(); err != nil {
					return nil, badResponse(ProviderBedrock, fmt.Sprintf("tool use %d: input: %v", i, err))
				}
			}
			reply.toolStart(i, aws.ToString(b.Value.ToolUseId), aws.ToString(b.Value.Name))
			reply.toolInput(i, string(input))
		}
	}
	reply.stop = string(out.StopReason)
	reply.usage = out.Usage
	res, err := reply.result(req, p.Model)
	if err == nil {
		req.emit(res.Text)
	}
	return res, err
}

// stream runs one round with ConverseStream.
func (p *BedrockProvider) stream(ctx context.Context, req *Request, in *bedrockruntime.ConverseStreamInput) (*convo.ModelRoundResult, error) {
	out, err := p.client.ConverseStream(ctx, in)
	if err != nil {
		return nil, p.failure(ctx, err)
	}
	stream := out.GetStream()
	defer stream.Close()
	reply := bedrockReply{req: req}
	for ev := range stream.Events() {
		switch ev := ev.(type) {
		case *types.ConverseStreamOutputMemberContentBlockStart:
			if tu, ok := ev.Value.Start.(*types.ContentBlockStartMemberToolUse); ok {
				reply.toolStart(int(aws.ToInt32(ev.Value.ContentBlockIndex)), aws.ToString(tu.Value.ToolUseId), aws.ToString(tu.Value.Name))
			}
		case *types.ConverseStreamOutputMemberContentBlockDelta:
			block := int(aws.ToInt32(ev.Value.ContentBlockIndex))
			switch d := ev.Value.Delta.(type) {
			case *types.ContentBlockDeltaMemberText:
				reply.text(block, d.Value)
			case *types.ContentBlockDeltaMemberToolUse:
				reply.toolInput(block, aws.ToString(d.Value.Input))
			}
		case *types.ConverseStreamOutputMemberMessageStop:
			reply.stop = string(ev.Value.StopReason)
		case *types.ConverseStreamOutputMemberMetadata:
			reply.usage = ev.Value.Usage
		}
	}
	if err := stream.Err(); err != nil {
		return nil, p.failure(ctx, err)
	}
	if reply.stop == "" {
		return nil, badResponse(ProviderBedrock, "the stream ended without messageStop")
	}
	return reply.result(req, p.Model)
}

// cannotStream reports whether err is Bedrock's refusal to stream a round for this
// model ("This model doesn't support tool use in streaming mode").
func cannotStream(err error) bool {
	var appErr interface{ Type() string }
	if err == nil || !errors.As(err, &appErr) || appErr.Type() != ErrTypeBadRequest {
		return false
	}
	s := strings.ToLower(err.Error())
	return strings.Contains(s, "validationexception") && strings.Contains(s, "stream")
}

// failure classifies an SDK error: by the HTTP status of the response when there was
// one (with its headers, for Retry-After), else by the exception's code (an exception
// inside the event stream has no status of its own).
func (p *BedrockProvider) failure(ctx context.Context, err error) error {
	status := 0
	var header http.Header
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
		if re.Response != nil {
			header = re.Response.Header
		}
	}
	msg := ""
	var ae smithy.APIError
	if errors.As(err, &ae) {
		msg = ae.ErrorCode()
		if m := ae.ErrorMessage(); m != "" {
			msg += ": " + m
		}
		if status == 0 {
			status = bedrockStatus(ae.ErrorCode())
		}
	}
	redact := p.redactor(ctx)
	if status != 0 {
		return classifyHTTP(httpFailure{provider: ProviderBedrock, status: status, header: header, message: msg}, redact)
	}
	return classifyTransport(ctx, ProviderBedrock, err, redact)
}

// redactor scrubs the credentials the SDK signs with (the secret key, the session
// token) from an error's text. Bedrock does not echo them, but nothing a provider
// answers is trusted to hold no secret.
func (p *BedrockProvider) redactor(ctx context.Context) func(string) string {
	creds := p.client.Options().Credentials
	if creds == nil || ctx.Err() != nil {
		return redactor()
	}
	c, err := creds.Retrieve(ctx) // cached by the SDK: no new request
	if err != nil {
		return redactor()
	}
	return redactor(c.SecretAccessKey, c.SessionToken)
}

// bedrockStatus is the HTTP status Bedrock answers an exception with, for an exception
// that arrives inside an event stream.
func bedrockStatus(code string) int {
	switch code {
	case "ThrottlingException", "ModelNotReadyException", "ServiceQuotaExceededException":
		return http.StatusTooManyRequests
	case "InternalServerException", "ModelStreamErrorException", "ServiceUnavailableException":
		return http.StatusServiceUnavailable
	case "ModelTimeoutException":
		return http.StatusRequestTimeout
	case "AccessDeniedException", "UnrecognizedClientException", "ExpiredTokenException", "InvalidSignatureException":
		return http.StatusForbidden
	case "ResourceNotFoundException":
		return http.StatusNotFound
	default:
		return http.StatusBadRequest
	}
}

// request builds a round's messages, system blocks, tool configuration and inference
// parameters.
func (p *BedrockProvider) request(req *Request) ([]types.Message, []types.SystemContentBlock, *types.ToolConfiguration, *types.InferenceConfiguration, error) {
	in := req.Input
	var system []types.SystemContentBlock
	if in.System != "" {
		system = append(system, &types.SystemContentBlockMemberText{Value: in.System})
	}
	offered := req.offeredTools()
	// Bedrock refuses toolUse and toolResult blocks in a request that declares no
	// tools: a round offered none sees the earlier calls and results as text.
	asText := len(offered) == 0
	var msgs []types.Message
	add := func(role types.ConversationRole, blocks ...types.ContentBlock) {
		if len(blocks) == 0 {
			return
		}
		if n := len(msgs); n > 0 && msgs[n-1].Role == role {
			msgs[n-1].Content = append(msgs[n-1].Content, blocks...)
			return
		}
		msgs = append(msgs, types.Message{Role: role, Content: blocks})
	}
	for i, m := range req.Messages {
		switch m.Role {
		case convo.RoleSystem:
			if m.Text != "" {
				system = append(system, &types.SystemContentBlockMemberText{Value: m.Text})
			}
		case convo.RoleUser:
			if m.Text != "" {
				add(types.ConversationRoleUser, &types.ContentBlockMemberText{Value: m.Text})
			}
		case convo.RoleAssistant:
			var blocks []types.ContentBlock
			if m.Text != "" {
				blocks = append(blocks, &types.ContentBlockMemberText{Value: m.Text})
			}
			for _, c := range m.ToolCalls {
				args := c.Args
				if len(args) == 0 {
					args = json.RawMessage(`{}`)
				}
				if asText {
					blocks = append(blocks, &types.ContentBlockMemberText{Value: fmt.Sprintf("[called tool %s with %s]", c.Name, args)})
					continue
				}
				var input any
				if err := json.Unmarshal(args, &input); err != nil {
					input = map[string]any{"_raw_arguments": string(args)}
				}
				blocks = append(blocks, &types.ContentBlockMemberToolUse{Value: types.ToolUseBlock{
					ToolUseId: aws.String(c.ID), Name: aws.String(c.Name), Input: document.NewLazyDocument(input),
				}})
			}
			add(types.ConversationRoleAssistant, blocks...)
		case convo.RoleTool:
			text := m.Text
			if text == "" {
				text = "{}"
			}
			if asText {
				add(types.ConversationRoleUser, &types.ContentBlockMemberText{Value: fmt.Sprintf("[result of tool %s: %s]", m.Name, toolResultText(m))})
				continue
			}
			res := types.ToolResultBlock{ToolUseId: aws.String(m.ToolCallID),
				Content: []types.ToolResultContentBlock{&types.ToolResultContentBlockMemberText{Value: text}}}
			if m.IsError {
				res.Status = types.ToolResultStatusError
			}
			add(types.ConversationRoleUser, &types.ContentBlockMemberToolResult{Value: res})
		default:
			return nil, nil, nil, nil, nonRetryable(ErrTypeBadRequest, "transcript message %d has unknown role %q", i, m.Role)
		}
	}
	// Converse needs a user message first.
	if len(msgs) == 0 || msgs[0].Role != types.ConversationRoleUser {
		msgs = append([]types.Message{{Role: types.ConversationRoleUser, Content: []types.ContentBlock{&types.ContentBlockMemberText{Value: continueCue}}}}, msgs...)
	}

	var tools *types.ToolConfiguration
	for _, t := range offered {
		schema, err := schemaObject(t.Name, t.Parameters)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		spec := types.ToolSpecification{Name: aws.String(t.Name), InputSchema: &types.ToolInputSchemaMemberJson{Value: document.NewLazyDocument(schema)}}
		if t.Description != "" {
			spec.Description = aws.String(t.Description)
		}
		if tools == nil {
			tools = &types.ToolConfiguration{}
		}
		tools.Tools = append(tools.Tools, &types.ToolMemberToolSpec{Value: spec})
	}
	if tools != nil {
		switch in.ToolChoice {
		case "required":
			tools.ToolChoice = &types.ToolChoiceMemberAny{}
		case "auto":
			tools.ToolChoice = &types.ToolChoiceMemberAuto{}
		}
	}

	sp, err := req.parameters()
	if err != nil {
		return nil, nil, nil, nil, err
	}
	var inference *types.InferenceConfiguration
	if sp.Temperature != nil || sp.TopP != nil || sp.MaxTokens != nil {
		inference = &types.InferenceConfiguration{}
		if sp.Temperature != nil {
			inference.Temperature = aws.Float32(float32(*sp.Temperature))
		}
		if sp.TopP != nil {
			inference.TopP = aws.Float32(float32(*sp.TopP))
		}
		if sp.MaxTokens != nil && *sp.MaxTokens > 0 {
			inference.MaxTokens = aws.Int32(int32(*sp.MaxTokens))
		}
	}
	// top_k and the penalties have no Converse field (top_k is model-specific there);
	// they are not sent.
	return msgs, system, tools, inference, nil
}

// bedrockReply assembles the content blocks of a Converse answer, streamed or whole.
type bedrockReply struct {
	req    *Request // nil: nothing streams
	texts  textJoiner
	blocks []bedrockBlock
	stop   string
	usage  *types.TokenUsage
}

type bedrockBlock struct {
	index    int
	text     strings.Builder
	tool     bool
	id, name string
	input    strings.Builder
}

func (r *bedrockReply) block(index int) *bedrockBlock {
	for i := range r.blocks {
		if r.blocks[i].index == index {
			return &r.blocks[i]
		}
	}
	r.blocks = append(r.blocks, bedrockBlock{index: index})
	return &r.blocks[len(r.blocks)-1]
}

func (r *bedrockReply) text(index int, s string) {
	if s == "" {
		return
	}
	r.block(index).text.WriteString(s)
	if r.req != nil {
		r.texts.req = r.req
		r.texts.text(index, s)
	}
}

func (r *bedrockReply) toolStart(index int, id, name string) {
	b := r.block(index)
	b.tool, b.id, b.name = true, id, name
}

func (r *bedrockReply) toolInput(index int, s string) { r.block(index).input.WriteString(s) }

func (r *bedrockReply) result(req *Request, model string) (*convo.ModelRoundResult, error) {
	res := &convo.ModelRoundResult{Provider: ProviderBedrock, Model: model, FinishReason: r.stop}
	if u := r.usage; u != nil {
		res.Usage = convo.Usage{InputTokens: int(aws.ToInt32(u.InputTokens)), OutputTokens: int(aws.ToInt32(u.OutputTokens))}
	}
	var texts []string
	for i := range r.blocks {
		b := &r.blocks[i]
		if !b.tool {
			if t := b.text.String(); t != "" {
				texts = append(texts, t)
			}
			continue
		}
		if strings.TrimSpace(b.name) == "" {
			return nil, badResponse(ProviderBedrock, fmt.Sprintf("tool use block %d has no name", b.index))
		}
		id := b.id
		if id == "" {
			id = callID(req.Input.Round, len(res.ToolCalls), b.name)
		}
		res.ToolCalls = append(res.ToolCalls, convo.ToolCall{ID: id, Name: b.name, Args: objectArgs(b.input.String())})
	}
	res.Text = strings.Join(texts, "\n\n")
	return res, nil
}
