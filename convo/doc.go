// Package convo holds the data of a conversation: its messages and the tool calls in
// them, the tools offered to the model, token usage, and what one model round or tool
// call takes and gives back (the inputs and results the engine, the workflows and the
// activities exchange), with the pure helpers over them (transcript digest, tail,
// sizes).
//
// It is a leaf: it imports only the standard library, so the deterministic engine can
// speak of conversations without linking the worker's I/O or any provider SDK. The name
// is the conversation's, not the transcript's, because it holds more than the
// transcript: a round's input and result are a conversation's exchange with a model.
//
// The JSON shapes here are carried across continue-as-new and in activity inputs and
// results of recorded histories: a field's name or encoding must not change.
package convo
