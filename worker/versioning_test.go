package worker

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/workflow"
)

func TestVersioningFromEnvAndCheck(t *testing.T) {
	env := map[string]string{"WOP_DEPLOYMENT_NAME": "wop", "WOP_BUILD_ID": "v2", "WOP_SET_CURRENT_VERSION": "true"}
	cfg, err := ConfigFromEnv(func(k string) string { return env[k] })
	require.NoError(t, err)
	assert.Equal(t, Versioning{Deployment: "wop", BuildID: "v2", SetCurrent: true}, cfg.Versioning)
	require.NoError(t, cfg.Versioning.Check())
	o := cfg.Versioning.options()
	assert.True(t, o.UseVersioning)
	assert.Equal(t, workflow.VersioningBehaviorAutoUpgrade, o.DefaultVersioningBehavior, "auto-upgrade unless told")
	assert.Equal(t, "v2", o.Version.BuildID)
	assert.Equal(t, workflow.VersioningBehaviorPinned, Versioning{Deployment: "wop", BuildID: "v2", Behavior: VersioningPinned}.options().DefaultVersioningBehavior)
	assert.False(t, Versioning{}.options().UseVersioning, "unversioned without a deployment")

	for v, want := range map[Versioning]string{
		{BuildID: "v2"}:                    "need --deployment-name",
		{Deployment: "wop"}:                `deployment "wop" needs --build-id (WOP_BUILD_ID)`,
		{Deployment: "w.p", BuildID: "v2"}: "Temporal reserves '.'",
		{Deployment: "wop", BuildID: "v2", Behavior: "sticky"}: `versioning behavior "sticky": use auto-upgrade or pinned`,
	} {
		assert.ErrorContains(t, v.Check(), want, "%+v", v)
	}
	env["WOP_SET_CURRENT_VERSION"] = "yes please"
	_, err = ConfigFromEnv(func(k string) string { return env[k] })
	assert.ErrorContains(t, err, `WOP_SET_CURRENT_VERSION="yes please": want true or false`)
}
