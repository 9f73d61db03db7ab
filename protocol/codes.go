package protocol

// OpenWOP error codes: the "error" of the error envelope, RunError.code and the code
// of a refused resolve. They are untyped string constants, so they fit every field
// and parameter that holds a code.
const (
	// Requests the API refuses.
	CodeValidation            = "validation_error"
	CodeUnauthenticated       = "unauthenticated"
	CodeKeyRevoked            = "key_revoked"
	CodeKeyExpired            = "key_expired"
	CodeForbidden             = "forbidden"
	CodeNotFound              = "not_found"
	CodeIdempotencyMismatch   = "idempotency_key_mismatch"
	CodeUnsupportedStreamMode = "unsupported_stream_mode"
	CodeRateLimited           = "rate_limited"
	CodePayloadTooLarge       = "payload_too_large"
	CodeUnsupportedMediaType  = "unsupported_media_type"
	CodeMethodNotAllowed      = "method_not_allowed"
	CodeInternal              = "internal_error"
	CodeUnavailable           = "unavailable"
	CodeRequestTimeout        = "request_timeout"
	CodeRunTimeout            = "run_timeout" // RFC 0058: a run past its wall-clock limit

	// Codes of the v2 registry (registry.go) that only major-2 answers carry.
	CodeProtocolVersionUnsupported = "protocol_version_unsupported" // 406: an unlisted major
	CodeProtocolVersionMismatch    = "protocol_version_mismatch"    // 400: /v1 asked under another major
	CodeIDTenantMismatch           = "id_tenant_mismatch"           // 403: a bound id of another tenant
	CodeIdempotencyKeyInvalid      = "idempotency_key_invalid"      // 400: a key outside the v2 grammar
	CodeRunTerminal                = "run_terminal"                 // 409: a mutation of an ended run
	CodeRunForbidden               = "run_forbidden"                // 403: a run of the caller's tenant the key may not act on
	CodeRunnerUnavailable          = "runner_unavailable"           // 503
	CodeInterruptTokenInvalid      = "interrupt_token_invalid"      // 401
	CodeEventTypeUnmapped          = "event_type_unmapped"          // 500: a stored type no codemap row names
	CodePayloadUnprojectable       = "payload_unprojectable"        // 500
	CodeForkPointInvalid           = "fork_point_invalid"           // 422: a fork's fromSeq not in the source's log

	// Webhook subscriptions.
	CodeWebhookURLRejected        = "webhook_url_rejected"
	CodeWebhookEndpointUnverified = "webhook_endpoint_unverified" // 400: a Standard Webhooks opt-in's endpoint did not echo its challenge
	CodeSubscriptionNotFound      = "subscription_not_found"
	CodeTooManyWebhooks           = "too_many_webhooks"

	// Resolves a run refuses.
	CodeInterruptNotFound  = "interrupt_not_found"
	CodeInterruptResolved  = "interrupt_already_resolved"
	CodeInterruptExpired   = "interrupt_expired"
	CodeInterruptCancelled = "interrupt_cancelled"
	// CodeApprovalPending refuses a conversation message while a tool call of the
	// conversation waits for its approval.
	CodeApprovalPending = "approval_pending"
	// CodeRunStateConflict refuses an injected event that the pack's current state
	// does not take but another state declares: the event came at the wrong time.
	CodeRunStateConflict = "run_state_conflict"
	// RFC 0239 (Draft): an agent turn whose speaker is off the conversation's roster
	// (the turn is not taken), and a roster longer than the host takes. Both 422; no
	// registry copy carries them yet, so a major-2 answer names them wop.<code>.
	CodeConversationSpeakerNotParticipant = "conversation_speaker_not_participant"
	CodeConversationRosterExceeded        = "conversation_roster_exceeded"

	// Why a run failed (RunError.code).
	CodeRunFailed             = "run_failed"
	CodeCapabilityNotProvided = "capability_not_provided"
	CodeInterruptTimeout      = "interrupt_timeout"
	CodeApprovalRejected      = "approval_rejected"
	CodeChildRunFailed        = "child_run_failed"
	CodeReplayFailed          = "replay_failed"
	// CodeReplaySourceMissing fails a side-effecting node of a replay fork whose source
	// recorded no outcome of it: the fork never performs the effect.
	CodeReplaySourceMissing  = "replay_source_missing"
	CodeAgentError           = "agent_error"
	CodeBudgetExhausted      = "budget_exhausted"
	CodeStateTooLarge        = "state_too_large"
	CodeHistoryLimitExceeded = "history_limit_exceeded"
	CodeActivityTimeout      = "activity_timeout"
	// CodeReplayDiverged fails a pack that cannot follow its source's recording on a
	// fork replay.
	CodeReplayDiverged = "replay_diverged"
	// CodeConformanceTestFailure is the failure core.fail raises (the conformance
	// suite expects it).
	CodeConformanceTestFailure = "conformance_test_failure"
	// CodeWebhookDeadLettered ends a webhook delivery that ran out of attempts.
	CodeWebhookDeadLettered = "webhook_dead_lettered"

	// Why a pack's turn ended (engine.TurnResult.ErrorCode).
	CodeMaxVisitsExceeded = "max_visits_exceeded"
	CodeMaxRoundsExceeded = "max_rounds_exceeded"
	CodeModelError        = "model_error"
	CodeToolError         = "tool_error"
	CodeUnsupportedState  = "unsupported_state"
	CodeRenderError       = "render_error"
	// CodeLoopLimitExceeded ends a turn that reached a host limit, the code RFC 0058
	// gives an agent-loop ceiling.
	CodeLoopLimitExceeded = "loop_limit_exceeded"

	// A model round or tool call failed in an activity (activities.ErrorCode).
	CodeModelBadRequest        = "model_bad_request"
	CodeModelAuthentication    = "model_authentication"
	CodeMockScriptMismatch     = "mock_script_mismatch"
	CodeMockScriptExhausted    = "mock_script_exhausted"
	CodeMockScriptedFailure    = "mock_scripted_failure"
	CodeUnknownProvider        = "unknown_provider"
	CodeUnknownTool            = "unknown_tool"
	CodeModelMalformedResponse = "model_malformed_response"
	CodeModelRateLimited       = "model_rate_limited"
	CodeModelUnavailable       = "model_unavailable"
)
