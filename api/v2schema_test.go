package api

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/wop-dev/wop/internal/v2schema"
	"github.com/wop-dev/wop/protocol"
)

// v2Schemas are the vendored OpenWOP v2 schemas the v2 answers are validated against.
var v2Schemas = v2schema.New("../protocol/spec/v2/schemas")

// validateV2 validates a JSON document against a vendored v2 schema (file[#pointer]).
func validateV2(t testing.TB, loc string, doc []byte) {
	t.Helper()
	if err := v2Schemas.Validate(loc, doc); err != nil {
		t.Errorf("does not validate against %s: %v\n%s", loc, err, doc)
	}
}

// expectV2Error checks a major-2 error answer: status, code, the closed v2 envelope
// (error-envelope.schema.json: the code registered), and OpenWOP-Version 2.0.
func expectV2Error(t testing.TB, rec *httptest.ResponseRecorder, status int, code string) envelope {
	t.Helper()
	if rec.Code != status {
		t.Fatalf("status = %d, want %d; body %s", rec.Code, status, rec.Body)
	}
	if v := rec.Header().Get("OpenWOP-Version"); v != "2.0" {
		t.Errorf("OpenWOP-Version = %q, want 2.0", v)
	}
	validateV2(t, "error-envelope.schema.json", rec.Body.Bytes())
	var e envelope
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
		t.Fatalf("not an envelope: %s", rec.Body)
	}
	if e.Error != code || e.Message == "" {
		t.Fatalf("error = %q (message %q), want %q; body %s", e.Error, e.Message, code, rec.Body)
	}
	for k := range e.Details {
		if strings.HasPrefix(k, "retryAfter") {
			t.Errorf("a v2 envelope carries %s: retry timing is Retry-After only", k)
		}
	}
	return e
}

// validateEventV2 validates a v2 event document against run-event.schema.json. The
// vendored schema's type is oneOf{the closed enum, the vendor pattern}, and every
// registered type also matches the vendor pattern (run.started is <org>.<name> in
// shape), so no registered type passes its oneOf as written; the envelope is checked
// with the type set to a vendor type of this host, and the type itself against the
// closed enum (the codemap's v2 names) here.
func validateEventV2(t testing.TB, doc []byte) {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(doc, &m); err != nil {
		t.Fatalf("not an event: %s", doc)
	}
	typ, _ := m["type"].(string)
	if v2, ok := protocol.EventTypeV2(typ); (!ok || v2 != typ) && !protocol.IsVendorEventType(typ) {
		t.Errorf("type %q is neither in the closed v2 enum nor a vendor type of this host", typ)
	}
	m["type"] = protocol.Org + ".schema-check"
	b, _ := json.Marshal(m)
	validateV2(t, "run-event.schema.json", b)
}
