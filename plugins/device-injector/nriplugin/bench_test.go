package nriplugin

import (
	"fmt"
	"testing"

	"github.com/nri-suite/nri-suite/plugins/device-injector/internal/specgen"
)

// benchFixture is the plugin on a node with 1,000 devices in 100 spec files
// (beside the fixture's 3), checked for health once an hour so that the
// monitor stays out of the measurement. The files are written before the
// plugin is pointed at their directory: written while it watches, each
// write's event costs a full rescan of the directory, which would go on
// during the measurement.
func benchFixture(b *testing.B, mode string) *fixture {
	b.Helper()
	f := newFixture(b, "")
	dir := b.TempDir()
	if err := specgen.Write(dir, 100, 10); err != nil {
		b.Fatal(err)
	}
	config := fmt.Sprintf("spec-dirs: [%s, %s]\nhealth-interval: 1h\nmode: %s\n", f.specDirs, dir, mode)
	if err := f.p.Configure([]byte(config), "bench.yaml"); err != nil {
		b.Fatal(err)
	}
	if n := f.p.resolver.Devices(); n != 1003 {
		b.Fatalf("the cache resolves %d devices, expected 1003", n)
	}
	return f
}

// BenchmarkCreateContainer is the CreateContainer handler alone for a
// container asking for 4 of the 1,000 devices: annotations, policy, health,
// resolution, conflict checks, locality lookups in sysfs, and the locality
// and health records written to the shared directory. RemoveContainer
// after each keeps the tracked set constant and is included.
func BenchmarkCreateContainer(b *testing.B) {
	annotations := map[string]string{"cdi-devices.nri-suite.io": fmt.Sprintf("%s,%s,%s,%s",
		specgen.Name(3, 1), specgen.Name(42, 7), specgen.Name(77, 0), specgen.Name(99, 9))}
	for _, mode := range []string{"plugin", "runtime"} {
		b.Run(mode, func(b *testing.B) {
			f := benchFixture(b, mode)
			p := pod("default", annotations)
			i := 0
			for b.Loop() {
				i++
				c := container(fmt.Sprintf("ctr-%d", i))
				adjust, _, err := f.p.CreateContainer(b.Context(), p, c)
				if err != nil || adjust == nil {
					b.Fatalf("CreateContainer: %v (adjustment %v)", err, adjust)
				}
				if err := f.p.RemoveContainer(b.Context(), p, c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
