package request

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func ptr[T any](v T) *T { return &v }

func cdiNames(r Request) []string {
	var out []string
	for _, c := range r.CDI {
		out = append(out, c.Name+" <- "+c.Key)
	}
	return out
}

func TestParseKeysAndPrecedence(t *testing.T) {
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		want        []string // CDI name <- key
	}{
		{"none", map[string]string{"other": "x"}, nil},
		{"suite bare key", map[string]string{"cdi-devices.nri-suite.io": "a.com/gpu=0, a.com/gpu=1"},
			[]string{"a.com/gpu=0 <- cdi-devices.nri-suite.io", "a.com/gpu=1 <- cdi-devices.nri-suite.io"}},
		{"pod beats bare", map[string]string{
			"cdi-devices.nri-suite.io":     "a.com/gpu=0",
			"cdi-devices.nri-suite.io/pod": "a.com/gpu=1",
		}, []string{"a.com/gpu=1 <- cdi-devices.nri-suite.io/pod"}},
		{"container beats pod", map[string]string{
			"cdi-devices.nri-suite.io/pod":           "a.com/gpu=1",
			"cdi-devices.nri-suite.io/container.app": "a.com/gpu=2",
			"cdi-devices.nri-suite.io/container.web": "a.com/gpu=3",
		}, []string{"a.com/gpu=2 <- cdi-devices.nri-suite.io/container.app"}},
		{"empty container value clears the pod's", map[string]string{
			"cdi-devices.nri-suite.io/pod":           "a.com/gpu=1",
			"cdi-devices.nri-suite.io/container.app": "",
		}, nil},
		{"standard keys are joined, sorted by key", map[string]string{
			"cdi.k8s.io/vendor.gpu_1": "a.com/gpu=1",
			"cdi.k8s.io/vendor.gpu_0": "a.com/gpu=0,a.com/gpu=9",
		}, []string{"a.com/gpu=0 <- cdi.k8s.io/vendor.gpu_0", "a.com/gpu=9 <- cdi.k8s.io/vendor.gpu_0", "a.com/gpu=1 <- cdi.k8s.io/vendor.gpu_1"}},
		{"standard container-scoped key", map[string]string{
			"cdi.k8s.io/container.app": "a.com/gpu=0",
			"cdi.k8s.io/container.web": "a.com/gpu=1",
		}, []string{"a.com/gpu=0 <- cdi.k8s.io/container.app"}},
		{"sample key", map[string]string{"cdi-devices.noderesource.dev/container.app": "- a.com/gpu=0\n- a.com/gpu=1\n"},
			[]string{"a.com/gpu=0 <- cdi-devices.noderesource.dev/container.app", "a.com/gpu=1 <- cdi-devices.noderesource.dev/container.app"}},
		{"sample prefix beats old prefix at one level", map[string]string{
			"cdi-devices.nri.io/pod":           "[a.com/gpu=0]",
			"cdi-devices.noderesource.dev/pod": "[a.com/gpu=1]",
		}, []string{"a.com/gpu=1 <- cdi-devices.noderesource.dev/pod"}},
		{"more specific old prefix beats sample prefix", map[string]string{
			"cdi-devices.nri.io/container.app": "[a.com/gpu=0]",
			"cdi-devices.noderesource.dev/pod": "[a.com/gpu=1]",
		}, []string{"a.com/gpu=0 <- cdi-devices.nri.io/container.app"}},
		{"families are joined, a name once", map[string]string{
			"cdi-devices.nri-suite.io":     "a.com/gpu=0",
			"cdi.k8s.io/x":                 "a.com/gpu=0,a.com/gpu=1",
			"cdi-devices.noderesource.dev": "[a.com/gpu=2]",
		}, []string{"a.com/gpu=0 <- cdi-devices.nri-suite.io", "a.com/gpu=1 <- cdi.k8s.io/x", "a.com/gpu=2 <- cdi-devices.noderesource.dev"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Parse(tc.annotations, "app")
			require.NoError(t, err)
			assert.Equal(t, tc.want, cdiNames(r))
			assert.Equal(t, len(tc.want) == 0, r.Empty())
		})
	}
}

func TestParseDevicesAndMounts(t *testing.T) {
	r, err := Parse(map[string]string{
		"devices.nri-suite.io/container.app": "- path: /dev/fuse\n- {path: /dev/null, type: c, major: 1, minor: 3, file_mode: 0o640, uid: 10, gid: 20}\n",
		"devices.noderesource.dev/pod":       "- path: /dev/zero\n",
		"devices.nri.io":                     "- path: /dev/ignored\n",
		"mounts.noderesource.dev":            "- {source: /opt/x, destination: /x, type: bind, options: [rbind, ro]}\n",
	}, "app")
	require.NoError(t, err)
	assert.Equal(t, []Device{
		{Path: "/dev/fuse", Key: "devices.nri-suite.io/container.app"},
		{Path: "/dev/null", Type: "c", Major: ptr[int64](1), Minor: ptr[int64](3), FileMode: ptr[uint32](0o640),
			UID: ptr[uint32](10), GID: ptr[uint32](20), Key: "devices.nri-suite.io/container.app"},
		{Path: "/dev/zero", Key: "devices.noderesource.dev/pod"},
	}, r.Devices)
	assert.Equal(t, []Mount{{Source: "/opt/x", Destination: "/x", Type: "bind", Options: []string{"rbind", "ro"}, Key: "mounts.noderesource.dev"}}, r.Mounts)
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		want        []string
	}{
		{"suite name not qualified", map[string]string{"cdi-devices.nri-suite.io": "gpu0"},
			[]string{`annotation cdi-devices.nri-suite.io="gpu0"`, `CDI name "gpu0"`, "vendor.com/class=name"}},
		{"suite empty element", map[string]string{"cdi-devices.nri-suite.io/pod": "a.com/gpu=0,,a.com/gpu=1"},
			[]string{"cdi-devices.nri-suite.io/pod", `CDI name ""`}},
		{"standard bad name", map[string]string{"cdi.k8s.io/x": "a.com/gpu"},
			[]string{`annotation cdi.k8s.io/x="a.com/gpu"`, "comma-separated CDI names"}},
		{"sample not a list", map[string]string{"cdi-devices.noderesource.dev": "a.com/gpu=0: x"},
			[]string{"cdi-devices.noderesource.dev", "a YAML list of CDI names"}},
		{"sample empty", map[string]string{"cdi-devices.noderesource.dev": "  "},
			[]string{"cdi-devices.noderesource.dev", "empty value"}},
		{"sample two documents", map[string]string{"cdi-devices.noderesource.dev": "[a.com/b=c]\n---\n[a.com/b=d]\n"},
			[]string{"single YAML document"}},
		{"device unknown field", map[string]string{"devices.nri-suite.io": "- {path: /dev/fuse, mode: rw}"},
			[]string{"devices.nri-suite.io", "field mode not found"}},
		{"device relative path", map[string]string{"devices.nri-suite.io": "- path: dev/fuse"},
			[]string{"device 1", `path "dev/fuse"`, "clean absolute path"}},
		{"device unclean path", map[string]string{"devices.nri-suite.io": "- path: /dev/../etc/shadow"},
			[]string{"clean absolute path"}},
		{"device bad type", map[string]string{"devices.noderesource.dev": "- {path: /dev/x, type: p}"},
			[]string{"devices.noderesource.dev", `type "p"`, "c (char) or b (block)"}},
		{"device major without minor", map[string]string{"devices.nri-suite.io": "- {path: /dev/x, major: 1}"},
			[]string{"major and minor together"}},
		{"device negative numbers", map[string]string{"devices.nri-suite.io": "- {path: /dev/x, major: -1, minor: 0}"},
			[]string{"expected numbers >= 0"}},
		{"device mode with file type bits", map[string]string{"devices.nri-suite.io": "- {path: /dev/x, file_mode: 0o20666}"},
			[]string{"file_mode", "permission bits only"}},
		{"device wrong shape", map[string]string{"devices.nri-suite.io": "path: /dev/x"},
			[]string{"a YAML list of devices"}},
		{"mount without source", map[string]string{"mounts.noderesource.dev": "- {destination: /x}"},
			[]string{"mounts.noderesource.dev", "mount 1", "empty source"}},
		{"mount relative destination", map[string]string{"mounts.nri.io/pod": "- {source: /a, destination: x}"},
			[]string{"mounts.nri.io/pod", `destination "x"`}},
		{"every bad annotation is reported", map[string]string{
			"cdi-devices.nri-suite.io": "bad",
			"devices.nri-suite.io":     "- path: rel",
		}, []string{"cdi-devices.nri-suite.io", "devices.nri-suite.io"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.annotations, "app")
			require.Error(t, err)
			var annErr *Error
			assert.True(t, errors.As(err, &annErr), "an *Error names the key: %v", err)
			for _, want := range tc.want {
				assert.Contains(t, err.Error(), want)
			}
		})
	}
}

// The fuzz targets check that no value makes a parser panic, and that what
// a parser accepts is what the rest of the plugin relies on.

func FuzzParseCDIList(f *testing.F) {
	for _, s := range []string{"", "a.com/gpu=0", " a.com/gpu=0 , b.org/x=y ", "a.com/gpu", ",", "a.com/gpu=0,", "a.com/gpu=a:b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		names, err := ParseCDIList(value)
		if err != nil {
			assert.Nil(t, names)
			return
		}
		for _, n := range names {
			assert.NoError(t, checkCDIName(n))
			assert.Equal(t, strings.TrimSpace(n), n)
		}
	})
}

func FuzzParseCDIYAML(f *testing.F) {
	for _, s := range []string{"[a.com/gpu=0]", "- a.com/gpu=0\n- a.com/gpu=1\n", "", "x: y", "[a.com/gpu]", "---\n---\n", "[[a]]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		names, err := ParseCDIYAML(value)
		if err != nil {
			return
		}
		for _, n := range names {
			assert.NoError(t, checkCDIName(n))
		}
	})
}

func FuzzParseDevices(f *testing.F) {
	for _, s := range []string{
		"- path: /dev/fuse\n", "- {path: /dev/null, type: c, major: 1, minor: 3, file_mode: 438, uid: 1, gid: 2}",
		"- {path: /dev/x, major: 1}", "- path: x", "[]", "{}", "- {path: /dev/x, major: -1, minor: -1}", "- {path: /dev/x, file_mode: 4294967295}",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		devs, err := ParseDevices(value)
		if err != nil {
			return
		}
		for _, d := range devs {
			assert.NoError(t, d.check())
			assert.True(t, strings.HasPrefix(d.Path, "/"))
			assert.Equal(t, d.Major == nil, d.Minor == nil)
		}
	})
}

func FuzzParseMounts(f *testing.F) {
	for _, s := range []string{"- {source: /a, destination: /b}", "- {source: /a, destination: b}", "- {destination: /b}", "[]", "x", "- {source: /a, destination: /b, options: [ro, rbind]}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		mounts, err := ParseMounts(value)
		if err != nil {
			return
		}
		for _, m := range mounts {
			assert.NotEmpty(t, m.Source)
			assert.True(t, strings.HasPrefix(m.Destination, "/"))
		}
	})
}

// FuzzParse feeds one value to every key at once, the standard one included.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"a.com/gpu=0", "[a.com/gpu=0]", "- path: /dev/null", "- {source: /a, destination: /b}", "", "a.com/gpu=0,bad"} {
		f.Add("app", s)
	}
	f.Fuzz(func(t *testing.T, container, value string) {
		r, err := Parse(map[string]string{
			KeyCDI + "/container." + container: value,
			"cdi.k8s.io/" + container:          value,
			KeySampleCDI:                       value,
			KeyDevices + "/pod":                value,
			KeySampleMounts:                    value,
		}, container)
		if err != nil {
			var annErr *Error
			assert.True(t, errors.As(err, &annErr), "errors name the annotation: %v", err)
			return
		}
		seen := map[string]bool{}
		for _, c := range r.CDI {
			assert.False(t, seen[c.Name], "%s twice", c.Name)
			seen[c.Name] = true
			assert.NoError(t, checkCDIName(c.Name))
		}
	})
}
