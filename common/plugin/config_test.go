package plugin

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/quote"
)

type decodeTarget struct {
	Name   string            `yaml:"name"`
	Count  int               `yaml:"count"`
	Labels map[string]string `yaml:"labels"`
	Nested struct {
		Enabled bool `yaml:"enabled"`
	} `yaml:"nested"`
	Items []struct {
		Name string `yaml:"name"`
	} `yaml:"items"`
}

func TestDecodeConfig(t *testing.T) {
	defaults := decodeTarget{Name: "default", Count: 3}
	for _, tc := range []struct {
		name    string
		data    string
		want    decodeTarget
		wantErr []string
	}{
		{name: "empty keeps defaults", data: "", want: defaults},
		{name: "whitespace keeps defaults", data: "  \n\t\n", want: defaults},
		{name: "comments only keep defaults", data: "# nothing here\n", want: defaults},
		{name: "partial overrides one field", data: "count: 7\n", want: decodeTarget{Name: "default", Count: 7}},
		{
			name: "nested and maps", data: "name: x\nlabels: {a: b}\nnested:\n  enabled: true\n",
			want: func() decodeTarget {
				d := decodeTarget{Name: "x", Count: 3, Labels: map[string]string{"a": "b"}}
				d.Nested.Enabled = true
				return d
			}(),
		},
		{name: "unknown top-level key", data: "name: x\ncolour: red\n", wantErr: []string{"test.yaml", `line 2: unknown key "colour"`}},
		{name: "unknown nested key", data: "nested:\n  enabled: true\n  verbose: 1\n", wantErr: []string{`line 3: unknown key "nested.verbose"`}},
		{name: "unknown key in a list item", data: "items:\n- name: a\n- name: b\n  size: 2\n", wantErr: []string{`line 4: unknown key "items[1].size"`}},
		{name: "wrong type", data: "count: many\n", wantErr: []string{"test.yaml", "line 1", "many"}},
		{name: "malformed", data: "name: [x\n", wantErr: []string{"test.yaml"}},
		{name: "duplicate key", data: "count: 1\ncount: 2\n", wantErr: []string{"test.yaml", `"count" already defined`}},
		{name: "two documents", data: "count: 1\n---\ncount: 2\n", wantErr: []string{"test.yaml", "single YAML document"}},
		{name: "huge unknown key", data: "? " + strings.Repeat("k", 1<<20) + "\n: 1\n", // explicit: a plain key ends at 1024
			wantErr: []string{"line 1: unknown key \"kkkk", "…(1048576 bytes)"}},
		{name: "many unknown keys", data: manyKeys(10000),
			wantErr: []string{"line 1: unknown key \"k0\"; line 2: unknown key \"k1\""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := defaults
			err := DecodeConfig([]byte(tc.data), "test.yaml", &got)
			if tc.wantErr != nil {
				require.Error(t, err)
				for _, want := range tc.wantErr {
					assert.Contains(t, err.Error(), want)
				}
				assert.Less(t, len(err.Error()), 2*quote.MaxError, "the error is bounded")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// manyKeys is a document of n unknown keys.
func manyKeys(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "k%d: 1\n", i)
	}
	return b.String()
}

func FuzzDecodeConfig(f *testing.F) {
	for _, seed := range []string{
		"", "name: x\n", "count: 7\nlabels: {a: b}\n", "colour: red\n", "name: [x\n",
		"nested:\n  enabled: yes\n", "---\n---\n", "&a [*a]\n", "count: !!binary aGk=\n",
		"? " + strings.Repeat("k", 1<<13) + "\n: 1\n", manyKeys(200), "name: " + strings.Repeat("[", 1<<13),
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var out decodeTarget
		err := DecodeConfig(data, "fuzz.yaml", &out)
		if err != nil {
			assert.Contains(t, err.Error(), "fuzz.yaml", "errors name their source")
			assert.Less(t, len(err.Error()), 2*quote.MaxError, "errors are bounded")
		}
	})
}

func TestOneOf(t *testing.T) {
	type mode string
	got, err := OneOf[mode]("mode", "", "auto", "auto", "plugin")
	require.NoError(t, err)
	assert.Equal(t, mode("auto"), got, "empty is the default")
	got, err = OneOf[mode]("mode", "plugin", "auto", "auto", "plugin")
	require.NoError(t, err)
	assert.Equal(t, mode("plugin"), got)
	_, err = OneOf[mode]("mode", "runtim", "auto", "auto", "plugin")
	assert.EqualError(t, err, `mode: "runtim": expected one of auto, plugin`)
	_, err = OneOf[mode]("mode", strings.Repeat("x", 1<<20), "auto", "auto", "plugin")
	assert.Less(t, len(err.Error()), 2*quote.MaxError, "the value is quoted at a bounded length")
}
