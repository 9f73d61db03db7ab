package api

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/webhooks"
)

// dispatchers stands for the tenants' webhook dispatchers: the registrations and
// removals each dispatcher (by workflow id) was sent.
type dispatchers struct {
	mu      sync.Mutex
	started []string
	subs    map[string][]string // dispatcher id -> webhook ids
	removed map[string][]string
}

// withDispatchers answers the dispatcher's start and its register and unregister
// updates on env's client.
func withDispatchers(env *testEnv) *dispatchers {
	d := &dispatchers{subs: map[string][]string{}, removed: map[string][]string{}}
	env.mc.On("ExecuteWorkflow", mock.Anything, mock.Anything, webhooks.WebhookDispatcherWorkflowName, mock.Anything).Return(
		func(_ context.Context, o client.StartWorkflowOptions, _ any, _ ...any) (client.WorkflowRun, error) {
			d.mu.Lock()
			defer d.mu.Unlock()
			d.started = append(d.started, o.ID)
			return nil, nil
		}).Maybe()
	env.mc.On("UpdateWorkflow", mock.Anything, mock.MatchedBy(func(o client.UpdateWorkflowOptions) bool {
		return o.UpdateName == webhooks.WebhookRegisterUpdate || o.UpdateName == webhooks.WebhookUnregisterUpdate
	})).Return(func(_ context.Context, o client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error) {
		d.mu.Lock()
		defer d.mu.Unlock()
		if o.UpdateName == webhooks.WebhookUnregisterUpdate {
			d.removed[o.WorkflowID] = append(d.removed[o.WorkflowID], o.Args[0].(string))
			return dispatcherAnswer{o: o}, nil
		}
		reg := o.Args[0].(webhooks.WebhookRegistration)
		d.subs[o.WorkflowID] = append(d.subs[o.WorkflowID], reg.Subscription.ID)
		return dispatcherAnswer{o: o, v: webhooks.WebhookRegistered{Subscription: reg.Subscription}}, nil
	}).Maybe()
	return d
}

// dispatcherAnswer is a dispatcher update's completed answer.
type dispatcherAnswer struct {
	o client.UpdateWorkflowOptions
	v any
}

func (h dispatcherAnswer) WorkflowID() string { return h.o.WorkflowID }
func (h dispatcherAnswer) RunID() string      { return "" }
func (h dispatcherAnswer) UpdateID() string   { return h.o.UpdateID }
func (h dispatcherAnswer) Get(_ context.Context, ptr any) error {
	if ptr == nil || h.v == nil {
		return nil
	}
	b, err := json.Marshal(h.v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, ptr)
}

func surfaceSeamEnv(t *testing.T, seams bool) (*testEnv, *dispatchers) {
	env := newTestEnv(t, func(c *Config) {
		c.WebhookSecret = []byte("webhook-key")
		if seams {
			c.ConformanceSeams = &ConformanceSeams{}
		}
	})
	return env, withDispatchers(env)
}

// The surface seam performs a webhooks operation in the tenant it names, through the
// protocol route's own handler: a registration lands in that tenant's dispatcher
// (answered 200 with the route's body), a removal goes to that tenant's dispatcher,
// and a list reads that tenant's subscriptions only.
func TestSurfaceSeamActsInTheNamedTenant(t *testing.T) {
	env, d := surfaceSeamEnv(t, true)
	rec := env.do(http.MethodPost, SurfaceSeamPath, fullKey,
		`{"tenantId":"tenant-a","surface":"webhooks","op":"register","args":{"url":"https://example.com/hook","events":["run.completed"]}}`)
	require.Equal(t, http.StatusOK, rec.Code, "%s", rec.Body)
	var got RegisterWebhookResponse
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &got))
	assert.NotEmpty(t, got.WebhookID)
	assert.Equal(t, "tenant-a", got.TenantID)
	a := protocol.WebhookDispatcherID("tenant-a")
	assert.Equal(t, []string{a}, d.started)
	assert.Equal(t, []string{got.WebhookID}, d.subs[a])
	assert.Empty(t, d.subs[protocol.WebhookDispatcherID("default")], "nothing in the key's own tenant")

	// A tenant without a dispatcher lists nothing.
	rec = env.do(http.MethodPost, SurfaceSeamPath, fullKey, `{"tenantId":"tenant-c","surface":"webhooks","op":"list","args":{}}`)
	require.Equal(t, http.StatusOK, rec.Code, "%s", rec.Body)
	assert.JSONEq(t, `{"webhooks":[],"deadLetters":[]}`, rec.Body.String())

	rec = env.do(http.MethodPost, SurfaceSeamPath, fullKey,
		`{"tenantId":"tenant-a","surface":"webhooks","op":"unregister","args":{"webhookId":"`+got.WebhookID+`"}}`)
	require.Equal(t, http.StatusOK, rec.Code, "%s", rec.Body)
	assert.JSONEq(t, `{}`, rec.Body.String())
	assert.Equal(t, []string{got.WebhookID}, d.removed[a])
}

// The seam checks what the route checks (a refused destination is
// webhook_url_rejected, the route's scope is required) and refuses what it does not
// serve, naming the field; without --conformance-seams it does not exist.
func TestSurfaceSeamRefuses(t *testing.T) {
	env, d := surfaceSeamEnv(t, true)
	for _, c := range []struct{ body, field string }{
		{`{"surface":"webhooks","op":"list"}`, "tenantId"},
		{`{"tenantId":"../x","surface":"webhooks","op":"list"}`, "tenantId"},
		{`{"tenantId":"tenant-a","surface":"runs","op":"list"}`, "surface"},
		{`{"tenantId":"tenant-a","surface":"webhooks","op":"rotate"}`, "op"},
		{`{"tenantId":"tenant-a","surface":"webhooks","op":"register","args":[1]}`, "args"},
		{`{"tenantId":"tenant-a","surface":"webhooks","op":"unregister","args":{}}`, "args.webhookId"},
		{`{"tenantId":"tenant-a","surface":"webhooks","op":"list","extra":1}`, "extra"},
	} {
		e := env.expectError(env.do(http.MethodPost, SurfaceSeamPath, fullKey, c.body), http.StatusBadRequest, CodeValidation)
		assert.Equal(t, c.field, e.Details["field"], c.body)
	}
	env.expectError(env.do(http.MethodPost, SurfaceSeamPath, fullKey,
		`{"tenantId":"tenant-a","surface":"webhooks","op":"register","args":{"url":"http://127.0.0.1:9/x","events":["run.completed"]}}`),
		http.StatusBadRequest, CodeWebhookURLRejected)
	env.expectError(env.do(http.MethodPost, SurfaceSeamPath, lowKey, `{"tenantId":"tenant-a","surface":"webhooks","op":"list"}`),
		http.StatusForbidden, CodeForbidden)
	assert.Empty(t, d.started, "no dispatcher started")

	off, _ := surfaceSeamEnv(t, false)
	rec := off.do(http.MethodPost, SurfaceSeamPath, fullKey, `{"tenantId":"tenant-a","surface":"webhooks","op":"list"}`)
	assert.Equal(t, http.StatusNotFound, rec.Code, "%s", rec.Body)
}
