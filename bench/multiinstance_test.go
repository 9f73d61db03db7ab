package bench

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The witness's exactly-once verdict: every accepted turn "message 1..sent" once, one
// reply per turn.
func TestCheckTranscriptCountsLostAndDuplicatedTurns(t *testing.T) {
	for _, c := range []struct {
		name            string
		users           []string
		replies, sent   int
		lost, duplicate int
	}{
		{"every turn once", []string{"message 1", "message 2", "message 3"}, 3, 3, 0, 0},
		{"a turn missing and its reply", []string{"message 1", "message 3"}, 2, 3, 1, 0},
		{"a turn twice, answered twice", []string{"message 1", "message 2", "message 2"}, 3, 2, 0, 2},
		{"a text never sent", []string{"message 1", "message 9"}, 2, 1, 0, 2},
		{"a turn without its reply", []string{"message 1", "message 2"}, 1, 2, 1, 0},
		{"nothing arrived", nil, 0, 2, 2, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			lost, dup := checkTranscript(c.users, c.replies, c.sent)
			assert.Equal(t, c.lost, lost, "lost")
			assert.Equal(t, c.duplicate, dup, "duplicated")
		})
	}
}
