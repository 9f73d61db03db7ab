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
	Ports   []string `yaml:"ports"`
}

type composeDepends struct {
	Condition string `yaml:"condition"`
}

func loadCompose(t *testing.T) composeFile {
	t.Helper()
	return loadComposeFile(t, "../docker-compose.yml")
}

func loadComposeFile(t *testing.T, path string) composeFile {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var f composeFile
	require.NoError(t, yaml.Unmarshal(raw, &f), "%s must be valid YAML with the expected shapes", path)
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
	m := regexp.MustCompile(`(?m)^SEARCH_ATTRIBUTES="([^"]*)"`).FindSubmatch(raw)
	require.NotNil(t, m, "script declares SEARCH_ATTRIBUTES")
	legacy := regexp.MustCompile(`(?m)^LEGACY_SEARCH_ATTRIBUTES="([^"]*)"`).FindSubmatch(raw)
	require.NotNil(t, legacy, "script declares LEGACY_SEARCH_ATTRIBUTES")
	require.ElementsMatch(t, workflows.LegacySearchAttributes, strings.Fields(string(legacy[1])), "the legacy ones are Keyword attributes")
	// Entries are NAME or NAME:TYPE, Keyword by default, as the CLI spells the types.
	var got []string
	for _, entry := range strings.Fields(string(m[1]) + " " + string(legacy[1])) {
		name, typ, ok := strings.Cut(entry, ":")
		if !ok {
			typ = "Keyword"
		}
		got = append(got, name+":"+typ)
	}
	cliType := map[enumspb.IndexedValueType]string{
		enumspb.INDEXED_VALUE_TYPE_KEYWORD:      "Keyword",
		enumspb.INDEXED_VALUE_TYPE_DATETIME:     "Datetime",
		enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST: "KeywordList",
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

// interpolate resolves ${VAR:-default}, ${VAR-default} and ${VAR} as compose does when
// VAR is unset: what the file means without any variable set.
func interpolate(s string) string {
	return regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:?[-?]([^}]*))?\}`).ReplaceAllStringFunc(s, func(m string) string {
		parts := regexp.MustCompile(`^\$\{[A-Za-z_][A-Za-z0-9_]*(:?-([^}]*))?`).FindStringSubmatch(m)
		if parts != nil && parts[1] != "" {
			return parts[2]
		}
		return ""
	})
}

// TestComposePublishesOnLoopbackOnly: without any variable set, every published port
// is bound to 127.0.0.1, Temporal's frontend is not published at all, and the UI
// cannot change runs; each binding is a variable the operator can open up.
func TestComposePublishesOnLoopbackOnly(t *testing.T) {
	f := loadCompose(t)
	assert.Empty(t, f.Services["temporal"].Ports, "Temporal's frontend is not published by default")
	published := map[string]string{}
	for name, s := range f.Services {
		for _, p := range s.Ports {
			// Short syntax HOST_IP:HOST_PORT:CONTAINER_PORT, the host address a *_BIND
			// variable defaulting to loopback; a port without a host address would bind
			// every interface.
			m := regexp.MustCompile(`^\$\{[A-Z_]+_BIND:-127\.0\.0\.1\}:([0-9]+):[0-9]+$`).FindStringSubmatch(p)
			require.NotNil(t, m, "service %s publishes %q; bind it with ${<NAME>_BIND:-127.0.0.1}:", name, p)
			assert.True(t, strings.HasPrefix(interpolate(p), "127.0.0.1:"), interpolate(p))
			published[name] = m[1]
		}
	}
	assert.Equal(t, map[string]string{"api": "8080", "temporal-ui": "8233"}, published)
	assert.Equal(t, "true", interpolate(f.Services["temporal-ui"].Environment["TEMPORAL_DISABLE_WRITE_ACTIONS"]),
		"the UI cannot signal, cancel or terminate runs by default")

	// Opening Temporal's port is an explicit override, on loopback too.
	pub := loadComposeFile(t, "../deploy/compose.publish-temporal.yml")
	require.Len(t, pub.Services["temporal"].Ports, 1)
	assert.Equal(t, "127.0.0.1:7233:7233", interpolate(pub.Services["temporal"].Ports[0]))
}

// TestComposeImagesMatchTheEmbeddedServer keeps the Temporal server, admin tools and UI
// images at the versions `wop dev` embeds (go.mod).
func TestComposeImagesMatchTheEmbeddedServer(t *testing.T) {
	mod, err := os.ReadFile("../go.mod")
	require.NoError(t, err)
	version := func(module string) string {
		m := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(module) + ` v([0-9.]+)\s*$`).FindSubmatch(mod)
		require.NotNil(t, m, "go.mod requires %s", module)
		return string(m[1])
	}
	f := loadCompose(t)
	server, ui := version("go.temporal.io/server"), version("github.com/temporalio/ui-server/v2")
	assert.Equal(t, "temporalio/server:"+server, f.Services["temporal"].Image)
	assert.Equal(t, "temporalio/admin-tools:"+server, f.Services["temporal-schema"].Image)
	assert.Equal(t, "temporalio/admin-tools:"+server, f.Services["temporal-namespace"].Image)
	assert.Equal(t, "temporalio/ui:"+ui, f.Services["temporal-ui"].Image)
}

// TestComposeWorkerGetsProviderAndTelemetrySettings: the worker receives every provider
// variable the worker reads (keys and base URLs); the API none of the provider keys.
func TestComposeWorkerGetsProviderAndTelemetrySettings(t *testing.T) {
	f := loadCompose(t)
	w, a := f.Services["worker"].Environment, f.Services["api"].Environment
	for _, v := range []string{"OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL",
		"WOP_OPENAI_COMPATIBLE_BASE_URL", "WOP_OPENAI_COMPATIBLE_API_KEY", "WOP_MODEL_PROVIDER", "WOP_MODEL", "WOP_PROVIDERS",
		"GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL", "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION", "GOOGLE_VERTEX_BASE_URL",
		"AWS_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_BEDROCK_RUNTIME",
		"AZURE_OPENAI_ENDPOINT", "AZURE_OPENAI_API_KEY", "OPENAI_API_VERSION"} {
		assert.Contains(t, w, v, "worker")
		assert.NotContains(t, a, v, "api")
	}
	for _, env := range []map[string]string{w, a} {
		assert.Contains(t, env, "OTEL_EXPORTER_OTLP_ENDPOINT")
	}
	assert.NotEmpty(t, f.Services["worker"].Healthcheck.Test)
	assert.Contains(t, strings.Join(f.Services["worker"].Healthcheck.Test, " "), strings.TrimPrefix(interpolate(w["WOP_WORKER_HEALTH_ADDR"]), "0.0.0.0"),
		"the worker's health check asks the address it serves")
}

// TestComposeOverridesFitTheFile checks the keys and mutual-TLS overrides: they name
// services of the compose file, the keys file is mounted as a folder where
// WOP_KEYS_FILE points, and every Temporal client gets the same certificate settings.
func TestComposeOverridesFitTheFile(t *testing.T) {
	base := loadCompose(t)
	keys := loadComposeFile(t, "../deploy/compose.keys.yml")
	api := keys.Services["api"]
	require.Len(t, api.Volumes, 1)
	parts := strings.Split(interpolate(api.Volumes[0]), ":")
	require.Len(t, parts, 3)
	assert.Equal(t, "ro", parts[2])
	assert.True(t, strings.HasPrefix(api.Environment["WOP_KEYS_FILE"], parts[1]+"/"), "WOP_KEYS_FILE lies in the mounted folder")

	mtls := loadComposeFile(t, "../deploy/compose.temporal-mtls.yml")
	server := mtls.Services["temporal"].Environment
	assert.Equal(t, "true", server["TEMPORAL_TLS_REQUIRE_CLIENT_AUTH"])
	for _, v := range []string{"TEMPORAL_TLS_SERVER_CERT", "TEMPORAL_TLS_SERVER_KEY", "TEMPORAL_TLS_SERVER_CA_CERT",
		"TEMPORAL_TLS_FRONTEND_CERT", "TEMPORAL_TLS_FRONTEND_KEY", "TEMPORAL_TLS_CLIENT1_CA_CERT"} {
		assert.True(t, strings.HasPrefix(server[v], "/certs/"), "%s = %q", v, server[v])
	}
	for name, s := range mtls.Services {
		assert.Contains(t, base.Services, name, "the override names a service of docker-compose.yml")
		assert.Contains(t, s.Volumes, "${TEMPORAL_CERTS_DIR:-./deploy/certs}:/certs:ro", name)
		if name == "temporal" {
			continue
		}
		for _, v := range []string{"TEMPORAL_TLS_CA", "TEMPORAL_TLS_CERT", "TEMPORAL_TLS_KEY", "TEMPORAL_TLS_SERVER_NAME"} {
			assert.NotEmpty(t, s.Environment[v], "%s: %s", name, v)
		}
	}
	for _, app := range []string{"worker", "api", "temporal-ui", "temporal-namespace"} {
		assert.Contains(t, mtls.Services, app, "every client of Temporal presents a certificate")
	}
}
