package runtime

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
)

// BenchmarkCleanStateToRunningContainer measures a whole node cycle: start
// the runtime and the kubelet, run one static pod until its container runs,
// tear everything down.
func BenchmarkCleanStateToRunningContainer(b *testing.B) {
	for _, rt := range RuntimeNames() {
		b.Run(rt, func(b *testing.B) {
			RequirePrereqs(b, rt)
			log := logrus.New()
			log.SetLevel(logrus.WarnLevel)
			for b.Loop() {
				ctx := TestContext(b)
				sb, err := Start(ctx, Options{Runtime: rt, Log: log, TolerateMissingPlugins: true})
				if err != nil {
					b.Fatal(err)
				}
				if err := sb.WritePod(BusyboxPod("bench")); err != nil {
					b.Fatal(err)
				}
				_, err = sb.WaitContainer(ctx, "bench", "main")
				if closeErr := sb.Close(); closeErr != nil {
					b.Fatal(closeErr)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkClusterToReadyNode measures a cluster sandbox's whole cycle:
// make its network namespace and certificates, start the control plane,
// the runtime and the kubelet until the node is Ready and schedulable, tear
// everything down.
func BenchmarkClusterToReadyNode(b *testing.B) {
	for _, rt := range RuntimeNames() {
		b.Run(rt, func(b *testing.B) {
			RequireClusterPrereqs(b, rt)
			log := logrus.New()
			log.SetLevel(logrus.WarnLevel)
			for b.Loop() {
				sb, err := Start(TestContext(b), Options{Runtime: rt, Cluster: true, Log: log})
				if err != nil {
					b.Fatal(err)
				}
				if err := sb.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkClusterIdle reports what an idle cluster sandbox (no pods) costs
// per component over a minute: CPU seconds per minute and resident memory,
// read from /proc by PID.
func BenchmarkClusterIdle(b *testing.B) {
	RequireClusterPrereqs(b, "containerd")
	log := logrus.New()
	log.SetLevel(logrus.WarnLevel)
	sb, err := Start(TestContext(b), Options{Cluster: true, Log: log})
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Close()
	components := map[string]int{"containerd": sb.Runtime().PID(), "kubelet": sb.kubelet.process.PID()}
	for _, c := range sb.cluster.control.components {
		components[c.cmd.name] = c.process.PID()
	}
	const idle = time.Minute
	for b.Loop() {
		before := cpuSeconds(b, components)
		time.Sleep(idle)
		after := cpuSeconds(b, components)
		for name, pid := range components {
			b.ReportMetric((after[name]-before[name])/idle.Minutes(), name+"-cpu-s/min")
			b.ReportMetric(residentMiB(b, pid), name+"-rss-MiB")
		}
	}
}

// cpuSeconds reads each process's user and system time (proc(5) stat
// fields 14 and 15, in clock ticks of 1/100 s on Linux).
func cpuSeconds(b *testing.B, pids map[string]int) map[string]float64 {
	out := map[string]float64{}
	for name, pid := range pids {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			b.Fatal(err)
		}
		fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
		utime, _ := strconv.ParseFloat(fields[11], 64)
		stime, _ := strconv.ParseFloat(fields[12], 64)
		out[name] = (utime + stime) / 100
	}
	return out
}

// residentMiB reads a process's VmRSS.
func residentMiB(b *testing.B, pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	kib, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(ParseProcStatus(string(data))["VmRSS"]), " kB"), 64)
	if err != nil {
		b.Fatal(err)
	}
	return kib / 1024
}
