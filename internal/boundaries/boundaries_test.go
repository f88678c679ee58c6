package boundaries

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestModuleKeepsItsBoundaries holds this module's import graph, as go list
// reports it, to the rules.
func TestModuleKeepsItsBoundaries(t *testing.T) {
	pkgs := modulePackages(t)
	require.NotEmpty(t, pkgs)
	assert.Empty(t, Check(pkgs), "imports that break docs/architecture.md's boundaries")
}

func TestCheckCatchesEachViolation(t *testing.T) {
	pkgs := []Package{
		{Path: "plugins/stats/internal/server", Imports: []string{"plugins/stats/collect", "common/plugin"}},
		{Path: "plugins/stats", Imports: []string{"plugins/topology-aware/internal/policy"}},
		{Path: "common/state", Imports: []string{"plugins/sidecar-order/internal/coord"}},
		{Path: "common/plugin", Imports: []string{"e2e/harness", "deployments"}},
		{Path: "plugins/security", Imports: []string{"internal/testenv"}},
		{Path: "deployments/images", Imports: []string{"e2e/runtime"}},
		{Path: "e2e/runtime/deploy", Imports: []string{"plugins/stats/internal/server", "e2e/harness"}},
		{Path: "plugins/statsfoo", Imports: []string{"plugins/stats"}},
		{Path: "common/plugin", Imports: []string{"internal/catalog"}},
		{Path: "plugins/stats", Imports: []string{"internal/catalog"}},
	}
	assert.Equal(t, []string{
		"plugins/stats imports plugins/topology-aware/internal/policy: no plugin imports another",
		"common/state imports plugins/sidecar-order/internal/coord: common/ knows no plugin",
		"common/plugin imports e2e/harness: product code imports no test code",
		"common/plugin imports deployments: common/ knows no deployment",
		"plugins/security imports internal/testenv: product code imports no test code",
		"deployments/images imports e2e/runtime: product code imports no test code",
		"plugins/statsfoo imports plugins/stats: no plugin imports another",
		"common/plugin imports internal/catalog: common/ knows no plugin",
	}, Check(pkgs))
}

// modulePackages lists the module's packages with go list, each with the
// module's packages its non-test files import, paths relative to the module.
func modulePackages(t *testing.T) []Package {
	t.Helper()
	module := strings.TrimSpace(run(t, "go", "list", "-m"))
	out := run(t, "go", "list", "-json=ImportPath,Imports", module+"/...")
	var pkgs []Package
	for dec := json.NewDecoder(strings.NewReader(out)); ; {
		var listed struct {
			ImportPath string
			Imports    []string
		}
		err := dec.Decode(&listed)
		if errors.Is(err, io.EOF) {
			return pkgs
		}
		require.NoError(t, err)
		pkg := Package{Path: relative(module, listed.ImportPath)}
		for _, imported := range listed.Imports {
			if under(imported, module) {
				pkg.Imports = append(pkg.Imports, relative(module, imported))
			}
		}
		pkgs = append(pkgs, pkg)
	}
}

func relative(module, path string) string {
	return strings.TrimPrefix(strings.TrimPrefix(path, module), "/")
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "%s %s: %s", name, strings.Join(args, " "), stderr.String())
	return string(out)
}
