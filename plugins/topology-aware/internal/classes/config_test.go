package classes

import (
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/nri-suite/nri-suite/common/k8s"
)

// sections decodes a plugin configuration's blockio and rdt keys as the
// plugin's config package does.
func sections(t testing.TB, doc string) (blockIO, rdtSection Section) {
	t.Helper()
	var f struct {
		BlockIO Section `yaml:"blockio"`
		RDT     Section `yaml:"rdt"`
	}
	dec := yaml.NewDecoder(stringsReader(doc))
	dec.KnownFields(true)
	if err := dec.Decode(&f); !errors.Is(err, io.EOF) {
		require.NoError(t, err)
	}
	return f.BlockIO, f.RDT
}

func parse(t testing.TB, doc string) (Config, error) {
	t.Helper()
	b, r := sections(t, doc)
	return Parse(b, r)
}

// exampleConfig defines block I/O classes without devices (weights only, so
// that they resolve on any machine) and RDT classes in goresctrl's formats.
const exampleConfig = `
blockio:
  config:
    Classes:
      throttled:
      - Weight: 50
      fast:
      - Weight: "800"
  qos:
    BestEffort: throttled
    Guaranteed: fast
  namespaces:
    batch: throttled
rdt:
  config:
    options:
      l3: {optional: true}
      mb: {optional: true}
    partitions:
      shared:
        l3Allocation: "100%"
        mbAllocation: ["100%"]
        classes:
          gold:
            l3Allocation: "60%"
            mbAllocation: ["100%"]
          bronze:
            l3Allocation: "20%"
            mbAllocation: ["40%"]
            kubernetes: {denyPodAnnotation: true}
  qos:
    Guaranteed: gold
    BestEffort: bronze
`

func TestParse(t *testing.T) {
	cfg, err := parse(t, exampleConfig)
	require.NoError(t, err)
	assert.Equal(t, []string{"fast", "throttled"}, cfg.BlockIO.Names)
	assert.Equal(t, map[k8s.QOSClass]string{k8s.QOSBestEffort: "throttled", k8s.QOSGuaranteed: "fast"}, cfg.BlockIO.QOS)
	assert.Equal(t, map[string]string{"batch": "throttled"}, cfg.BlockIO.Namespaces)
	assert.Equal(t, []string{"bronze", "gold", RootRDTClass}, cfg.RDT.Names, "the root class is always defined")
	assert.Equal(t, map[string]bool{"bronze": true}, cfg.RDT.noPodAnnotation)
	require.NotNil(t, cfg.blockio)
	assert.Equal(t, "800", cfg.blockio.Classes["fast"][0].Weight, "goresctrl's own document, decoded")
	require.NotNil(t, cfg.rdt)
	assert.Contains(t, cfg.rdt.Partitions, "shared")

	none, err := parse(t, "")
	require.NoError(t, err)
	assert.Empty(t, none.BlockIO.Names)
	assert.Equal(t, []string{RootRDTClass}, none.RDT.Names)
	assert.Nil(t, none.blockio)
	assert.Nil(t, none.rdt)
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, doc, want string
	}{
		{"a key goresctrl's blockio format does not have", `
blockio:
  config:
    Classes:
      slow:
      - Devices: [/dev/vda]
        ThrottleReadBytes: 1Mi`, `blockio: config (line 4): expected goresctrl's blockio configuration: `},
		{"a list where goresctrl wants a map", `
blockio:
  config:
    Classes: [slow]`, `blockio: config (line 4): expected goresctrl's blockio configuration`},
		{"a key goresctrl's rdt format does not have", `
rdt:
  config:
    partitions:
      p:
        l3Alloc: "50%"
        classes:
          gold: {}`, `rdt: config (line 4): expected goresctrl's rdt configuration`},
		{"a QoS class mapped to a class that does not exist", `
blockio:
  config:
    Classes:
      slow: [{Weight: 10}]
  qos:
    BestEffort: throttled`, `blockio: qos: BestEffort: class "throttled" is not defined: expected one of "slow" (the classes of the plugin's blockio.config)`},
		{"an RDT class that does not exist", `
rdt:
  qos:
    Guaranteed: gold`, `rdt: qos: Guaranteed: class "gold" is not defined: expected one of "system/default" (the classes of the plugin's rdt.config)`},
		{"a namespace mapped to a class that does not exist", `
blockio:
  namespaces:
    batch: slow`, `blockio: namespaces: batch: class "slow" is not defined: expected a class of the plugin's blockio.config, which defines none`},
		{"not a QoS class", `
blockio:
  config: {Classes: {slow: [{Weight: 10}]}}
  qos:
    besteffort: slow`, `blockio: qos: "besteffort": expected a pod QoS class: Guaranteed, Burstable or BestEffort`},
		{"not a namespace", `
blockio:
  config: {Classes: {slow: [{Weight: 10}]}}
  namespaces:
    Batch: slow`, `blockio: namespaces: "Batch": expected a Kubernetes namespace name`},
		{"a class in two partitions", `
rdt:
  config:
    partitions:
      a: {classes: {gold: {}}}
      b: {classes: {gold: {}}}`, `rdt: config (line 4): expected goresctrl's rdt configuration: class "gold" is in partitions "a" and "b": expected each class in one partition`},
		{"a class name no resctrl group can have", `
rdt:
  config:
    partitions:
      a: {classes: {"gold/plated": {}}}`, `rdt: config: class name "gold/plated": expected 1 to 253 printable characters without '/' or spaces`},
		{"an empty class name", `
blockio:
  config: {Classes: {"": [{Weight: 10}]}}`, `blockio: config: class name "": expected`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(t, tc.doc)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
