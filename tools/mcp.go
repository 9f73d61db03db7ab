package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/wop-dev/wop/convo"
)

// mcpConnectTimeout bounds connecting to an MCP server (starting a subprocess and the
// protocol's handshake).
const mcpConnectTimeout = 30 * time.Second

// inheritedEnv are the variables an MCP subprocess gets from the worker's environment,
// as MCP clients commonly pass them: enough to find programs and a home folder, and none
// of the worker's secrets. A server's env adds the rest.
var inheritedEnv = []string{"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "TMPDIR", "USER"}

// mcpPool keeps one client session per MCP server, connected on first use and again
// after the connection broke.
type mcpPool struct {
	set    *Set
	client *mcp.Client

	mu       sync.Mutex
	sessions map[string]*mcpConn
	closed   bool
}

// mcpConn is the connection of one server; mu serialises connecting.
type mcpConn struct {
	mu      sync.Mutex
	session *mcp.ClientSession
}

func newMCPPool(s *Set) *mcpPool {
	return &mcpPool{
		set:      s,
		client:   mcp.NewClient(&mcp.Implementation{Name: "wop", Version: "1"}, nil),
		sessions: map[string]*mcpConn{},
	}
}

// conn returns the connection slot of a server.
func (p *mcpPool) conn(name string) (*mcpConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errors.New("the tool bindings are closed")
	}
	c := p.sessions[name]
	if c == nil {
		c = &mcpConn{}
		p.sessions[name] = c
	}
	return c, nil
}

// session returns the server's session, connecting when there is none.
func (p *mcpPool) session(ctx context.Context, name string) (*mcp.ClientSession, error) {
	srv := p.set.server(name)
	if srv == nil {
		return nil, fmt.Errorf("MCP server %q is not declared", name)
	}
	c, err := p.conn(name)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.session != nil {
		return c.session, nil
	}
	cctx, cancel := context.WithTimeout(ctx, mcpConnectTimeout)
	defer cancel()
	stderr := &tailBuffer{max: 1024}
	cs, err := p.client.Connect(cctx, p.transport(srv, stderr), nil)
	if err != nil {
		msg := err.Error()
		if t := strings.TrimSpace(stderr.String()); t != "" {
			msg += "; the server wrote: " + t
		}
		return nil, fmt.Errorf("connect to MCP server %s (%s): %s", name, srv.describe(), p.set.redact(msg))
	}
	c.session = cs
	return cs, nil
}

// drop closes a server's session after a failure, so the next call connects again.
func (p *mcpPool) drop(name string, cs *mcp.ClientSession) {
	c, err := p.conn(name)
	if err != nil {
		return
	}
	c.mu.Lock()
	if c.session == cs {
		c.session = nil
	}
	c.mu.Unlock()
	_ = cs.Close()
}

func (p *mcpPool) close() error {
	p.mu.Lock()
	p.closed = true
	conns := p.sessions
	p.sessions = map[string]*mcpConn{}
	p.mu.Unlock()
	var errs []error
	for _, c := range conns {
		c.mu.Lock()
		if c.session != nil {
			if err := c.session.Close(); err != nil && !errors.Is(err, mcp.ErrConnectionClosed) {
				errs = append(errs, err)
			}
			c.session = nil
		}
		c.mu.Unlock()
	}
	return errors.Join(errs...)
}

// transport builds the MCP transport of a server: a subprocess over stdio, or the
// streamable HTTP transport.
func (p *mcpPool) transport(srv *MCPServer, stderr *tailBuffer) mcp.Transport {
	if srv.URL != "" {
		hc := &http.Client{Transport: headerTransport{headers: srv.Headers, next: http.DefaultTransport}}
		return &mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: hc, DisableStandaloneSSE: true, MaxRetries: -1}
	}
	cmd := exec.Command(srv.Command[0], srv.Command[1:]...)
	cmd.Dir = srv.Dir
	env := []string{}
	for _, k := range inheritedEnv {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	keys := make([]string, 0, len(srv.Env))
	for k := range srv.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+srv.Env[k].Value())
	}
	cmd.Env = env
	cmd.Stderr = stderr
	return &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
}

// describe names the server's transport for messages (no secrets: url and command
// cannot hold ${VAR}).
func (srv *MCPServer) describe() string {
	if srv.URL != "" {
		return "streamable HTTP " + srv.URL
	}
	return "stdio: " + strings.Join(srv.Command, " ")
}

// headerTransport adds a server's headers to every request.
type headerTransport struct {
	headers map[string]Secret
	next    http.RoundTripper
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(t.headers) > 0 {
		r = r.Clone(r.Context())
		for k, v := range t.headers {
			r.Header.Set(k, v.Value())
		}
	}
	return t.next.RoundTrip(r)
}

// Keys of the _meta every MCP tool call carries, as an HTTP binding's headers: the
// idempotency key is the same for every attempt of one call, so a server that honours
// it may let a binding say idempotent: true.
const (
	MetaIdempotencyKey = "wop/idempotencyKey"
	MetaRunID          = "wop/runId"
	MetaCallID         = "wop/toolCallId"
	MetaTool           = "wop/tool"
	MetaPackID         = "wop/packId"
	MetaAttempt        = "wop/attempt" // 1 for the first attempt
)

// callMeta is the _meta of a call's attempt.
func callMeta(ctx context.Context, in convo.ToolCallInput) mcp.Meta {
	attempt := int32(1)
	if activity.IsActivity(ctx) {
		attempt = activity.GetInfo(ctx).Attempt
	}
	return mcp.Meta{MetaIdempotencyKey: in.IdempotencyKey, MetaRunID: in.RunID, MetaCallID: in.CallID,
		MetaTool: in.Tool, MetaPackID: in.PackID, MetaAttempt: attempt}
}

// callMCP calls the bound tool of an MCP server, with the call's _meta (callMeta). The
// server's result becomes the tool result (see mcpContent); a result the server marks isError, and a protocol error
// (unknown tool, invalid arguments), are error results the model reads; a broken
// connection is a retryable error, and the next attempt connects again.
func (s *Set) callMCP(ctx context.Context, b *MCPBinding, in convo.ToolCallInput) (*convo.ToolCallResult, error) {
	cctx, cancel := context.WithTimeout(ctx, b.Timeout)
	defer cancel()
	cs, err := s.mcp.session(cctx, b.Server)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, temporal.NewApplicationError(err.Error(), ErrTypeToolUnavailable)
	}
	args := json.RawMessage(in.Args)
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	res, err := cs.CallTool(cctx, &mcp.CallToolParams{Meta: callMeta(ctx, in), Name: b.Tool, Arguments: args})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var werr *jsonrpc.Error
		if errors.As(err, &werr) && !transportCode(werr.Code) {
			return errorResult(map[string]any{"error": fmt.Sprintf("MCP server %s refused the call of %s: %s", b.Server, b.Tool, s.redact(werr.Message)), "code": werr.Code}), nil
		}
		s.mcp.drop(b.Server, cs)
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, temporal.NewApplicationError(fmt.Sprintf("MCP server %s: no answer from tool %s within %s", b.Server, b.Tool, b.Timeout), ErrTypeToolUnavailable)
		}
		return nil, temporal.NewApplicationError(fmt.Sprintf("MCP server %s: calling tool %s failed: %s", b.Server, b.Tool, s.redact(err.Error())), ErrTypeToolUnavailable)
	}
	content, isError := mcpContent(res)
	content = json.RawMessage(s.redact(string(content)))
	if len(content) > MaxResultBytes {
		return errorResult(map[string]any{"error": fmt.Sprintf("the result of %s is larger than %d KiB, more than a tool result may hold; ask for less", in.Tool, MaxResultBytes>>10)}), nil
	}
	return &convo.ToolCallResult{Content: content, IsError: isError}, nil
}

// transportCode reports whether a JSON-RPC error code says the call did not reach the
// server's tool (the Go SDK's codes for a closed or rejecting connection, and an
// internal error, which a retry may not meet) rather than that the server refused it.
func transportCode(code int64) bool {
	switch code {
	case jsonrpc.CodeInternalError, -32001, -32003, -32004, -32005: // internal, unknown, client/server closing, rejected by transport
		return true
	}
	return false
}

// mcpContent maps an MCP tool result to a tool result's content:
//
//   - structuredContent, when the server sends it, is the result as is;
//   - else one text item is the result: its JSON when the text is JSON, else the text;
//   - else the items become a list: text as {"type":"text","text":…}, resources as
//     their uri, type and text, images and audio as their type and size (the model
//     gets no binary data);
//   - a result the server marks isError becomes {"error": <its text>}.
func mcpContent(res *mcp.CallToolResult) (json.RawMessage, bool) {
	if res.IsError {
		var texts []string
		for _, c := range res.Content {
			if t, ok := c.(*mcp.TextContent); ok {
				texts = append(texts, t.Text)
			}
		}
		msg := strings.Join(texts, "\n")
		if msg == "" {
			msg = "the MCP tool reported an error without a message"
		}
		b, _ := json.Marshal(map[string]string{"error": msg})
		return b, true
	}
	if res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			return b, false
		}
	}
	if len(res.Content) == 1 {
		if t, ok := res.Content[0].(*mcp.TextContent); ok {
			return resultJSON(t.Text), false
		}
	}
	items := make([]map[string]any, 0, len(res.Content))
	for _, c := range res.Content {
		switch v := c.(type) {
		case *mcp.TextContent:
			items = append(items, map[string]any{"type": "text", "text": v.Text})
		case *mcp.ImageContent:
			items = append(items, map[string]any{"type": "image", "mimeType": v.MIMEType, "bytes": len(v.Data)})
		case *mcp.AudioContent:
			items = append(items, map[string]any{"type": "audio", "mimeType": v.MIMEType, "bytes": len(v.Data)})
		case *mcp.ResourceLink:
			items = append(items, map[string]any{"type": "resource_link", "uri": v.URI, "name": v.Name, "mimeType": v.MIMEType})
		case *mcp.EmbeddedResource:
			item := map[string]any{"type": "resource"}
			if r := v.Resource; r != nil {
				item["uri"], item["mimeType"] = r.URI, r.MIMEType
				if r.Text != "" {
					item["text"] = r.Text
				} else if len(r.Blob) > 0 {
					item["bytes"] = len(r.Blob)
				}
			}
			items = append(items, item)
		default:
			items = append(items, map[string]any{"type": fmt.Sprintf("%T", c)})
		}
	}
	b, _ := json.Marshal(items)
	return b, false
}

// tailBuffer keeps the last max bytes written to it: the end of an MCP subprocess's
// stderr, to explain a server that would not start.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append([]byte(nil), t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
