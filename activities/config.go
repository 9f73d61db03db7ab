package activities

import (
	"fmt"
	"net/url"
	"strings"
)

// Environment variables read by ProvidersFromEnv (the table is in the package doc).
const (
	EnvModelProvider           = "WOP_MODEL_PROVIDER"
	EnvModel                   = "WOP_MODEL"
	EnvOpenAIKey               = "OPENAI_API_KEY"
	EnvOpenAIBaseURL           = "OPENAI_BASE_URL"
	EnvAnthropicKey            = "ANTHROPIC_API_KEY"
	EnvAnthropicBaseURL        = "ANTHROPIC_BASE_URL"
	EnvOpenAICompatibleBaseURL = "WOP_OPENAI_COMPATIBLE_BASE_URL"
	EnvOpenAICompatibleKey     = "WOP_OPENAI_COMPATIBLE_API_KEY"
)

// ProvidersFromEnv builds the provider registry from the worker's environment, read
// only through getenv (pass os.Getenv). It returns the primary provider under
// DefaultProviderKey. WOP_MODEL_PROVIDER picks it (mock, openai, anthropic,
// openai-compatible); when unset, the first of OPENAI_API_KEY, ANTHROPIC_API_KEY and
// WOP_OPENAI_COMPATIBLE_BASE_URL that is set decides, and without any of them the
// scripted mock is used. Errors name the missing or malformed variable, never a key.
func ProvidersFromEnv(getenv func(string) string) (map[string]Provider, error) {
	env := func(k string) string { return strings.TrimSpace(getenv(k)) }
	kind := strings.ToLower(env(EnvModelProvider))
	if kind == "" {
		switch {
		case env(EnvOpenAIKey) != "":
			kind = ProviderOpenAI
		case env(EnvAnthropicKey) != "":
			kind = ProviderAnthropic
		case env(EnvOpenAICompatibleBaseURL) != "":
			kind = ProviderOpenAICompatible
		default:
			kind = ProviderMock
		}
	}
	model := env(EnvModel)

	var p Provider
	switch kind {
	case ProviderMock:
		p = &MockProvider{}
	case ProviderOpenAI:
		key := env(EnvOpenAIKey)
		if key == "" {
			return nil, fmt.Errorf("%s=openai needs %s in the worker's environment", EnvModelProvider, EnvOpenAIKey)
		}
		base, err := baseURL(EnvOpenAIBaseURL, env(EnvOpenAIBaseURL))
		if err != nil {
			return nil, err
		}
		p = NewOpenAIProvider(key, model, base)
	case ProviderAnthropic:
		key := env(EnvAnthropicKey)
		if key == "" {
			return nil, fmt.Errorf("%s=anthropic needs %s in the worker's environment", EnvModelProvider, EnvAnthropicKey)
		}
		base, err := baseURL(EnvAnthropicBaseURL, env(EnvAnthropicBaseURL))
		if err != nil {
			return nil, err
		}
		p = NewAnthropicProvider(key, model, base)
	case ProviderOpenAICompatible:
		raw := env(EnvOpenAICompatibleBaseURL)
		if raw == "" {
			return nil, fmt.Errorf("%s=openai-compatible needs %s (for Ollama: http://localhost:11434/v1)", EnvModelProvider, EnvOpenAICompatibleBaseURL)
		}
		base, err := baseURL(EnvOpenAICompatibleBaseURL, raw)
		if err != nil {
			return nil, err
		}
		if model == "" {
			return nil, fmt.Errorf("%s=openai-compatible needs %s, the name of a model the endpoint serves", EnvModelProvider, EnvModel)
		}
		p = NewOpenAICompatibleProvider(env(EnvOpenAICompatibleKey), model, base)
	default:
		return nil, fmt.Errorf("%s=%q is not a provider: use mock, openai, anthropic or openai-compatible", EnvModelProvider, kind)
	}
	return map[string]Provider{DefaultProviderKey: p}, nil
}

// baseURL checks an optional base URL variable: empty stays empty (the provider's
// default), anything else must be an absolute http(s) URL.
func baseURL(name, raw string) (string, error) {
	if raw == "" {
		return "", nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%s=%q is not an absolute http(s) URL", name, raw)
	}
	if u.User != nil {
		return "", fmt.Errorf("%s must not carry credentials in the URL; use the API key variable", name)
	}
	return raw, nil
}
