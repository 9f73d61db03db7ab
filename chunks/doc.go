// Package chunks carries a model reply from the worker that is generating it to the API
// processes whose clients follow the run in streamMode=messages, while the round runs.
//
// Chunks are ephemeral: they never enter a workflow's history, an activity heartbeat or
// the run's durable event log. The round's result (the whole reply, assembled by the
// provider from the same stream) is what the workflow records, exactly as without
// streaming; the durable conversation.exchanged event follows the chunks.
//
// # Pieces
//
//   - Hub (worker side): a model round opens a Publisher with Begin, publishes each
//     piece of text as the provider streams it, and ends the stream with End (the round
//     succeeded) or Abort (the attempt failed; a retry opens a new stream, attempt + 1,
//     whose sequence starts at 0 again). The hub keeps the chunks of the rounds in
//     flight, and of rounds that ended a moment ago (Retain), for the readers of the run.
//   - Handler (worker side): GET /v1/runs/{runId}/chunks serves one run's chunks on
//     this worker as server-sent events, to a caller that presents a token signed with
//     the shared secret for that run and this worker (Key). It answers only while a
//     round of the run is in flight or has just ended; 204 when none starts in time.
//   - Client (API side): reads a worker's chunk stream for a run.
//   - Locate (API side): asks Temporal which worker runs a run's model round now: the
//     pending ModelRound activity's last worker identity, or, for a round run as a
//     local activity, the identity of the worker running the workflow task. A worker
//     advertises its chunk endpoint in its Temporal identity (Identity, EndpointOf).
//
// Temporal stays the only stateful dependency: no broker, no registry of workers. An
// API process finds a run's worker through Temporal and asks it directly, so N workers
// and M API processes need no configuration beyond the shared secret.
package chunks
