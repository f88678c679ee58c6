package plugin

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/version"
)

// RegisterMetrics registers every collector it can and names each failure.
func TestRegisterMetrics(t *testing.T) {
	counter := func(name string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "nri_suite_test", Name: name, Help: name})
	}
	reg := prometheus.NewRegistry()
	require.NoError(t, RegisterMetrics(reg, counter("a_total"), counter("b_total")))

	err := RegisterMetrics(reg, counter("a_total"), counter("c_total"), counter("b_total"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "registering metrics")
	var already prometheus.AlreadyRegisteredError
	assert.ErrorAs(t, err, &already)
	families, gatherErr := reg.Gather()
	require.NoError(t, gatherErr)
	var names []string
	for _, f := range families {
		names = append(names, f.GetName())
	}
	assert.Equal(t, []string{"nri_suite_test_a_total", "nri_suite_test_b_total", "nri_suite_test_c_total"}, names,
		"the collector between two taken names is registered all the same")
}

// Every plugin's registry has nri_suite_build_info, unprefixed, labelled
// with common/version's answer.
func TestBuildInfo(t *testing.T) {
	reg, _ := newRegistry("nri_suite_test")
	v := version.Get()
	want := fmt.Sprintf(`
# HELP nri_suite_build_info 1, labelled with the version, VCS revision and Go version the plugin was built from.
# TYPE nri_suite_build_info gauge
nri_suite_build_info{goversion=%q,revision=%q,version=%q} 1
`, v.GoVersion, v.Revision, v.Version)
	assert.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "nri_suite_build_info"))
}
