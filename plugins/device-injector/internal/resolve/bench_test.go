package resolve

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/nri-suite/nri-suite/plugins/device-injector/internal/specgen"
)

// The benchmarks' node: 1,000 devices in 100 spec files.
const (
	benchFiles          = 100
	benchDevicesPerFile = 10
)

func benchResolver(b *testing.B) (*Resolver, string) {
	b.Helper()
	dir := b.TempDir()
	if err := specgen.Write(dir, benchFiles, benchDevicesPerFile); err != nil {
		b.Fatal(err)
	}
	r := New([]string{dir}, logrus.NewEntry(logrus.New()))
	b.Cleanup(r.Close)
	if n := r.Devices(); n != benchFiles*benchDevicesPerFile {
		b.Fatalf("the cache resolves %d devices, expected %d", n, benchFiles*benchDevicesPerFile)
	}
	return r, dir
}

// BenchmarkRescan is the full rescan of the 100 files, what every change
// to a spec directory costs, in the watcher's goroutine: resolutions keep
// using the previous scan meanwhile.
func BenchmarkRescan(b *testing.B) {
	r, _ := benchResolver(b)
	for b.Loop() {
		r.rescan()
	}
	if n := r.Devices(); n != benchFiles*benchDevicesPerFile {
		b.Fatalf("the rescan found %d devices", n)
	}
}

// BenchmarkSpecChangeVisible is the time from rewriting one spec file with
// a new device to the moment a Resolve of that device succeeds: the
// watcher's notification, the rescan, and the lookup.
func BenchmarkSpecChangeVisible(b *testing.B) {
	r, dir := benchResolver(b)
	i := 0
	for b.Loop() {
		i++
		extra := fmt.Sprintf("new%d", i)
		file := i % benchFiles
		if err := os.WriteFile(specgen.Path(dir, file), []byte(specgen.Spec(file, benchDevicesPerFile, extra)), 0o644); err != nil {
			b.Fatal(err)
		}
		name := specgen.Vendor(file) + "/dev=" + extra
		deadline := time.Now().Add(30 * time.Second)
		for r.current.Load().devices[name] == nil {
			if time.Now().After(deadline) {
				b.Fatalf("%s never became resolvable", name)
			}
			time.Sleep(50 * time.Microsecond)
		}
	}
	if _, err := r.Resolve([]string{specgen.Name(0, 0)}, Owner{}); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkResolve4 resolves 4 of the 1,000 devices, each injected alone
// into a scratch spec.
func BenchmarkResolve4(b *testing.B) {
	r, _ := benchResolver(b)
	names := []string{specgen.Name(3, 1), specgen.Name(42, 7), specgen.Name(77, 0), specgen.Name(99, 9)}
	for b.Loop() {
		if _, err := r.Resolve(names, Owner{}); err != nil {
			b.Fatal(err)
		}
	}
}
