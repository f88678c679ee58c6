// Package collect samples every known pod and container cgroup, and the
// suite's shared state, at most once per cache period, and serves the result
// as Prometheus metrics (cAdvisor's and the kubelet's resource metric names,
// plus the suite's own) and as a per-pod report.
//
// A scrape never fails because of one container: a cgroup that vanished, a
// file that cannot be read or parsed, or a broken shared-state record is
// counted in nri_suite_stats_collection_errors_total{reason} and left out,
// and everything else is served.
package collect

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"

	"github.com/nri-suite/nri-suite/plugins/stats/internal/cgstats"
	"github.com/nri-suite/nri-suite/plugins/stats/internal/machine"
	"github.com/nri-suite/nri-suite/plugins/stats/internal/netdev"
	"github.com/nri-suite/nri-suite/plugins/stats/internal/nodefs"
	"github.com/nri-suite/nri-suite/plugins/stats/internal/resctrl"
	"github.com/nri-suite/nri-suite/plugins/stats/inventory"
)

// Reasons of nri_suite_stats_collection_errors_total.
const (
	ReasonVanished    = "cgroup_vanished" // the cgroup went away (container removed)
	ReasonRead        = "cgroup_read"     // a cgroup file was unreadable or malformed
	ReasonPath        = "cgroup_path"     // the runtime's cgroups path could not be resolved
	ReasonStateRecord = "state_record"    // a shared-state record was broken
	ReasonResctrl     = "resctrl_read"    // a resctrl monitoring group was unreadable
	ReasonNetwork     = "network_read"    // a /proc/<pid>/net/dev was unreadable or malformed
	ReasonFilesystem  = "filesystem_read" // a node filesystem's statfs or /proc/diskstats failed
)

// Options tune the collection.
type Options struct {
	// CacheFor is how long a snapshot serves scrapes before the cgroups are
	// read again; several scrapers then cost one read.
	CacheFor time.Duration
	// Interval, when positive, reads the cgroups in the background every
	// Interval (as cAdvisor's housekeeping does) and scrapes serve the last
	// reading at once; CacheFor then does not apply.
	Interval time.Duration
	// Workers bound the cgroups read in parallel.
	Workers int
	// SharedDir is the suite's shared state directory; empty: no suite data.
	SharedDir string
	// Resctrl reads the containers' resctrl monitoring groups; nil: the
	// node has no resctrl monitoring.
	Resctrl *resctrl.Reader
	// Proc is the host's /proc, where the node's (pid 1) and the pod
	// sandboxes' network counters are read; empty: none are.
	Proc string
	// Filesystems reads the node's filesystems (the root cgroup's
	// container_fs_* series); nil: none are read.
	Filesystems *nodefs.Reader
	// Machine is the node's machine info, read at start; nil: it could not
	// be read (machine_scrape_error is 1). Version is the node's kernel and
	// OS; nil: no cadvisor_version_info.
	Machine *machine.Info
	Version *machine.Version
}

// DefaultOptions: a second of cache, one worker per CPU (at most 4).
func DefaultOptions() Options {
	return Options{CacheFor: time.Second, Workers: min(4, runtime.GOMAXPROCS(0))}
}

// Snapshot is one reading of the node.
type Snapshot struct {
	Time time.Time
	// Node is the root cgroup; nil if unreadable.
	Node *cgstats.Sample
	// Network is the node's interfaces (those of pid 1's network
	// namespace); nil if unread.
	Network []netdev.Interface
	// Filesystems are the node's filesystems; nil if unread.
	Filesystems []nodefs.Filesystem
	// SandboxContainer is the container label of the sandboxes' series:
	// what cAdvisor's handler of the runtime gives it.
	SandboxContainer string
	Pods             []PodStats
	Suite            SuiteState
}

// PodStats is a pod, its cgroup and its containers.
type PodStats struct {
	inventory.Pod
	Cgroup     string // the pod cgroup's name (id label); empty if unknown
	Sample     *cgstats.Sample
	Containers []ContainerStats
	// SandboxCgroup is the id label of the pod's network series: its
	// sandbox (pause) container's cgroup name, else its own (see
	// sandboxNetJob); Network is its network namespace's interfaces, nil if
	// unread.
	SandboxCgroup string
	Network       []netdev.Interface
}

// ContainerStats is a running container and its cgroup's sample.
type ContainerStats struct {
	inventory.Container
	Cgroup string
	Sample *cgstats.Sample
	// Resctrl is what its resctrl monitoring group counts, by cache id;
	// nil when it has none.
	Resctrl []resctrl.Domain
}

// Collector takes snapshots.
type Collector struct {
	inv      *inventory.Inventory
	reader   *cgstats.Reader
	opts     Options
	log      *logrus.Entry
	errors   *prometheus.CounterVec
	duration prometheus.Histogram
	suite    *suiteReader

	// readMu serializes readings, so that concurrent scrapes share one;
	// mu guards the fields below, and is never held during a reading.
	readMu sync.Mutex
	mu     sync.Mutex
	last   *Snapshot
	stop   chan struct{} // closes the background loop; nil without one
	done   chan struct{}
	now    func() time.Time

	sandboxContainer atomic.Pointer[string]
}

// New returns a collector of the containers in inv, registering its error
// counter in reg under namespace (nri_suite_stats).
func New(inv *inventory.Inventory, reader *cgstats.Reader, opts Options, namespace string, log *logrus.Entry) (*Collector, error) {
	if opts.Workers < 1 {
		opts.Workers = 1
	}
	c := &Collector{
		inv: inv, reader: reader, opts: opts, log: log, now: time.Now,
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace,
			Name:      "collection_errors_total",
			Help:      "Failures while collecting stats, by reason: cgroup_vanished, cgroup_read, cgroup_path, state_record, resctrl_read, network_read, filesystem_read. The scrape goes on without the failed part.",
		}, []string{"reason"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace,
			Name:      "collection_duration_seconds",
			Help:      "Time to read every pod and container cgroup and the shared state once (a scrape within the cache period costs nothing).",
			Buckets:   []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}),
	}
	for _, r := range []string{ReasonVanished, ReasonRead, ReasonPath, ReasonStateRecord, ReasonResctrl, ReasonNetwork, ReasonFilesystem} {
		c.errors.WithLabelValues(r) // export zeros, so that rates work from the start
	}
	if opts.SharedDir != "" {
		s, err := newSuiteReader(opts.SharedDir)
		if err != nil {
			return nil, err
		}
		c.suite = s
	}
	return c, nil
}

// SetRuntime names the runtime (NRI's "containerd", "cri-o"), which decides
// the container label of the sandboxes' network series as cAdvisor's
// handlers set it: CRI-O labels its infra container "POD", containerd its
// sandbox container not at all.
func (c *Collector) SetRuntime(name string) {
	container := ""
	if name == "cri-o" {
		container = "POD"
	}
	c.sandboxContainer.Store(&container)
}

// Metrics are the collector's own metrics, to register.
func (c *Collector) Metrics() []prometheus.Collector {
	return []prometheus.Collector{c.errors, c.duration}
}

// Configure changes the cache period, the background interval and the
// number of workers (0: the default), and starts or stops the background
// loop accordingly.
func (c *Collector) Configure(cacheFor, interval time.Duration, workers int) {
	c.stopLoop()
	c.readMu.Lock()
	if workers < 1 {
		workers = DefaultOptions().Workers
	}
	c.opts.CacheFor, c.opts.Interval, c.opts.Workers = cacheFor, interval, workers
	c.readMu.Unlock()
	if interval > 0 {
		c.mu.Lock()
		c.stop, c.done = make(chan struct{}), make(chan struct{})
		go c.loop(interval, c.stop, c.done)
		c.mu.Unlock()
	}
}

// Close stops the background loop, if any.
func (c *Collector) Close() { c.stopLoop() }

func (c *Collector) stopLoop() {
	c.mu.Lock()
	stop, done := c.stop, c.done
	c.stop, c.done = nil, nil
	c.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
}

// loop is the one goroutine that reads in the background.
func (c *Collector) loop(interval time.Duration, stop, done chan struct{}) {
	defer close(done)
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		c.refresh(nil)
		select {
		case <-stop:
			return
		case <-ticker.C:
		}
	}
}

// Snapshot returns the last reading when a background loop runs, else a
// reading no older than the cache period, made now if needed. Concurrent
// callers share one reading.
func (c *Collector) Snapshot() *Snapshot {
	c.mu.Lock()
	last, background := c.last, c.stop != nil
	c.mu.Unlock()
	if last != nil && background {
		return last
	}
	return c.refresh(func(last *Snapshot) bool {
		return last != nil && c.now().Sub(last.Time) < c.opts.CacheFor
	})
}

// refresh reads the cgroups unless fresh says the last reading will do.
func (c *Collector) refresh(fresh func(*Snapshot) bool) *Snapshot {
	c.readMu.Lock()
	defer c.readMu.Unlock()
	c.mu.Lock()
	last := c.last
	c.mu.Unlock()
	if fresh != nil && fresh(last) {
		return last
	}
	start := time.Now()
	s := c.take()
	c.duration.Observe(time.Since(start).Seconds())
	c.mu.Lock()
	c.last = s
	c.mu.Unlock()
	return s
}

// job is one cgroup to read; the results land in place.
type job struct {
	cgroupsPath string
	what        string // for the log: node, pod ns/name, container ns/pod/name
	name        *string
	sample      **cgstats.Sample
	// dated: the sample gets its cgroup's creation time, for the cgroups
	// cAdvisor dates by their directories (the root, pods).
	dated bool
}

func (c *Collector) take() *Snapshot {
	s := &Snapshot{Time: c.now()}
	if name := c.sandboxContainer.Load(); name != nil {
		s.SandboxContainer = *name
	}
	c.mu.Lock()
	prev := c.last.samples()
	c.mu.Unlock()
	views := c.inv.Snapshot()
	s.Pods = make([]PodStats, len(views))
	jobs := make([]job, 0, 1+2*len(views))
	jobs = append(jobs, job{cgroupsPath: "/", what: "node", name: new(string), sample: &s.Node, dated: true})
	var nets []netJob
	if c.opts.Proc != "" {
		nets = append(nets, netJob{pid: 1, what: "node", out: &s.Network})
	}
	for i, v := range views {
		p := &s.Pods[i]
		p.Pod = v.Pod
		if c.opts.Proc != "" {
			if job, ok := c.sandboxNetJob(p, v); ok {
				nets = append(nets, job)
			}
		}
		if v.CgroupParent != "" {
			jobs = append(jobs, job{cgroupsPath: v.CgroupParent, what: "pod " + v.Namespace + "/" + v.Name, name: &p.Cgroup, sample: &p.Sample, dated: true})
		}
		for _, ctr := range v.Containers {
			if !ctr.Running {
				continue
			}
			p.Containers = append(p.Containers, ContainerStats{Container: ctr})
		}
		for j := range p.Containers {
			cs := &p.Containers[j]
			jobs = append(jobs, job{cgroupsPath: cs.CgroupsPath, what: "container " + v.Namespace + "/" + v.Name + "/" + cs.Name, name: &cs.Cgroup, sample: &cs.Sample})
		}
	}
	c.parallel(len(jobs)+len(nets), func(i int) {
		if i < len(jobs) {
			c.read(&jobs[i], prev)
		} else {
			c.readNetwork(&nets[i-len(jobs)])
		}
	})
	if c.opts.Resctrl != nil {
		c.readResctrl(s)
	}
	if c.opts.Filesystems != nil {
		var err error
		if s.Filesystems, err = c.opts.Filesystems.Read(); err != nil {
			c.errors.WithLabelValues(ReasonFilesystem).Inc()
			c.log.WithError(err).Debug("reading part of the node's filesystems failed")
		}
	}
	if c.suite != nil {
		var errs []error
		s.Suite, errs = c.suite.read()
		for _, err := range errs {
			c.errors.WithLabelValues(ReasonStateRecord).Inc()
			c.log.WithError(err).Debug("skipping a broken shared-state record")
		}
	}
	return s
}

// samples indexes a snapshot's samples by cgroup name.
func (s *Snapshot) samples() map[string]*cgstats.Sample {
	if s == nil {
		return nil
	}
	out := make(map[string]*cgstats.Sample, 1+2*len(s.Pods))
	out["/"] = s.Node
	for _, p := range s.Pods {
		out[p.Cgroup] = p.Sample
		for _, c := range p.Containers {
			out[c.Cgroup] = c.Sample
		}
	}
	return out
}

// parallel calls do for 0..n-1 with a fixed number of workers.
func (c *Collector) parallel(n int, do func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(c.opts.Workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				do(i)
			}
		}()
	}
	wg.Wait()
}

func (c *Collector) read(j *job, prev map[string]*cgstats.Sample) {
	name, err := cgstats.Name(j.cgroupsPath)
	if err != nil {
		c.errors.WithLabelValues(ReasonPath).Inc()
		c.log.WithError(err).WithField("cgroup", j.cgroupsPath).Debugf("skipping the %s", j.what)
		return
	}
	*j.name = name
	sample, err := c.reader.Read(name, prev[name])
	switch {
	case errors.Is(err, cgstats.ErrNotFound):
		c.errors.WithLabelValues(ReasonVanished).Inc()
		c.log.WithError(err).Debugf("the cgroup of the %s is gone", j.what)
		return
	case err != nil:
		c.errors.WithLabelValues(ReasonRead).Inc()
		c.log.WithError(err).Debugf("reading part of the cgroup of the %s failed", j.what)
	}
	if j.dated {
		// The oldest of times that only grow: dated once, then kept.
		if p := prev[name]; p != nil && !p.Created.IsZero() {
			sample.Created = p.Created
		} else {
			sample.Created = c.reader.Created(name)
		}
	}
	*j.sample = &sample
}
