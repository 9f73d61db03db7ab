package devserver

import (
	"errors"
	"fmt"
	"net"
	"strconv"
)

// PortInUseError reports that a port the server must listen on is taken.
type PortInUseError struct {
	// What names the listener, e.g. "Temporal gRPC" or "Temporal UI".
	What string
	// Addr is the host:port that could not be bound.
	Addr string
	Err  error
}

func (e *PortInUseError) Error() string {
	return fmt.Sprintf("%s port %s is already in use", e.What, e.Addr)
}

func (e *PortInUseError) Unwrap() error { return e.Err }

// IsPortInUse reports whether err is (or wraps) a *PortInUseError.
func IsPortInUse(err error) bool {
	var p *PortInUseError
	return errors.As(err, &p)
}

// checkPortFree binds host:port once and releases it, so a busy port is reported as one
// clear error before the server (which would exit the process on a bind failure) starts.
func checkPortFree(what, host string, port int) error {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return &PortInUseError{What: what, Addr: addr, Err: err}
	}
	return l.Close()
}

// freePort asks the kernel for a free port on host. The port is left in TIME_WAIT by a
// connection that the listening side closes first, so the kernel does not hand the same
// number to the next bind(":0") while the server is still starting; an explicit bind to
// it still succeeds because Go listeners set SO_REUSEADDR.
func freePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("find a free port on %s: %w", host, err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port

	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		accepted <- c
	}()
	dialed, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		// The port is free anyway; only the TIME_WAIT reservation failed.
		return port, nil
	}
	if c := <-accepted; c != nil {
		_ = c.Close() // server side closes first: it holds the TIME_WAIT
	}
	_ = dialed.Close()
	return port, nil
}
