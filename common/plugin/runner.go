// Package plugin is the runner every nri-suite binary is built on. It owns what all
// plugins share: the common flags, strict YAML configuration, logging, metrics and
// health endpoints, and the NRI connection's whole life: waiting for the runtime's
// socket, registering, reconnecting with backoff when the runtime restarts (keeping the
// plugin's in-memory state), running pre-registered from the runtime's plugin
// directory, recovering panics in handlers, and a clean stop on SIGTERM.
//
// A plugin is any value implementing some of the NRI stub's handler interfaces
// (stub.CreateContainerInterface, ...), optionally Configurable and io.Closer. It is
// built by a Factory that receives the runner's Deps; ExampleMain shows a whole main.
//
// External plugins connect to --socket and never exit because the runtime went away,
// nor because their --config file is bad: they wait, not ready, /readyz saying why,
// until it is fixed. `nri-<plugin> probe URL` prints a /readyz answer, for an exec
// probe whose output the kubelet puts into the pod's events.
// In a cluster, --daemonset names the DaemonSet that runs the plugin: stopped on a
// signal while it is being deleted (helm uninstall), the plugin removes its node state
// (NodeStateRemover, leave.go); `nri-<plugin> uninstall` is the chart's pre-delete hook
// that deletes the DaemonSets so (uninstall.go).
// Pre-registered plugins (NRI_PLUGIN_SOCKET set: the runtime launched the binary from
// its plugin directory, connected on a file descriptor) cannot reconnect: the runtime
// kills them when it stops and launches a fresh instance when it starts, so when the
// connection closes the runner closes the plugin and Run returns nil (exit status 0).
// The runtime discards their output, so Main logs to a file in PreRegisteredLogDir.
// Where the plugin reaches an API server (--kubeconfig or the pod's service account,
// --api-events), every refusal of a container becomes a Warning Event NRIRefused on
// its pod, posted without waiting for the server (common/apievents; api.go); without
// one the plugin says so once and works as before.
package plugin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	"google.golang.org/protobuf/encoding/protowire"
	"k8s.io/client-go/kubernetes"

	"github.com/nri-suite/nri-suite/common/apievents"
)

const (
	// Reconnection backoff: quick while a restarting runtime comes back, bounded so
	// that a runtime down for long is not hammered.
	initialBackoff = 100 * time.Millisecond
	maxBackoff     = 5 * time.Second
	// registrationGuard bounds stub.Start, which waits forever for the runtime's
	// Configure if the connection drops right after RegisterPlugin.
	registrationGuard = 30 * time.Second
	// drainTimeout bounds the wait for running handlers at shutdown.
	drainTimeout = 5 * time.Second
	// httpShutdownTimeout bounds the wait for in-flight HTTP requests at shutdown.
	httpShutdownTimeout = 5 * time.Second
	// configRetryInterval is how often a --config file that could not be applied is
	// read again: a mounted ConfigMap changes within a minute of its edit.
	configRetryInterval = time.Second
)

// ErrNotConnected is returned by Deps.Updater while the plugin is not registered.
var ErrNotConnected = errors.New("not connected to the runtime")

// Deps are what the runner hands to a plugin's Factory.
type Deps struct {
	// Name and Index are what the plugin registers with NRI as ("40" and
	// "security" for 40-security).
	Name  string
	Index string
	// Log is the runner's logger with the field plugin=<Name>.
	Log *logrus.Entry
	// Registry takes the plugin's metrics; they are served on /metrics.
	Registry prometheus.Registerer
	// MetricsNamespace is nri_suite_<plugin kind>, the prefix of the plugin's metric
	// names: use it as prometheus.Opts.Namespace.
	MetricsNamespace string
	// SharedDir is the node-local shared state directory (common/state) the plugin
	// publishes its records in; empty when sharing is disabled.
	SharedDir string
	// Updater requests updates of running containers outside of an NRI request; within
	// a handler, return the updates instead (the runtime is locked while it waits).
	Updater Updater
	// NotReady keeps the plugin not ready, whatever its connection, for why (a file
	// it cannot load, a port it cannot bind): /readyz and the published status say
	// so. NotReady("") releases it.
	NotReady func(why string)
	// NodeName is the node the plugin runs on (--node-name, else $NODE_NAME), for
	// what it asks the API server about this node; empty when unknown.
	NodeName string
	// Kubeconfig reaches the API server (--kubeconfig); empty: the pod's service
	// account.
	Kubeconfig string
	// Events posts Events about pods to the API server without waiting; nil
	// (no API server, or --api-events=false) posts nothing, and is safe to
	// call. The runner itself posts every refusal of a container (NRIRefused).
	Events *apievents.Recorder
	// APIClient is a client of the API server for what the plugin reports
	// besides Events (device-injector's node condition); nil when Events is.
	APIClient kubernetes.Interface
}

// Updater requests unsolicited container updates from the runtime.
type Updater interface {
	// UpdateContainers returns the updates the runtime could not apply.
	UpdateContainers(updates []*api.ContainerUpdate) ([]*api.ContainerUpdate, error)
}

// Factory builds the plugin once; the same value serves every connection to the runtime.
type Factory func(Deps) (any, error)

// Runner runs one plugin.
type Runner struct {
	settings      Settings
	preRegistered bool
	log           *logrus.Entry
	registry      *prometheus.Registry
	metrics       *runnerMetrics
	plugin        any
	wrapper       *wrapper
	status        status
	publisher     *statusPublisher
	conn          connection
	// configErr is why the --config file could not be applied at start; Run then
	// waits for a version of the file that applies (waitForConfig).
	configErr error
	// leaving asks, at a stop on a signal, whether the plugin leaves the node for
	// good (leaveNode); nil without --daemonset.
	leaving leavingFunc
	// events writes the Events posted (refusals, the plugin's own) while Run
	// runs; nil without an API server, noAPI then saying why.
	events *apievents.Recorder
	noAPI  string

	mu       sync.Mutex
	httpAddr string
}

// New checks the settings, builds the plugin with factory and applies the --config
// file; a file that cannot be read or applied is not an error here, Run waits for a
// good one (see Run). A pre-registered plugin (launched by the runtime, see package doc) takes its
// name and index from the runtime's environment instead of the settings.
func New(s Settings, factory Factory) (*Runner, error) {
	r := &Runner{settings: s, preRegistered: preRegistered()}
	if r.preRegistered {
		r.settings.Name = os.Getenv(api.PluginNameEnvVar)
		r.settings.Idx = os.Getenv(api.PluginIdxEnvVar)
	}
	if err := r.settings.validate(r.preRegistered); err != nil {
		return nil, err
	}
	logger, err := r.settings.newLogger()
	if err != nil {
		return nil, err
	}
	r.log = logger.WithField("plugin", r.settings.Name)
	routeKlog(r.log)

	namespace := MetricsNamespace(r.settings.Plugin)
	r.registry, r.metrics = newRegistry(namespace)
	client, err := r.connectAPI(namespace)
	if err != nil {
		return nil, err
	}

	r.plugin, err = factory(Deps{
		Name:             r.settings.Name,
		Index:            r.settings.Idx,
		Log:              r.log,
		Registry:         r.registry,
		MetricsNamespace: namespace,
		SharedDir:        r.settings.SharedDir,
		Updater:          &r.conn,
		NotReady:         r.status.hold,
		NodeName:         r.settings.NodeName,
		Kubeconfig:       r.settings.Kubeconfig,
		Events:           r.events,
		APIClient:        client,
	})
	if err != nil {
		return nil, fmt.Errorf("create plugin %s: %w", r.settings.Name, err)
	}
	events, err := EventMask(r.plugin)
	if err != nil {
		return nil, err
	}
	r.wrapper = &wrapper{
		plugin:   r.plugin,
		name:     r.settings.Name,
		events:   events,
		log:      r.log,
		metrics:  r.metrics,
		status:   &r.status,
		recorder: r.events,
	}
	if err := r.loadConfigFile(); err != nil {
		return nil, err
	}
	if r.publisher, err = newStatusPublisher(r.settings.SharedDir, r.settings.Name, r.settings.Idx, r.log); err != nil {
		return nil, fmt.Errorf("--shared-dir %s: %w", r.settings.SharedDir, err)
	}
	r.status.observe = r.publisher.publish
	if r.settings.DaemonSet != "" {
		r.leaving = daemonSetLeaving(r.settings.DaemonSet)
	}
	return r, nil
}

// loadConfigFile hands the --config file, if any, to the plugin. Only a plugin that
// takes no configuration is an error; the file's own errors are kept in configErr.
func (r *Runner) loadConfigFile() error {
	path := r.settings.ConfigFile
	if path == "" {
		return nil
	}
	if _, ok := r.plugin.(Configurable); !ok {
		return fmt.Errorf("--config %s given, but plugin %s takes no configuration", path, r.settings.Name)
	}
	data, err := readConfigFile(path)
	if err == nil {
		err = r.configure(data)
	}
	r.configErr = err
	return nil
}

// configure hands the bytes of the --config file to the plugin.
func (r *Runner) configure(data []byte) error {
	path := r.settings.ConfigFile
	c := r.plugin.(Configurable)
	if err := r.wrapper.call(configureEvent, nil, nil, func() error { return c.Configure(data, path) }); err != nil {
		return fmt.Errorf("configure plugin %s: %w", r.settings.Name, err)
	}
	r.log.WithField("source", path).Info("applied configuration")
	return nil
}

// waitForConfig holds a plugin whose --config file could not be applied at start:
// not connected to the runtime (it would run on a configuration nobody wrote),
// /readyz and the published status saying why, the file read again every
// configRetryInterval until a version of it applies. A fixed ConfigMap thus applies
// without a restart, and the error stays visible meanwhile: the chart's startup
// probe puts /readyz's answer into the pod's events. It returns the last error if
// ctx ends first.
func (r *Runner) waitForConfig(ctx context.Context) error {
	var logged string
	var tried []byte
	for r.configErr != nil {
		if reason := r.configErr.Error(); reason != logged {
			// Logged first: whoever sees /readyz refuse finds the reason in the log.
			r.log.WithError(r.configErr).Error("cannot apply the configuration: not connecting to the runtime until the --config file is fixed")
			r.status.disconnected(reason)
			logged = reason
		}
		if !sleep(ctx, configRetryInterval) {
			return reported{r.configErr}
		}
		data, err := readConfigFile(r.settings.ConfigFile)
		switch {
		case err != nil:
			r.configErr = err
		case !bytes.Equal(data, tried):
			tried, r.configErr = data, r.configure(data)
		}
	}
	return nil
}

// HTTPAddr returns the (first) address /metrics, /healthz and /readyz listen on once
// Run has bound it (useful with --http-addr 127.0.0.1:0), or "" before or when disabled.
func (r *Runner) HTTPAddr() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.httpAddr
}

// Run serves the plugin until ctx is cancelled, then stops the NRI connection, waits
// for running handlers, closes the plugin (io.Closer) and the HTTP server. It connects
// only once the --config file applied (waitForConfig). An external plugin never
// returns because the runtime went away: it reconnects. A pre-registered
// plugin returns nil when its connection closes, since the runtime launches a new
// instance when it comes back. Run may be called once.
func (r *Runner) Run(ctx context.Context) error {
	stopAPI := r.startAPI(ctx)
	// The plugin is closed however Run ends: the factory may have opened resources.
	stopHTTP, serveErr := r.startHTTP()
	if serveErr == nil {
		serveErr = r.waitForConfig(ctx)
	}
	if serveErr == nil {
		serveErr = r.serveNRI(ctx)
	}

	if !r.wrapper.drain(drainTimeout) {
		r.log.Warnf("handlers still running after %s; closing the plugin anyway", drainTimeout)
	}
	var closeErr error
	if c, ok := r.plugin.(io.Closer); ok {
		if err := c.Close(); err != nil {
			closeErr = fmt.Errorf("close plugin %s: %w", r.settings.Name, err)
		}
	}
	stopAPI()
	httpErr := stopHTTP()
	r.publisher.remove()
	if ctx.Err() != nil {
		r.leaveNode()
	}
	r.log.Info("stopped")
	return errors.Join(serveErr, closeErr, httpErr)
}

// serveNRI keeps the plugin registered with the runtime until ctx is cancelled.
func (r *Runner) serveNRI(ctx context.Context) error {
	backoff := initialBackoff
	registered := false // at least once, so later registrations count as reconnects
	waiting := false    // the outage was already logged
	r.status.disconnected("connecting to the runtime")
	for {
		s, lost, err := r.connect(ctx)
		if ctx.Err() != nil {
			if err == nil {
				s.Stop()
			}
			return nil
		}
		if err != nil {
			if r.preRegistered {
				return err
			}
			r.status.disconnected(err.Error())
			if !waiting {
				r.log.WithError(err).Infof("waiting for the runtime; retrying with backoff up to %s", maxBackoff)
				waiting = true
			} else {
				r.log.WithError(err).Debug("runtime still unavailable")
			}
			if !sleep(ctx, backoff) {
				return nil
			}
			backoff = min(2*backoff, maxBackoff)
			continue
		}

		waiting = false
		r.conn.set(s)
		r.metrics.connected.Set(1)
		log := r.log.WithField("runtime", r.status.lastRuntime())
		if registered {
			r.metrics.reconnects.Inc()
			log.Info("registered with the runtime again")
		} else {
			log.WithField("pre-registered", r.preRegistered).Info("registered with the runtime")
		}
		registered = true

		select {
		case <-ctx.Done():
			r.conn.set(nil)
			s.Stop()
			r.metrics.connected.Set(0)
			return nil
		case <-lost:
		}
		r.conn.set(nil)
		r.metrics.connected.Set(0)
		wasReady, reason := r.status.connection()
		if r.preRegistered {
			r.status.disconnected("connection to the runtime closed")
			r.log.Info("connection to the runtime closed; a pre-registered plugin is relaunched by the runtime, exiting")
			return nil
		}
		r.status.disconnected("connection to the runtime lost, reconnecting")
		if wasReady {
			r.log.Info("connection to the runtime lost; reconnecting")
			backoff = initialBackoff // it worked: the next outage starts quick again
			continue
		}
		// The runtime dropped a plugin that never got ready (e.g. its Synchronize
		// failed): back off rather than spin.
		r.log.WithField("reason", reason).Warnf("runtime closed the connection before the plugin was ready; retrying in %s", backoff)
		if !sleep(ctx, backoff) {
			return nil
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// sleep waits for d or until ctx is cancelled; it reports whether to go on.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// connect creates a stub, registers it and waits until the runtime configured it. The
// returned channel is closed when the connection goes down.
func (r *Runner) connect(ctx context.Context) (stub.Stub, <-chan struct{}, error) {
	lost := make(chan struct{})
	var once sync.Once
	opts := []stub.Option{
		stub.WithLogger(stubLogger{r.log.WithField("component", "nri-stub")}),
		stub.WithOnClose(func() { once.Do(func() { close(lost) }) }),
	}
	if fc, ok := r.wrapper.plugin.(FailClosed); ok && fc.FailClosed() {
		opts = append(opts, stub.WithFailurePolicy(&api.FailurePolicy{FailRequest: true}))
	}
	var conn net.Conn
	if !r.preRegistered {
		var err error
		conn, err = (&net.Dialer{}).DialContext(ctx, "unix", r.settings.SocketPath)
		if err != nil {
			return nil, nil, fmt.Errorf("connect to NRI socket %s: %w", r.settings.SocketPath, err)
		}
		// With our own connection we can cut a registration that hangs.
		opts = append(opts,
			stub.WithConnection(conn),
			stub.WithPluginName(r.settings.Name),
			stub.WithPluginIdx(r.settings.Idx))
	}
	s, err := stub.New(r.wrapper, opts...)
	if err != nil {
		if conn != nil {
			conn.Close()
		}
		return nil, nil, fmt.Errorf("create NRI stub: %w", err)
	}

	started := make(chan error, 1)
	go func() { started <- s.Start(ctx) }()
	guard := time.NewTimer(registrationGuard)
	defer guard.Stop()
	select {
	case err := <-started:
		if err != nil {
			return nil, nil, fmt.Errorf("register with the runtime as %s-%s: %w", r.settings.Idx, r.settings.Name, err)
		}
		return s, lost, nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-guard.C:
		err = fmt.Errorf("register with the runtime as %s-%s: not configured within %s", r.settings.Idx, r.settings.Name, registrationGuard)
	}
	// The stub cannot be stopped while Start waits; closing the connection is all
	// that can be done, the stub's goroutine is abandoned.
	if conn != nil {
		conn.Close()
	}
	return nil, nil, err
}

// connection is the current stub, through which the plugin updates containers.
type connection struct {
	mu   sync.Mutex
	stub stub.Stub
}

func (c *connection) set(s stub.Stub) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stub = s
}

// UpdateContainers implements Updater.
func (c *connection) UpdateContainers(updates []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) {
	c.mu.Lock()
	s := c.stub
	c.mu.Unlock()
	if s == nil {
		return updates, ErrNotConnected
	}
	var failed []*api.ContainerUpdate
	for sent, batch := range batchUpdates(updates, maxUpdateBatch) {
		f, err := s.UpdateContainers(batch)
		failed = append(failed, f...)
		if err != nil {
			// What was not sent was not applied either.
			failed = append(failed, updates[sent+len(batch):]...)
			return failed, fmt.Errorf("update %d containers: %d sent: %w", len(updates), sent, err)
		}
	}
	return failed, nil
}

// maxUpdateBatch bounds the encoded updates of one UpdateContainers request:
// NRI's transport (ttrpc) refuses a message above 4 MiB, and the stub sends
// what it is given as one. 10,000 updates of a fragmented shared pool come
// to about 20 MB.
const maxUpdateBatch = 1 << 20

// batchUpdates splits updates into consecutive batches of at most maxBytes
// encoded (a single larger update is a batch of its own), each yielded with
// the number of updates before it.
func batchUpdates(updates []*api.ContainerUpdate, maxBytes int) iter.Seq2[int, []*api.ContainerUpdate] {
	return func(yield func(int, []*api.ContainerUpdate) bool) {
		start, size := 0, 0
		for i, u := range updates {
			// Each update is a length-delimited field of the request.
			n := protowire.SizeTag(1) + protowire.SizeBytes(u.SizeVT())
			if i > start && size+n > maxBytes {
				if !yield(start, updates[start:i]) {
					return
				}
				start, size = i, 0
			}
			size += n
		}
		if start < len(updates) {
			yield(start, updates[start:])
		}
	}
}

// startHTTP serves /metrics, /healthz and /readyz on every address of
// --http-addr, if any, and returns the function that stops serving (a no-op
// when nothing was started). Several addresses let a plugin on the node's
// network answer its probes on the node's loopback and a Prometheus on the
// node's address, and on no other of the node's addresses.
func (r *Runner) startHTTP() (func() error, error) {
	noop := func() error { return nil }
	addrs := httpAddrs(r.settings.HTTPAddr)
	if len(addrs) == 0 {
		return noop, nil
	}
	var listeners []net.Listener
	for _, addr := range addrs {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			for _, l := range listeners {
				l.Close()
			}
			return noop, fmt.Errorf("listen on --http-addr %s: %w", addr, err)
		}
		listeners = append(listeners, ln)
	}
	r.mu.Lock()
	r.httpAddr = listeners[0].Addr().String()
	r.mu.Unlock()

	srv := &http.Server{Handler: newHTTPHandler(r.registry, &r.status), ReadHeaderTimeout: 10 * time.Second}
	var served sync.WaitGroup
	for _, ln := range listeners {
		served.Go(func() {
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				r.log.WithError(err).WithField("addr", ln.Addr().String()).Error("HTTP server stopped")
			}
		})
		r.log.WithField("addr", ln.Addr().String()).Info("serving /metrics, /healthz and /readyz")
	}

	return func() error {
		ctx, cancel := context.WithTimeout(context.Background(), httpShutdownTimeout)
		defer cancel()
		err := srv.Shutdown(ctx)
		served.Wait()
		if err != nil {
			return fmt.Errorf("shut down HTTP server on %s: %w", r.settings.HTTPAddr, err)
		}
		return nil
	}, nil
}

// httpAddrs splits --http-addr's comma-separated list; empty: none.
func httpAddrs(flag string) []string {
	var addrs []string
	for a := range strings.SplitSeq(flag, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	return addrs
}
