package stack

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/wop-dev/wop/internal/devserver"
	"github.com/wop-dev/wop/worker"
)

// The recovery bound the worker declares counts the timer shift the embedded server
// runs with, and the one the cluster's dynamic config (compose, deploy/cluster) sets.
func TestRecoveryCountsTheServersTimerShift(t *testing.T) {
	assert.Equal(t, devserver.TimerShift, worker.ServerTimerShift)

	b, err := os.ReadFile("../../deploy/dynamicconfig/wop.yaml")
	require.NoError(t, err)
	var dc map[string][]struct {
		Value string `yaml:"value"`
	}
	require.NoError(t, yaml.Unmarshal(b, &dc))
	v := dc["history.timerProcessorMaxTimeShift"]
	require.Len(t, v, 1, "deploy/dynamicconfig/wop.yaml sets history.timerProcessorMaxTimeShift once")
	d, err := time.ParseDuration(v[0].Value)
	require.NoError(t, err)
	assert.Equal(t, worker.ServerTimerShift, d)
}
