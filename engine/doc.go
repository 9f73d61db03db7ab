// Package engine executes a PromptPack workflow at RFC 0014 Level 2: the state machine
// (visits, max_visits, budgets, transitions, artifacts) and the turn algorithm of
// promptpack-workflow.md §8.9. It is deterministic plain Go: all effects (model rounds,
// tool calls, the clock) go through the Runtime interface, which the run workflow
// implements with Temporal activities and workflow.Now. It never ranges over a map
// without sorting its keys.
package engine

// Decisions where the spec leaves room (DESIGN.md §8 and the REC lines of
// promptpack-workflow.md, made concrete):
//
//   - A turn's reply is the non-empty round texts, in order, joined with a blank line;
//     text written next to tool calls counts. It accumulates even when the turn ends
//     in a failure status.
//   - max_rounds (default 5) counts model rounds per state segment; a segment whose
//     last allowed round still calls tools ends the run failed with code
//     max_rounds_exceeded. max_tool_calls_per_turn (default 10) counts calls per
//     state segment; calls past it get an error tool result and are not executed.
//   - Every call counts toward engine.budget.max_tool_calls, including workflow__*
//     calls, blocked calls and calls refused for the per-turn limit. The budget is
//     checked before each tool batch (total + batch > max), and at each transition
//     with max_total_visits and max_wall_time_sec (current >= max); wall time is also
//     checked before each model round, measured with Runtime.Now from the run start.
//   - An unknown event or a second transition in one round gets an error tool result;
//     the model may retry. Calls of tools the state does not offer get an error result
//     that lists the offered tools; blocklisted tools are not offered and their calls
//     are answered "blocked by policy".
//   - persistence: transient moves the context start to the end of the transcript on
//     entry. If the turn goes on in that state (control agent, or a terminal state)
//     the turn's triggering message is copied there; otherwise the next user message
//     starts it. The hand-over reaches the model as {{workflow_context}} only.
//     Absent or persistent keeps the whole history.
//   - Inject is allowed only into external or hybrid states. Into a terminal target it
//     appends a user-role message "[Event E from outside the conversation] context"
//     and runs the terminal prompt (without the transition tool) until it stops
//     calling tools, so the user hears the outcome; the run completes. A non-terminal
//     target runs no round; its prompt answers the next user message with the event's
//     context bound as {{workflow_context}}.
//   - An agent-initiated transition into an external state that is also terminal
//     completes the run without a round in it (the hand-off case of §8.9 step 6a).
//   - Validators: banned_words (params.words; whole word, case-insensitive) and
//     regex_match/regex (params.pattern must match) block the round's text, replacing
//     it with the validator's message or DefaultBlockedText; max_length
//     (params.max_characters or params.max_length) truncates it. Unknown types pass.
//     The enforced text is what the transcript keeps.
//   - Composition states are not supported: reaching one ends the run failed with
//     code unsupported_state. A pack without a workflow cannot start.
//   - Config.Limits are the host's limits on one turn: model rounds and tool calls
//     counted across state changes (max_rounds and max_tool_calls_per_turn count per
//     segment). The round limit is checked before each round, the call limit before
//     each batch (calls + batch > max); reaching one ends the run as an exhausted
//     budget does (status budget_exhausted, a budget event with Host set) with code
//     loop_limit_exceeded. The pack's own limits apply first when they are lower.
//   - Runtime.Stopped is asked before each round and each tool batch, and an effect
//     that returns ErrStopped stops the turn where it is: status stopped, nothing of
//     the interrupted round kept. The host uses it to cancel a run mid-turn.
//   - A model round that returns ErrUnavailable (the host waited out an outage as long
//     as it was configured to) ends the turn but not the run: the turn's messages,
//     transitions and reply so far stay, the status is the current state's idle one,
//     and TurnResult.TurnError says why. The unanswered user message stays in the
//     transcript, so the next turn's round reads it with the new one.
