package activities

// This file delivers run events to webhook subscribers (OpenWOP spec/v1/webhooks.md):
// one POST per event, signed with HMAC-SHA256 over "<timestamp>.<body>" under the
// subscription's secret. Secrets are never stored: a subscription's secret is derived
// from the host's webhook key (WOP_WEBHOOK_SECRET, which the API and the workers share)
// and the subscription's tenant and id, so it never enters a workflow's input,
// history or events. Retries are Temporal's (the delivery workflow's retry policy); a
// destination that is not allowed is refused without retrying.

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"

	"github.com/wop-dev/wop/protocol"
)

// Headers of a webhook delivery (webhooks.md §Headers), sent in both the X-openwop-*
// family and the OpenWOP-* family of RFC 0165 with the same values.
const (
	HeaderWebhookID          = "X-openwop-Webhook-Id"
	HeaderWebhookEventType   = "X-openwop-Event-Type"
	HeaderWebhookTimestamp   = "X-openwop-Timestamp"
	HeaderWebhookSignature   = "X-openwop-Signature"
	HeaderWebhookSigAlgo     = "X-openwop-Signature-Algorithm"
	WebhookSignatureAlgoV1   = "v1"
	webhookUserAgentPrefix   = "openwop-webhook-dispatcher/wop-"
	maxWebhookResponseToRead = 4 << 10
)

// ErrTypeWebhookRefused marks a delivery whose destination is not allowed (or that
// cannot be signed): retrying cannot help.
const ErrTypeWebhookRefused = "WebhookRefused"

// WebhookUnprojectable starts the error of a delivery whose event cannot be rendered
// for its subscription (OpenWOP payload_unprojectable): it is dead-lettered at once.
const WebhookUnprojectable = "the event cannot be rendered for the subscription"

// ErrTypeWebhookUnregistered marks an attempt of a delivery whose subscription was
// unregistered since: it does not POST, and the delivery ends.
const ErrTypeWebhookUnregistered = "WebhookUnregistered"

// stillRegistered asks the tenant's dispatcher, before an attempt to a subscription,
// whether the subscription is still registered. A run's callback is always; an
// answer that does not come (the dispatcher busy, Temporal slow) lets the attempt go
// on, as delivery is at least once; a dispatcher that is gone has no subscriptions.
func (a *Activities) stillRegistered(ctx context.Context, d WebhookDelivery) bool {
	if d.WebhookID == "" || a.signals == nil {
		return true
	}
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	v, err := a.signals.QueryWorkflow(qctx, protocol.WebhookDispatcherID(d.Tenant), "", protocol.WebhookRegisteredQuery, d.WebhookID)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return false
	}
	var registered bool
	if err != nil || v.Get(&registered) != nil {
		return true
	}
	return registered
}

// DefaultWebhookAttemptTimeout bounds one delivery attempt (webhooks.md: 5 s).
const DefaultWebhookAttemptTimeout = 5 * time.Second

// WebhookDelivery is one event to deliver to one destination.
type WebhookDelivery struct {
	Tenant string `json:"tenant"`
	// WebhookID is the subscription's id, or "" for the run's own callbackUrl.
	WebhookID string `json:"webhookId,omitempty"`
	URL       string `json:"url"`
	RunID     string `json:"runId"`
	// EventType, Sequence and Event are the run event: Event is its RunEventDoc.
	EventType string          `json:"eventType"`
	Sequence  int64           `json:"sequence"`
	Event     json.RawMessage `json:"event"`
	// AttemptTimeout bounds one POST (default DefaultWebhookAttemptTimeout).
	AttemptTimeout time.Duration `json:"attemptTimeout,omitempty"`
	// Major is the protocol major the subscription was registered under: 2 delivers
	// v2's body (WebhookBody); 0 and 1 v1's.
	Major int `json:"major,omitempty"`
	// SealedSecret is the subscriber's own secret, sealed (SealWebhookSecret): it
	// signs instead of the derived one. StandardWebhooks adds the Standard Webhooks
	// headers, signed with it.
	SealedSecret     string `json:"sealedSecret,omitempty"`
	StandardWebhooks bool   `json:"standardWebhooks,omitempty"`
}

// WebhookDeliveryResult says how the delivery went.
type WebhookDeliveryResult struct {
	Status  int   `json:"status"`
	Attempt int32 `json:"attempt"`
}

// WebhookSecret derives the signing secret of subscription webhookID of tenant from the
// host's webhook key: hex(HMAC-SHA256(key, "openwop-webhook" \0 tenant \0 webhookID)).
func WebhookSecret(key []byte, tenant, webhookID string) string {
	return deriveSecret(key, "openwop-webhook", tenant, webhookID)
}

// CallbackSecret derives the signing secret of the deliveries to run runID's
// callbackUrl: hex(HMAC-SHA256(key, "openwop-callback" \0 tenant \0 runID)).
func CallbackSecret(key []byte, tenant, runID string) string {
	return deriveSecret(key, "openwop-callback", tenant, runID)
}

func deriveSecret(key []byte, parts ...string) string {
	return hex.EncodeToString(deriveKey(key, parts...))
}

// deriveKey is HMAC-SHA256(key, parts joined by \0): 32 bytes.
func deriveKey(key []byte, parts ...string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(strings.Join(parts, "\x00")))
	return m.Sum(nil)
}

// SecretDigest is a digest of a subscriber's secret keyed by the host's webhook key
// (hex HMAC-SHA256 under a key derived from it), which compares one registration's
// secret with another's without letting whoever reads it test guesses of the secret.
func SecretDigest(webhookKey []byte, secret string) string {
	m := hmac.New(sha256.New, deriveKey(webhookKey, "openwop-webhook-secret-digest"))
	m.Write([]byte(secret))
	return hex.EncodeToString(m.Sum(nil))
}

// SecretFingerprint is the first 8 hex characters of sha256(secret), which logs and
// listings show instead of the secret.
func SecretFingerprint(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])[:8]
}

// SignWebhook returns the X-openwop-Signature value of body at timestamp ts (Unix
// seconds): "sha256=" + hex(HMAC-SHA256(secret, "<ts>.<body>")).
func SignWebhook(secret string, ts int64, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(strconv.FormatInt(ts, 10) + "."))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// VerifyWebhook checks one delivery the way webhooks.md tells a receiver to: the v1
// algorithm, a timestamp within five minutes of now, and the signature
// sha256=HMAC-SHA256(secret, "<timestamp>.<rawBody>") compared in constant time.
func VerifyWebhook(h http.Header, body []byte, secret string, now time.Time) error {
	if secret == "" {
		return errors.New("no secret to verify with")
	}
	if a := h.Get(HeaderWebhookSigAlgo); a != WebhookSignatureAlgoV1 {
		return fmt.Errorf("signature algorithm %q, want %q", a, WebhookSignatureAlgoV1)
	}
	ts, err := strconv.ParseInt(h.Get(HeaderWebhookTimestamp), 10, 64)
	if err != nil {
		return fmt.Errorf("timestamp %q: %w", h.Get(HeaderWebhookTimestamp), err)
	}
	if d := now.Unix() - ts; d > 300 || d < -300 {
		return fmt.Errorf("timestamp %d is %ds away from now", ts, d)
	}
	if !hmac.Equal([]byte(h.Get(HeaderWebhookSignature)), []byte(SignWebhook(secret, ts, body))) {
		return errors.New("the signature does not match")
	}
	return nil
}

// WebhookBody is the JSON body of a delivery: webhooks.md's wrapper (runId,
// workspaceId, event) with the event's type, sequence and id repeated at the top for
// receivers that read them there. To a subscription registered at major 2 it is v2's
// body, {runId, event}: the run's bound id and the event as a v2 reader is served it
// (no workspaceId: this host's runs have none).
func WebhookBody(d WebhookDelivery) ([]byte, error) {
	if d.Major == protocol.Major2 {
		var ev protocol.StoredEvent
		if err := json.Unmarshal(d.Event, &ev); err != nil {
			return nil, err
		}
		doc, err := protocol.EventV2(d.Tenant, ev)
		if err != nil {
			return nil, err
		}
		return json.Marshal(map[string]any{"runId": protocol.BindID(d.Tenant, d.RunID), "event": doc})
	}
	return json.Marshal(map[string]any{
		"runId": d.RunID, "workspaceId": d.Tenant, "tenantId": d.Tenant,
		"type": d.EventType, "sequence": d.Sequence, "event": d.Event,
	})
}

// DeliverWebhook POSTs one run event to its destination, signed. A 2xx answer is a
// delivery; anything else (a timeout, a refused connection, a 3xx, 4xx or 5xx) fails
// the attempt and Temporal retries it as the delivery workflow's policy says. A
// destination that resolves to a refused address fails without retry.
func (a *Activities) DeliverWebhook(ctx context.Context, d WebhookDelivery) (*WebhookDeliveryResult, error) {
	if len(a.webhookKey) == 0 {
		return nil, nonRetryable(ErrTypeWebhookRefused, "this worker has no webhook signing key (WOP_WEBHOOK_SECRET), so it cannot sign deliveries")
	}
	if err := CheckWebhookURL(d.URL, a.webhookAllowPrivate); err != nil {
		return nil, nonRetryable(ErrTypeWebhookRefused, "%v", err)
	}
	if !a.stillRegistered(ctx, d) {
		// RFC 0215 §B: once unregistered, no further attempt, scheduled retries
		// included.
		return nil, nonRetryable(ErrTypeWebhookUnregistered, "webhook %s was unregistered: no further attempt", d.WebhookID)
	}
	signing, err := a.deliverySigning(d)
	if err != nil {
		return nil, nonRetryable(ErrTypeWebhookRefused, "%v", err)
	}
	body, err := WebhookBody(d)
	if err != nil {
		return nil, nonRetryable(ErrTypeWebhookRefused, "%s: %v", WebhookUnprojectable, err)
	}
	timeout := d.AttemptTimeout
	if timeout <= 0 {
		timeout = DefaultWebhookAttemptTimeout
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, d.URL, bytes.NewReader(body))
	if err != nil {
		return nil, nonRetryable(ErrTypeWebhookRefused, "webhook URL %q: %v", d.URL, err)
	}
	signing.setHeaders(req.Header, time.Now().Unix(), body)
	req.Header.Set("User-Agent", webhookUserAgentPrefix+a.version)
	attempt := activity.GetInfo(ctx).Attempt
	resp, err := a.webhookClient().Do(req)
	if err != nil {
		var refused *refusedAddressError
		if errors.As(err, &refused) {
			return nil, nonRetryable(ErrTypeWebhookRefused, "%v", refused)
		}
		return nil, fmt.Errorf("POST %s (attempt %d): %w", d.URL, attempt, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxWebhookResponseToRead))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, fmt.Errorf("POST %s answered HTTP %d (attempt %d)", d.URL, resp.StatusCode, attempt)
	}
	a.logger.Info("Webhook delivered", "runId", d.RunID, "webhookId", signing.id, "type", d.EventType, "sequence", d.Sequence, "attempt", attempt, "status", resp.StatusCode)
	return &WebhookDeliveryResult{Status: resp.StatusCode, Attempt: attempt}, nil
}

// deliverySigning is how delivery d is signed: a run callback with its derived
// secret; a subscription with its derived secret, or, when it supplied one (a Standard
// Webhooks opt-in), with that secret, opened here and nowhere else, and the Standard
// Webhooks headers beside v1's.
func (a *Activities) deliverySigning(d WebhookDelivery) (webhookSigning, error) {
	s := webhookSigning{id: "callback:" + d.RunID, eventType: d.EventType, secret: CallbackSecret(a.webhookKey, d.Tenant, d.RunID)}
	if v2, ok := protocol.EventTypeV2(d.EventType); ok && d.Major == protocol.Major2 {
		s.eventType = v2
	}
	if d.WebhookID == "" {
		return s, nil
	}
	s.id, s.secret = d.WebhookID, WebhookSecret(a.webhookKey, d.Tenant, d.WebhookID)
	if d.Major == protocol.Major2 {
		s.id = protocol.BindID(d.Tenant, d.WebhookID)
	}
	if d.SealedSecret == "" {
		return s, nil
	}
	secret, err := OpenWebhookSecret(a.webhookKey, d.Tenant, d.WebhookID, d.SealedSecret)
	if err != nil {
		return s, fmt.Errorf("webhook %s: %w", d.WebhookID, err)
	}
	s.secret = secret
	if d.StandardWebhooks {
		if s.standardKey, err = DecodeWhsec(secret); err != nil {
			return s, fmt.Errorf("webhook %s: %w", d.WebhookID, err)
		}
		s.messageID = StandardWebhookMessageID(d.Tenant, d.WebhookID, d.RunID, d.Sequence)
	}
	return s, nil
}

// webhookClient is the HTTP client of this worker's deliveries (NewWebhookHTTPClient).
func (a *Activities) webhookClient() *http.Client {
	a.webhookOnce.Do(func() { a.webhookHTTP = NewWebhookHTTPClient(a.webhookAllowPrivate) })
	return a.webhookHTTP
}

// NewWebhookHTTPClient is the HTTP client of webhook POSTs: it never follows redirects
// and refuses, at connect time, every address CheckWebhookAddr refuses, so a name that
// resolves to a private or metadata address after registration is refused too.
func NewWebhookHTTPClient(allowPrivate bool) *http.Client {
	dialer := &net.Dialer{
		Timeout: 10 * time.Second,
		Control: func(_, address string, _ syscall.RawConn) error {
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				return err
			}
			ip, err := netip.ParseAddr(host)
			if err != nil {
				return &refusedAddressError{addr: host, why: "is not an IP address"}
			}
			if why := refusedAddr(ip, allowPrivate); why != "" {
				return &refusedAddressError{addr: host, why: why}
			}
			return nil
		},
	}
	return &http.Client{
		Transport: &http.Transport{DialContext: dialer.DialContext, Proxy: nil, MaxIdleConnsPerHost: 4, IdleConnTimeout: 30 * time.Second},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// refusedAddressError is a connection the delivery client refused to make.
type refusedAddressError struct{ addr, why string }

func (e *refusedAddressError) Error() string {
	return fmt.Sprintf("webhook destination %s %s", e.addr, e.why)
}

// metadataHosts are cloud metadata names a webhook may never name.
var metadataHosts = []string{"metadata.google.internal", "metadata", "metadata.azure.com", "instance-data", "instance-data.ec2.internal"}

// alwaysRefused are address ranges a webhook may never reach, even when private
// addresses are allowed: link-local (where cloud metadata services live) and the
// metadata addresses of the big clouds.
var alwaysRefused = []netip.Prefix{
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("fe80::/10"),
	netip.MustParsePrefix("fd00:ec2::254/128"),
	netip.MustParsePrefix("100.100.100.200/32"), // Alibaba Cloud metadata
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("::/128"),
}

// privateRanges are refused unless the deployment allows private destinations.
var privateRanges = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("::1/128"),
	netip.MustParsePrefix("fc00::/7"),
}

// translatedRanges are IPv6 ranges that carry an IPv4 address a gateway or the host's
// own stack may reach (NAT64, 6to4, Teredo, IPv4-compatible): refused whatever the
// IPv4 inside, as no webhook receiver needs them and they would smuggle a private or
// metadata IPv4 past the checks above.
var translatedRanges = []netip.Prefix{
	netip.MustParsePrefix("64:ff9b::/96"),   // NAT64 (RFC 6052)
	netip.MustParsePrefix("64:ff9b:1::/48"), // local-use NAT64 (RFC 8215)
	netip.MustParsePrefix("2002::/16"),      // 6to4 (RFC 3056)
	netip.MustParsePrefix("2001::/32"),      // Teredo (RFC 4380)
	netip.MustParsePrefix("::/96"),          // IPv4-compatible ::a.b.c.d (RFC 4291, deprecated)
}

// reservedRanges are IPv4 ranges that are no receiver on the internet: benchmarking,
// reserved for future use (the limited broadcast 255.255.255.255 included), the IETF
// protocol assignments and the documentation networks.
var reservedRanges = []netip.Prefix{
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("2001:db8::/32"),
	netip.MustParsePrefix("100::/64"), // IPv6 discard
}

// refusedAddr says why ip may not be a webhook destination ("" when it may). An
// IPv4-mapped address (::ffff:a.b.c.d) is judged by its IPv4.
func refusedAddr(ip netip.Addr, allowPrivate bool) string {
	ip = ip.Unmap()
	for _, p := range alwaysRefused {
		if p.Contains(ip) {
			return "is a link-local or cloud metadata address"
		}
	}
	if ip.IsMulticast() || ip.IsInterfaceLocalMulticast() {
		return "is a multicast address"
	}
	for _, p := range translatedRanges {
		if p.Contains(ip) && ip != netip.IPv6Loopback() {
			return "is an IPv6 address that carries an IPv4 one (NAT64, 6to4, Teredo or IPv4-compatible)"
		}
	}
	for _, p := range reservedRanges {
		if p.Contains(ip) {
			return "is a reserved, benchmarking, broadcast or documentation address"
		}
	}
	if !allowPrivate {
		for _, p := range privateRanges {
			if p.Contains(ip) {
				return "is a loopback or private address"
			}
		}
	}
	return ""
}

// WebhookURLError is a webhook destination the host refuses (OpenWOP
// webhook_url_rejected); a URL that is not a URL at all is a plain error.
type WebhookURLError struct{ Reason string }

func (e *WebhookURLError) Error() string { return e.Reason }

// MaxWebhookURLBytes bounds a webhook or callback URL (what browsers and proxies
// commonly take), so subscriptions and runs keep small state.
const MaxWebhookURLBytes = 2048

// CheckWebhookURL checks a webhook or callback destination before it is used: at most
// MaxWebhookURLBytes long, an absolute https:// URL (http:// only to a loopback or
// private destination, when those are allowed) without
// credentials, whose host is not a cloud metadata name, and whose literal or resolved
// addresses are not link-local, metadata, or (unless allowed) loopback or private. A
// name that does not resolve now is accepted over https: every delivery checks the addresses it
// connects to.
func CheckWebhookURL(raw string, allowPrivate bool) error {
	if len(raw) > MaxWebhookURLBytes {
		return fmt.Errorf("a webhook URL may be at most %d bytes (got %d)", MaxWebhookURLBytes, len(raw))
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return fmt.Errorf("%q is not an absolute http(s) URL", raw)
	}
	plain := u.Scheme != "https"
	if plain && !allowPrivate {
		return &WebhookURLError{Reason: fmt.Sprintf("webhook URLs must use https:// (got %q)", raw)}
	}
	// Private destinations allowed: plain http:// only to them (plainRefused).
	if u.User != nil {
		return &WebhookURLError{Reason: "webhook URLs must not carry credentials"}
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	for _, m := range metadataHosts {
		if host == m {
			return &WebhookURLError{Reason: fmt.Sprintf("%s is a cloud metadata host", host)}
		}
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		if !allowPrivate {
			return &WebhookURLError{Reason: fmt.Sprintf("%s is a loopback host", host)}
		}
		return nil
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if why := refusedAddr(ip, allowPrivate); why != "" {
			return &WebhookURLError{Reason: fmt.Sprintf("%s %s", host, why)}
		}
		if plain && refusedAddr(ip, false) == "" {
			return plainRefused(raw)
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		if plain {
			return plainRefused(raw) // not shown to be private
		}
		return nil // unresolvable now; each delivery checks what it connects to
	}
	for _, ip := range addrs {
		if why := refusedAddr(ip, allowPrivate); why != "" {
			return &WebhookURLError{Reason: fmt.Sprintf("%s resolves to %s, which %s", host, ip, why)}
		}
		if plain && refusedAddr(ip, false) == "" {
			return plainRefused(raw)
		}
	}
	return nil
}

// plainRefused refuses a plain http:// URL to a destination that is not private: the
// relaxation WOP_WEBHOOK_ALLOW_PRIVATE opens private destinations, not https.
func plainRefused(raw string) error {
	return &WebhookURLError{Reason: fmt.Sprintf("webhook URLs must use https:// (got %q); plain http:// is accepted only to loopback and private addresses", raw)}
}
