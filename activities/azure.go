package activities

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/azure"
	"github.com/openai/openai-go/v3/option"
)

// DefaultAzureOpenAIAPIVersion is the Azure OpenAI data-plane API version of the
// azure-openai provider when OPENAI_API_VERSION is unset: the newest GA version that
// has max_completion_tokens and stream_options.
const DefaultAzureOpenAIAPIVersion = "2024-10-21"

// AzureOpenAIConfig configures the azure-openai provider.
type AzureOpenAIConfig struct {
	// Endpoint is the resource's endpoint, https://<resource>.openai.azure.com
	// (AZURE_OPENAI_ENDPOINT). http is accepted for a loopback address only (a local
	// emulator or proxy).
	Endpoint string
	// Deployment is the model deployment rounds call (WOP_MODEL); it is also the
	// model name model_overrides entries are matched against.
	Deployment string
	// APIVersion is the api-version query parameter (OPENAI_API_VERSION; default
	// DefaultAzureOpenAIAPIVersion).
	APIVersion string
	// APIKey is the resource key (AZURE_OPENAI_API_KEY), sent as the api-key header.
	// Empty: Credential authenticates instead.
	APIKey string
	// Credential is an Entra ID credential (azidentity), used when APIKey is empty.
	Credential azcore.TokenCredential
	// HTTPClient is the client requests go through (nil: a new one).
	HTTPClient *http.Client
}

// NewAzureOpenAIProvider builds the azure-openai provider: chat completions on an Azure
// OpenAI deployment through the official OpenAI SDK's azure package
// (/openai/deployments/{deployment}/chat/completions?api-version=...), streamed, with
// the SDK's retries off as for OpenAI.
func NewAzureOpenAIProvider(cfg AzureOpenAIConfig) (*OpenAIProvider, error) {
	if cfg.Deployment == "" {
		return nil, fmt.Errorf("azure-openai needs the deployment name (%s)", EnvModel)
	}
	if cfg.APIKey == "" && cfg.Credential == nil {
		return nil, fmt.Errorf("azure-openai needs %s or Entra ID credentials", EnvAzureOpenAIKey)
	}
	if cfg.APIVersion == "" {
		cfg.APIVersion = DefaultAzureOpenAIAPIVersion
	}
	u, err := url.Parse(cfg.Endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") || u.User != nil {
		return nil, fmt.Errorf("%s=%q is not an https URL such as https://<resource>.openai.azure.com", EnvAzureOpenAIEndpoint, cfg.Endpoint)
	}
	loopback := isLoopbackHost(u.Hostname())
	if u.Scheme == "http" && !loopback {
		return nil, fmt.Errorf("%s=%q: credentials are sent over https only (http is accepted for a loopback address)", EnvAzureOpenAIEndpoint, cfg.Endpoint)
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	// azure.WithEndpoint turns the SDK's environment defaults off: nothing is read from
	// the process environment, the key and endpoint come only from cfg.
	opts := []option.RequestOption{
		azure.WithEndpoint(cfg.Endpoint, cfg.APIVersion),
		option.WithHTTPClient(hc),
		option.WithMaxRetries(0),
	}
	if cfg.APIKey != "" {
		opts = append(opts, azure.WithAPIKey(cfg.APIKey))
	} else {
		opts = append(opts, azure.WithTokenCredential(cfg.Credential))
	}
	if u.Scheme == "http" {
		opts = append(opts, azure.WithUnsafeAllowHTTP())
	}
	return &OpenAIProvider{
		Model: cfg.Deployment, BaseURL: cfg.Endpoint, HTTPClient: hc,
		apiKey: cfg.APIKey, name: ProviderAzureOpenAI,
		svc: openai.NewChatCompletionService(opts...),
	}, nil
}

// isLoopbackHost reports whether host is localhost or a loopback IP address.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
