package api

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/wop-dev/wop/chunks"
	"github.com/wop-dev/wop/internal/certify"
	"github.com/wop-dev/wop/internal/payloadcodec"
	"github.com/wop-dev/wop/webhooks"
	"github.com/wop-dev/wop/workflows"
)

// Scopes of the OpenWOP v1 vocabulary this host checks.
const (
	ScopeManifestRead     = "manifest:read"
	ScopeRunsCreate       = "runs:create"
	ScopeRunsRead         = "runs:read"
	ScopeRunsCancel       = "runs:cancel"
	ScopeApprovalsRespond = "approvals:respond"
	// ScopeApprovalsDelegate (a host scope) lets a key cast approval votes for the
	// voters it names (resumeValue.voter or decidedBy), as a relay that authenticates
	// several people does; other keys vote as themselves. With it one key can meet a
	// quorum, so it is granted only by name: it is not in AllScopes ("all"), and
	// WOP_API_KEY holds it only when WOP_API_KEY_SCOPES names it.
	ScopeApprovalsDelegate = "approvals:delegate"
	// ScopePayloadsCodec (a host scope) lets a key use the codec endpoint (codec.go):
	// decoding shows the content of any tenant's runs, an operator's right, so it too
	// is granted only by name.
	ScopePayloadsCodec = "payloads:codec"
)

// AllScopes is every scope a full-access key holds ("all"): every scope but
// approvals:delegate and payloads:codec.
var AllScopes = []string{ScopeManifestRead, ScopeRunsCreate, ScopeRunsRead, ScopeRunsCancel, ScopeApprovalsRespond, ScopeWebhooksManage}

// KnownScopes is every scope this host checks: AllScopes, approvals:delegate and
// payloads:codec.
var KnownScopes = append(append([]string(nil), AllScopes...), ScopeApprovalsDelegate, ScopePayloadsCodec)

// ParseScopes reads a comma-separated scope list, in which "all" stands for AllScopes
// (e.g. "all,approvals:delegate"). An unknown scope is an error naming the known ones.
func ParseScopes(list string) ([]string, error) {
	var out []string
	add := func(s string) {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	for _, s := range strings.Split(list, ",") {
		switch s = strings.TrimSpace(s); {
		case s == "":
		case s == "all":
			for _, a := range AllScopes {
				add(a)
			}
		case slices.Contains(KnownScopes, s):
			add(s)
		default:
			return nil, fmt.Errorf("unknown scope %q; this host knows %s, and \"all\" (every scope but %s and %s)", s, strings.Join(KnownScopes, ", "), ScopeApprovalsDelegate, ScopePayloadsCodec)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no scopes in %q: name at least one of %s, or \"all\"", list, strings.Join(KnownScopes, ", "))
	}
	return out, nil
}

// Defaults of the tunable limits.
const (
	DefaultMaxRequestBodyBytes = 1 << 20
	DefaultRateLimitPerSecond  = 50
	DefaultRateLimitBurst      = 100
	DefaultTokenTTL            = 24 * time.Hour
	DefaultKeepAlive           = 15 * time.Second
	DefaultTokenKeyID          = "k1"
	// DefaultMaxTurnBytes bounds the resume value of one resolve: a conversation
	// turn's content, an approval, an injected event. A turn travels in a signal,
	// becomes events and transcript messages, and Temporal rejects any payload over
	// 2 MB; 256 KiB leaves room for the rest of what carries it.
	DefaultMaxTurnBytes = 256 << 10
	// DefaultEventsPageBytes bounds one page of events (JSON, poll, each SSE catch-up
	// read). It must stay below the Temporal server's payload limit
	// (limit.blobSize.error, 2 MB by default): a query answer is such a payload.
	DefaultEventsPageBytes = 1 << 20
	DefaultKeysFilePoll    = 2 * time.Second
)

// Key is one configured API key: Secret is the bearer token as configured, or SHA256
// its hex SHA-256 (as a keys file holds it); the server keeps only the hash.
type Key struct {
	ID     string
	Secret string
	SHA256 string
	Tenant string
	Scopes []string
	// Revoked keys are answered 401 key_revoked; keys past ExpiresAt (when set) 401
	// key_expired.
	Revoked   bool
	ExpiresAt time.Time
}

// Config configures the API server. Zero values take the defaults above.
type Config struct {
	// NoLegacyAttributes leaves the legacy search attributes (runs created before
	// WopTags, workflows.LegacySearchAttributes) out of the API's visibility queries: for
	// a namespace set up without them (legacyattrs.go). `wop api` sets it when the
	// namespace lacks them.
	NoLegacyAttributes bool
	// ConformanceSeams, when set, mounts the RFC 0158 durability seams
	// (/host/durability/kill and /bound, durability.go): test infrastructure for the
	// conformance suite, off unless a process boots with --conformance-seams.
	ConformanceSeams *ConformanceSeams
	// Keys are the accepted bearer keys.
	Keys []Key
	// KeysFile is a keys file (LoadKeysFile) whose keys are accepted besides Keys. The
	// server reads it when it starts, again whenever it changes (checked every
	// KeysFilePoll, default 2 s) and on ReloadKeys; a file that no longer parses keeps
	// the keys read before and logs why.
	KeysFile     string
	KeysFilePoll time.Duration
	// TokenSecret signs interrupt tokens (HMAC-SHA256) under TokenKeyID.
	TokenSecret []byte
	// TokenKeyID names TokenSecret inside tokens (default "k1"), so secrets can rotate.
	TokenKeyID string
	// OldTokenSecrets are earlier secrets by key id, still accepted for verification.
	OldTokenSecrets map[string][]byte
	// TokenTTL bounds the life of an interrupt token when the interrupt has no deadline of
	// its own; it counts from the interrupt's request time.
	TokenTTL time.Duration
	// PublicURL is the base URL used in callback URLs, e.g. http://127.0.0.1:8080. When
	// empty, a request's Host is used only if Guards.AllowedHosts lists it.
	PublicURL string
	// Guards are the limits that keep one client, a slow connection or a forged Host
	// from harming others (guard.go).
	Guards GuardConfig
	// MaxRequestBodyBytes limits request bodies (advertised as limits.maxRequestBodyBytes).
	MaxRequestBodyBytes int64
	// MaxTurnBytes limits the resume value of a resolve, checked before anything is
	// signalled.
	MaxTurnBytes int64
	// EventsPageBytes bounds one page of events read from the run; lower it with the
	// server's limit.blobSize.error.
	EventsPageBytes int
	// Namespace is the Temporal namespace of the runs (default "default"), in which the
	// API reads the histories of a run's closed executions (segments.go).
	Namespace string
	// TaskQueue is the task queue the API starts runs and webhook dispatchers on
	// (WOP_TASK_QUEUE; default workflows.TaskQueue): the one the workers poll.
	TaskQueue string
	// RateLimitPerSecond and RateLimitBurst shape the per-key token bucket.
	RateLimitPerSecond float64
	RateLimitBurst     int
	// KeepAlive is the interval of SSE keepalive comments.
	KeepAlive time.Duration
	// Version is the implementation version reported by discovery.
	Version string
	// StreamSecret is the secret shared with the workers' chunk endpoints (package
	// chunks; WOP_STREAM_SECRET): with it, streamMode=messages delivers the replies of
	// model rounds as they stream. Without it, messages streams carry no chunks.
	StreamSecret []byte
	// Now is the clock (tests); time.Now when nil.
	Now func() time.Time
	// WebhookSecret is the host's webhook key (WOP_WEBHOOK_SECRET): the signing secret
	// of every webhook and callbackUrl is derived from it. The workers need the same
	// key. Without it the host offers no webhooks and refuses callbackUrl.
	WebhookSecret []byte
	// WebhookAllowPrivate accepts loopback and private webhook destinations (and
	// http://) for development and tests; link-local and metadata ones stay refused.
	WebhookAllowPrivate bool
	// WebhookDelivery is the retry policy of deliveries (zero fields: the defaults, 1s
	// doubling to 10m, for 24h).
	WebhookDelivery webhooks.WebhookDeliveryConfig
	// Metrics, when set, receives the wop_http_* request metrics, and MetricsHandler
	// serves GET /metrics (the process's registry; see internal/telemetry). Without a
	// handler /metrics answers 404.
	Metrics        prometheus.Registerer
	MetricsHandler http.Handler
	// TracerProvider, when set, makes every request a span, child of the caller's
	// traceparent when it sends one.
	TracerProvider trace.TracerProvider
	// PayloadCodec, when set, is the codec the host's Temporal client seals payloads
	// with (WOP_PAYLOAD_KEYS_FILE; the client must be built with
	// payloadcodec.DataConverter of the same codec): the API opens with it what it
	// reads of histories and memos itself, and serves it at /codec (codec.go).
	PayloadCodec *payloadcodec.Codec
	// CodecCORSOrigins are the browser origins (the Temporal UI's) that may call the
	// codec endpoint with a key (WOP_CODEC_CORS_ORIGINS, comma-separated).
	CodecCORSOrigins []string
	// CodecUIOrigin is an origin whose requests the codec endpoint answers without a
	// key: wop dev sets it to its embedded, loopback-only UI. Never set from the
	// environment.
	CodecUIOrigin string
	// SigningKeys are the public keys of the host's certification bundles, published
	// in both discovery representations (signingKeys[]; none: an empty list).
	SigningKeys []SigningKey
}

func (c Config) withDefaults() Config {
	if c.MaxRequestBodyBytes <= 0 {
		c.MaxRequestBodyBytes = DefaultMaxRequestBodyBytes
	}
	if c.MaxTurnBytes <= 0 {
		c.MaxTurnBytes = DefaultMaxTurnBytes
	}
	if c.EventsPageBytes <= 0 {
		c.EventsPageBytes = DefaultEventsPageBytes
	}
	if c.Namespace == "" {
		c.Namespace = "default"
	}
	if c.TaskQueue == "" {
		c.TaskQueue = workflows.TaskQueue
	}
	if c.RateLimitPerSecond <= 0 {
		c.RateLimitPerSecond = DefaultRateLimitPerSecond
	}
	if c.RateLimitBurst <= 0 {
		c.RateLimitBurst = DefaultRateLimitBurst
	}
	if c.TokenTTL <= 0 {
		c.TokenTTL = DefaultTokenTTL
	}
	if c.KeepAlive <= 0 {
		c.KeepAlive = DefaultKeepAlive
	}
	if c.TokenKeyID == "" {
		c.TokenKeyID = DefaultTokenKeyID
	}
	if c.Version == "" {
		c.Version = "0.1.0"
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.KeysFilePoll <= 0 {
		c.KeysFilePoll = DefaultKeysFilePoll
	}
	c.PublicURL = strings.TrimRight(c.PublicURL, "/")
	c.Guards = c.Guards.withDefaults()
	return c
}

// ConfigFromEnv reads the API configuration from the environment:
//
//	WOP_API_KEY           a full-access key for tenant "default"
//	WOP_API_KEY_SCOPES    its scopes (default "all"; e.g. "all,approvals:delegate")
//	WOP_KEYS_FILE         a keys file: keys of every tenant with their scopes (LoadKeysFile)
//	WOP_TOKEN_SECRET      secret that signs interrupt tokens (required when keys are set)
//	WOP_PUBLIC_URL        base URL used in callback URLs
//	WOP_MAX_BODY_BYTES    request body limit in bytes (default 1 MiB)
//	WOP_MAX_TURN_BYTES    limit of one resolve's resume value in bytes (default 256 KiB)
//	WOP_RATE_LIMIT        requests per second per key (default 50)
//	WOP_RATE_BURST        burst per key (default 100)
//	WOP_TOKEN_TTL         interrupt token lifetime from when it is served, a Go duration (default 24h)
//	WOP_ALLOWED_HOSTS     hosts whose requests may name the callback URLs' base, without WOP_PUBLIC_URL
//	WOP_RESOLVE_WAIT      how long a resolve waits for the run's outcome (default 10s)
//	WOP_WEBHOOK_SECRET    key the webhook secrets derive from (webhooks are off without it)
//	WOP_WEBHOOK_ALLOW_PRIVATE  true: accept loopback and private webhook destinations
//	WOP_WEBHOOK_RETRY_FOR      how long a delivery is retried before it is dead-lettered (default 24h)
//	WOP_WEBHOOK_MAX_ATTEMPTS   attempts of a delivery (default 0: until WOP_WEBHOOK_RETRY_FOR)
//	WOP_STREAM_SECRET     secret shared with the workers' chunk endpoints (streamMode=messages)
//	WOP_SIGNING_KEY_FILE  the host's Ed25519 certification key (PKCS#8 PEM): its public half in signingKeys[]
//	WOP_SIGNING_KEY_ID    its id there (default wop-bundle-1)
//	WOP_PAYLOAD_KEYS_FILE the keys payloads are sealed with (package payloadcodec), served at /codec
//	WOP_CODEC_CORS_ORIGINS     browser origins (the Temporal UI's) that may call /codec, comma-separated
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	var cfg Config
	q, err := workflows.TaskQueueFromEnv(getenv)
	if err != nil {
		return cfg, err
	}
	cfg.TaskQueue = q
	if k := strings.TrimSpace(getenv("WOP_API_KEY")); k != "" {
		scopes := AllScopes
		if v := strings.TrimSpace(getenv("WOP_API_KEY_SCOPES")); v != "" {
			var err error
			if scopes, err = ParseScopes(v); err != nil {
				return cfg, fmt.Errorf("WOP_API_KEY_SCOPES: %w", err)
			}
		}
		cfg.Keys = append(cfg.Keys, Key{ID: "env", Secret: k, Tenant: "default", Scopes: scopes})
	}
	cfg.KeysFile = strings.TrimSpace(getenv("WOP_KEYS_FILE"))
	if s := getenv("WOP_TOKEN_SECRET"); s != "" {
		cfg.TokenSecret = []byte(s)
	}
	cfg.PublicURL = strings.TrimRight(getenv("WOP_PUBLIC_URL"), "/")
	if v := getenv("WOP_MAX_BODY_BYTES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return cfg, fmt.Errorf("WOP_MAX_BODY_BYTES=%q: want a positive integer", v)
		}
		cfg.MaxRequestBodyBytes = n
	}
	if v := getenv("WOP_MAX_TURN_BYTES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return cfg, fmt.Errorf("WOP_MAX_TURN_BYTES=%q: want a positive integer", v)
		}
		cfg.MaxTurnBytes = n
	}
	if v := getenv("WOP_RATE_LIMIT"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 {
			return cfg, fmt.Errorf("WOP_RATE_LIMIT=%q: want a positive number", v)
		}
		cfg.RateLimitPerSecond = f
	}
	if v := getenv("WOP_RATE_BURST"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return cfg, fmt.Errorf("WOP_RATE_BURST=%q: want a positive integer", v)
		}
		cfg.RateLimitBurst = n
	}
	if v := getenv("WOP_TOKEN_TTL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return cfg, fmt.Errorf("WOP_TOKEN_TTL=%q: want a positive Go duration such as 24h", v)
		}
		cfg.TokenTTL = d
	}
	if v := getenv("WOP_STREAM_SECRET"); v != "" {
		if len(v) < chunks.MinSecretBytes {
			return cfg, fmt.Errorf("WOP_STREAM_SECRET: want at least %d bytes", chunks.MinSecretBytes)
		}
		cfg.StreamSecret = []byte(v)
	}
	if v := getenv("WOP_WEBHOOK_SECRET"); v != "" {
		cfg.WebhookSecret = []byte(v)
	}
	if v := strings.TrimSpace(getenv("WOP_WEBHOOK_ALLOW_PRIVATE")); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return cfg, fmt.Errorf("WOP_WEBHOOK_ALLOW_PRIVATE=%q: want true or false", v)
		}
		cfg.WebhookAllowPrivate = b
	}
	if v := getenv("WOP_WEBHOOK_RETRY_FOR"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return cfg, fmt.Errorf("WOP_WEBHOOK_RETRY_FOR=%q: want a positive Go duration such as 24h", v)
		}
		cfg.WebhookDelivery.RetryFor = d
	}
	if v := getenv("WOP_WEBHOOK_MAX_ATTEMPTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return cfg, fmt.Errorf("WOP_WEBHOOK_MAX_ATTEMPTS=%q: want a non-negative integer", v)
		}
		cfg.WebhookDelivery.MaxAttempts = int32(n)
	}
	if err := guardsFromEnv(getenv, &cfg.Guards); err != nil {
		return cfg, err
	}
	if path := strings.TrimSpace(getenv(payloadcodec.KeysFileEnv)); path != "" {
		if cfg.PayloadCodec, err = payloadcodec.Load(path); err != nil {
			return cfg, fmt.Errorf("%s: %w", payloadcodec.KeysFileEnv, err)
		}
	}
	for _, o := range strings.Split(getenv("WOP_CODEC_CORS_ORIGINS"), ",") {
		if o = strings.TrimRight(strings.TrimSpace(o), "/"); o != "" {
			cfg.CodecCORSOrigins = append(cfg.CodecCORSOrigins, o)
		}
	}
	if path := strings.TrimSpace(getenv("WOP_SIGNING_KEY_FILE")); path != "" {
		key, err := certify.LoadKey(path, strings.TrimSpace(getenv("WOP_SIGNING_KEY_ID")))
		if err != nil {
			return cfg, fmt.Errorf("WOP_SIGNING_KEY_FILE: %w", err)
		}
		// Only the public half is kept: the API publishes it, the signer signs.
		cfg.SigningKeys = append(cfg.SigningKeys, SigningKey{KeyID: key.ID, PublicKey: key.Public()})
	}
	if (len(cfg.Keys) > 0 || cfg.KeysFile != "") && len(cfg.TokenSecret) == 0 {
		return cfg, fmt.Errorf("WOP_TOKEN_SECRET is required when API keys are configured")
	}
	return cfg, nil
}
