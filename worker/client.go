package worker

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/wop-dev/wop/internal/payloadcodec"
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
//	WOP_PAYLOAD_KEYS_FILE     keys that seal every payload the client writes (payloadcodec)
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
	if path := strings.TrimSpace(getenv(payloadcodec.KeysFileEnv)); path != "" {
		codec, err := payloadcodec.Load(path)
		if err != nil {
			return opts, fmt.Errorf("%s: %w", payloadcodec.KeysFileEnv, err)
		}
		opts.DataConverter = payloadcodec.DataConverter(codec)
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

// ClientFlags are the flags that override the TLS and API-key variables
// ClientOptionsFromEnv reads (RegisterClientFlags):
//
//	--tls-cert FILE         TEMPORAL_TLS_CERT
//	--tls-key FILE          TEMPORAL_TLS_KEY
//	--tls-ca FILE           TEMPORAL_TLS_CA
//	--tls-server-name NAME  TEMPORAL_TLS_SERVER_NAME
//	--tls                   TEMPORAL_TLS
//	--api-key-file FILE     TEMPORAL_API_KEY, read from FILE
//
// The API key is taken from a file, never from the command line, which every user of
// the machine can read in the process list.
type ClientFlags struct {
	vals    map[string]*string
	tls     *bool
	keyFile *string
}

// RegisterClientFlags registers the client flags on fs.
func RegisterClientFlags(fs *flag.FlagSet) *ClientFlags {
	f := &ClientFlags{vals: map[string]*string{}}
	str := func(name, env, usage string) {
		v := new(string)
		fs.StringVar(v, name, "", usage+" (env "+env+")")
		f.vals[env] = v
	}
	str("tls-cert", "TEMPORAL_TLS_CERT", "client certificate `file` (PEM) for mutual TLS with Temporal; turns TLS on")
	str("tls-key", "TEMPORAL_TLS_KEY", "private key `file` (PEM) of --tls-cert")
	str("tls-ca", "TEMPORAL_TLS_CA", "CA bundle `file` (PEM) that signs Temporal's server certificate")
	str("tls-server-name", "TEMPORAL_TLS_SERVER_NAME", "server `name` to verify in Temporal's certificate, when it differs from the address's host")
	f.tls = fs.Bool("tls", false, "use TLS with Temporal without a client certificate or API key (env TEMPORAL_TLS)")
	f.keyFile = fs.String("api-key-file", "", "read the Temporal API key from `file` (sent as a bearer token; turns TLS on; env TEMPORAL_API_KEY holds the key itself)")
	return f
}

// Env returns getenv with the flags that were set laid over it; call it after the flag
// set is parsed. An --api-key-file that cannot be read or is empty is an error.
func (f *ClientFlags) Env(getenv func(string) string) (func(string) string, error) {
	over := map[string]string{}
	for env, v := range f.vals {
		if *v != "" {
			over[env] = *v
		}
	}
	if *f.tls {
		over["TEMPORAL_TLS"] = "true"
	}
	if *f.keyFile != "" {
		data, err := os.ReadFile(*f.keyFile)
		if err != nil {
			return nil, fmt.Errorf("read --api-key-file: %w", err)
		}
		key := strings.TrimSpace(string(data))
		if key == "" {
			return nil, fmt.Errorf("--api-key-file %s is empty", *f.keyFile)
		}
		over["TEMPORAL_API_KEY"] = key
	}
	return func(name string) string {
		if v, ok := over[name]; ok {
			return v
		}
		return getenv(name)
	}, nil
}
