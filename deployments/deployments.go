// Package deployments holds what the suite ships for nodes besides its
// binaries: the containerd and CRI-O drop-ins that enable NRI and CDI, and
// the configurations of the pre-registered plugins. The files are embedded,
// so that tests and the real-node sandbox use these very bytes; the sandbox
// only moves the host paths they name to private ones (DropIn).
package deployments

import (
	_ "embed"
	"fmt"
	"slices"
	"strings"

	"github.com/nri-suite/nri-suite/common/k8s"
)

var (
	//go:embed containerd/nri-suite.toml
	containerdDropIn string
	//go:embed crio/nri-suite.conf
	crioDropIn string
)

// Runtime drop-in names, as DropIn takes them.
const (
	Containerd = "containerd"
	CRIO       = "crio"
)

// TolerateMissingPlugins is the pod annotation that the containerd drop-in
// names as NRI's tolerate_missing_plugins_annotation (see
// k8s.TolerateMissingPluginsAnnotation).
const TolerateMissingPlugins = k8s.TolerateMissingPluginsAnnotation

// dropIns maps a runtime to its shipped drop-in and the file's name in the
// repository (for error messages).
var dropIns = map[string]struct{ file, content string }{
	Containerd: {"deployments/containerd/nri-suite.toml", containerdDropIn},
	CRIO:       {"deployments/crio/nri-suite.conf", crioDropIn},
}

// Paths are the host paths a runtime drop-in names.
type Paths struct {
	// NRISocket is where external plugins (the DaemonSet) connect.
	NRISocket string
	// PluginDir holds the pre-registered plugins (NN-name executables).
	PluginDir string
	// PluginConfigDir holds their configurations (NN-name.conf).
	PluginConfigDir string
	// CDISpecDirs are the CDI spec directories, later ones winning.
	CDISpecDirs []string
}

// DefaultPaths are the paths the drop-ins ship with: NRI's and CDI's
// defaults, which the suite's binaries and the Helm chart use as well.
var DefaultPaths = Paths{
	NRISocket:       "/var/run/nri/nri.sock",
	PluginDir:       "/opt/nri/plugins",
	PluginConfigDir: "/etc/nri/conf.d",
	CDISpecDirs:     []string{"/etc/cdi", "/var/run/cdi"},
}

// DropIn returns the shipped drop-in of runtime (Containerd or CRIO) with
// every path of DefaultPaths replaced by the same field of p. The
// substitution is of whole quoted values ('/etc/cdi' or "/etc/cdi"), each of
// which must occur exactly once in the file, so that the result can only
// differ from the shipped file in those values: nothing else is templated.
// DropIn(runtime, DefaultPaths) is the shipped file itself.
func DropIn(runtime string, p Paths) (string, error) {
	d, ok := dropIns[runtime]
	if !ok {
		return "", fmt.Errorf("runtime drop-in %q: unknown runtime, expected %s or %s", runtime, Containerd, CRIO)
	}
	if len(p.CDISpecDirs) != len(DefaultPaths.CDISpecDirs) {
		return "", fmt.Errorf("rewriting %s: %d CDI spec dirs %q given, expected %d (in place of %q)",
			d.file, len(p.CDISpecDirs), p.CDISpecDirs, len(DefaultPaths.CDISpecDirs), DefaultPaths.CDISpecDirs)
	}
	pairs := [][2]string{
		{DefaultPaths.NRISocket, p.NRISocket},
		{DefaultPaths.PluginDir, p.PluginDir},
		{DefaultPaths.PluginConfigDir, p.PluginConfigDir},
	}
	for i, dir := range DefaultPaths.CDISpecDirs {
		pairs = append(pairs, [2]string{dir, p.CDISpecDirs[i]})
	}
	// Every occurrence is found in the shipped text before any replacement,
	// so that a new path equal to another default is not replaced twice.
	type edit struct {
		at, n int
		value string
	}
	var edits []edit
	for _, pair := range pairs {
		from, to := pair[0], pair[1]
		if !strings.HasPrefix(to, "/") || strings.ContainsAny(to, "'\"\\\n") {
			return "", fmt.Errorf("rewriting %s: path %q in place of %s: expected an absolute path without quotes, backslashes or newlines", d.file, to, from)
		}
		at, quoted, err := findQuotedOnce(d.content, from)
		if err != nil {
			return "", fmt.Errorf("rewriting %s: %w", d.file, err)
		}
		q := quoted[:1]
		edits = append(edits, edit{at, len(quoted), q + to + q})
	}
	slices.SortFunc(edits, func(a, b edit) int { return a.at - b.at })
	var b strings.Builder
	last := 0
	for _, e := range edits {
		b.WriteString(d.content[last:e.at])
		b.WriteString(e.value)
		last = e.at + e.n
	}
	b.WriteString(d.content[last:])
	return b.String(), nil
}

// findQuotedOnce returns where value occurs quoted ('value' or "value") in
// content, and how, requiring exactly one occurrence.
func findQuotedOnce(content, value string) (int, string, error) {
	at, quoted, count := -1, "", 0
	for _, q := range []string{"'", `"`} {
		s := q + value + q
		if n := strings.Count(content, s); n > 0 {
			count += n
			at, quoted = strings.Index(content, s), s
		}
	}
	if count != 1 {
		return 0, "", fmt.Errorf("default path %s occurs quoted %d times, expected exactly once", value, count)
	}
	return at, quoted, nil
}
