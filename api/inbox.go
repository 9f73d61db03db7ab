package api

import (
	"embed"
	"io/fs"
	"mime"
	"net/http"
	"path"

	"github.com/labstack/echo/v4"
)

// The approvals inbox: a page served at /inbox where a person signs in with an API key
// and answers the operator work that waits on it (approvals, questions, external
// decisions, the conversations staff answer; the end users' chats read-only, on
// request), live. Its files are embedded; there is no build step. The page is only a client of
// the public API (GET /v1/interrupts as a stream, POST /v1/runs/{runId}/interrupts/
// {nodeId}), so it can do nothing its key could not do with curl.

//go:embed inbox/*.html inbox/*.js inbox/*.css
var inboxFiles embed.FS

// inboxCSP confines the page to this host's own scripts, styles and API.
const inboxCSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

func (s *Server) handleInbox(c echo.Context) error {
	return serveInboxFile(c, "index.html")
}

func (s *Server) handleInboxAsset(c echo.Context) error {
	name := c.Param("asset")
	if name == "index.html" || path.Base(name) != name {
		return notFound("no inbox file %q", name)
	}
	return serveInboxFile(c, name)
}

func serveInboxFile(c echo.Context, name string) error {
	b, err := fs.ReadFile(inboxFiles, "inbox/"+name)
	if err != nil {
		return notFound("no inbox file %q", name)
	}
	h := c.Response().Header()
	h.Set("Content-Security-Policy", inboxCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
	ct := mime.TypeByExtension(path.Ext(name))
	if ct == "" {
		ct = echo.MIMEOctetStream
	}
	return c.Blob(http.StatusOK, ct, b)
}
