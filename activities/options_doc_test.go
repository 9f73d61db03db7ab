package activities

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/wop-dev/wop/internal/docblock"
)

// TestRetryDefaultsDoc keeps the table of activity timeouts and retries in
// docs/timeouts.md equal to ModelRoundOptions, LocalModelRoundOptions, ToolCallOptions
// and RouteToolsOptions. WOP_UPDATE_DOCS=1 rewrites it.
func TestRetryDefaultsDoc(t *testing.T) {
	row := func(what, where string, stc, hb time.Duration, rp *temporal.RetryPolicy) []string {
		hbText := "none"
		if hb > 0 {
			hbText = docblock.Duration(hb)
		}
		backoff := fmt.Sprintf("%s ×%g, at most %s", docblock.Duration(rp.InitialInterval), rp.BackoffCoefficient, docblock.Duration(rp.MaximumInterval))
		if d := errorBackoff(1, rp); d > 0 {
			backoff = fmt.Sprintf("after a lost attempt %s ×%g; after an error %s ×2; at most %s",
				docblock.Duration(rp.InitialInterval), rp.BackoffCoefficient, docblock.Duration(d), docblock.Duration(rp.MaximumInterval))
		}
		return []string{what, where, docblock.Duration(stc), hbText, fmt.Sprint(rp.MaximumAttempts), backoff}
	}
	var rows [][]string
	for _, p := range []struct{ name, provider string }{
		{"`mock`", ProviderMock}, {"`openai`", ProviderOpenAI}, {"`anthropic`", ProviderAnthropic},
		{"`gemini`", ProviderGemini}, {"`vertex`", ProviderVertex}, {"`bedrock`", ProviderBedrock},
		{"`azure-openai`", ProviderAzureOpenAI},
		{"`openai-compatible`", ProviderOpenAICompatible}, {"not known yet (a run's first round)", "default"},
	} {
		o := ModelRoundOptions(p.provider)
		rows = append(rows, row("`ModelRound`, provider "+p.name, "activity", o.StartToCloseTimeout, o.HeartbeatTimeout, o.RetryPolicy))
	}
	l := LocalModelRoundOptions("")
	rows = append(rows, row("`ModelRoundLocal` (the scripted mock's later rounds)", "local activity", l.StartToCloseTimeout, 0, l.RetryPolicy))
	tc := ToolCallOptions()
	rows = append(rows, row("`ToolCall` (HTTP, MCP, Go, mock tool_results)", "activity", tc.StartToCloseTimeout, tc.HeartbeatTimeout, tc.RetryPolicy))
	rt := RouteToolsOptions()
	rows = append(rows, row("`RouteTools` (where each call of a batch runs)", "local activity", rt.StartToCloseTimeout, 0, rt.RetryPolicy))
	table := docblock.Table([]string{"activity", "kind", "start-to-close", "heartbeat", "attempts", "backoff"}, rows)
	table += fmt.Sprintf("\nNot retried, whatever the attempts say: %s.\n", strings.Join(quoted(NonRetryableErrorTypes), ", "))
	table += fmt.Sprintf("A tool call's attempts follow its `action_scope`: a `read` tool gets `max_attempts` (default %d); "+
		"`write`, `external` and undeclared tools get 1 unless their binding says `idempotent: true`.\n", DefaultToolAttempts)
	docblock.Check(t, "../docs/timeouts.md", "activity-options", table)

	var outage [][]string
	for _, p := range []struct{ name, provider string }{{"every real provider but `openai-compatible`", ProviderOpenAI}, {"`openai-compatible`", ProviderOpenAICompatible}} {
		o := DefaultModelOutage(p.provider)
		outage = append(outage, []string{p.name, docblock.Duration(o.RetryFor),
			fmt.Sprintf("%s ×2, at most %s", docblock.Duration(o.InitialInterval), docblock.Duration(o.MaxInterval)), docblock.Duration(o.RemindEvery)})
	}
	docblock.Check(t, "../docs/timeouts.md", "model-outage", docblock.Table(
		[]string{"provider", "waits out an outage for (`WOP_MODEL_RETRY_FOR`)", "backoff (`WOP_MODEL_RETRY_MAX_INTERVAL`)", "a `workflow.stalled` event every (`WOP_STALL_REMINDER`)"}, outage)+
		fmt.Sprintf("\nThe quick attempts come first: %d for a real provider.\n", QuickAttempts))
}

func quoted(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = "`" + s + "`"
	}
	return out
}
