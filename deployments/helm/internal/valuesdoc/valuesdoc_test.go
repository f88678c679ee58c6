package valuesdoc

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const testSchema = `{
  "properties": {
    "image": {"type": "object", "properties": {
      "tag": {"type": "string"},
      "pullPolicy": {"enum": ["Always", "Never"], "description": "when to pull"}}},
    "tolerations": {"$ref": "#/definitions/tolerations"},
    "empty": {"type": "object", "properties": {"a": {"type": "string"}}, "description": "nothing set"},
    "plugins": {"type": "object", "properties": {
      "a": {"type": "object", "properties": {
        "port": {"$ref": "#/definitions/plugin/properties/port"},
        "affinity": {"$ref": "#/definitions/plugin/properties/affinity"},
        "dir": {"type": "string", "description": "a's dir"}}},
      "b": {"type": "object", "properties": {
        "port": {"$ref": "#/definitions/plugin/properties/port"},
        "affinity": {"$ref": "#/definitions/plugin/properties/affinity"},
        "on": {"type": "boolean", "description": "on"}}},
      "c": {"type": "object", "properties": {
        "port": {"$ref": "#/definitions/plugin/properties/port"},
        "affinity": {"$ref": "#/definitions/plugin/properties/affinity"},
        "on": {"type": "boolean", "description": "on"}}}}}
  },
  "definitions": {
    "tolerations": {"type": "array", "items": {"type": "object"}, "description": "core/v1 Tolerations"},
    "affinity": {"type": "object", "description": "an Affinity"},
    "plugin": {"properties": {
      "port": {"type": "integer", "description": "the port"},
      "affinity": {"$ref": "#/definitions/affinity", "description": "replaces the global <affinity>"}}}
  }
}`

const testValues = `# The images.
image:
  tag: ""                  # default: the chart's *appVersion*
  pullPolicy: Never

# Not this paragraph.

# Every taint: a|b.
tolerations:
  - operator: Exists
empty: {}
# Per plugin.
plugins:
  a:
    port: 1
    dir: /a
  b:
    port: 2
    on: true
  c:
    # c's port.
    port: 2
    on: true
`

func TestTable(t *testing.T) {
	table, err := Table([]byte(testValues), []byte(testSchema))
	require.NoError(t, err)
	assert.Equal(t, "| key | type | default | description |\n|---|---|---|---|\n"+
		"| `image` | object |  | The images. |\n"+
		"| `image.tag` | string | `\"\"` | default: the chart's \\*appVersion\\* |\n"+
		"| `image.pullPolicy` | one of \"Always\", \"Never\" | `\"Never\"` | when to pull |\n"+
		"| `tolerations` | list of object | `[{operator: Exists}]` | Every taint: a\\|b. |\n"+
		"| `empty` | object | `{}` | nothing set |\n"+
		"| `plugins` | object |  | Per plugin. |\n"+
		"| `plugins.<name>.port` | integer | a: `1`; b, c: `2` | (a, b) the port (c) c's port. |\n"+
		"| `plugins.a.dir` | string | `\"/a\"` | a's dir |\n"+
		"| `plugins.<name>.affinity` | object | unset | replaces the global &lt;affinity&gt; |\n"+
		"| `plugins.<name>.on` | boolean | b, c: `true` | on |\n",
		table)
}

func TestTableRefuses(t *testing.T) {
	_, err := Table([]byte("image:\n  tga: v1\n"), []byte(testSchema))
	assert.EqualError(t, err, "values.yaml: image.tga is not in values.schema.json")
	_, err = Table([]byte("image:\n  tag: v1\n  pullPolicy: Never\n"), []byte(`{"properties": {"image": {"properties": {"tag": {}, "pullPolicy": {}}}}}`))
	assert.EqualError(t, err, "image.tag: no comment in values.yaml and no description in values.schema.json\n"+
		"image.pullPolicy: no comment in values.yaml and no description in values.schema.json", "every key without one")
	_, err = Table([]byte("tolerations: []\n"), []byte(`{"properties": {"tolerations": {"$ref": "#/definitions/nope"}}}`))
	assert.EqualError(t, err, `values.schema.json: tolerations: $ref "#/definitions/nope": no such schema`)
}

func TestSplice(t *testing.T) {
	readme := "# chart\n\n" + Begin + "\n| old |\n" + End + "\n\nmore\n"
	out, err := Splice([]byte(readme), "| new |\n")
	require.NoError(t, err)
	assert.Equal(t, "# chart\n\n"+Begin+"\n| new |\n"+End+"\n\nmore\n", string(out))
	_, err = Splice([]byte("# chart\n"), "| new |\n")
	assert.ErrorContains(t, err, "no line")
	_, err = Splice([]byte(Begin+"\n| old |\n"), "| new |\n")
	assert.ErrorContains(t, err, "no \""+End+"\"")
}
