// Package mcptest is a small MCP server for tests of MCP tool bindings, built with the
// official Go SDK. Serve it over streamable HTTP with Handler, or over stdio with
// ServeStdio from a subprocess (a test binary re-executing itself).
package mcptest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// SearchArgs are the arguments of the server's "search" tool: its inferred input
// schema requires query (a string) and allows limit (an integer), nothing else.
type SearchArgs struct {
	Query string `json:"query" jsonschema:"what to search for"`
	Limit int    `json:"limit,omitempty" jsonschema:"how many hits at most"`
}

// MetaIdempotencyKey is the _meta key of a call's idempotency key (tools.MetaIdempotencyKey;
// this package does not import tools).
const MetaIdempotencyKey = "wop/idempotencyKey"

// TokenVar is the environment variable the stdio server reads as its access token, and
// TokenHashVar the one holding the hex SHA-256 of the token it expects.
const (
	TokenVar     = "DOCS_TOKEN"
	TokenHashVar = "DOCS_TOKEN_SHA256"
)

// NewServer returns the test server. Its tools:
//
//   - search(query, limit): a text result holding JSON {"query", "transport", "hits":
//     [{"title", "url"}], "authorized", "idempotencyKey"}; authorized says whether the
//     process's DOCS_TOKEN hashes to DOCS_TOKEN_SHA256 (stdio servers get both through
//     their binding's env), idempotencyKey is the call's _meta wop/idempotencyKey.
//   - broken(): a result marked isError, with the text "the index is being rebuilt".
func NewServer(transport string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "docs", Version: "1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "search", Description: "Search the product documentation."},
		func(_ context.Context, req *mcp.CallToolRequest, args SearchArgs) (*mcp.CallToolResult, any, error) {
			limit := args.Limit
			if limit <= 0 {
				limit = 2
			}
			hits := []map[string]string{
				{"title": "Refund policy: 30 days for " + args.Query, "url": "https://docs.example/refunds"},
				{"title": "Returning a damaged item", "url": "https://docs.example/returns"},
				{"title": "Store credit", "url": "https://docs.example/credit"},
			}
			if limit < len(hits) {
				hits = hits[:limit]
			}
			out := map[string]any{"query": args.Query, "transport": transport, "hits": hits, "authorized": authorized()}
			if key, ok := req.Params.GetMeta()[MetaIdempotencyKey].(string); ok {
				out["idempotencyKey"] = key
			}
			body, _ := json.Marshal(out)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(body)}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "broken", Description: "Always fails."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "the index is being rebuilt"}}}, nil, nil
		})
	return s
}

func authorized() bool {
	tok, want := os.Getenv(TokenVar), os.Getenv(TokenHashVar)
	if tok == "" || want == "" {
		return false
	}
	sum := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(sum[:]) == want
}

// Hash is the hex SHA-256 of a token, the value of TokenHashVar.
func Hash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// Handler serves the test server over streamable HTTP.
func Handler() http.Handler {
	s := NewServer("http")
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
}

// ServeStdio serves the test server on stdin and stdout until the client closes stdin.
func ServeStdio(ctx context.Context) error {
	err := NewServer("stdio").Run(ctx, &mcp.StdioTransport{})
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
