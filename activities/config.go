package activities

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/aws/aws-sdk-go-v2/aws"
	awscreds "github.com/aws/aws-sdk-go-v2/credentials"
	"gopkg.in/yaml.v3"
)

// Environment variables read by ProviderConfigFromEnv (the table is in the package doc).
const (
	EnvModelProvider           = "WOP_MODEL_PROVIDER"
	EnvModel                   = "WOP_MODEL"
	EnvProvidersFile           = "WOP_PROVIDERS"
	EnvOpenAIKey               = "OPENAI_API_KEY"
	EnvOpenAIBaseURL           = "OPENAI_BASE_URL"
	EnvAnthropicKey            = "ANTHROPIC_API_KEY"
	EnvAnthropicBaseURL        = "ANTHROPIC_BASE_URL"
	EnvOpenAICompatibleBaseURL = "WOP_OPENAI_COMPATIBLE_BASE_URL"
	EnvOpenAICompatibleKey     = "WOP_OPENAI_COMPATIBLE_API_KEY"
	EnvGeminiKey               = "GEMINI_API_KEY"
	EnvGoogleKey               = "GOOGLE_API_KEY"
	EnvGeminiBaseURL           = "GOOGLE_GEMINI_BASE_URL"
	EnvVertexBaseURL           = "GOOGLE_VERTEX_BASE_URL"
	EnvGoogleCloudProject      = "GOOGLE_CLOUD_PROJECT"
	EnvGoogleCloudLocation     = "GOOGLE_CLOUD_LOCATION"
	EnvAWSRegion               = "AWS_REGION"
	EnvAWSDefaultRegion        = "AWS_DEFAULT_REGION"
	EnvBedrockEndpoint         = "AWS_ENDPOINT_URL_BEDROCK_RUNTIME"
	EnvAzureOpenAIEndpoint     = "AZURE_OPENAI_ENDPOINT"
	EnvAzureOpenAIKey          = "AZURE_OPENAI_API_KEY"
	EnvAzureOpenAIAPIVersion   = "OPENAI_API_VERSION"
)

// providerTypes are the values of WOP_MODEL_PROVIDER and of a providers file's type.
var providerTypes = []string{ProviderMock, ProviderOpenAI, ProviderAnthropic, ProviderOpenAICompatible,
	ProviderGemini, ProviderVertex, ProviderBedrock, ProviderAzureOpenAI}

// ProviderSpec is one configured provider: what WOP_MODEL_PROVIDER and its variables
// say, or one entry of the providers file. Empty fields take the provider's standard
// variables (OPENAI_BASE_URL, GOOGLE_CLOUD_PROJECT, AWS_REGION, AZURE_OPENAI_ENDPOINT,
// ...) and then its defaults. It holds no secret: keys are read from the variable
// APIKeyEnv names, in the worker's environment, when the provider is built.
type ProviderSpec struct {
	Type  string `yaml:"type"`  // one of mock, openai, anthropic, openai-compatible, gemini, vertex, bedrock, azure-openai
	Model string `yaml:"model"` // model, Bedrock model id or inference profile, Azure deployment
	// BaseURL replaces the API's base URL (openai, anthropic, openai-compatible,
	// gemini, vertex).
	BaseURL string `yaml:"base_url"`
	// APIKeyEnv names the variable that holds the key; default the provider's own
	// (OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY then GOOGLE_API_KEY,
	// AZURE_OPENAI_API_KEY, WOP_OPENAI_COMPATIBLE_API_KEY).
	APIKeyEnv string `yaml:"api_key_env"`
	Project   string `yaml:"project"`  // vertex
	Location  string `yaml:"location"` // vertex
	Region    string `yaml:"region"`   // bedrock
	// Endpoint is the Azure OpenAI resource endpoint, or Bedrock's endpoint override.
	Endpoint   string `yaml:"endpoint"`
	APIVersion string `yaml:"api_version"` // azure-openai
	// Stream false asks gemini, vertex and bedrock for whole replies (generateContent,
	// Converse) instead of streams.
	Stream *bool `yaml:"stream"`
}

// ProviderConfig is the worker's provider configuration as read, before any client is
// built: which provider serves each logical provider key (RFC 0012 requires.providers,
// RFC 0017 prompt provider references), and per pack which keys are served by another
// key's provider. Reading it does no I/O besides the providers file, so a process
// that starts runs (the API) can read the same configuration to learn what a worker
// serves.
type ProviderConfig struct {
	// Specs maps a provider key to its provider. DefaultProviderKey is the primary: it
	// serves every key that has no entry of its own.
	Specs map[string]ProviderSpec
	// Packs maps a pack id to key → provider key: the pack's key is served by that
	// entry of Specs instead of its own.
	Packs map[string]map[string]string
	// Source says where the configuration came from, for the worker's start line:
	// "WOP_PROVIDERS=<file>", "WOP_MODEL_PROVIDER=<type>", or the variable whose
	// presence chose the provider (OPENAI_API_KEY). Empty: nothing was configured and
	// the scripted mock serves by default, which `wop worker` refuses.
	Source string
}

// providersFile is the YAML of WOP_PROVIDERS.
type providersFile struct {
	Providers map[string]ProviderSpec      `yaml:"providers"`
	Packs     map[string]map[string]string `yaml:"packs"`
}

// keyPattern is RFC 0012's provider key.
var keyPattern = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// ProviderConfigFromEnv reads the provider configuration from the worker's
// environment, through getenv only. WOP_PROVIDERS names a providers file (YAML):
//
//	providers:            # provider key → provider
//	  default:
//	    type: gemini
//	    model: gemini-2.5-flash
//	  judge:
//	    type: bedrock
//	    model: anthropic.claude-sonnet-4-20250514-v1:0
//	    region: us-east-1
//	packs:                # optional: pack id → its key → the provider key serving it
//	  refunds:
//	    default: judge
//
// Without a file, or when the file has no default entry, WOP_MODEL_PROVIDER and its
// variables configure the default key; when WOP_MODEL_PROVIDER is unset the first of
// OPENAI_API_KEY, ANTHROPIC_API_KEY and WOP_OPENAI_COMPATIBLE_BASE_URL that is set
// chooses it, and without any of them the scripted mock is the default (Source "").
// Errors name the file and line or the variable, never a key.
func ProviderConfigFromEnv(getenv func(string) string) (ProviderConfig, error) {
	env := func(k string) string { return strings.TrimSpace(getenv(k)) }
	cfg := ProviderConfig{Specs: map[string]ProviderSpec{}}
	if path := env(EnvProvidersFile); path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return cfg, fmt.Errorf("%s: %w", EnvProvidersFile, err)
		}
		f, err := parseProvidersFile(path, data)
		if err != nil {
			return cfg, err
		}
		cfg.Specs, cfg.Packs = f.Providers, f.Packs
		cfg.Source = EnvProvidersFile + "=" + path
	}
	if _, ok := cfg.Specs[DefaultProviderKey]; ok {
		return cfg, nil
	}
	kind, source := strings.ToLower(env(EnvModelProvider)), EnvModelProvider+"="+strings.ToLower(env(EnvModelProvider))
	if kind == "" {
		switch {
		case env(EnvOpenAIKey) != "":
			kind, source = ProviderOpenAI, EnvOpenAIKey
		case env(EnvAnthropicKey) != "":
			kind, source = ProviderAnthropic, EnvAnthropicKey
		case env(EnvOpenAICompatibleBaseURL) != "":
			kind, source = ProviderOpenAICompatible, EnvOpenAICompatibleBaseURL
		default:
			kind, source = ProviderMock, ""
		}
	}
	if !slices.Contains(providerTypes, kind) {
		return cfg, fmt.Errorf("%s=%q is not a provider: use %s", EnvModelProvider, kind, strings.Join(providerTypes, ", "))
	}
	cfg.Specs[DefaultProviderKey] = ProviderSpec{Type: kind, Model: env(EnvModel)}
	switch {
	case cfg.Source == "":
		cfg.Source = source
	case source != "":
		cfg.Source += ", default from " + source
	default:
		return cfg, fmt.Errorf("%s: the file has no %q entry and %s is not set: add one of them", EnvProvidersFile, DefaultProviderKey, EnvModelProvider)
	}
	return cfg, nil
}

// parseProvidersFile decodes and checks a providers file.
func parseProvidersFile(path string, data []byte) (providersFile, error) {
	var f providersFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return f, fmt.Errorf("%s: %s", path, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if len(f.Providers) == 0 {
		return f, fmt.Errorf("%s: no providers: the file needs a providers: map of keys to providers", path)
	}
	var errs []error
	for _, key := range slices.Sorted(maps.Keys(f.Providers)) {
		spec := f.Providers[key]
		spec.Type = strings.ToLower(strings.TrimSpace(spec.Type))
		f.Providers[key] = spec
		switch {
		case !keyPattern.MatchString(key):
			errs = append(errs, fmt.Errorf("%s: providers.%s: a provider key is letters, digits, _ and - (RFC 0012)", path, key))
		case spec.Type == "":
			errs = append(errs, fmt.Errorf("%s: providers.%s: type is required: one of %s", path, key, strings.Join(providerTypes, ", ")))
		case !slices.Contains(providerTypes, spec.Type):
			errs = append(errs, fmt.Errorf("%s: providers.%s: type %q is not a provider: use %s", path, key, spec.Type, strings.Join(providerTypes, ", ")))
		case spec.Stream != nil && !*spec.Stream && spec.Type != ProviderGemini && spec.Type != ProviderVertex && spec.Type != ProviderBedrock:
			errs = append(errs, fmt.Errorf("%s: providers.%s: stream: false is for gemini, vertex and bedrock", path, key))
		}
		if spec.APIKeyEnv != "" && !regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`).MatchString(spec.APIKeyEnv) {
			errs = append(errs, fmt.Errorf("%s: providers.%s: api_key_env names a variable (such as MY_KEY), not a key", path, key))
		}
	}
	for _, pack := range slices.Sorted(maps.Keys(f.Packs)) {
		for _, key := range slices.Sorted(maps.Keys(f.Packs[pack])) {
			if to := f.Packs[pack][key]; f.Providers[to].Type == "" {
				errs = append(errs, fmt.Errorf("%s: packs.%s.%s: %q is not a key of providers (%s)", path, pack, key, to,
					strings.Join(slices.Sorted(maps.Keys(f.Providers)), ", ")))
			}
		}
	}
	return f, errors.Join(errs...)
}

// ServedProvider is one provider key a worker serves: the canonical provider and its
// model.
type ServedProvider struct {
	Key      string `json:"key"`
	Provider string `json:"provider"`
	Model    string `json:"model,omitempty"`
}

// Served lists the configured keys, sorted, with their providers and models (the
// model a provider would use when its spec names none).
func (c ProviderConfig) Served() []ServedProvider {
	out := make([]ServedProvider, 0, len(c.Specs))
	for _, key := range slices.Sorted(maps.Keys(c.Specs)) {
		s := c.Specs[key]
		out = append(out, ServedProvider{Key: key, Provider: s.Type, Model: cmp.Or(s.Model, defaultModel(s.Type))})
	}
	return out
}

// Keys returns the provider keys the worker serves for a pack: every configured key
// and the pack's own mapped keys, sorted. Any other key is served by the default.
func (c ProviderConfig) Keys(pack string) []string {
	keys := slices.Collect(maps.Keys(c.Specs))
	for k := range c.Packs[pack] {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// defaultModel is the model a provider type uses when none is configured.
func defaultModel(kind string) string {
	switch kind {
	case ProviderOpenAI:
		return DefaultOpenAIModel
	case ProviderAnthropic:
		return DefaultAnthropicModel
	case ProviderGemini, ProviderVertex:
		return DefaultGeminiModel
	case ProviderMock:
		return MockModel
	}
	return ""
}

// ProviderSet is the worker's built providers: Config.Providers and Config.PackProviders
// of the activities.
type ProviderSet struct {
	Providers map[string]Provider
	Packs     map[string]map[string]string
	// Source is ProviderConfig.Source: empty when nothing was configured.
	Source string
	// Served is ProviderConfig.Served of what was built.
	Served []ServedProvider
}

// Build builds every provider of the configuration, reading keys and the providers'
// standard variables through getenv. Errors name the key and the variable, never a key.
func (c ProviderConfig) Build(ctx context.Context, getenv func(string) string) (ProviderSet, error) {
	set := ProviderSet{Providers: map[string]Provider{}, Packs: c.Packs, Source: c.Source, Served: c.Served()}
	var errs []error
	for _, key := range slices.Sorted(maps.Keys(c.Specs)) {
		p, err := c.Specs[key].build(ctx, getenv)
		if err != nil {
			if len(c.Specs) > 1 || key != DefaultProviderKey {
				err = fmt.Errorf("provider %q: %w", key, err)
			}
			errs = append(errs, err)
			continue
		}
		set.Providers[key] = p
	}
	for i, s := range set.Served {
		if mn, ok := set.Providers[s.Key].(modelNamer); ok && mn.ModelName() != "" {
			set.Served[i].Model = mn.ModelName()
		}
	}
	return set, errors.Join(errs...)
}

// ProvidersFromEnv builds the providers of ProviderConfigFromEnv by key (the default
// under DefaultProviderKey).
func ProvidersFromEnv(getenv func(string) string) (map[string]Provider, error) {
	cfg, err := ProviderConfigFromEnv(getenv)
	if err != nil {
		return nil, err
	}
	set, err := cfg.Build(context.Background(), getenv)
	if err != nil {
		return nil, err
	}
	return set.Providers, nil
}

// build builds the provider of a spec.
func (s ProviderSpec) build(ctx context.Context, getenv func(string) string) (Provider, error) {
	env := func(k string) string { return strings.TrimSpace(getenv(k)) }
	// or returns the spec's value, else the variable's.
	or := func(v, name string) string {
		if v != "" {
			return v
		}
		return env(name)
	}
	key := func(defaults ...string) (string, string) {
		if s.APIKeyEnv != "" {
			return env(s.APIKeyEnv), s.APIKeyEnv
		}
		for _, name := range defaults {
			if v := env(name); v != "" {
				return v, name
			}
		}
		return "", strings.Join(defaults, " or ")
	}
	stream := s.Stream == nil || *s.Stream
	switch s.Type {
	case ProviderMock:
		return &MockProvider{}, nil
	case ProviderOpenAI:
		k, name := key(EnvOpenAIKey)
		if k == "" {
			return nil, fmt.Errorf("openai needs %s in the worker's environment", name)
		}
		base, err := baseURL(EnvOpenAIBaseURL, or(s.BaseURL, EnvOpenAIBaseURL))
		if err != nil {
			return nil, err
		}
		return NewOpenAIProvider(k, s.Model, base), nil
	case ProviderAnthropic:
		k, name := key(EnvAnthropicKey)
		if k == "" {
			return nil, fmt.Errorf("anthropic needs %s in the worker's environment", name)
		}
		base, err := baseURL(EnvAnthropicBaseURL, or(s.BaseURL, EnvAnthropicBaseURL))
		if err != nil {
			return nil, err
		}
		return NewAnthropicProvider(k, s.Model, base), nil
	case ProviderOpenAICompatible:
		raw := or(s.BaseURL, EnvOpenAICompatibleBaseURL)
		if raw == "" {
			return nil, fmt.Errorf("openai-compatible needs %s (for Ollama: http://localhost:11434/v1)", EnvOpenAICompatibleBaseURL)
		}
		base, err := baseURL(EnvOpenAICompatibleBaseURL, raw)
		if err != nil {
			return nil, err
		}
		if s.Model == "" {
			return nil, fmt.Errorf("openai-compatible needs %s, the name of a model the endpoint serves", EnvModel)
		}
		k, _ := key(EnvOpenAICompatibleKey)
		return NewOpenAICompatibleProvider(k, s.Model, base), nil
	case ProviderGemini:
		k, name := key(EnvGeminiKey, EnvGoogleKey)
		if k == "" {
			return nil, fmt.Errorf("gemini needs %s in the worker's environment", name)
		}
		base, err := baseURL(EnvGeminiBaseURL, or(s.BaseURL, EnvGeminiBaseURL))
		if err != nil {
			return nil, err
		}
		return NewGeminiProvider(ctx, GeminiConfig{Model: s.Model, APIKey: k, BaseURL: base, NoStream: !stream})
	case ProviderVertex:
		base, err := baseURL(EnvVertexBaseURL, or(s.BaseURL, EnvVertexBaseURL))
		if err != nil {
			return nil, err
		}
		project := or(s.Project, EnvGoogleCloudProject)
		if project == "" {
			return nil, fmt.Errorf("vertex needs %s (the Google Cloud project)", EnvGoogleCloudProject)
		}
		return NewGeminiProvider(ctx, GeminiConfig{Model: s.Model, Vertex: true, Project: project,
			Location: or(s.Location, EnvGoogleCloudLocation), BaseURL: base, NoStream: !stream})
	case ProviderBedrock:
		cfg := BedrockConfig{Model: s.Model, Region: or(or(s.Region, EnvAWSRegion), EnvAWSDefaultRegion), NoStream: !stream}
		endpoint, err := baseURL(EnvBedrockEndpoint, or(s.Endpoint, EnvBedrockEndpoint))
		if err != nil {
			return nil, err
		}
		cfg.Endpoint = endpoint
		if id, secret := env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY"); id != "" && secret != "" {
			// The chain's first source, read here through getenv like every other key.
			cfg.AWS = &aws.Config{Region: cfg.Region,
				Credentials: aws.NewCredentialsCache(awscreds.NewStaticCredentialsProvider(id, secret, env("AWS_SESSION_TOKEN")))}
		}
		return NewBedrockProvider(ctx, cfg)
	case ProviderAzureOpenAI:
		cfg := AzureOpenAIConfig{Endpoint: or(s.Endpoint, EnvAzureOpenAIEndpoint), Deployment: s.Model,
			APIVersion: or(s.APIVersion, EnvAzureOpenAIAPIVersion)}
		if cfg.Endpoint == "" {
			return nil, fmt.Errorf("azure-openai needs %s (https://<resource>.openai.azure.com)", EnvAzureOpenAIEndpoint)
		}
		cfg.APIKey, _ = key(EnvAzureOpenAIKey)
		if cfg.APIKey == "" {
			// Entra ID: the SDK's default credential chain (environment, workload
			// identity, managed identity, Azure CLI); it reads its own variables.
			cred, err := azidentity.NewDefaultAzureCredential(nil)
			if err != nil {
				return nil, fmt.Errorf("azure-openai: %s is unset and no Entra ID credential is configured: %w", EnvAzureOpenAIKey, err)
			}
			cfg.Credential = cred
		}
		return NewAzureOpenAIProvider(cfg)
	default:
		return nil, fmt.Errorf("%q is not a provider: use %s", s.Type, strings.Join(providerTypes, ", "))
	}
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
