// Package request reads what a container asks the device-injector for from
// its pod's annotations: CDI devices by name, host device nodes by path and
// host mounts, in the suite's own keys, the standard cdi.k8s.io keys and the
// keys of NRI's sample device injector. It only parses: policy, the host and
// the CDI specs are consulted elsewhere. Errors name the annotation key, the
// value and what was expected.
package request

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
	"tags.cncf.io/container-device-interface/pkg/cdi"
	"tags.cncf.io/container-device-interface/pkg/parser"

	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/common/quote"
)

// MaxValue is the size limit of the value of each key the device-injector
// reads: its values are lists, longer than k8s.MaxAnnotationValue allows for
// a pod that asks for many devices (a hundred CDI names, fifty device nodes).
const MaxValue = 16 << 10

// The annotation keys, as bare prefixes (see family for the forms).
const (
	// KeyCDI lists CDI names, comma-separated.
	KeyCDI = "cdi-devices.nri-suite.io"
	// KeyDevices lists host device nodes, a YAML list of Device.
	KeyDevices = "devices.nri-suite.io"
	// The keys of NRI's sample device injector, with its older prefixes.
	KeySampleCDI        = "cdi-devices.noderesource.dev"
	KeySampleCDIOld     = "cdi-devices.nri.io"
	KeySampleDevices    = "devices.noderesource.dev"
	KeySampleDevicesOld = "devices.nri.io"
	KeySampleMounts     = "mounts.noderesource.dev"
	KeySampleMountsOld  = "mounts.nri.io"
)

// CDI is a CDI device asked for, and the annotation that asked.
type CDI struct {
	Name string // fully qualified: vendor.com/class=name
	Key  string
}

// Device is a host device node asked for, in the sample injector's format.
// Type, Major and Minor are read from the host when absent.
type Device struct {
	Path     string  `yaml:"path"`
	Type     string  `yaml:"type"`
	Major    *int64  `yaml:"major"`
	Minor    *int64  `yaml:"minor"`
	FileMode *uint32 `yaml:"file_mode"`
	UID      *uint32 `yaml:"uid"`
	GID      *uint32 `yaml:"gid"`
	// Key is the annotation that asked for it.
	Key string `yaml:"-"`
}

// Mount is a host mount asked for, in the sample injector's format.
type Mount struct {
	Source      string   `yaml:"source"`
	Destination string   `yaml:"destination"`
	Type        string   `yaml:"type"`
	Options     []string `yaml:"options"`
	Key         string   `yaml:"-"`
}

// Request is everything one container asks for, in annotation order:
// suite keys first, then the standard keys (sorted), then the sample's.
// Each CDI name appears once.
type Request struct {
	CDI     []CDI
	Devices []Device
	Mounts  []Mount
}

// Empty reports whether the container asks for nothing.
func (r Request) Empty() bool {
	return len(r.CDI) == 0 && len(r.Devices) == 0 && len(r.Mounts) == 0
}

// family is one kind of key under one or more prefixes. At each level of
// the suite's precedence (container.<name>, pod, bare) the first prefix
// present wins, and the most specific level wins over all prefixes, as in
// the sample injector.
type family []string

// lookup returns the value and key of the strongest key of f present, or
// the error of the first prefix whose keys k8s.Annotations refuses.
func (f family) lookup(a k8s.Annotations) (value, key string, ok bool, err error) {
	best := -1
	for _, prefix := range f {
		v, k, found, err := a.Lookup(prefix)
		if err != nil {
			return "", "", true, err
		}
		if level := slices.Index(a.Keys(prefix), k); found && (best < 0 || level < best) {
			value, key, best = v, k, level
		}
	}
	return value, key, best >= 0, nil
}

// Parse reads the request of the container named container from its pod's
// annotations.
func Parse(pod map[string]string, container string) (Request, error) {
	var r Request
	var errs []error
	a := k8s.NewAnnotations(pod, container).WithMaxValue(MaxValue)
	lookup := func(f family) (string, string, bool) {
		v, key, ok, err := f.lookup(a)
		errs = append(errs, err)
		return v, key, ok && err == nil
	}
	add := func(names []string, key string) {
		for _, n := range names {
			if !slices.ContainsFunc(r.CDI, func(c CDI) bool { return c.Name == n }) {
				r.CDI = append(r.CDI, CDI{Name: n, Key: key})
			}
		}
	}

	if v, key, ok := lookup(family{KeyCDI}); ok {
		names, err := ParseCDIList(v)
		errs = appendErr(errs, key, v, err)
		add(names, key)
	}
	standard, err := standardCDI(pod, container)
	errs = append(errs, err)
	for _, s := range standard {
		add(s.names, s.key)
	}
	if v, key, ok := lookup(family{KeySampleCDI, KeySampleCDIOld}); ok {
		names, err := ParseCDIYAML(v)
		errs = appendErr(errs, key, v, err)
		add(names, key)
	}
	for _, f := range []family{{KeyDevices}, {KeySampleDevices, KeySampleDevicesOld}} {
		if v, key, ok := lookup(f); ok {
			devs, err := ParseDevices(v)
			errs = appendErr(errs, key, v, err)
			for _, d := range devs {
				d.Key = key
				r.Devices = append(r.Devices, d)
			}
		}
	}
	if v, key, ok := lookup(family{KeySampleMounts, KeySampleMountsOld}); ok {
		mounts, err := ParseMounts(v)
		errs = appendErr(errs, key, v, err)
		for _, m := range mounts {
			m.Key = key
			r.Mounts = append(r.Mounts, m)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Request{}, err
	}
	return r, nil
}

// Error is a present annotation whose value could not be used.
type Error struct {
	Key   string // the key that matched
	Value string // as written
	Err   error  // what was wrong and what was expected
}

// Error quotes key and value at a bounded length (package quote).
func (e *Error) Error() string {
	return fmt.Sprintf("annotation %s=%s: %v", quote.Bare(e.Key), quote.Value(e.Value), e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

func appendErr(errs []error, key, value string, err error) []error {
	if err == nil {
		return errs
	}
	return append(errs, &Error{Key: key, Value: value, Err: err})
}

type standardRequest struct {
	key   string
	names []string
}

// standardCDI reads the pod's cdi.k8s.io/<key> annotations (CDI's own
// format: comma-separated qualified names). They are not ordered by
// precedence but joined: each key is one allocation, as the kubelet writes
// them. cdi.k8s.io/container.<name> is for that container only; every other
// key is for every container of the pod.
func standardCDI(pod map[string]string, container string) ([]standardRequest, error) {
	var out []standardRequest
	var errs []error
	for key, value := range pod {
		if !strings.HasPrefix(key, cdi.AnnotationPrefix) || !k8s.AnnotationFor(key, container) {
			continue
		}
		if err := k8s.CheckSize(key, value, MaxValue); err != nil {
			errs = append(errs, err)
			continue
		}
		_, names, err := cdi.ParseAnnotations(map[string]string{key: value})
		if err != nil {
			errs = append(errs, &Error{Key: key, Value: value,
				Err: fmt.Errorf("expected comma-separated CDI names such as vendor.com/gpu=0: %w", quote.Error(err))})
			continue
		}
		out = append(out, standardRequest{key: key, names: names})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out, errors.Join(errs...)
}

// ParseCDIList parses the suite's comma-separated CDI names; spaces around
// names are ignored and an empty value asks for none (to clear a pod-level
// key for one container).
func ParseCDIList(value string) ([]string, error) {
	value = strings.TrimSpace(value)
	if value == "" {
		return nil, nil
	}
	var names []string
	for _, n := range strings.Split(value, ",") {
		n = strings.TrimSpace(n)
		if err := checkCDIName(n); err != nil {
			return nil, err
		}
		names = append(names, n)
	}
	return names, nil
}

// ParseCDIYAML parses the sample injector's YAML list of CDI names.
func ParseCDIYAML(value string) ([]string, error) {
	var names []string
	if err := decodeYAML(value, &names, "a YAML list of CDI names such as [vendor.com/gpu=0]"); err != nil {
		return nil, err
	}
	for _, n := range names {
		if err := checkCDIName(n); err != nil {
			return nil, err
		}
	}
	return names, nil
}

func checkCDIName(n string) error {
	if _, _, _, err := parser.ParseQualifiedName(n); err != nil {
		return fmt.Errorf("CDI name %s: expected vendor.com/class=name: %w", quote.Value(n), quote.Error(err))
	}
	return nil
}

// ParseDevices parses a YAML list of device nodes. Only the path is
// required; a type given must be c or b, and major and minor come together.
func ParseDevices(value string) ([]Device, error) {
	var devs []Device
	if err := decodeYAML(value, &devs, "a YAML list of devices such as [{path: /dev/fuse}]"); err != nil {
		return nil, err
	}
	for i, d := range devs {
		if err := d.check(); err != nil {
			return nil, fmt.Errorf("device %d: %w", i+1, err)
		}
	}
	return devs, nil
}

func (d Device) check() error {
	if err := checkPath("path", d.Path, "/dev/fuse"); err != nil {
		return err
	}
	if d.Type != "" && d.Type != "c" && d.Type != "b" {
		return fmt.Errorf("%s: type %s: expected c (char) or b (block)", quote.Bare(d.Path), quote.Value(d.Type))
	}
	if (d.Major == nil) != (d.Minor == nil) {
		return fmt.Errorf("%s: expected major and minor together, or neither", quote.Bare(d.Path))
	}
	if d.Major != nil && (*d.Major < 0 || *d.Minor < 0) {
		return fmt.Errorf("%s: major %d, minor %d: expected numbers >= 0", quote.Bare(d.Path), *d.Major, *d.Minor)
	}
	if d.FileMode != nil && *d.FileMode&^0o777 != 0 {
		return fmt.Errorf("%s: file_mode %#o: expected permission bits only (at most 0o777)", quote.Bare(d.Path), *d.FileMode)
	}
	return nil
}

// ParseMounts parses a YAML list of mounts: bind mounts of a clean absolute
// host path at a clean absolute path in the container (see Mount.check).
func ParseMounts(value string) ([]Mount, error) {
	var mounts []Mount
	if err := decodeYAML(value, &mounts, "a YAML list of mounts such as [{source: /opt/x, destination: /x, type: bind, options: [rbind, ro]}]"); err != nil {
		return nil, err
	}
	for i, m := range mounts {
		if err := m.check(); err != nil {
			return nil, fmt.Errorf("mount %d: %w", i+1, err)
		}
	}
	return mounts, nil
}

// runtimeDirs are what the runtime mounts in every container itself; a mount
// over or inside them would hide its masks and read-only files, or redirect
// what the runtime writes there while it sets the container up.
var runtimeDirs = []string{"/proc", "/sys", "/dev"}

// check refuses what the policy's host path patterns could not vouch for: a
// source that is not a clean absolute path (`..` would climb out of what a
// pattern allows), a mount of another type than bind (its source is not a
// host path, and its options can name others: overlay's lowerdir=/), and a
// destination that is not a clean absolute path, is the container's root or
// lies in runtimeDirs. Device nodes belong in the device annotations.
func (m Mount) check() error {
	if err := checkPath("source", m.Source, "/opt/models"); err != nil {
		return err
	}
	if err := checkPath("destination", m.Destination, "/models"); err != nil {
		return err
	}
	if m.Destination == "/" || slices.ContainsFunc(runtimeDirs, func(dir string) bool {
		return m.Destination == dir || strings.HasPrefix(m.Destination, dir+"/")
	}) {
		return fmt.Errorf("destination %s: expected a path outside / itself and %s, which the runtime sets up",
			quote.Bare(m.Destination), strings.Join(runtimeDirs, ", "))
	}
	bind := m.Type == "bind" || m.Type == "" && (slices.Contains(m.Options, "bind") || slices.Contains(m.Options, "rbind"))
	if !bind {
		return fmt.Errorf("type %s with options %s: expected a bind mount (type bind, or options with bind or rbind) of a host path",
			quote.Value(m.Type), quote.Bare(fmt.Sprint(m.Options)))
	}
	return nil
}

// checkPath refuses a path that is relative or not clean (`..`, `.`, `//`,
// a trailing `/`); what names the field, example is one that would do.
func checkPath(what, p, example string) error {
	if !filepath.IsAbs(p) || filepath.Clean(p) != p {
		return fmt.Errorf("%s %s: expected a clean absolute path such as %s", what, quote.Value(p), example)
	}
	return nil
}

// decodeYAML decodes a single YAML document strictly: unknown fields are
// errors. want says what was expected.
func decodeYAML(value string, out any, want string) error {
	dec := yaml.NewDecoder(strings.NewReader(value))
	dec.KnownFields(true)
	if err := dec.Decode(out); err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("empty value: expected %s", want)
		}
		return fmt.Errorf("expected %s: %w", want, quote.Error(err))
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return fmt.Errorf("expected a single YAML document holding %s", want)
	}
	return nil
}
