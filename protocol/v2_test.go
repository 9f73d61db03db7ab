package protocol

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseVersionHeader(t *testing.T) {
	for v, want := range map[string]int{"2": 2, "2.0": 2, " 1.7 ": 1, "1": 1, "9": 9, "0.3": 0} {
		got, ok := ParseVersionHeader(v)
		assert.True(t, ok, v)
		assert.Equal(t, want, got, v)
	}
	for _, v := range []string{"", "v2", "2.", ".1", "02", "2.01", "2.0.1", "abc", "1x", "-1", "9999999999"} {
		_, ok := ParseVersionHeader(v)
		assert.False(t, ok, v)
	}
}

func TestBoundIDProjection(t *testing.T) {
	assert.Equal(t, "acme/r_01ABC", BindID("acme", "r_01ABC"))
	assert.Equal(t, "acme/r_01ABC", BindID("other", "acme/r_01ABC"), "binding is idempotent")
	for id, seg := range map[string]string{
		"acme/r_01ABC":       "acme~2Fr_01ABC",
		"anon:s1/wh_00":      "anon~3As1~2Fwh_00",
		"a~b/c":              "a~7Eb~2Fc",
		"t/é":                "t~2F~C3~A9",
		"plain-id.with_dots": "plain-id.with_dots",
	} {
		assert.Equal(t, seg, ProjectID(id), id)
		back, err := UnprojectID(seg)
		require.NoError(t, err)
		assert.Equal(t, id, back)
	}
	back, err := UnprojectID("acme~2fr_1")
	require.NoError(t, err)
	assert.Equal(t, "acme/r_1", back, "lower-case hex decodes too")
	for _, bad := range []string{"a~", "a~2", "a~zz", "~G1"} {
		_, err := UnprojectID(bad)
		assert.ErrorIs(t, err, ErrBadProjection, bad)
	}
	tn, op, bound := SplitBoundID("acme/r_1")
	assert.Equal(t, []any{"acme", "r_1", true}, []any{tn, op, bound})
	_, op, bound = SplitBoundID("r_1")
	assert.Equal(t, []any{"r_1", false}, []any{op, bound})
	assert.True(t, ValidTenantID("tenant-b"))
	assert.True(t, ValidTenantID("anon:x"))
	assert.False(t, ValidTenantID("acme corp"))
	assert.False(t, ValidTenantID(""))
}

func TestCodemapReadsBothVocabularies(t *testing.T) {
	assert.Equal(t, 117, EventTypeCount())
	for v1, v2 := range map[string]string{
		"agent.toolCalled": "agent.tool-called", "agent.toolReturned": "agent.tool-returned",
		"run.resuming": "run.resume-started", "core.dispatch.fanOut": "dispatch.fanned-out",
	} {
		got, ok := EventTypeV2(v1)
		assert.True(t, ok)
		assert.Equal(t, v2, got, "a v1 name is served to v2 readers under its v2 name")
		got, ok = EventTypeV2(v2)
		assert.True(t, ok)
		assert.Equal(t, v2, got, "a v2 name stays")
		got, ok = EventTypeV1(v2)
		assert.True(t, ok)
		assert.Equal(t, v1, got, "a v2 name is served to v1 readers under its v1 name")
		got, ok = EventTypeV1(v1)
		assert.True(t, ok)
		assert.Equal(t, v1, got)
		renamed, ok := RenamedAtV2(v1)
		assert.True(t, ok)
		assert.Equal(t, v2, renamed)
	}
	for _, same := range []string{"run.started", "conversation.exchanged", "agent.decided", "provider.usage"} {
		got, ok := EventTypeV2(same)
		assert.True(t, ok)
		assert.Equal(t, same, got)
		_, renamed := RenamedAtV2(same)
		assert.False(t, renamed)
	}
	_, ok := EventTypeV2("ai.message.chunk")
	assert.False(t, ok, "an SSE frame name is no event type")
	_, ok = EventTypeV1("nobody.knows")
	assert.False(t, ok)

	renamed := 0
	for _, r := range codemapRows {
		if r[0] != r[1] {
			renamed++
		}
	}
	assert.Equal(t, 36, renamed)
}

func TestCodemapLoadRefusesAmbiguousRows(t *testing.T) {
	_, problem := loadCodemap([][2]string{{"a.b", "a.c"}, {"a.c", "a.d"}})
	assert.Contains(t, problem, "also the v2 name", "a renamed v1 name that is another row's v2 name would make a stored type ambiguous")
	_, problem = loadCodemap([][2]string{{"a.b", "a.c"}, {"a.b", "a.d"}})
	assert.Contains(t, problem, "two rows")
	cm, problem := loadCodemap([][2]string{{"a.b", "x.y"}, {"a.c", "x.y"}, {"a.d", "a.d"}})
	require.Empty(t, problem)
	assert.True(t, cm.folded["x.y"], "two v1 rows folding into one v2 name: its v1 view is refused")
	_, ok := cm.toV1["x.y"]
	assert.False(t, ok)
}

func TestVendorEventTypes(t *testing.T) {
	assert.True(t, IsVendorEventType("wop.turn-held"))
	assert.True(t, IsVendorEventType("wop.turn.held"))
	assert.False(t, IsVendorEventType("wop."))
	assert.False(t, IsVendorEventType("wop.Turn"))
	assert.False(t, IsVendorEventType("wop.a.b.c"))
	assert.False(t, IsVendorEventType("other.turn"))
	assert.False(t, IsVendorEventType("wop.turn-"))
}

func TestV2Codes(t *testing.T) {
	assert.Equal(t, 111, RegisteredCodes())
	for host, v2 := range map[string]string{
		CodeValidation: CodeValidation, CodeNotFound: CodeNotFound, CodeRunTimeout: CodeRunTimeout,
		CodeKeyExpired: CodeUnauthenticated, CodeKeyRevoked: "credential_revoked",
		CodeSubscriptionNotFound: CodeNotFound, CodeMethodNotAllowed: CodeNotFound,
		CodeUnavailable: CodeRunnerUnavailable, CodeRequestTimeout: CodeRunnerUnavailable,
		CodeInterruptCancelled: CodeInterruptResolved, CodeApprovalPending: CodeRunStateConflict,
		CodeInterruptTimeout: CodeRunTimeout, CodeApprovalRejected: CodeApprovalRejected,
		CodeLoopLimitExceeded: CodeLoopLimitExceeded, CodeCapabilityNotProvided: CodeCapabilityNotProvided,
		CodeBudgetExhausted: "wop.budget_exhausted", CodeMaxVisitsExceeded: "wop.max_visits_exceeded",
		CodeConformanceTestFailure: "wop.conformance_test_failure", CodeTooManyWebhooks: "wop.too_many_webhooks",
		CodeMockScriptMismatch: "wop.mock_script_mismatch", CodeRunFailed: "wop.run_failed",
		"wop.already_vendor": "wop.already_vendor", "other.vendor": CodeInternal, "PanicError": CodeInternal, "": CodeInternal,
	} {
		assert.Equal(t, v2, V2Code(host), host)
		got := V2Code(host)
		_, registered := RegisteredStatus(got)
		assert.True(t, registered || IsVendorCode(got), "%s is served as %s, which is neither registered nor this host's vendor code", host, got)
	}
	for _, c := range []string{CodeProtocolVersionUnsupported, CodeProtocolVersionMismatch, CodeIDTenantMismatch, CodeIdempotencyKeyInvalid,
		CodeRunTerminal, CodeRunnerUnavailable, CodeInterruptTokenInvalid, CodeEventTypeUnmapped, CodePayloadUnprojectable} {
		_, ok := RegisteredStatus(c)
		assert.True(t, ok, "%s is a registered code", c)
	}
	status, _ := RegisteredStatus(CodeProtocolVersionUnsupported)
	assert.Equal(t, 406, status)
}
