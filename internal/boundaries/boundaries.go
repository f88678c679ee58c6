// Package boundaries checks the import rules docs/architecture.md promises:
// no plugin imports another, common/ knows no plugin and no test code, and
// no product code imports test code. The rules are a function of the
// module's import graph (go list), so that a test can hold the module to
// them and show, on a graph with a deliberate violation, that they catch it.
package boundaries

import (
	"fmt"
	"strings"
)

// Package is one package of the module: its path relative to the module
// (for example "plugins/stats/internal/server") and the module-relative paths of the
// module's packages its non-test files import.
type Package struct {
	Path    string
	Imports []string
}

// testCode is what only tests may import: the end-to-end harnesses, the
// test plugin and the test environment's rules.
var testCode = []string{"e2e", "internal/testenv"}

// Check returns one line per import that breaks a rule, naming the
// importer, the imported package and the rule; none when the graph keeps
// them all.
func Check(pkgs []Package) []string {
	var violations []string
	for _, pkg := range pkgs {
		for _, imported := range pkg.Imports {
			if rule := broken(pkg.Path, imported); rule != "" {
				violations = append(violations, fmt.Sprintf("%s imports %s: %s", pkg.Path, imported, rule))
			}
		}
	}
	return violations
}

// broken names the rule that importer importing imported breaks, or "".
func broken(importer, imported string) string {
	switch {
	case isTestCode(importer):
		return ""
	case isTestCode(imported):
		return "product code imports no test code"
	case under(importer, "common") && (under(imported, "plugins") || under(imported, "internal/catalog")):
		return "common/ knows no plugin"
	case under(importer, "common") && under(imported, "deployments"):
		return "common/ knows no deployment"
	case under(importer, "plugins") && under(imported, "plugins") && plugin(importer) != plugin(imported):
		return "no plugin imports another"
	}
	return ""
}

func isTestCode(path string) bool {
	for _, dir := range testCode {
		if under(path, dir) {
			return true
		}
	}
	return false
}

// under reports whether path is dir or inside it.
func under(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, dir+"/")
}

// plugin is the plugin a path under plugins/ belongs to.
func plugin(path string) string {
	name, _, _ := strings.Cut(strings.TrimPrefix(path, "plugins/"), "/")
	return name
}
