package request

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/common/quote"
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

// TestParseBindMounts: the forms of a bind mount, and destinations that only
// begin like the runtime's directories.
func TestParseBindMounts(t *testing.T) {
	mounts, err := ParseMounts(`
- {source: /opt/a, destination: /a, type: bind}
- {source: /opt/b, destination: /procfs, options: [rbind, ro]}
- {source: /opt/c, destination: /devices/x, options: [bind]}
- {source: /, destination: /system, type: bind}
`)
	require.NoError(t, err)
	assert.Len(t, mounts, 4)
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
			[]string{"mounts.noderesource.dev", "mount 1", `source ""`, "clean absolute path such as /opt/models"}},
		{"mount relative source", map[string]string{"mounts.noderesource.dev": "- {source: opt/x, destination: /x, type: bind}"},
			[]string{`source "opt/x"`, "clean absolute path"}},
		{"mount source climbing out", map[string]string{"mounts.noderesource.dev": "- {source: /opt/.., destination: /x, type: bind}"},
			[]string{`source "/opt/.."`, "clean absolute path"}},
		{"mount source through . and ..", map[string]string{"mounts.noderesource.dev": "- {source: /opt/./../etc, destination: /x, type: bind}"},
			[]string{`source "/opt/./../etc"`}},
		{"mount relative destination", map[string]string{"mounts.nri.io/pod": "- {source: /a, destination: x, type: bind}"},
			[]string{"mounts.nri.io/pod", `destination "x"`}},
		{"mount destination climbing out", map[string]string{"mounts.noderesource.dev": "- {source: /a, destination: /x/../proc, type: bind}"},
			[]string{`destination "/x/../proc"`, "clean absolute path"}},
		{"mount over the root", map[string]string{"mounts.noderesource.dev": "- {source: /a, destination: /, type: bind}"},
			[]string{"destination /:", "outside / itself and /proc, /sys, /dev"}},
		{"mount in /proc", map[string]string{"mounts.noderesource.dev": "- {source: /a, destination: /proc/sys/kernel, type: bind}"},
			[]string{"destination /proc/sys/kernel"}},
		{"mount at /dev", map[string]string{"mounts.noderesource.dev": "- {source: /a, destination: /dev, type: bind}"},
			[]string{"destination /dev:"}},
		{"mount in /sys", map[string]string{"mounts.noderesource.dev": "- {source: /a, destination: /sys/fs/cgroup, type: bind}"},
			[]string{"destination /sys/fs/cgroup"}},
		{"second mount bad", map[string]string{"mounts.noderesource.dev": "- {source: /a, destination: /a, type: bind}\n- {source: /b, destination: /dev/b, type: bind}"},
			[]string{"mount 2", "destination /dev/b"}},
		{"overlay mount", map[string]string{"mounts.noderesource.dev": "- {source: /a, destination: /x, type: overlay, options: [lowerdir=/]}"},
			[]string{`type "overlay"`, "[lowerdir=/]", "expected a bind mount"}},
		{"no type and no bind option", map[string]string{"mounts.noderesource.dev": "- {source: /a, destination: /x, options: [ro]}"},
			[]string{`type ""`, "expected a bind mount"}},
		{"tmpfs", map[string]string{"mounts.noderesource.dev": "- {source: /a, destination: /x, type: tmpfs}"},
			[]string{`type "tmpfs"`}},
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

// Values the parsers accept but that are long come back quoted at a bounded
// length, even where the CDI and YAML libraries quote them whole.
func TestParseErrorsAreBounded(t *testing.T) {
	longName := "a.com/gpu=" + strings.Repeat("x!", 5000) // within MaxValue, not a CDI name
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		want        []string
	}{
		{"suite CDI name", map[string]string{KeyCDI: longName}, []string{`CDI name "a.com/gpu=x!x!`, "…(10010 bytes)"}},
		{"sample CDI name", map[string]string{KeySampleCDI: "[" + longName + "]"}, []string{`CDI name "a.com/gpu=x!x!`}},
		{"standard CDI name", map[string]string{"cdi.k8s.io/x": longName}, []string{"comma-separated CDI names", "bytes)"}},
		{"device path", map[string]string{KeyDevices: "- path: /" + strings.Repeat("d/", 5000) + "..\n"}, []string{`path "/d/d/`}},
		{"device unknown field", map[string]string{KeyDevices: "- path: /dev/x\n  ? " + strings.Repeat("k", 10000) + "\n  : 1\n"},
			[]string{"field kkkk", "bytes)"}},
		{"mount options", map[string]string{KeySampleMounts: "- {source: /a, destination: /x, options: [" + strings.Repeat("ro,", 3000) + "ro]}"},
			[]string{"with options [ro ro", "expected a bind mount"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.annotations, "app")
			var annErr *Error
			require.ErrorAs(t, err, &annErr)
			for _, want := range tc.want {
				assert.Contains(t, err.Error(), want)
			}
			assert.Less(t, len(err.Error()), 2*quote.MaxError, "the error quotes bounded prefixes")
		})
	}
}

// What k8s.Annotations refuses, the device-injector refuses: a key in none of
// the suite's forms, under each prefix it reads, and a value above MaxValue,
// the standard key's included.
func TestParseRefusesUnknownKeysAndLongValues(t *testing.T) {
	huge := strings.Repeat("a.com/gpu=0,", 1<<16)
	within := strings.Repeat("a.com/gpu=0,", (MaxValue-len("a.com/gpu=0"))/12) + "a.com/gpu=0"
	_, err := Parse(map[string]string{KeyCDI: within, "cdi.k8s.io/x": within}, "app")
	require.NoError(t, err, "values up to MaxValue are read")
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		key, want   string
	}{
		{"suite unknown suffix", map[string]string{KeyCDI + "/bogus": "a.com/gpu=0"}, KeyCDI + "/bogus", "want a key of the form cdi-devices.nri-suite.io,"},
		{"devices unknown suffix", map[string]string{KeyDevices + "/containers.app": "- path: /dev/fuse"}, KeyDevices + "/containers.app", "want a key of the form devices.nri-suite.io,"},
		{"sample unknown suffix", map[string]string{KeySampleMounts + "/pod/app": "[]"}, KeySampleMounts + "/pod/app", "want a key of the form mounts.noderesource.dev,"},
		{"old sample unknown suffix", map[string]string{KeySampleDevicesOld + "/": "[]", KeySampleDevices: "[]"}, KeySampleDevicesOld + "/", "want a key of the form devices.nri.io,"},
		{"suite value above the limit", map[string]string{KeyCDI + "/container.app": huge}, KeyCDI + "/container.app", "want a value of at most 16384 bytes"},
		{"standard value above the limit", map[string]string{"cdi.k8s.io/x": huge}, "cdi.k8s.io/x", "want a value of at most 16384 bytes"},
		{"sample value above the limit", map[string]string{KeySampleCDIOld + "/pod": strings.Repeat("x", MaxValue+1)}, KeySampleCDIOld + "/pod", "want a value of at most 16384 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.annotations, "app")
			var annErr *k8s.AnnotationError
			require.ErrorAs(t, err, &annErr)
			assert.Equal(t, tc.key, annErr.Key)
			assert.Contains(t, err.Error(), "annotation "+tc.key+"=")
			assert.Contains(t, err.Error(), tc.want)
			assert.Less(t, len(err.Error()), 2*quote.MaxError, "the error quotes a bounded prefix")
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
	for _, s := range []string{"- {source: /a, destination: /b}", "- {source: /a, destination: b}", "- {destination: /b}", "[]", "x", "- {source: /a, destination: /b, options: [ro, rbind]}",
		"- {source: /opt/.., destination: /b, type: bind}", "- {source: /opt/./../etc, destination: /b, type: bind}", "- {source: opt, destination: /b, type: bind}",
		"- {source: /a, destination: /, type: bind}", "- {source: /a, destination: /proc/sys, type: bind}", "- {source: /a, destination: /b/../dev, type: bind}",
		"- {source: /a, destination: /devx, type: bind}", "- {source: /a, destination: /b, type: overlay, options: [lowerdir=/]}", "- {source: /a, destination: /b, type: sysfs}",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		mounts, err := ParseMounts(value)
		if err != nil {
			return
		}
		for _, m := range mounts {
			for _, p := range []string{m.Source, m.Destination} {
				assert.True(t, filepath.IsAbs(p) && filepath.Clean(p) == p, "clean absolute: %q", p)
			}
			assert.NotEqual(t, "/", m.Destination)
			for _, dir := range []string{"/proc", "/sys", "/dev"} {
				assert.False(t, m.Destination == dir || strings.HasPrefix(m.Destination, dir+"/"), "destination %s", m.Destination)
			}
			assert.Contains(t, []string{"", "bind"}, m.Type)
		}
	})
}

// FuzzParse feeds one value to every key at once, the standard one included.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"a.com/gpu=0", "[a.com/gpu=0]", "- path: /dev/null", "- {source: /a, destination: /b}", "", "a.com/gpu=0,bad",
		"a.com/gpu=" + strings.Repeat("x", 1<<15), "[a.com/gpu=" + strings.Repeat("é", MaxValue/4) + "]"} {
		f.Add("app", s)
	}
	f.Add("App_1", "a.com/gpu=0") // a container name no container has
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
			var k8sErr *k8s.AnnotationError
			assert.True(t, errors.As(err, &annErr) || errors.As(err, &k8sErr), "errors name the annotation: %v", err)
			// At most one error a key, each quoting bounded prefixes.
			assert.Less(t, len(err.Error()), 5*2*quote.MaxError, "errors are bounded")
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
