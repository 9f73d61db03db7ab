package worker

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	deploymentpb "go.temporal.io/api/deployment/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// Versioning opts a worker into Temporal's Worker Versioning (Worker Deployments):
// it polls as the version BuildID of deployment Deployment, and Temporal routes each
// workflow task to a version by the workflow's versioning behaviour. Empty Deployment
// leaves the worker unversioned, as before.
//
// The host's workflows auto-upgrade by default: a conversation stays open for days,
// and a pinned one would hold its build's workers until it closes; an auto-upgrading
// one moves to the deployment's current version at its next workflow task, which
// replays its history on the new build: every change of workflow behaviour is a gate
// of workflows/versions.go, and the recorded histories prove the replay
// (docs/DECISIONS.md, "Upgrades").
type Versioning struct {
	// Deployment is the Worker Deployment name (WOP_DEPLOYMENT_NAME, --deployment-name).
	Deployment string
	// BuildID is this worker's version within it (WOP_BUILD_ID, --build-id).
	BuildID string
	// Behavior is the versioning behaviour of the host's workflows: VersioningAutoUpgrade
	// (the default) or VersioningPinned (WOP_VERSIONING_BEHAVIOR, --versioning-behavior).
	Behavior string
	// SetCurrent makes this worker's version the deployment's current version once it
	// polls (WOP_SET_CURRENT_VERSION, --set-current-version): new runs start on it,
	// and auto-upgrading ones move to it.
	SetCurrent bool
	// Namespace is the deployment's namespace, the worker's (the command sets it).
	Namespace string
}

// Versioning behaviours of Versioning.Behavior.
const (
	VersioningAutoUpgrade = "auto-upgrade"
	VersioningPinned      = "pinned"
)

// versioningFromEnv reads Versioning from the environment.
func versioningFromEnv(getenv func(string) string) (Versioning, error) {
	v := Versioning{
		Deployment: strings.TrimSpace(getenv("WOP_DEPLOYMENT_NAME")),
		BuildID:    strings.TrimSpace(getenv("WOP_BUILD_ID")),
		Behavior:   strings.TrimSpace(getenv("WOP_VERSIONING_BEHAVIOR")),
	}
	if s := strings.TrimSpace(getenv("WOP_SET_CURRENT_VERSION")); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return v, fmt.Errorf("WOP_SET_CURRENT_VERSION=%q: want true or false", s)
		}
		v.SetCurrent = b
	}
	return v, nil
}

// registerFlags adds the versioning flags, with the environment's values as defaults.
func (v *Versioning) registerFlags(fs *flag.FlagSet) {
	fs.StringVar(&v.Deployment, "deployment-name", v.Deployment, "Worker Deployment `name`: poll with Worker Versioning as --build-id of it (env WOP_DEPLOYMENT_NAME; empty: unversioned)")
	fs.StringVar(&v.BuildID, "build-id", v.BuildID, "this worker's `build id` within --deployment-name (env WOP_BUILD_ID)")
	fs.StringVar(&v.Behavior, "versioning-behavior", v.Behavior, "versioning `behavior` of the host's workflows: auto-upgrade (default) or pinned (env WOP_VERSIONING_BEHAVIOR)")
	fs.BoolVar(&v.SetCurrent, "set-current-version", v.SetCurrent, "make this build the deployment's current version once the worker polls (env WOP_SET_CURRENT_VERSION)")
}

// Check reports a versioning configuration the worker cannot run with.
func (v Versioning) Check() error {
	if v.Deployment == "" {
		if v.BuildID != "" || v.Behavior != "" || v.SetCurrent {
			return errors.New("--build-id, --versioning-behavior and --set-current-version need --deployment-name (WOP_DEPLOYMENT_NAME)")
		}
		return nil
	}
	if v.BuildID == "" {
		return fmt.Errorf("deployment %q needs --build-id (WOP_BUILD_ID)", v.Deployment)
	}
	if strings.Contains(v.Deployment, ".") {
		return fmt.Errorf("deployment name %q: Temporal reserves '.'", v.Deployment)
	}
	switch v.Behavior {
	case "", VersioningAutoUpgrade, VersioningPinned:
		return nil
	}
	return fmt.Errorf("versioning behavior %q: use %s or %s", v.Behavior, VersioningAutoUpgrade, VersioningPinned)
}

// options are the SDK worker's deployment options (none when unversioned).
func (v Versioning) options() sdkworker.DeploymentOptions {
	if v.Deployment == "" {
		return sdkworker.DeploymentOptions{}
	}
	behavior := workflow.VersioningBehaviorAutoUpgrade
	if v.Behavior == VersioningPinned {
		behavior = workflow.VersioningBehaviorPinned
	}
	return sdkworker.DeploymentOptions{
		UseVersioning:             true,
		Version:                   sdkworker.WorkerDeploymentVersion{DeploymentName: v.Deployment, BuildID: v.BuildID},
		DefaultVersioningBehavior: behavior,
	}
}

// setCurrentTimeout bounds how long SetCurrentVersion waits for Temporal to know the
// version (it does once the worker's first polls reached it).
const setCurrentTimeout = time.Minute

// SetCurrentVersion makes the worker's version the current version of its deployment,
// once Temporal knows it, and waits until the change has reached the task queues: it
// asks until the version is registered by the worker's polls, then until the
// deployment's routing update is complete, or ctx (bounded by setCurrentTimeout) ends.
// When it returns, every task goes to this version, so the previous build's workers may
// stop. A version that has been current before and is not now does not take over
// again: that is a worker of an earlier build restarting (or a rollback, which an
// operator makes current by hand). Without v.SetCurrent it only says how the version
// becomes current; logger may be nil.
func SetCurrentVersion(ctx context.Context, c client.Client, v Versioning, logger *slog.Logger) error {
	if v.Deployment == "" {
		return nil
	}
	if !v.SetCurrent {
		if logger != nil {
			logger.Info("Polling as a Worker Deployment version: it takes runs once it is the deployment's current version (--set-current-version, or `temporal worker deployment set-current-version`)",
				"deployment", v.Deployment, "buildId", v.BuildID)
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, setCurrentTimeout)
	defer cancel()
	var info *deploymentpb.WorkerDeploymentInfo
	describe := func() error {
		d, err := c.WorkflowService().DescribeWorkerDeployment(ctx, &workflowservice.DescribeWorkerDeploymentRequest{Namespace: v.Namespace, DeploymentName: v.Deployment})
		info = d.GetWorkerDeploymentInfo()
		return err
	}
	registered := func() error {
		if err := describe(); err != nil {
			return err
		}
		if ours(info, v.BuildID) == nil {
			return fmt.Errorf("build %s is not registered yet", v.BuildID)
		}
		return nil
	}
	set := func() error {
		_, err := c.WorkerDeploymentClient().GetHandle(v.Deployment).SetCurrentVersion(ctx, client.WorkerDeploymentSetCurrentVersionOptions{BuildID: v.BuildID})
		return err
	}
	propagated := func() error {
		if err := describe(); err != nil {
			return err
		}
		if info.GetRoutingConfigUpdateState() == enumspb.ROUTING_CONFIG_UPDATE_STATE_IN_PROGRESS {
			return errors.New("the routing change is still reaching the task queues")
		}
		return nil
	}
	retry := func(step func() error) error {
		for {
			err := step()
			if err == nil {
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("set build %s current in deployment %s: %w", v.BuildID, v.Deployment, err)
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	if err := retry(registered); err != nil {
		return err
	}
	current := info.GetRoutingConfig().GetCurrentDeploymentVersion().GetBuildId()
	if current != v.BuildID && ours(info, v.BuildID).GetFirstActivationTime() != nil {
		if logger != nil {
			logger.Warn("This build was current before and another is now: not taking over (set it current by hand to roll back)",
				"deployment", v.Deployment, "buildId", v.BuildID, "current", current)
		}
		return nil
	}
	if current != v.BuildID {
		if err := retry(set); err != nil {
			return err
		}
	}
	if err := retry(propagated); err != nil {
		return err
	}
	if logger != nil {
		logger.Info("Worker Deployment version is current", "deployment", v.Deployment, "buildId", v.BuildID)
	}
	return nil
}

// ours is the summary of build in info's versions, nil when it has none.
func ours(info *deploymentpb.WorkerDeploymentInfo, build string) *deploymentpb.WorkerDeploymentInfo_WorkerDeploymentVersionSummary {
	for _, vs := range info.GetVersionSummaries() {
		if vs.GetDeploymentVersion().GetBuildId() == build {
			return vs
		}
	}
	return nil
}
