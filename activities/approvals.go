package activities

// This file carries a tool's approval settings into the run workflow. The workflow
// cannot read the deployment's bindings file or the worker's environment, so RouteTools
// answers, with each route, the approval settings of the call's tool: the binding's
// (package tools) over the host's defaults (Config.ApprovalDefaults). Temporal records
// the answer, so a replay decides exactly as the run did.

import (
	"fmt"
	"slices"
	"time"

	"github.com/wop-dev/wop/packs"
)

// Approval modes of a tool (ToolApproval.Mode).
const (
	// ApprovalRequired: every call of the tool waits for a person's decision.
	ApprovalRequired = "required"
	// ApprovalNever: no call of the tool waits, whatever the pack's autonomy level.
	ApprovalNever = "never"
)

// DefaultApprovalTimeout is how long a tool call waits for its decision when neither
// its binding nor the host says: then it is treated as rejected with reason "expired".
const DefaultApprovalTimeout = 72 * time.Hour

// MaxApprovalWait bounds every approval duration a deployment may configure.
const MaxApprovalWait = 366 * 24 * time.Hour

// ToolApproval is how calls of one tool are approved: whether they must be (Mode, else
// the pack's autonomy level decides), how long a decision may take, who decides, when
// approvers are reminded and when the wait escalates to a second group.
type ToolApproval struct {
	// Mode is ApprovalRequired, ApprovalNever, or "" (the pack's governance decides).
	Mode string `json:"mode,omitempty"`
	// Timeout is the deadline of a decision; past it the call is rejected as expired.
	Timeout time.Duration `json:"timeout,omitempty"`
	// RemindEvery, when > 0, records a reminder (and notifies webhooks) at that interval
	// while the decision is pending.
	RemindEvery time.Duration `json:"remindEvery,omitempty"`
	// Approvers, when set, are the principals who may decide (OpenWOP approversList);
	// empty means anyone allowed to resolve interrupts.
	Approvers []string `json:"approvers,omitempty"`
	// RequiredApprovals is the quorum of accepting votes (default 1).
	RequiredApprovals int `json:"requiredApprovals,omitempty"`
	// EscalateAfter, when > 0, adds EscalateTo to the approvers once the call has
	// waited that long.
	EscalateAfter time.Duration `json:"escalateAfter,omitempty"`
	EscalateTo    []string      `json:"escalateTo,omitempty"`
}

// IsZero reports whether t sets nothing.
func (t ToolApproval) IsZero() bool {
	return t.Mode == "" && t.Timeout == 0 && t.RemindEvery == 0 && len(t.Approvers) == 0 &&
		t.RequiredApprovals == 0 && t.EscalateAfter == 0 && len(t.EscalateTo) == 0
}

// Merge returns t with every unset field taken from defaults.
func (t ToolApproval) Merge(defaults ToolApproval) ToolApproval {
	if t.Mode == "" {
		t.Mode = defaults.Mode
	}
	if t.Timeout == 0 {
		t.Timeout = defaults.Timeout
	}
	if t.RemindEvery == 0 {
		t.RemindEvery = defaults.RemindEvery
	}
	if len(t.Approvers) == 0 {
		t.Approvers = slices.Clone(defaults.Approvers)
	}
	if t.RequiredApprovals == 0 {
		t.RequiredApprovals = defaults.RequiredApprovals
	}
	if t.EscalateAfter == 0 && len(t.EscalateTo) == 0 {
		t.EscalateAfter, t.EscalateTo = defaults.EscalateAfter, slices.Clone(defaults.EscalateTo)
	}
	return t
}

// Check reports the first inconsistency of t: a negative or oversized duration, an
// escalation without a group (or a group without a delay), a quorum below 1.
func (t ToolApproval) Check() error {
	switch t.Mode {
	case "", ApprovalRequired, ApprovalNever:
	default:
		return fmt.Errorf("approval must be %s or %s, not %q", ApprovalNever, ApprovalRequired, t.Mode)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"approval_timeout", t.Timeout}, {"approval_reminder", t.RemindEvery}, {"escalate_after", t.EscalateAfter}} {
		if d.v < 0 || d.v > MaxApprovalWait {
			return fmt.Errorf("%s must be between 0 and %s (got %s)", d.name, MaxApprovalWait, d.v)
		}
	}
	if t.RequiredApprovals < 0 {
		return fmt.Errorf("required_approvals must be at least 1 (got %d)", t.RequiredApprovals)
	}
	if (t.EscalateAfter > 0) != (len(t.EscalateTo) > 0) {
		return fmt.Errorf("escalate_after and escalate_to go together: the delay and the group the wait escalates to")
	}
	if t.RequiredApprovals > 1 && len(t.Approvers) > 0 && t.RequiredApprovals > len(t.Approvers)+len(t.EscalateTo) {
		return fmt.Errorf("required_approvals %d is more than the %d approvers listed", t.RequiredApprovals, len(t.Approvers)+len(t.EscalateTo))
	}
	return nil
}

// ToolApprovals is implemented by tool bindings that carry approval settings per tool
// (package tools' Set): the settings of a tool's bindings-file entry, bound or not.
type ToolApprovals interface {
	ApprovalOf(tool string) (ToolApproval, bool)
}

// approvalOf is the approval settings RouteTools answers for a tool: its entry's over
// the host's defaults, the timeout never unset.
func (a *Activities) approvalOf(tool string) *ToolApproval {
	var t ToolApproval
	if ta, ok := a.bindings.(ToolApprovals); ok && ta != nil {
		t, _ = ta.ApprovalOf(tool)
	}
	t = t.Merge(a.approvalDefaults)
	if t.Timeout == 0 {
		t.Timeout = DefaultApprovalTimeout
	}
	return &t
}

// ApprovalNeeded is the approval policy of one tool call, and why: the binding decides
// first (mode never, then required); otherwise the autonomy level the agent declares
// (packs.Pack.AutonomyLevel): with acts_with_approval, every call of a tool whose
// action_scope.effect is write or external, or undeclared (not safe), waits. Read
// tools, and agents with any other autonomy level, never wait by default.
func ApprovalNeeded(mode, autonomy, tool, effect string) (bool, string) {
	switch mode {
	case ApprovalNever:
		return false, ""
	case ApprovalRequired:
		return true, fmt.Sprintf("the deployment's binding of %s says approval: required", tool)
	}
	if autonomy != packs.AutonomyActsWithApproval {
		return false, ""
	}
	switch effect {
	case packs.EffectRead:
		return false, ""
	case "":
		return true, fmt.Sprintf("the agent acts with approval (autonomy_level acts_with_approval) and %s declares no action_scope.effect", tool)
	default:
		return true, fmt.Sprintf("the agent acts with approval (autonomy_level acts_with_approval) and %s has effect %s", tool, effect)
	}
}
