package activities

// This file holds how long a model round (or a tool call whose binding says so) waits
// out an unavailable provider before its turn gives up. The run workflow cannot read
// the worker's configuration, so when a round has failed its quick attempts
// (ModelRoundOptions) it asks the ModelOutagePolicy local activity, whose answer
// Temporal records in the run's history: a replay waits exactly as the run did, and a
// changed configuration applies from the next outage.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"
)

// OutagePolicy is how a call waits out an outage of what it calls: it is retried with
// a backoff from InitialInterval doubling to MaxInterval for RetryFor, counted from the
// call's first attempt, and the run records a workflow.stalled event every RemindEvery
// while it waits. RetryFor 0 does not wait: the call gives up after its quick attempts.
type OutagePolicy struct {
	RetryFor        time.Duration `json:"retryFor"`
	InitialInterval time.Duration `json:"initialInterval,omitempty"`
	MaxInterval     time.Duration `json:"maxInterval,omitempty"`
	RemindEvery     time.Duration `json:"remindEvery,omitempty"`
}

// Defaults of OutagePolicy: a provider may be away for a day before a turn gives up;
// a provider that comes back is tried again within a minute (30 s for an
// OpenAI-compatible server, usually a local one that restarts quickly), and a stalled
// run says so every 15 minutes.
const (
	DefaultOutageRetryFor    = 24 * time.Hour
	DefaultOutageInitial     = 2 * time.Second
	DefaultOutageMaxInterval = time.Minute
	DefaultStallReminder     = 15 * time.Minute
	// MaxOutageRetryFor bounds what a deployment may configure.
	MaxOutageRetryFor = 366 * 24 * time.Hour
)

// DefaultModelOutage is the policy of a provider when the worker's configuration says
// nothing: DefaultOutageRetryFor, backing off from DefaultOutageInitial to a minute
// (30 s for openai-compatible), reminding every DefaultStallReminder.
func DefaultModelOutage(provider string) OutagePolicy {
	p := OutagePolicy{RetryFor: DefaultOutageRetryFor, InitialInterval: DefaultOutageInitial,
		MaxInterval: DefaultOutageMaxInterval, RemindEvery: DefaultStallReminder}
	if provider == ProviderOpenAICompatible {
		p.MaxInterval = 30 * time.Second
	}
	return p
}

// Check reports a policy no call could follow.
func (p OutagePolicy) Check() error {
	switch {
	case p.RetryFor < 0 || p.InitialInterval < 0 || p.MaxInterval < 0 || p.RemindEvery < 0:
		return errors.New("durations must not be negative")
	case p.RetryFor > MaxOutageRetryFor:
		return fmt.Errorf("retry-for %s is longer than %s", p.RetryFor, MaxOutageRetryFor)
	case p.MaxInterval > 0 && p.InitialInterval > p.MaxInterval:
		return fmt.Errorf("initial interval %s is longer than the maximum interval %s", p.InitialInterval, p.MaxInterval)
	}
	return nil
}

// Merge returns p with its unset intervals and reminder taken from defaults. RetryFor
// is p's as it is: 0 means no wait.
func (p OutagePolicy) Merge(defaults OutagePolicy) OutagePolicy {
	if p.InitialInterval == 0 {
		p.InitialInterval = defaults.InitialInterval
		if p.MaxInterval > 0 {
			p.InitialInterval = min(p.InitialInterval, p.MaxInterval)
		}
	}
	if p.MaxInterval == 0 {
		p.MaxInterval = max(defaults.MaxInterval, p.InitialInterval)
	}
	if p.RemindEvery == 0 {
		p.RemindEvery = defaults.RemindEvery
	}
	return p
}

// String describes the policy for logs and banners.
func (p OutagePolicy) String() string {
	if p.RetryFor == 0 {
		return "no wait"
	}
	return fmt.Sprintf("retried for %s, every %s to %s, reminder every %s", p.RetryFor, p.InitialInterval, p.MaxInterval, p.RemindEvery)
}

// ModelOutageInput asks for the outage policy of a round's logical provider key.
type ModelOutageInput struct {
	ProviderKey string `json:"providerKey"`
	// PackID is the round's pack, whose keys a providers file may map to other keys.
	PackID string `json:"packId,omitempty"`
}

// ModelOutageResult is the outage policy of one provider: Provider is the canonical
// provider id the key resolves to on this worker.
type ModelOutageResult struct {
	Provider string       `json:"provider"`
	Policy   OutagePolicy `json:"policy"`
}

// ModelOutagePolicy is a local activity: the outage policy of the provider a round's
// key resolves to on this worker (Config.ModelOutage by logical key, else by canonical
// provider, else "" for all, over DefaultModelOutage). It reads only this worker's
// configuration, so its recorded answer keeps the workflow deterministic.
func (a *Activities) ModelOutagePolicy(_ context.Context, in ModelOutageInput) (*ModelOutageResult, error) {
	p, key, err := a.provider(in.PackID, in.ProviderKey)
	if err != nil {
		return nil, err
	}
	name := p.Name()
	return &ModelOutageResult{Provider: name, Policy: a.modelOutage(key, name)}, nil
}

// modelOutage is the policy of logical key key, whose provider is name.
func (a *Activities) modelOutage(key, name string) OutagePolicy {
	return ModelOutageOf(a.outage, key, name)
}

// ModelOutageOf is the outage policy configured (as Config.ModelOutage) for logical
// provider key key, whose canonical provider is name: the entry of the key, else of
// the provider, else of "", over DefaultModelOutage(name).
func ModelOutageOf(configured map[string]OutagePolicy, key, name string) OutagePolicy {
	def := DefaultModelOutage(name)
	for _, k := range []string{key, name, ""} {
		if pol, ok := configured[k]; ok {
			return pol.Merge(def)
		}
	}
	return def
}

// ModelOutageOptions are the local activity options of ModelOutagePolicy: it only reads
// memory.
func ModelOutageOptions() workflow.LocalActivityOptions {
	return workflow.LocalActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy:         retryPolicy(100*time.Millisecond, time.Second, 3),
	}
}

// OutageRetryOptions turns base, the options of a call's quick attempts, into those of
// its wait through an outage: unlimited attempts backing off as policy says, within
// remaining (the part of policy.RetryFor not spent yet).
func OutageRetryOptions(base workflow.ActivityOptions, policy OutagePolicy, remaining time.Duration) workflow.ActivityOptions {
	o := base
	rp := retryPolicy(policy.InitialInterval, policy.MaxInterval, 0)
	if base.RetryPolicy != nil {
		rp.NonRetryableErrorTypes = slices.Clone(base.RetryPolicy.NonRetryableErrorTypes)
	}
	o.RetryPolicy = rp
	o.ScheduleToCloseTimeout = remaining
	if o.StartToCloseTimeout > remaining {
		o.StartToCloseTimeout = remaining
	}
	return o
}

// OutageFromEnv reads the model outage policy of the worker's providers:
//
//	WOP_MODEL_RETRY_FOR           how long a round waits out an unavailable provider before its
//	                              turn gives up (default 24h; 0: the turn gives up after the
//	                              quick attempts; Go durations or whole days, 7d)
//	WOP_MODEL_RETRY_MAX_INTERVAL  the longest pause between two attempts (default 1m, 30s for
//	                              openai-compatible)
//	WOP_STALL_REMINDER            a workflow.stalled event this often while a call waits
//	                              (default 15m)
//
// Unset variables keep the per-provider defaults (DefaultModelOutage). The result is
// Config.ModelOutage: nil when nothing is set.
func OutageFromEnv(getenv func(string) string) (map[string]OutagePolicy, error) {
	var p OutagePolicy
	var set bool
	var errs []error
	for _, v := range []struct {
		name string
		dst  *time.Duration
	}{{EnvModelRetryFor, &p.RetryFor}, {EnvModelRetryMaxInterval, &p.MaxInterval}, {EnvStallReminder, &p.RemindEvery}} {
		raw := strings.TrimSpace(getenv(v.name))
		if raw == "" {
			continue
		}
		d, err := ParseLongDuration(raw)
		if err != nil || d < 0 {
			errs = append(errs, fmt.Errorf("%s=%q: want a duration such as 30m, 24h or 7d", v.name, raw))
			continue
		}
		*v.dst, set = d, true
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if !set {
		return nil, nil
	}
	retryForSet := strings.TrimSpace(getenv(EnvModelRetryFor)) != ""
	out := map[string]OutagePolicy{}
	for _, name := range []string{ProviderMock, ProviderOpenAI, ProviderAnthropic, ProviderOpenAICompatible,
		ProviderGemini, ProviderVertex, ProviderBedrock, ProviderAzureOpenAI} {
		def := DefaultModelOutage(name)
		pol := def
		if retryForSet {
			pol.RetryFor = p.RetryFor
		}
		if p.MaxInterval > 0 {
			pol.MaxInterval = p.MaxInterval
			pol.InitialInterval = min(pol.InitialInterval, p.MaxInterval)
		}
		if p.RemindEvery > 0 {
			pol.RemindEvery = p.RemindEvery
		}
		if err := pol.Check(); err != nil {
			return nil, fmt.Errorf("model retry policy: %w", err)
		}
		out[name] = pol
	}
	return out, nil
}

// Environment variables of OutageFromEnv.
const (
	EnvModelRetryFor         = "WOP_MODEL_RETRY_FOR"
	EnvModelRetryMaxInterval = "WOP_MODEL_RETRY_MAX_INTERVAL"
	EnvStallReminder         = "WOP_STALL_REMINDER"
)

// ParseLongDuration reads a Go duration such as 90m or 24h, or a whole number of days
// such as 7d.
func ParseLongDuration(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if days, ok := strings.CutSuffix(v, "d"); ok {
		var n int
		if _, err := fmt.Sscanf(days, "%d", &n); err != nil || n < 0 || fmt.Sprint(n) != days {
			return 0, fmt.Errorf("bad number of days %q", days)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	return time.ParseDuration(v)
}

// outagePolicies checks and copies Config.ModelOutage.
func outagePolicies(in map[string]OutagePolicy) (map[string]OutagePolicy, error) {
	for _, k := range slices.Sorted(maps.Keys(in)) {
		if err := in[k].Check(); err != nil {
			return nil, fmt.Errorf("model outage policy %q: %w", k, err)
		}
	}
	return maps.Clone(in), nil
}
