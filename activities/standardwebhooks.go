package activities

// Standard Webhooks 1.0.0 (OpenWOP RFC 0201, scheme id "standard-webhooks-1"), an
// opt-in per subscription beside the v1 scheme. The subscriber supplies a whsec_
// secret; the host keeps it sealed (AES-256-GCM under a key derived from the host's
// webhook key, the tenant and the webhook id as additional data), so only the sealed
// form enters the dispatcher's state and a delivery's input, and the delivery activity
// opens it. An opted-in delivery adds webhook-id (stable per subscription, run and
// event sequence), webhook-timestamp (the OpenWOP-Timestamp) and webhook-signature
// ("v1," + base64 HMAC-SHA256 over "<id>.<timestamp>.<body>" keyed by the secret's
// decoded bytes). OpenWOP-Signature stays v1's, keyed by the secret string as issued.

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// WebhookSignatureAlgoStandard names the Standard Webhooks 1.0.0 scheme.
const WebhookSignatureAlgoStandard = "standard-webhooks-1"

// The Standard Webhooks headers of an opted-in delivery.
const (
	HeaderStandardWebhookID        = "webhook-id"
	HeaderStandardWebhookTimestamp = "webhook-timestamp"
	HeaderStandardWebhookSignature = "webhook-signature"
)

// WebhookVerificationType is the type of the endpoint verification request an opt-in
// is registered only after: {"type": WebhookVerificationType, "challenge": "..."}.
const WebhookVerificationType = "openwop.webhook.verification"

const whsecPrefix = "whsec_"

// DecodeWhsec returns the HMAC key of a Standard Webhooks secret: "whsec_" and the
// standard base64 of 24 to 64 bytes.
func DecodeWhsec(secret string) ([]byte, error) {
	body, ok := strings.CutPrefix(secret, whsecPrefix)
	if !ok {
		return nil, errors.New(`a Standard Webhooks secret starts with "whsec_"`)
	}
	key, err := base64.StdEncoding.DecodeString(body)
	if err != nil {
		return nil, errors.New(`a Standard Webhooks secret is "whsec_" and standard base64`)
	}
	if len(key) < 24 || len(key) > 64 {
		return nil, fmt.Errorf("a Standard Webhooks secret decodes to 24 to 64 bytes (this one to %d)", len(key))
	}
	return key, nil
}

// sealAEAD is the AES-256-GCM of sealed subscriber secrets, its key derived from the
// host's webhook key.
func sealAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(deriveKey(key, "openwop-webhook-seal"))
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

func sealData(tenant, webhookID string) []byte { return []byte(tenant + "\x00" + webhookID) }

// SealWebhookSecret seals a subscriber's secret for subscription webhookID of tenant:
// base64url(nonce || AES-256-GCM(secret)), the tenant and id as additional data, so a
// sealed secret opens for its own subscription only.
func SealWebhookSecret(key []byte, tenant, webhookID, secret string) (string, error) {
	aead, err := sealAEAD(key)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(aead.Seal(nonce, nonce, []byte(secret), sealData(tenant, webhookID))), nil
}

// OpenWebhookSecret opens what SealWebhookSecret sealed.
func OpenWebhookSecret(key []byte, tenant, webhookID, sealed string) (string, error) {
	aead, err := sealAEAD(key)
	if err != nil {
		return "", err
	}
	raw, err := base64.RawURLEncoding.DecodeString(sealed)
	if err != nil || len(raw) < aead.NonceSize() {
		return "", errors.New("the sealed secret is not one this host sealed")
	}
	plain, err := aead.Open(nil, raw[:aead.NonceSize()], raw[aead.NonceSize():], sealData(tenant, webhookID))
	if err != nil {
		return "", errors.New("the sealed secret does not open under this host's webhook key")
	}
	return string(plain), nil
}

// StandardWebhookMessageID is the webhook-id of the delivery of event sequence of run
// runID to subscription webhookID of tenant: "msg_" and 24 base64url characters of a
// digest of the four, the same on every attempt, distinct across deliveries, and never
// the subscription's id.
func StandardWebhookMessageID(tenant, webhookID, runID string, sequence int64) string {
	sum := sha256.Sum256([]byte(strings.Join([]string{"openwop-webhook-message", tenant, webhookID, runID, strconv.FormatInt(sequence, 10)}, "\x00")))
	return "msg_" + base64.RawURLEncoding.EncodeToString(sum[:18])
}

// SignStandardWebhook is one webhook-signature entry: "v1," + base64(HMAC-SHA256(key,
// "<id>.<ts>.<body>")).
func SignStandardWebhook(key []byte, id string, ts int64, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + strconv.FormatInt(ts, 10) + "."))
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// webhookSigning is what signs a POST: the v1 secret, and for an opted-in subscription
// the Standard Webhooks key and message id.
type webhookSigning struct {
	id, eventType, secret string
	standardKey           []byte
	messageID             string
}

// setHeaders signs body at ts and sets both OpenWOP header families and, for an
// opt-in, the Standard Webhooks headers.
func (s webhookSigning) setHeaders(h http.Header, ts int64, body []byte) {
	headers := map[string]string{
		HeaderWebhookID: s.id, HeaderWebhookEventType: s.eventType, HeaderWebhookTimestamp: strconv.FormatInt(ts, 10),
		HeaderWebhookSignature: SignWebhook(s.secret, ts, body), HeaderWebhookSigAlgo: WebhookSignatureAlgoV1,
	}
	for k, v := range headers {
		h.Set(k, v)
		h.Set("OpenWOP-"+strings.TrimPrefix(k, "X-openwop-"), v)
	}
	if s.standardKey != nil {
		h.Set(HeaderStandardWebhookID, s.messageID)
		h.Set(HeaderStandardWebhookTimestamp, strconv.FormatInt(ts, 10))
		h.Set(HeaderStandardWebhookSignature, SignStandardWebhook(s.standardKey, s.messageID, ts, body))
	}
	h.Set("Content-Type", "application/json")
}

// ErrWebhookEndpointUnverified is an endpoint that did not answer its verification.
var ErrWebhookEndpointUnverified = errors.New("the endpoint did not answer its verification")

// VerifyWebhookEndpoint POSTs the endpoint verification of a Standard Webhooks opt-in
// to rawURL, signed like a delivery under the subscriber's secret, and checks that the
// endpoint answered 200 with {"challenge": <the challenge>}. The destination rules of
// deliveries apply (the same client: every address it connects to is checked, no
// redirect is followed). Its errors wrap ErrWebhookEndpointUnverified, or are a
// refused destination (*WebhookURLError).
func VerifyWebhookEndpoint(ctx context.Context, rawURL string, allowPrivate bool, webhookID, secret string) error {
	if err := CheckWebhookURL(rawURL, allowPrivate); err != nil {
		return err
	}
	key, err := DecodeWhsec(secret)
	if err != nil {
		return err
	}
	var c [24]byte
	_, _ = rand.Read(c[:])
	challenge := base64.RawURLEncoding.EncodeToString(c[:])
	body, _ := json.Marshal(map[string]string{"type": WebhookVerificationType, "challenge": challenge})
	rctx, cancel := context.WithTimeout(ctx, DefaultWebhookAttemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, rawURL, bytes.NewReader(body))
	if err != nil {
		return &WebhookURLError{Reason: fmt.Sprintf("webhook URL %q: %v", rawURL, err)}
	}
	signing := webhookSigning{id: webhookID, eventType: WebhookVerificationType, secret: secret, standardKey: key, messageID: "verify_" + challenge}
	signing.setHeaders(req.Header, time.Now().Unix(), body)
	resp, err := NewWebhookHTTPClient(allowPrivate).Do(req)
	if err != nil {
		var refused *refusedAddressError
		if errors.As(err, &refused) {
			return &WebhookURLError{Reason: refused.Error()}
		}
		return fmt.Errorf("%w: POST %s: %v", ErrWebhookEndpointUnverified, rawURL, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxWebhookResponseToRead))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: it answered HTTP %d, not 200", ErrWebhookEndpointUnverified, resp.StatusCode)
	}
	var answer struct {
		Challenge string `json:"challenge"`
	}
	if json.Unmarshal(raw, &answer) != nil || !hmac.Equal([]byte(answer.Challenge), []byte(challenge)) {
		return fmt.Errorf(`%w: its 200 did not echo the challenge as {"challenge": "..."}`, ErrWebhookEndpointUnverified)
	}
	return nil
}
