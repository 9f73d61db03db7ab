package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/wop-dev/wop/convo"
	"github.com/wop-dev/wop/packs"
)

// Canonical provider ids, as reported in convo.ModelRoundResult.Provider and accepted by
// WOP_MODEL_PROVIDER and ModelRoundOptions.
const (
	ProviderMock             = "mock"
	ProviderOpenAI           = "openai"
	ProviderAnthropic        = "anthropic"
	ProviderOpenAICompatible = "openai-compatible"
	ProviderGemini           = "gemini"       // the Gemini API (google.golang.org/genai)
	ProviderVertex           = "vertex"       // Gemini on Vertex AI (the same SDK)
	ProviderBedrock          = "bedrock"      // AWS Bedrock's Converse API (aws-sdk-go-v2)
	ProviderAzureOpenAI      = "azure-openai" // Azure OpenAI (openai-go's azure package)
)

// DefaultProviderKey is the logical provider key of the primary provider; a round
// whose key is empty or not configured uses it.
const DefaultProviderKey = "default"

// Provider is one model backend behind a provider-neutral interface
// (promptpack-workflow.md §5.3). Implementations must be safe for concurrent use, must
// not retry on their own (Temporal retries the activity), and must return errors
// built with the ErrType* constants so the workflow can tell permanent from transient
// failures. They must never put their credentials into an error, a log or a result.
type Provider interface {
	// Name is the canonical provider id: mock, openai, anthropic, openai-compatible,
	// gemini, vertex, bedrock, azure-openai.
	Name() string
	// Complete runs one model round over the request's transcript, passing the reply's
	// text to req.Stream as it is produced.
	Complete(ctx context.Context, req *Request) (*convo.ModelRoundResult, error)
}

// Checker is a provider that can tell at start whether it can serve at all (its
// credentials resolve), so a worker refuses to start instead of failing its rounds.
type Checker interface {
	Check(ctx context.Context) error
}

// CheckProviders runs Check on every provider that has one, in key order.
func CheckProviders(ctx context.Context, providers map[string]Provider) error {
	for _, key := range slices.Sorted(maps.Keys(providers)) {
		if c, ok := providers[key].(Checker); ok {
			if err := c.Check(ctx); err != nil {
				return fmt.Errorf("provider %q: %w", key, err)
			}
		}
	}
	return nil
}

// Request is one model round as a provider sees it: the activity input plus the
// transcript the activity fetched through the input's convo.TranscriptRef.
type Request struct {
	Input convo.ModelRoundInput
	// Messages are the round's context: messages [From, To) of the transcript.
	Messages []convo.Message
	// Earlier are messages [0, From), read only for a provider that asks for the whole
	// transcript (the scripted mock); nil otherwise.
	Earlier []convo.Message
	// Stream, when not nil, receives the reply's text while the provider produces it,
	// piece by piece and in order; the pieces concatenate to the result's Text. The
	// ModelRound activity points it at the worker's chunk hub (package chunks). A
	// provider that cannot stream may call it once with the whole text, or not at all.
	Stream func(text string)
}

// emit passes a piece of the reply to Stream.
func (r *Request) emit(text string) {
	if r.Stream != nil && text != "" {
		r.Stream(text)
	}
}

// wholeTranscriptProvider is a provider whose rounds of a pack need Request.Earlier.
type wholeTranscriptProvider interface {
	wantsWholeTranscript(pack string) bool
}

// parameters decodes the prompt's sampling parameters (packs.Parameters as JSON).
// Absent or null parameters are the zero value.
func (r *Request) parameters() (packs.Parameters, error) {
	var p packs.Parameters
	if len(r.Input.Parameters) == 0 || string(r.Input.Parameters) == "null" {
		return p, nil
	}
	if err := json.Unmarshal(r.Input.Parameters, &p); err != nil {
		return p, nonRetryable(ErrTypeBadRequest, "prompt %q: parameters are not valid packs.Parameters JSON: %v", r.Input.Prompt, err)
	}
	return p, nil
}

// offeredTools returns the tools to declare to the model: none when the tool choice
// is "none" (the model then cannot call any), else all of them.
func (r *Request) offeredTools() []convo.ToolSpec {
	if r.Input.ToolChoice == "none" {
		return nil
	}
	return r.Input.Tools
}

// callID returns the tool-call id a provider did not supply, in the mock's
// deterministic form call_<round>_<i>_<name>.
func callID(round, i int, name string) string {
	return fmt.Sprintf("call_%d_%d_%s", round, i, name)
}

// objectArgs returns raw tool-call arguments as a JSON object. Empty arguments are
// {}; arguments that are not a JSON object (models occasionally emit broken JSON)
// are kept verbatim under "_raw_arguments" so the tool, or the workflow's schema
// check, can answer the model with an error instead of failing the round.
func objectArgs(raw string) json.RawMessage {
	if raw == "" {
		return json.RawMessage(`{}`)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &obj); err == nil && obj != nil {
		return json.RawMessage(raw)
	}
	b, _ := json.Marshal(map[string]string{"_raw_arguments": raw})
	return b
}

// schemaObject decodes a tool's JSON Schema; an empty schema is an object with no
// properties.
func schemaObject(name string, raw json.RawMessage) (map[string]any, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return map[string]any{"type": "object", "properties": map[string]any{}}, nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, nonRetryable(ErrTypeBadRequest, "tool %q: parameters are not a JSON Schema object", name)
	}
	return m, nil
}

// toolResultText is the text of a tool-result message as sent to a provider that has
// no error flag (OpenAI chat completions): error results are marked.
func toolResultText(m convo.Message) string {
	text := m.Text
	if text == "" {
		text = "{}"
	}
	if m.IsError {
		return "ERROR: " + text
	}
	return text
}
