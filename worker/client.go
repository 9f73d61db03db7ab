package worker

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
)

// DefaultTemporalAddress is the Temporal frontend dialled when TEMPORAL_ADDRESS is unset.
const DefaultTemporalAddress = "127.0.0.1:7233"

// ClientOptionsFromEnv builds Temporal client options from the variables the Temporal
// SDKs use:
//
//	TEMPORAL_ADDRESS          host:port of the frontend (default 127.0.0.1:7233)
//	TEMPORAL_NAMESPACE        namespace (default "default")
//	TEMPORAL_API_KEY          API key sent as a bearer token; turns TLS on
//	TEMPORAL_TLS_CERT         client certificate file (PEM) for mTLS; turns TLS on
//	TEMPORAL_TLS_KEY          its private key file (PEM); required with TEMPORAL_TLS_CERT
//	TEMPORAL_TLS_CA           CA bundle file (PEM) that signs the server certificate
//	TEMPORAL_TLS_SERVER_NAME  server name to verify, when it differs from the address host
//	TEMPORAL_TLS              "true" forces TLS without a key or certificate
//
// The SDK's own logging goes to logger at warn level and up; nil discards it.
func ClientOptionsFromEnv(getenv func(string) string, logger *slog.Logger) (client.Options, error) {
	opts := client.Options{
		HostPort:  strings.TrimSpace(getenv("TEMPORAL_ADDRESS")),
		Namespace: strings.TrimSpace(getenv("TEMPORAL_NAMESPACE")),
		Logger:    SDKLogger(logger),
	}
	if opts.HostPort == "" {
		opts.HostPort = DefaultTemporalAddress
	}
	if opts.Namespace == "" {
		opts.Namespace = client.DefaultNamespace
	}

	apiKey := strings.TrimSpace(getenv("TEMPORAL_API_KEY"))
	certFile, keyFile := getenv("TEMPORAL_TLS_CERT"), getenv("TEMPORAL_TLS_KEY")
	caFile, serverName := getenv("TEMPORAL_TLS_CA"), getenv("TEMPORAL_TLS_SERVER_NAME")
	forceTLS := false
	if v := strings.TrimSpace(getenv("TEMPORAL_TLS")); v != "" {
		switch strings.ToLower(v) {
		case "1", "true", "yes", "on":
			forceTLS = true
		case "0", "false", "no", "off":
		default:
			return opts, fmt.Errorf("TEMPORAL_TLS=%q: want true or false", v)
		}
	}
	if (certFile == "") != (keyFile == "") {
		return opts, fmt.Errorf("TEMPORAL_TLS_CERT and TEMPORAL_TLS_KEY must be set together")
	}

	if apiKey != "" {
		opts.Credentials = client.NewAPIKeyStaticCredentials(apiKey)
	}
	if apiKey == "" && certFile == "" && caFile == "" && !forceTLS {
		return opts, nil
	}
	tlsConf := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return opts, fmt.Errorf("load TEMPORAL_TLS_CERT/TEMPORAL_TLS_KEY: %w", err)
		}
		tlsConf.Certificates = []tls.Certificate{cert}
	}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return opts, fmt.Errorf("read TEMPORAL_TLS_CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return opts, fmt.Errorf("TEMPORAL_TLS_CA %s holds no PEM certificate", caFile)
		}
		tlsConf.RootCAs = pool
	}
	opts.ConnectionOptions.TLS = tlsConf
	return opts, nil
}

// SDKLogger adapts logger for the Temporal SDK, keeping only warnings and errors: the
// SDK logs every worker start, poll and shutdown at info and debug. Nil discards.
func SDKLogger(logger *slog.Logger) sdklog.Logger {
	if logger == nil {
		return sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))
	}
	return sdklog.NewStructuredLogger(slog.New(minLevelHandler{min: slog.LevelWarn, Handler: logger.Handler()}))
}

// minLevelHandler drops records below min before they reach the wrapped handler.
type minLevelHandler struct {
	min slog.Level
	slog.Handler
}

func (h minLevelHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevelHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return minLevelHandler{min: h.min, Handler: h.Handler.WithAttrs(attrs)}
}

func (h minLevelHandler) WithGroup(name string) slog.Handler {
	return minLevelHandler{min: h.min, Handler: h.Handler.WithGroup(name)}
}
