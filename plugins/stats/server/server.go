// Package server serves the stats plugin's endpoints on their own listener:
// /metrics/cadvisor and /metrics/resource under the names cAdvisor and the
// kubelet use (which must not carry the suite's prefix, and clash with each
// other on container_cpu_usage_seconds_total), /metrics with the suite's
// nri_suite_stats_* metrics, and /stats/pods as JSON. It listens on
// loopback unless told otherwise, and can require TLS with a client
// certificate, a bearer token, or both.
package server

import (
	"compress/gzip"
	"context"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/sirupsen/logrus"

	"github.com/nri-suite/nri-suite/common/fsread"
	"github.com/nri-suite/nri-suite/common/plugin"
	"github.com/nri-suite/nri-suite/plugins/stats/collect"
)

// DefaultAddr is the stats endpoints' default address: loopback only.
const DefaultAddr = "127.0.0.1:9191"

// Options say where and how to serve.
type Options struct {
	// Addr is host:port; empty disables the listener.
	Addr string
	// TLSCert and TLSKey are PEM files; both or neither.
	TLSCert, TLSKey string
	// ClientCA is a PEM bundle: when set, clients must present a
	// certificate it signed (needs TLS).
	ClientCA string
	// TokenFile holds a bearer token every request must carry
	// (Authorization: Bearer <token>). Off loopback it needs TLS.
	TokenFile string
}

// TextWriter writes metrics in the Prometheus text format itself, for the
// large /metrics/cadvisor.
type TextWriter interface {
	WriteText(w io.Writer) error
}

// Endpoints are what the server serves.
type Endpoints struct {
	CAdvisor        TextWriter
	Resource, Suite prometheus.Gatherer
	// Pods returns the JSON document of /stats/pods.
	Pods func() any
}

// Server is a running listener.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
}

// Start checks opts, binds the address and serves in the background.
func Start(opts Options, ep Endpoints, log *logrus.Entry) (*Server, error) {
	if err := opts.checkPaths(); err != nil {
		return nil, err
	}
	tlsConfig, err := opts.tlsConfig()
	if err != nil {
		return nil, err
	}
	handler, err := opts.authenticate(newMux(ep, log))
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("listening on --stats-addr %s: %w", opts.Addr, err)
	}
	if tlsConfig != nil {
		ln = tls.NewListener(ln, tlsConfig)
	}
	s := &Server{ln: ln, done: make(chan struct{}),
		srv: &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			log.WithError(err).Error("stats HTTP server stopped")
		}
	}()
	log.WithFields(logrus.Fields{"addr": ln.Addr().String(), "tls": tlsConfig != nil,
		"client-cert": opts.ClientCA != "", "token": opts.TokenFile != ""}).
		Info("stats endpoints listening: /metrics/cadvisor, /metrics/resource, /metrics, /stats/pods")
	return s, nil
}

// Addr is the bound address.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops serving, waiting briefly for requests in flight.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	<-s.done
	if err != nil {
		return fmt.Errorf("shutting down the stats HTTP server: %w", err)
	}
	return nil
}

func newMux(ep Endpoints, log *logrus.Entry) *http.ServeMux {
	mux := http.NewServeMux()
	opts := promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, ErrorLog: logAdapter{log}}
	mux.HandleFunc("/metrics/cadvisor", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", collect.TextContentType)
		out := io.Writer(w)
		if gzipAccepted(r) {
			w.Header().Set("Content-Encoding", "gzip")
			gz, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
			defer gz.Close()
			out = gz
		}
		if err := ep.CAdvisor.WriteText(out); err != nil {
			log.WithError(err).Debug("writing /metrics/cadvisor")
		}
	})
	mux.Handle("/metrics/resource", promhttp.HandlerFor(ep.Resource, opts))
	mux.Handle("/metrics", promhttp.HandlerFor(ep.Suite, opts))
	mux.HandleFunc("/stats/pods", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(ep.Pods()); err != nil {
			log.WithError(err).Debug("writing /stats/pods")
		}
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	return mux
}

func gzipAccepted(r *http.Request) bool {
	for _, enc := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		if strings.TrimSpace(strings.SplitN(enc, ";", 2)[0]) == "gzip" {
			return true
		}
	}
	return false
}

type logAdapter struct{ log *logrus.Entry }

func (l logAdapter) Println(v ...any) { l.log.Warn(v...) }

// checkPaths checks the files that are set.
func (o Options) checkPaths() error {
	for _, f := range []struct{ flag, path string }{
		{"--stats-tls-cert", o.TLSCert}, {"--stats-tls-key", o.TLSKey}, {"--stats-client-ca", o.ClientCA}, {"--stats-token-file", o.TokenFile},
	} {
		if f.path == "" {
			continue
		}
		if err := plugin.CheckPath(f.flag, f.path); err != nil {
			return err
		}
	}
	return nil
}

func (o Options) tlsConfig() (*tls.Config, error) {
	if (o.TLSCert == "") != (o.TLSKey == "") {
		return nil, fmt.Errorf("--stats-tls-cert %q and --stats-tls-key %q: expected both or neither", o.TLSCert, o.TLSKey)
	}
	if o.TLSCert == "" {
		if o.ClientCA != "" {
			return nil, fmt.Errorf("--stats-client-ca %s: client certificates need TLS, expected --stats-tls-cert and --stats-tls-key too", o.ClientCA)
		}
		return nil, nil
	}
	certPEM, err := fsread.File(o.TLSCert, maxPEMSize)
	if err != nil {
		return nil, fmt.Errorf("loading --stats-tls-cert: %w", err)
	}
	keyPEM, err := fsread.File(o.TLSKey, maxPEMSize)
	if err != nil {
		return nil, fmt.Errorf("loading --stats-tls-key: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("loading the stats TLS key pair %s, %s: %w", o.TLSCert, o.TLSKey, err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if o.ClientCA != "" {
		pem, err := fsread.File(o.ClientCA, maxPEMSize)
		if err != nil {
			return nil, fmt.Errorf("reading --stats-client-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--stats-client-ca %s: no PEM certificate found, expected a CA bundle", o.ClientCA)
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// Limits of the files the listener reads at start, read through fsread so
// that a FIFO there is an error, not a start that hangs.
const (
	maxPEMSize   = 1 << 20
	maxTokenSize = 64 << 10
)

// authenticate wraps h with the bearer token check, if a token file is set.
func (o Options) authenticate(h http.Handler) (http.Handler, error) {
	if o.TokenFile == "" {
		return h, nil
	}
	if o.TLSCert == "" && !loopback(o.Addr) {
		return nil, fmt.Errorf("--stats-token-file on %s: a bearer token off loopback needs TLS, expected --stats-tls-cert and --stats-tls-key", o.Addr)
	}
	raw, err := fsread.File(o.TokenFile, maxTokenSize)
	if err != nil {
		return nil, fmt.Errorf("reading --stats-token-file: %w", err)
	}
	token := strings.TrimSpace(string(raw))
	if token == "" {
		return nil, fmt.Errorf("--stats-token-file %s is empty, expected a token", o.TokenFile)
	}
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" && subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="nri-stats"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}), nil
}

func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
