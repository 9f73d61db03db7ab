//go:build !nodev

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/wop-dev/wop/internal/devserver"
	"github.com/wop-dev/wop/worker"
	"github.com/wop-dev/wop/workflows"
)

// `wop setup` on a Temporal that lacks the namespace creates it with the retention
// asked, waits until the frontend serves it, and registers every Wop* search
// attribute; a second run finds it all in place and changes nothing.
func TestSetupCreatesTheNamespaceAndItsSearchAttributes(t *testing.T) {
	t.Parallel()
	ctx, srv := startServer(t, devserver.Options{})
	env := func(string) string { return "" }
	args := []string{"--address", srv.FrontendAddress(), "--namespace", "wop-setup", "--retention", "72h"}

	var out, errOut bytes.Buffer
	require.Equal(t, 0, runSetup(ctx, args, env, &out, &errOut), "stderr: %s", errOut.String())
	assert.Contains(t, out.String(), "Created namespace wop-setup (retention 72h0m0s)")

	c := dialServer(t, srv, "wop-setup")
	ns, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "wop-setup"})
	require.NoError(t, err)
	assert.Equal(t, 72*time.Hour, ns.GetConfig().GetWorkflowExecutionRetentionTtl().AsDuration())
	sas, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: "wop-setup"})
	require.NoError(t, err)
	for name, typ := range workflows.SearchAttributes {
		assert.Equal(t, typ, sas.GetCustomAttributes()[name], "search attribute %s", name)
	}

	out.Reset()
	require.Equal(t, 0, runSetup(ctx, args, env, &out, &errOut), "stderr: %s", errOut.String())
	assert.Contains(t, out.String(), "Namespace wop-setup exists")
}

// A bad --api-key-file is one error line naming the flag, before any dial.
func TestSetupRejectsAnUnreadableAPIKeyFile(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	missing := filepath.Join(t.TempDir(), "absent")
	code := runSetup(context.Background(), []string{"--address", "127.0.0.1:1", "--api-key-file", missing}, func(string) string { return "" }, &out, &errOut)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut.String(), "wop setup: read --api-key-file")
	empty := filepath.Join(t.TempDir(), "empty")
	require.NoError(t, os.WriteFile(empty, []byte("\n"), 0o600))
	errOut.Reset()
	code = runSetup(context.Background(), []string{"--address", "127.0.0.1:1", "--api-key-file", empty}, func(string) string { return "" }, &out, &errOut)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut.String(), "is empty")
}

// `wop setup --legacy-attributes=false` registers the four Keyword attributes and
// none of the legacy ones; a worker's check accepts that namespace, saying it has no
// legacy attributes.
func TestSetupWithoutLegacyAttributesTakesFourKeywordSlots(t *testing.T) {
	t.Parallel()
	ctx, srv := startServer(t, devserver.Options{})
	args := []string{"--address", srv.FrontendAddress(), "--namespace", "wop-slots", "--legacy-attributes=false"}
	var out, errOut bytes.Buffer
	require.Equal(t, 0, runSetup(ctx, args, func(string) string { return "" }, &out, &errOut), "stderr: %s", errOut.String())

	c := dialServer(t, srv, "wop-slots")
	sas, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: "wop-slots"})
	require.NoError(t, err)
	var keywords []string
	for name, typ := range sas.GetCustomAttributes() {
		if typ == enumspb.INDEXED_VALUE_TYPE_KEYWORD && strings.HasPrefix(name, "Wop") {
			keywords = append(keywords, name)
		}
	}
	assert.ElementsMatch(t, []string{"WopWorkflowId", "WopTenant", "WopStatus", "WopPackId"}, keywords)
	assert.Equal(t, enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST, sas.GetCustomAttributes()[workflows.SATags.GetName()])
	checked, legacy, err := worker.CheckSearchAttributes(ctx, c, "wop-slots")
	require.NoError(t, err)
	assert.True(t, checked)
	assert.False(t, legacy)
}

// startServer starts an embedded Temporal server for the test, with a context that
// bounds the test's calls.
func startServer(t *testing.T, opts devserver.Options) (context.Context, *devserver.Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	srv, err := devserver.Start(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	return ctx, srv
}

// dialServer dials namespace ns of srv.
func dialServer(t *testing.T, srv *devserver.Server, ns string) client.Client {
	t.Helper()
	c, err := client.Dial(client.Options{HostPort: srv.FrontendAddress(), Namespace: ns, Logger: worker.SDKLogger(nil)})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}
