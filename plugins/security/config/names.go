package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/containerd/nri/pkg/api"

	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/common/quote"
)

// declaredHandler returns a check that a runtime handler named under a key
// is one the file declares in runtime-handlers: a typo in a handler name
// would otherwise never match, and the rule it scopes would silently not
// apply.
func declaredHandler(declared []string) func(key, name string) error {
	return func(key, name string) error {
		if !slices.Contains(declared, name) {
			return fmt.Errorf("%s: unknown runtime handler %s: expected one declared in runtime-handlers (%s)",
				key, quote.Value(name), listOrNone(declared))
		}
		return nil
	}
}

func checkHandlers(handlers []string) error {
	for i, h := range handlers {
		if !k8s.IsDNSLabel(h) {
			return fmt.Errorf("runtime-handlers: %s: expected a RuntimeClass handler name (lowercase letters, digits and '-')", quote.Value(h))
		}
		if slices.Contains(handlers[:i], h) {
			return fmt.Errorf("runtime-handlers: %s: declared twice", quote.Value(h))
		}
	}
	return nil
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "none declared"
	}
	return strings.Join(names, ", ")
}

// PluginID is an NRI plugin as policies name it: index and name, "10-device-injector".
// NRI does not keep names unique, so a name alone identifies nobody.
type PluginID string

// Index and Name are the parts of "NN-name".
func (id PluginID) Index() string { i, _, _ := strings.Cut(string(id), "-"); return i }
func (id PluginID) Name() string  { _, n, _ := strings.Cut(string(id), "-"); return n }

// NewPluginID is the identity of a plugin that registered with index and name.
func NewPluginID(index, name string) PluginID { return PluginID(index + "-" + name) }

// checkPluginID accepts "NN-name" as NRI accepts a plugin's registration:
// an index of two digits, a dash, and a name of letters, digits and
// "_.+-". Anything else names no plugin that can connect, so a policy for
// it could never apply.
func checkPluginID(key, id string) error {
	idx, name, dash := strings.Cut(id, "-")
	err := api.CheckPluginIndex(idx)
	if err == nil {
		err = api.CheckPluginName(name)
	}
	if !dash || err != nil {
		return fmt.Errorf("%s: %s: expected a plugin as NRI registers it, a two-digit index, '-' and a name of letters, digits and '_.+-', such as 10-device-injector",
			key, quote.Value(id))
	}
	return nil
}

func checkSysctlPattern(s string) error {
	base := strings.TrimSuffix(s, ".*")
	if base == "" || strings.ContainsAny(base, "*/ ") || strings.HasPrefix(base, ".") || strings.HasSuffix(base, ".") {
		return fmt.Errorf("validator.allowed-sysctls: %s: expected a sysctl name such as net.ipv4.tcp_rmem, or a prefix ending in .*", quote.Value(s))
	}
	return nil
}
