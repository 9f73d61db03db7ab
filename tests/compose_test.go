package tests

// No Docker engine runs where the tests run, so this checks what can be checked of the
// production compose file without one: the services, pinned images, health checks,
// start order and the app's Temporal address.

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"gopkg.in/yaml.v3"

	"github.com/wop-dev/wop/workflows"
)

type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

type composeService struct {
	Image       string                    `yaml:"image"`
	Build       any                       `yaml:"build"`
	Command     any                       `yaml:"command"`
	Entrypoint  any                       `yaml:"entrypoint"`
	Environment map[string]string         `yaml:"environment"`
	DependsOn   map[string]composeDepends `yaml:"depends_on"`
	Healthcheck *struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
	Restart string   `yaml:"restart"`
	Volumes []string `yaml:"volumes"`
}

type composeDepends struct {
	Condition string `yaml:"condition"`
}

func loadCompose(t *testing.T) composeFile {
	t.Helper()
	raw, err := os.ReadFile("../docker-compose.yml")
	require.NoError(t, err)
	var f composeFile
	require.NoError(t, yaml.Unmarshal(raw, &f), "docker-compose.yml must be valid YAML with the expected shapes")
	return f
}

func TestComposeHasEveryService(t *testing.T) {
	f := loadCompose(t)
	for _, name := range []string{"postgresql", "temporal-schema", "temporal", "temporal-namespace", "temporal-ui", "worker", "api"} {
		assert.Contains(t, f.Services, name)
	}
	assert.Contains(t, f.Services["temporal"].Image, "temporalio/server:")
	assert.Contains(t, f.Services["temporal-ui"].Image, "temporalio/ui:")
	assert.Contains(t, f.Services["temporal-schema"].Image, "temporalio/admin-tools:")
	assert.Equal(t, "postgres12", f.Services["temporal"].Environment["DB"])
	for _, s := range f.Services {
		assert.NotContains(t, s.Image, "auto-setup", "temporalio/auto-setup is deprecated")
	}
}

var pinnedTag = regexp.MustCompile(`^[a-z0-9./_-]+:[0-9]+\.[0-9]+(\.[0-9]+)?([.-][A-Za-z0-9.-]+)?$`)

func TestComposeImagesArePinned(t *testing.T) {
	f := loadCompose(t)
	versions := map[string]string{}
	for name, s := range f.Services {
		if s.Build != nil {
			assert.Contains(t, []string{"worker", "api"}, name, "only the app is built here")
			continue
		}
		require.NotEmpty(t, s.Image, "service %s has neither image nor build", name)
		assert.Regexp(t, pinnedTag, s.Image, "service %s: image must carry a version tag", name)
		assert.NotContains(t, s.Image, ":latest")
		repo, tag, _ := strings.Cut(s.Image, ":")
		if prev, ok := versions[repo]; ok {
			assert.Equal(t, prev, tag, "every use of %s has the same tag", repo)
		}
		versions[repo] = tag
	}
	// Schema tools and server must be the same Temporal version.
	assert.Equal(t, versions["temporalio/server"], versions["temporalio/admin-tools"])
}

func TestComposeHealthchecksAndStartOrder(t *testing.T) {
	f := loadCompose(t)
	for _, name := range []string{"postgresql", "temporal", "temporal-ui", "worker", "api"} {
		s := f.Services[name]
		if assert.NotNil(t, s.Healthcheck, "service %s needs a healthcheck", name) {
			assert.NotEmpty(t, s.Healthcheck.Test, "service %s healthcheck test", name)
		}
	}
	// Every depends_on names a service and a condition that exists, and a condition on a
	// service_healthy target needs a healthcheck on that target.
	for name, s := range f.Services {
		for dep, cond := range s.DependsOn {
			target, ok := f.Services[dep]
			require.True(t, ok, "%s depends on unknown service %s", name, dep)
			assert.Contains(t, []string{"service_healthy", "service_completed_successfully"}, cond.Condition,
				"%s → %s condition", name, dep)
			if cond.Condition == "service_healthy" {
				assert.NotNil(t, target.Healthcheck, "%s waits for %s to be healthy, which has no healthcheck", name, dep)
			}
		}
	}
	assert.Equal(t, "service_healthy", f.Services["temporal-schema"].DependsOn["postgresql"].Condition)
	assert.Equal(t, "service_completed_successfully", f.Services["temporal"].DependsOn["temporal-schema"].Condition)
	for _, app := range []string{"worker", "api"} {
		s := f.Services[app]
		assert.Equal(t, "service_healthy", s.DependsOn["temporal"].Condition, app)
		assert.Equal(t, "service_completed_successfully", s.DependsOn["temporal-namespace"].Condition, app)
		assert.Equal(t, "on-failure", s.Restart, app)
	}
}

func TestComposeAppTalksToTheTemporalService(t *testing.T) {
	f := loadCompose(t)
	for _, app := range []string{"worker", "api", "temporal-namespace", "temporal-ui"} {
		addr := f.Services[app].Environment["TEMPORAL_ADDRESS"]
		assert.Equal(t, "temporal:7233", addr, "%s TEMPORAL_ADDRESS", app)
		host, _, _ := strings.Cut(addr, ":")
		assert.Contains(t, f.Services, host, "%s points at a service that exists", app)
	}
	assert.Equal(t, []any{"worker"}, f.Services["worker"].Command)
	assert.Equal(t, []any{"api"}, f.Services["api"].Command)
	// Provider keys are the worker's alone.
	assert.NotContains(t, f.Services["api"].Environment, "OPENAI_API_KEY")
	assert.NotContains(t, f.Services["api"].Environment, "ANTHROPIC_API_KEY")
}

// TestComposeBootstrapRegistersTheSearchAttributes keeps the namespace bootstrap script
// in step with workflows.SearchAttributes: a run that sets an unregistered search
// attribute fails every workflow task.
func TestComposeBootstrapRegistersTheSearchAttributes(t *testing.T) {
	f := loadCompose(t)
	var script string
	for _, v := range f.Services["temporal-namespace"].Volumes {
		host, _, _ := strings.Cut(v, ":")
		if strings.HasSuffix(host, ".sh") {
			script = "../" + strings.TrimPrefix(host, "./")
		}
	}
	require.NotEmpty(t, script, "temporal-namespace mounts its script")
	raw, err := os.ReadFile(script)
	require.NoError(t, err)
	m := regexp.MustCompile(`SEARCH_ATTRIBUTES="([^"]*)"`).FindSubmatch(raw)
	require.NotNil(t, m, "script declares SEARCH_ATTRIBUTES")
	// Entries are NAME or NAME:TYPE, Keyword by default, as the CLI spells the types.
	var got []string
	for _, entry := range strings.Fields(string(m[1])) {
		name, typ, ok := strings.Cut(entry, ":")
		if !ok {
			typ = "Keyword"
		}
		got = append(got, name+":"+typ)
	}
	cliType := map[enumspb.IndexedValueType]string{
		enumspb.INDEXED_VALUE_TYPE_KEYWORD:  "Keyword",
		enumspb.INDEXED_VALUE_TYPE_DATETIME: "Datetime",
	}
	want := make([]string, 0, len(workflows.SearchAttributes))
	for name, typ := range workflows.SearchAttributes {
		require.Contains(t, cliType, typ, "search attribute %s has a type the script cannot name yet", name)
		want = append(want, name+":"+cliType[typ])
	}
	slices.Sort(got)
	slices.Sort(want)
	assert.Equal(t, want, got)
	for _, s := range f.Services {
		for _, v := range s.Volumes {
			host, _, _ := strings.Cut(v, ":")
			if strings.HasPrefix(host, "./") {
				_, err := os.Stat("../" + strings.TrimPrefix(host, "./"))
				assert.NoError(t, err, "mounted file %s exists", host)
			}
		}
	}
}
