// Package activities holds every activity of the host: model rounds against a provider
// (OpenAI, Anthropic, any OpenAI-compatible endpoint, Gemini, Vertex AI, AWS Bedrock,
// Azure OpenAI, or the scripted mock) and tool calls. All I/O of a run happens here; workflow code only schedules these activities.
//
// # Activities
//
// Register one *Activities (built with New) on the worker. Its activities are:
//
//   - ModelRound(convo.ModelRoundInput) → convo.ModelRoundResult. The input carries a
//     convo.TranscriptRef, not the transcript: the activity reads the messages through
//     Config.Transcripts (ClientTranscripts queries the run's executions with
//     the run workflow's transcript page query, walking back through those that continued as new), so a
//     run's history grows by a constant amount per round. The round sees the newest
//     messages of its range within Config.Context (384 KiB and 2,000 messages by
//     default), from a user message on. The ref carries the messages added since the
//     run's previous round and a rolling digest of the whole transcript, so a
//     TranscriptCache that kept the earlier window answers without the query (the
//     worker wraps ClientTranscripts in one). A reply over Config.MaxResultBytes
//     (256 KiB) is cut visibly; see limits.go. The
//     provider is chosen by the input's logical provider key; an empty or unknown key
//     uses DefaultProviderKey; Config.PackProviders may map a pack's key to another
//     key's provider. The round heartbeats while the provider works.
//   - RouteTools(RouteToolsInput) → RouteToolsResult, a local activity: where each
//     call of a tool batch runs (Config.Bindings, package tools; a registered ToolFunc;
//     the mock; none) and how often it may be attempted (ToolAttempts: read tools are
//     retried, write and external tools only when their binding is idempotent). Its
//     recorded answer is how the workflow learns the bindings deterministically.
//   - ModelOutagePolicy(ModelOutageInput) → ModelOutageResult, a local activity: how long
//     a round whose provider is unavailable waits (OutagePolicy: Config.ModelOutage by
//     logical key or provider over DefaultModelOutage, 24 h backing off to a minute).
//     The workflow asks it when a round fails its QuickAttempts and schedules the round
//     again with OutageRetryOptions; see outage.go.
//   - Yield() does nothing: a turn whose local rounds ran a while schedules it to end its
//     workflow task so that queries and signals are served.
//   - ToolCall(convo.ToolCallInput) → convo.ToolCallResult. The executor is the ToolFunc
//     registered for the tool, else its binding on this worker (HTTP, MCP, Go), else,
//     on a worker whose every provider is the scripted mock, the pack's mock
//     tool_results entry, else none: the result is then an IsError result that tells
//     the model the tool has no binding on this host (the run goes on; the model can
//     answer without it). A worker that serves a real model never answers with the
//     mock's data. Calls routed to an activity
//     binding are scheduled by the workflow on the binding's task queue instead. Each
//     call carries an IdempotencyKey (ToolIdempotencyKey), the same for its attempts.
//     A registered executor's or binding's call heartbeats too.
//     A result over Config.MaxResultBytes is replaced by a marked head of it.
//
// Heartbeats (a tool call's every HeartbeatInterval, 1 s; a model round's every
// ModelRoundHeartbeatInterval, 250 ms, a quarter of its 1 s heartbeat timeout) are how
// Temporal tells that the worker running a round died, so that another worker runs it
// again within about a second, and how a running call learns that its run was
// cancelled: the answer to the next heartbeat carries the cancellation and the SDK
// cancels the activity's context, which aborts the provider's request. A worker must
// let them through (worker.Options.MaxHeartbeatThrottleInterval =
// MaxHeartbeatThrottle; the SDK's own throttle is 80% of the heartbeat timeout). A call
// shorter than its first interval sends none.
//
// A tool call that may have been applied when it fails (its executor sent the request
// and got no answer) fails as ErrTypeOutcomeUnknown, retryable.
//
// Workflows schedule them with ModelRoundOptions(provider), RouteToolsOptions() and
// ToolCallOptions() (with the route's attempts and timeout), and set
// ActivityOptions.Summary from ModelRoundSummary / ToolCallSummary.
//
// # Errors
//
// Failures are Temporal application errors whose Type is one of the ErrType*
// constants:
//
//	HTTP 400, 404, 422, other 4xx   ModelBadRequest          non-retryable
//	HTTP 401, 403                   ModelAuthentication      non-retryable, message never shows the key
//	HTTP 429                        ModelRateLimited         retried; NextRetryDelay = Retry-After(-Ms)
//	HTTP 408, 409, 5xx, no answer   ModelUnavailable         retried; NextRetryDelay = Retry-After if sent
//	2xx that is not a completion    ModelMalformedResponse   non-retryable
//	strict mock, round off script   MockScriptMismatch       non-retryable
//	mock round with error:          MockScriptedFailure      non-retryable
//	mock script exhausted + fail    MockScriptExhausted      non-retryable
//
// A run failed by one of them reports the OpenWOP code ErrorCode(type) (model_bad_request,
// model_authentication, ...) and the error's message; the types themselves are for
// retry policies and the Temporal UI.
//
// A round that still fails with a retryable type after its QuickAttempts is an outage:
// the run waits it out (OutagePolicy) rather than failing, and past the policy's time
// its turn fails with model_unavailable, not the run.
//
// The SDKs' own retries are disabled (max retries 0): Temporal retries the activity,
// so every attempt shows in the run's history and in the Temporal UI, backs off by the
// activity's RetryPolicy, and a long Retry-After does not keep an attempt open.
//
// # Configuration
//
// ProviderConfigFromEnv reads only the worker's environment (never workflow input);
// WOP_PROVIDERS adds a providers file that maps provider keys to providers (see its
// doc). Without a file, the variables below configure the default key:
//
//	Variable                        Meaning
//	WOP_MODEL_PROVIDER              mock | openai | anthropic | openai-compatible | gemini | vertex |
//	                                bedrock | azure-openai. Unset: openai if OPENAI_API_KEY is set,
//	                                else anthropic if ANTHROPIC_API_KEY is set, else
//	                                openai-compatible if WOP_OPENAI_COMPATIBLE_BASE_URL is set, else
//	                                the scripted mock (<pack>.mock.yaml), which wop worker refuses.
//	                                The cloud providers are chosen by name only.
//	WOP_MODEL                       Model name. Defaults: openai gpt-4o-mini, anthropic
//	                                claude-sonnet-4-5, gemini and vertex gemini-2.5-flash; required
//	                                for openai-compatible, bedrock (model id or inference profile) and
//	                                azure-openai (the deployment).
//	WOP_PROVIDERS                   Providers file (YAML): provider keys → providers, per-pack mappings.
//	OPENAI_API_KEY                  Key for openai (required with it).
//	OPENAI_BASE_URL                 Optional base URL for openai (default https://api.openai.com/v1/).
//	ANTHROPIC_API_KEY               Key for anthropic (required with it).
//	ANTHROPIC_BASE_URL              Optional base URL for anthropic (default https://api.anthropic.com/).
//	WOP_OPENAI_COMPATIBLE_BASE_URL  Base URL of an OpenAI-compatible endpoint, e.g.
//	                                http://localhost:11434/v1 (Ollama), http://localhost:8000/v1 (vLLM),
//	                                http://localhost:4000 (LiteLLM). Required for openai-compatible.
//	WOP_OPENAI_COMPATIBLE_API_KEY   Optional key for that endpoint (sent as a Bearer token).
//	GEMINI_API_KEY, GOOGLE_API_KEY  Key for gemini (the first that is set).
//	GOOGLE_GEMINI_BASE_URL          Optional base URL for gemini.
//	GOOGLE_CLOUD_PROJECT            Project for vertex (required); GOOGLE_CLOUD_LOCATION its location
//	                                (default global); credentials are Application Default Credentials;
//	                                GOOGLE_VERTEX_BASE_URL an optional base URL.
//	AWS_REGION, AWS_DEFAULT_REGION  Region for bedrock (or the AWS config file's); credentials come from
//	                                the SDK's default chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY,
//	                                AWS_PROFILE and the shared files, SSO, web identity, ECS/EC2 roles).
//	AWS_ENDPOINT_URL_BEDROCK_RUNTIME Optional endpoint for bedrock (a VPC endpoint, a proxy).
//	AZURE_OPENAI_ENDPOINT           https://<resource>.openai.azure.com for azure-openai (required).
//	AZURE_OPENAI_API_KEY            Its key; unset: Entra ID (azidentity's DefaultAzureCredential).
//	OPENAI_API_VERSION              Azure's api-version (default 2024-10-21).
//
// OutageFromEnv reads WOP_MODEL_RETRY_FOR, WOP_MODEL_RETRY_MAX_INTERVAL and
// WOP_STALL_REMINDER (outage.go).
//
// Keys stay inside the provider values: their String and LogValue methods print
// "[REDACTED]", errors never include them (a provider's error text is scrubbed of
// the key and of fragments of it), and they never reach workflow input, history,
// events or logs. The OpenAI and Anthropic SDKs are built so that they read nothing
// from the process environment themselves; genai is given every value it would read;
// the AWS and Azure credential chains read their own variables by design.
//
// Sampling parameters (packs.Parameters) map as follows: temperature, top_p →
// both; max_tokens → max_completion_tokens (OpenAI), max_tokens (compatible endpoints,
// Anthropic; Anthropic defaults to 4096 because the field is required);
// frequency_penalty, presence_penalty → OpenAI and compatible only; top_k → Anthropic
// only; Gemini takes temperature, top_p, top_k, max_tokens (maxOutputTokens) and both
// penalties; Bedrock's Converse takes temperature, top_p and max_tokens. Tool choice
// "none" offers no tools at all; "required" is OpenAI's "required", Anthropic's and
// Bedrock's "any" and Gemini's ANY.
package activities
