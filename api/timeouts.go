package api

// Connection timeouts suited to an API that also streams: a slow client may not hold a
// connection by trickling its headers or body, an idle keep-alive connection is closed,
// and a response is bounded in time — except an event stream, whose writes are bounded
// one at a time, so a stream lasts as long as its reader keeps reading.

import (
	"errors"
	"net/http"
	"os"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/wop-dev/wop/protocol"
)

// CodeRequestTimeout is the code of a request whose body did not arrive in time.
const CodeRequestTimeout = protocol.CodeRequestTimeout

// HTTPServer returns an http.Server serving this API with the connection timeouts of
// Config.Guards. Callers set Addr or call Serve with their listener.
func (s *Server) HTTPServer() *http.Server {
	g := s.cfg.Guards
	return &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: g.ReadHeaderTimeout,
		IdleTimeout:       g.IdleTimeout,
		// No ReadTimeout/WriteTimeout here: they would end every stream and long poll.
		// deadlines sets them per request instead.
		MaxHeaderBytes: 64 << 10,
	}
}

// deadlines sets a request's deadlines: its body must arrive within BodyReadTimeout
// (readBody lifts the deadline once it has the body, so a resolve may wait for its
// outcome), and its response must be written within WriteTimeout.
func (s *Server) deadlines(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		rc := http.NewResponseController(c.Response().Writer)
		now := time.Now()
		if r := c.Request(); r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
			_ = rc.SetReadDeadline(now.Add(s.cfg.Guards.BodyReadTimeout))
		}
		_ = rc.SetWriteDeadline(now.Add(s.cfg.Guards.WriteTimeout))
		return next(c)
	}
}

// bodyRead lifts the read deadline once a request's body has been read.
func (s *Server) bodyRead(c echo.Context) {
	_ = http.NewResponseController(c.Response().Writer).SetReadDeadline(time.Time{})
}

// bodyReadError is the error of a failed body read: 408 when the client was too slow.
func bodyReadError(err error) *Error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return codeErr(CodeRequestTimeout, "the request body did not arrive in time")
	}
	return badRequest("reading the request body failed: %v", err)
}

// streamDeadlines makes c's response an event stream's: every write gets
// StreamWriteTimeout from its start, instead of one deadline for the whole response.
func (s *Server) streamDeadlines(c echo.Context) {
	w := &streamWriter{ResponseWriter: c.Response().Writer, timeout: s.cfg.Guards.StreamWriteTimeout}
	w.rc = http.NewResponseController(w.ResponseWriter)
	_ = w.rc.SetWriteDeadline(time.Time{})
	c.Response().Writer = w
}

// streamWriter extends the write deadline before each write of a stream.
type streamWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func (w *streamWriter) Write(b []byte) (int, error) {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.timeout))
	return w.ResponseWriter.Write(b)
}

// Flush implements http.Flusher.
func (w *streamWriter) Flush() { _ = w.rc.Flush() }

// Unwrap lets http.ResponseController reach the connection.
func (w *streamWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
