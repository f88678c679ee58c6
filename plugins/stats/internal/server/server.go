// Package server serves the stats plugin's endpoints on their own listener:
// /metrics/cadvisor and /metrics/resource under the names cAdvisor and the
// kubelet use (which must not carry the suite's prefix, and clash with each
// other on container_cpu_usage_seconds_total), /metrics with the suite's
// nri_suite_stats_* metrics, and /stats/pods as JSON. It listens on
// loopback unless told otherwise; off loopback it serves HTTPS and
// authenticates and authorizes every request as the kubelet does its port
// (common/endpointauth).
package server

import (
	"compress/gzip"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/sirupsen/logrus"

	"github.com/nri-suite/nri-suite/common/endpointauth"
	"github.com/nri-suite/nri-suite/common/plugin"
	"github.com/nri-suite/nri-suite/internal/catalog"
	"github.com/nri-suite/nri-suite/plugins/stats/collect"
)

// DefaultAddr is the stats endpoints' default address: loopback only.
var DefaultAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(catalog.StatsPort))

// Listener names the listener in its flags (--stats-tls-cert, ...).
const Listener = "stats"

// Options say where and how to serve.
type Options struct {
	// Addr is host:port; empty disables the listener.
	Addr string
	// Auth is the listener's protection: TLS, client certificates, a
	// static token, or the kubelet's webhook mode.
	Auth endpointauth.Options
	// CAdvisor serves /metrics/cadvisor; false leaves the cAdvisor-named
	// series to the kubelet's own /metrics/cadvisor.
	CAdvisor bool
}

// Check checks the options without reading a file: the paths, the flags
// that need each other, and that off loopback the listener is protected.
func (o Options) Check() error {
	if o.Addr == "" {
		return nil
	}
	paths := o.Auth.Paths()
	for _, flag := range slices.Sorted(maps.Keys(paths)) {
		if err := plugin.CheckPath(flag, paths[flag]); err != nil {
			return err
		}
	}
	return o.Auth.Check(o.Addr)
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
	srv        *http.Server
	ln         net.Listener
	done       chan struct{}
	stopReload context.CancelFunc
}

// Start loads the listener's files, binds the address and serves in the
// background. opts must have passed Check; an error here (a file that
// cannot be loaded, an address in use) may go away, so the caller may try
// again.
func Start(opts Options, cluster endpointauth.Cluster, ep Endpoints, denied *endpointauth.Metrics, log *logrus.Entry) (*Server, error) {
	guard, err := endpointauth.New(opts.Auth, cluster, denied, log)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("listening on --stats-addr %s: %w", opts.Addr, err)
	}
	tlsConfig := guard.TLSConfig()
	if tlsConfig != nil {
		ln = tls.NewListener(ln, tlsConfig)
	}
	ctx, cancel := context.WithCancel(context.Background())
	guard.Run(ctx)
	s := &Server{ln: ln, done: make(chan struct{}), stopReload: cancel,
		srv: &http.Server{Handler: guard.Protect(newMux(opts, ep, log), "/healthz"), ReadHeaderTimeout: 10 * time.Second}}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			log.WithError(err).Error("stats HTTP server stopped")
		}
	}()
	paths := []string{"/metrics/resource", "/metrics", "/stats/pods"}
	if opts.CAdvisor {
		paths = append([]string{"/metrics/cadvisor"}, paths...)
	}
	log.WithFields(logrus.Fields{"addr": ln.Addr().String(), "tls": tlsConfig != nil, "auth": opts.Auth.Auth,
		"client-cert": opts.Auth.ClientCA != "", "token": opts.Auth.TokenFile != ""}).
		Info("stats endpoints listening: " + strings.Join(paths, ", "))
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
	s.stopReload()
	if err != nil {
		return fmt.Errorf("shutting down the stats HTTP server: %w", err)
	}
	return nil
}

func newMux(o Options, ep Endpoints, log *logrus.Entry) *http.ServeMux {
	mux := http.NewServeMux()
	opts := promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, ErrorLog: logAdapter{log}}
	if o.CAdvisor {
		mux.Handle("/metrics/cadvisor", cadvisorHandler(ep.CAdvisor, log))
	}
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

// cadvisorHandler writes the cAdvisor-named series straight from the
// reading, gzipped when the client accepts it.
func cadvisorHandler(cadvisor TextWriter, log *logrus.Entry) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", collect.TextContentType)
		out := io.Writer(w)
		if gzipAccepted(r) {
			w.Header().Set("Content-Encoding", "gzip")
			gz, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
			defer gz.Close()
			out = gz
		}
		if err := cadvisor.WriteText(out); err != nil {
			log.WithError(err).Debug("writing /metrics/cadvisor")
		}
	})
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
