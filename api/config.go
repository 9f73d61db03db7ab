package api

import (
	"fmt"
	"strings"
)

// Scopes of the OpenWOP v1 vocabulary this host checks.
const (
	ScopeManifestRead     = "manifest:read"
	ScopeRunsCreate       = "runs:create"
	ScopeRunsRead         = "runs:read"
	ScopeRunsCancel       = "runs:cancel"
	ScopeApprovalsRespond = "approvals:respond"
)

// AllScopes is every scope a full-access key holds.
var AllScopes = []string{ScopeManifestRead, ScopeRunsCreate, ScopeRunsRead, ScopeRunsCancel, ScopeApprovalsRespond}

// ConfigFromEnv reads the API configuration from the environment:
//
//	WOP_API_KEY       a full-access key for tenant "default"
//	WOP_TOKEN_SECRET  secret that signs interrupt tokens (required when keys are set)
//	WOP_PUBLIC_URL    base URL used in callback URLs
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	var cfg Config
	if k := strings.TrimSpace(getenv("WOP_API_KEY")); k != "" {
		cfg.Keys = append(cfg.Keys, Key{ID: "env", Secret: k, Tenant: "default", Scopes: AllScopes})
	}
	if s := getenv("WOP_TOKEN_SECRET"); s != "" {
		cfg.TokenSecret = []byte(s)
	}
	cfg.PublicURL = strings.TrimRight(getenv("WOP_PUBLIC_URL"), "/")
	if len(cfg.Keys) > 0 && len(cfg.TokenSecret) == 0 {
		return cfg, fmt.Errorf("WOP_TOKEN_SECRET is required when API keys are configured")
	}
	return cfg, nil
}
