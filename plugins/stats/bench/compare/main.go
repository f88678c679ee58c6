// Command compare runs the stats plugin's collector and cAdvisor (the
// cadvisor-peer binary) side by side over the same real cgroups: it makes
// -pods pods with one container each under a private parent cgroup, starts
// both servers as separate processes, and measures for each the scrape
// latency, the CPU time per scrape, the CPU time while idle and the
// resident memory. It removes the cgroups and stops both servers at the
// end. Run as root; see docs/benchmarks.md.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/nri-suite/nri-suite/plugins/stats/bench/cgtree"
	"github.com/nri-suite/nri-suite/plugins/stats/collect"
	"github.com/nri-suite/nri-suite/plugins/stats/internal/cgstats"
)

func main() {
	serve := flag.Bool("serve", false, "internal: serve the stats collector for -parent")
	parent := flag.String("parent", "", "internal: the parent cgroup to serve")
	mode := flag.String("mode", "interval", "how the stats collector reads: interval (every 10 s, as cAdvisor) or scrape (on scrape)")
	pods := flag.Int("pods", 1000, "pods to create, one container each")
	scrapes := flag.Int("scrapes", 25, "scrapes of each server")
	idle := flag.Duration("idle", 60*time.Second, "how long to measure idle CPU")
	peer := flag.String("peer", "", "the cadvisor-peer binary")
	flag.Parse()
	if *serve {
		if err := serveStats(*parent, *pods, *mode); err != nil {
			log.Fatal(err)
		}
		return
	}
	if err := run(*peer, *mode, *pods, *scrapes, *idle); err != nil {
		log.Fatal(err)
	}
}

func run(peer, mode string, pods, scrapes int, idle time.Duration) (err error) {
	if peer == "" {
		return errors.New("-peer: expected the path of the cadvisor-peer binary")
	}
	parent := fmt.Sprintf("/nri-stats-bench-%d", os.Getpid())
	tree, err := cgtree.Create(cgstats.DefaultRoot, parent, pods)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, tree.Remove()) }()

	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this binary: %w", err)
	}
	servers := []*server{
		{name: "nri-stats (" + mode + ")", argv: []string{self, "-serve", "-parent", parent, "-pods", strconv.Itoa(pods), "-mode", mode}},
		{name: "cAdvisor v0.60.6", argv: []string{peer, "-prefix", parent}},
	}
	for _, s := range servers {
		if err := s.start(); err != nil {
			return err
		}
		defer s.stop()
	}
	// Both serve every container once its first reading is done.
	for _, s := range servers {
		if err := s.waitFor(pods); err != nil {
			return err
		}
	}
	before := make([]time.Duration, len(servers))
	for i, s := range servers {
		if before[i], err = cpuTime(s.cmd.Process.Pid); err != nil {
			return err
		}
	}
	time.Sleep(idle)
	for i, s := range servers {
		after, err := cpuTime(s.cmd.Process.Pid)
		if err != nil {
			return err
		}
		s.idlePerMinute = time.Duration(float64(after-before[i]) * float64(time.Minute) / float64(idle))
	}
	for _, s := range servers {
		if err := s.measure(scrapes); err != nil {
			return err
		}
	}
	fmt.Printf("%d pods with one container each (%d cgroups under %s), %d scrapes each, idle CPU over %s\n\n", pods, 2*pods+1, parent, scrapes, idle)
	fmt.Println("| server | scrape p50 | scrape p90 | CPU per scrape | idle CPU per minute | RSS after scrapes | response | series |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	for _, s := range servers {
		fmt.Printf("| %s | %s | %s | %s | %s | %.1f MiB | %.1f MB | %d |\n", s.name, s.p50.Round(time.Millisecond), s.p90.Round(time.Millisecond),
			s.cpuPerScrape.Round(time.Millisecond), s.idlePerMinute.Round(10*time.Millisecond), float64(s.rss)/(1<<20), float64(s.size)/1e6, s.series)
	}
	return nil
}

type server struct {
	name          string
	argv          []string
	cmd           *exec.Cmd
	addr          string
	p50, p90      time.Duration
	cpuPerScrape  time.Duration
	idlePerMinute time.Duration
	rss           int64
	size, series  int
}

// start runs the server and reads the address it prints.
func (s *server) start() error {
	s.cmd = exec.Command(s.argv[0], s.argv[1:]...)
	s.cmd.Stderr = io.Discard
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("starting %s: %w", s.name, err)
	}
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", s.name, err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		return fmt.Errorf("reading the address of %s: %w", s.name, err)
	}
	s.addr = strings.TrimSpace(line)
	return nil
}

func (s *server) stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	}
}

// client asks for plain text: both servers would gzip otherwise.
var client = &http.Client{Transport: &http.Transport{DisableCompression: true}, Timeout: time.Minute}

func (s *server) scrape() (body []byte, took time.Duration, err error) {
	start := time.Now()
	resp, err := client.Get("http://" + s.addr + "/metrics")
	if err != nil {
		return nil, 0, fmt.Errorf("scraping %s: %w", s.name, err)
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(resp.Body)
	return body, time.Since(start), err
}

// waitFor waits until the server reports the memory of every pod and
// container (cAdvisor leaves out the CPU usage of a cgroup that used none).
func (s *server) waitFor(pods int) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		body, _, err := s.scrape()
		if err == nil && strings.Count(string(body), "\ncontainer_memory_usage_bytes{") >= 2*pods {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not serve %d containers within 2m (last error: %v)", s.name, pods, err)
		}
		time.Sleep(time.Second)
	}
}

func (s *server) measure(scrapes int) error {
	pid := s.cmd.Process.Pid
	before, err := cpuTime(pid)
	if err != nil {
		return err
	}
	took := make([]time.Duration, 0, scrapes)
	for range scrapes {
		body, d, err := s.scrape()
		if err != nil {
			return err
		}
		took = append(took, d)
		s.size = len(body)
		s.series = 0
		for _, line := range strings.Split(string(body), "\n") {
			if line != "" && !strings.HasPrefix(line, "#") {
				s.series++
			}
		}
	}
	after, err := cpuTime(pid)
	if err != nil {
		return err
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	s.p50, s.p90 = took[len(took)/2], took[len(took)*9/10]
	s.cpuPerScrape = (after - before) / time.Duration(scrapes)
	s.rss, err = rss(pid)
	return err
}

// cpuTime is a process's user and system time, from /proc/<pid>/stat.
func cpuTime(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("reading the CPU time of pid %d: %w", pid, err)
	}
	// Fields after the command name in parentheses: utime and stime are the
	// 12th and 13th.
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("parsing /proc/%d/stat: %w", pid, err)
	}
	const ticksPerSecond = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / ticksPerSecond, nil
}

// rss is a process's resident memory, from /proc/<pid>/status.
func rss(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("reading the memory of pid %d: %w", pid, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// serveStats serves the collector's /metrics/cadvisor as /metrics for the
// pods under parent, as the plugin would with that inventory from NRI.
func serveStats(parent string, pods int, mode string) error {
	layout, err := cgstats.Detect(cgstats.DefaultRoot)
	if err != nil {
		return err
	}
	swap, err := cgstats.SwapActive("/proc/swaps")
	if err != nil {
		return err
	}
	reader, err := cgstats.NewReader(layout, cgstats.Options{Swap: swap, SpecMaxAge: cgstats.DefaultSpecMaxAge, Meminfo: cgstats.DefaultMeminfo,
		SysBlock: cgstats.DefaultSysBlock})
	if err != nil {
		return err
	}
	inv := cgtree.Inventory(parent, pods)
	log := logrus.New()
	log.SetOutput(io.Discard)
	c, err := collect.New(inv, reader, collect.DefaultOptions(), "nri_suite_stats", logrus.NewEntry(log))
	if err != nil {
		return err
	}
	switch mode {
	case "interval":
		c.Configure(0, 10*time.Second, 0)
	case "scrape":
		c.Configure(time.Second, 0, 0)
	default:
		return fmt.Errorf("-mode %q: expected interval or scrape", mode)
	}
	cadvisor := collect.NewCAdvisor(c)
	http.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", collect.TextContentType)
		_ = cadvisor.WriteText(w)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Println(ln.Addr().String())
	return http.Serve(ln, nil)
}
