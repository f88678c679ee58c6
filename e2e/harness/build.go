package harness

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sirupsen/logrus"
)

// builds caches plugin binaries per package for the life of the test binary:
// compiling and linking a plugin takes seconds, tests take milliseconds.
var builds = struct {
	sync.Mutex
	dir string
	pkg map[string]*build
}{pkg: map[string]*build{}}

type build struct {
	once sync.Once
	path string
	err  error
}

// Main runs the tests of a package that builds plugins, then removes the
// binaries. Call it from TestMain. When benchmarks run, NRI's own info
// lines (one per runtime start and stop) are left out: they interleave
// with the benchmarks' result lines, which benchstat then cannot read.
func Main(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f != nil && f.Value.String() != "" {
		logrus.SetLevel(logrus.WarnLevel)
	}
	dir, err := os.MkdirTemp("", "nri-harness-bin-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "harness: creating the plugin build directory: %v\n", err)
		os.Exit(2)
	}
	builds.Lock()
	builds.dir = dir
	builds.Unlock()
	code := m.Run()
	if err := os.RemoveAll(dir); err != nil {
		fmt.Fprintf(os.Stderr, "harness: removing the plugin build directory: %v\n", err)
	}
	os.Exit(code)
}

// BuildPlugin builds the main package pkg (an import path, or a path relative
// to the module root such as "./e2e/testplugin") once per test binary and
// returns the binary's path. Builds use -race when the test binary does.
func BuildPlugin(t testing.TB, pkg string) string {
	t.Helper()
	builds.Lock()
	dir := builds.dir
	b := builds.pkg[pkg]
	if b == nil {
		b = &build{}
		builds.pkg[pkg] = b
	}
	builds.Unlock()
	if dir == "" {
		t.Fatalf("building plugin %s: the harness build directory is missing: call harness.Main(m) from TestMain", pkg)
	}
	b.once.Do(func() { b.path, b.err = goBuild(dir, pkg) })
	if b.err != nil {
		t.Fatalf("building plugin %s: %v", pkg, b.err)
	}
	return b.path
}

func goBuild(dir, pkg string) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(pkg))
	out := filepath.Join(dir, path.Base(pkg)+"-"+hex.EncodeToString(sum[:4]))
	args := []string{"build", "-o", out}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, pkg)...)
	cmd.Dir = root
	if output, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, output)
	}
	return out, nil
}

// moduleRoot is the directory of the main module's go.mod, so that relative
// package paths mean the same from every test package.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("locating the module root with go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("locating the module root: not inside a Go module")
	}
	return filepath.Dir(gomod), nil
}
