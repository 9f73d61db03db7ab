// Package api is the host's OpenWOP v1 REST surface, served with Echo. Every protocol
// call becomes a Temporal call: a workflow start, a signal, a query or a cancel.
package api

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"
	"go.temporal.io/sdk/client"

	"github.com/wop-dev/wop/workflows"
)

// Key is one configured API key. Secret is the bearer token as configured; the server
// keeps only its hash.
type Key struct {
	ID     string
	Secret string
	Tenant string
	Scopes []string
}

// Config configures the API server.
type Config struct {
	// Keys are the accepted bearer keys.
	Keys []Key
	// TokenSecret signs interrupt tokens (HMAC-SHA256).
	TokenSecret []byte
	// PublicURL is the base URL used in callback URLs, e.g. http://127.0.0.1:8080.
	PublicURL string
}

// Server is the HTTP API.
type Server struct {
	e *echo.Echo
}

// New builds the API server.
func New(cfg Config, tc client.Client, cat *workflows.Catalog, logger *slog.Logger) (*Server, error) {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.GET("/healthz", func(c echo.Context) error { return c.JSON(http.StatusOK, map[string]string{"status": "ok"}) })
	return &Server{e: e}, nil
}

// Handler returns the server's http.Handler.
func (s *Server) Handler() http.Handler { return s.e }

// Shutdown stops background work of the server (not the listener; the caller owns it).
func (s *Server) Shutdown(ctx context.Context) error { return nil }
