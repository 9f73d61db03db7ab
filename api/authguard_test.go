package api

import (
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Failed authentications count against the failing client: wrong keys from an address
// end in 429 for that address's failures, never for a key that authenticates; a
// revoked key's failures count against the key.
func TestAuthFailuresNeverLockOutAValidKey(t *testing.T) {
	env, _ := keysEnv(t, twoTenantKeys(), func(c *Config) { c.Guards.AuthFailureBurst = 5 })
	counts := map[int]int{}
	for range 40 {
		counts[env.do("GET", "/v1/workflows", "wrong-key", "").Code]++
		require.Equal(t, 200, env.do("GET", "/v1/workflows", fullKey, "").Code, "the valid key from the same address")
	}
	assert.Equal(t, 5, counts[401], "%v", counts)
	assert.Equal(t, 35, counts[429], "%v", counts)

	// A revoked key's failures are its own: they leave its address's budget alone.
	env, path := keysEnv(t, twoTenantKeys(), func(c *Config) { c.Guards.AuthFailureBurst = 5 })
	require.NoError(t, RevokeKey(path, "acme-dashboard"))
	require.NoError(t, env.srv.ReloadKeys())
	counts = map[int]int{}
	for range 10 {
		counts[env.do("GET", "/v1/workflows", acmeDashboard, "").Code]++
	}
	assert.Equal(t, map[int]int{401: 5, 429: 5}, counts)
	env.expectError(env.do("GET", "/v1/workflows", "wrong-key", ""), 401, CodeUnauthenticated)
	require.Equal(t, 200, env.do("GET", "/v1/workflows", acmeOps, "").Code)
}

func TestClientAddrBehindTrustedProxies(t *testing.T) {
	trusted, err := ParseTrustedProxies("10.0.0.0/8, 192.0.2.7")
	require.NoError(t, err)
	_, err = ParseTrustedProxies("10.0.0.0/8, proxy.local")
	require.ErrorContains(t, err, `"proxy.local" is neither an address nor a CIDR prefix`)
	s := &Server{cfg: Config{Guards: GuardConfig{TrustedProxies: trusted}}}
	plain := &Server{}
	e := echo.New()
	addr := func(srv *Server, peer string, xff ...string) string {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = peer
		for _, v := range xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		return srv.clientAddr(e.NewContext(r, httptest.NewRecorder()))
	}
	assert.Equal(t, "203.0.113.9", addr(s, "10.1.2.3:443", "203.0.113.9"), "a trusted proxy names the client")
	assert.Equal(t, "203.0.113.9", addr(s, "10.1.2.3:443", "198.51.100.1, 203.0.113.9, 10.9.9.9"), "read from the right up to the first untrusted hop")
	assert.Equal(t, "203.0.113.9", addr(s, "10.1.2.3:443", "198.51.100.1", "203.0.113.9:5555, 192.0.2.7"), "headers in order, ports dropped")
	assert.Equal(t, "2001:db8::1", addr(s, "10.1.2.3:443", "[2001:db8::1]:80"))
	assert.Equal(t, "10.2.2.2", addr(s, "10.1.2.3:443", "junk, 10.2.2.2"), "a hop that is no address ends the walk")
	assert.Equal(t, "198.51.100.20", addr(s, "198.51.100.20:443", "203.0.113.9"), "an untrusted peer's header is ignored")
	assert.Equal(t, "10.1.2.3", addr(plain, "10.1.2.3:443", "203.0.113.9"), "without trusted proxies nothing forwarded is read")
}
