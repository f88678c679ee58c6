package suite

import (
	"testing"

	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// The values point the chart at the sandbox's paths, never pull, and allow
// sidecar-order's mounts where the helper is, and the plugins request no
// CPU of the small node; the priority class is left out only where the
// runtime cannot run it.
func TestValues(t *testing.T) {
	p := paths{nriSocketDir: "/sb/nri", cdiSpecDirs: []string{"/sb/cdi", "/sb/cdi-run"}, helperDir: "/sb/helper"}
	data, err := yaml.Marshal(values(p, []string{"security", "sidecar-order", "stats"}))
	assert.NoError(t, err)
	assert.YAMLEq(t, `
image: {pullPolicy: Never}
nri: {socketDir: /sb/nri}
cdiSpecDirs: [/sb/cdi, /sb/cdi-run]
nodeResourceTopology: {enabled: true}
plugins:
  sidecar-order:
    helperDir: /sb/helper
    resources: {requests: {cpu: "0"}}
  security:
    config:
      validator:
        mounts:
          plugins: {20-sidecar-order: [/sb/helper/nri-sidecar-helper, "/run/nri-suite/sidecar-order/*"]}
    resources: {requests: {cpu: "0"}}
  stats:
    hostNetwork: true
    tlsSecret: nri-stats-tls
    resources: {requests: {cpu: "0"}}
`, string(data))

	p.noPriorityClass = true
	assert.Equal(t, "", values(p, nil)["priorityClassName"])
}

func TestDaemonSetReady(t *testing.T) {
	ds := func(generation, observed int64, desired, updated, ready int32) *appsv1.DaemonSet {
		return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "nri-stats", Generation: generation},
			Status: appsv1.DaemonSetStatus{ObservedGeneration: observed, DesiredNumberScheduled: desired,
				UpdatedNumberScheduled: updated, NumberReady: ready}}
	}
	assert.Equal(t, "", daemonSetReady(ds(2, 2, 1, 1, 1)))
	assert.Equal(t, "DaemonSet nri-stats: generation 2 not observed yet", daemonSetReady(ds(2, 1, 1, 1, 1)))
	assert.Equal(t, "DaemonSet nri-stats: scheduled to no node", daemonSetReady(ds(1, 1, 0, 0, 0)))
	assert.Equal(t, "DaemonSet nri-stats: 1 of 1 pods updated, 0 ready", daemonSetReady(ds(1, 1, 1, 1, 0)))
	assert.Equal(t, "DaemonSet nri-stats: 0 of 1 pods updated, 1 ready", daemonSetReady(ds(2, 2, 1, 0, 1)), "an old pod is ready")
}

func TestLoadImages(t *testing.T) {
	dir := t.TempDir()
	_, err := LoadImages(dir)
	assert.ErrorContains(t, err, "no nri-*.tar in "+dir+" (run make images IMAGES_OUT="+dir+")")
}
