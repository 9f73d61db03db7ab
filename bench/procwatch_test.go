package bench

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A /proc/<pid>/stat line whose command name holds spaces and parentheses still gives
// its parent and CPU ticks.
func TestParseProcStat(t *testing.T) {
	line := "4242 (postgres: temporal (idle)) S 4200 4242 4242 0 -1 4194560 1200 0 0 0 37 13 0 0 20 0 1 0 5000 0 0"
	pid, st, ok := parseProcStat(line)
	require.True(t, ok)
	assert.Equal(t, 4242, pid)
	assert.Equal(t, 4200, st.ppid)
	assert.Equal(t, int64(50), st.ticks, "utime 37 + stime 13")
	_, _, ok = parseProcStat("4242 (cut")
	assert.False(t, ok)

	_, _, err := parseCPUProcess("temporal")
	assert.Error(t, err)
	name, p, err := parseCPUProcess("db=17")
	require.NoError(t, err)
	assert.Equal(t, "db", name)
	assert.Equal(t, 17, p)
}
