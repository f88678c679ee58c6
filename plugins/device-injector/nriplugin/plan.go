package nriplugin

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/containerd/nri/pkg/api"
	rspec "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/nri-suite/nri-suite/plugins/device-injector/config"
	"github.com/nri-suite/nri-suite/plugins/device-injector/internal/resolve"
)

// ErrConflict is wrapped by the errors for two things that cannot both be
// in the container.
var ErrConflict = errors.New("conflict")

// ErrUnsupported is wrapped by the error for a CDI device whose edits plugin
// mode cannot apply.
var ErrUnsupported = errors.New("not supported in plugin mode")

// plan gathers what one container gets, each item with the source that asked
// for it ("CDI device vendor.com/gpu=0", "annotation devices.nri-suite.io"),
// so that a conflict names both sides. Sources that agree are merged: CDI
// devices of one spec share its spec-level edits, and a runtime that already
// injected a standard cdi.k8s.io device must not make it a conflict. What the
// container already has identically is not added again.
type plan struct {
	ctr     *api.Container
	cdi     []string
	devices []item[rspec.LinuxDevice]
	mounts  []item[rspec.Mount]
	env     []item[string] // KEY=VALUE
	hooks   []item[resolve.Hook]
}

type item[T any] struct {
	v      T
	source source
}

// source is who asked for an item: a CDI device, whose items the runtime
// applies itself in runtime mode, or an annotation.
type source struct {
	name string
	cdi  bool
}

func (s source) String() string { return s.name }

func newPlan(ctr *api.Container) *plan { return &plan{ctr: ctr} }

// addCDI adds a resolved CDI device; in runtime mode only its name reaches
// the adjustment, but its edits are checked all the same, so that a conflict
// fails here and not silently in the runtime.
func (p *plan) addCDI(d resolve.Device, mode config.Mode) error {
	if mode == config.ModePlugin && len(d.Unsupported) > 0 {
		return fmt.Errorf("CDI device %s needs %s: %w (NRI cannot adjust them): use mode runtime on a runtime that applies CDI",
			d.Name, strings.Join(d.Unsupported, ", "), ErrUnsupported)
	}
	p.cdi = append(p.cdi, d.Name)
	source := source{name: "CDI device " + d.Name, cdi: true}
	var errs []error
	for _, n := range d.Nodes {
		errs = append(errs, p.addDevice(n, source))
	}
	for _, m := range d.Mounts {
		errs = append(errs, p.addMount(m, source))
	}
	for _, e := range d.Env {
		errs = append(errs, p.addEnv(e, source))
	}
	for _, h := range d.Hooks {
		p.addHook(h, source)
	}
	return errors.Join(errs...)
}

func (p *plan) addDevice(d rspec.LinuxDevice, source source) error {
	for _, have := range p.devices {
		if have.v.Path != d.Path {
			continue
		}
		if sameNode(have.v, d) {
			return nil
		}
		return fmt.Errorf("%w: device %s: %s gives %s, %s gives %s", ErrConflict, d.Path,
			have.source, describeNode(have.v), source, describeNode(d))
	}
	for _, have := range p.ctr.GetLinux().GetDevices() {
		if have.GetPath() != d.Path {
			continue
		}
		if have.GetType() == d.Type && have.GetMajor() == d.Major && have.GetMinor() == d.Minor {
			return nil
		}
		return fmt.Errorf("%w: device %s: %s gives %s, the container already has %s %d:%d", ErrConflict, d.Path,
			source, describeNode(d), have.GetType(), have.GetMajor(), have.GetMinor())
	}
	p.devices = append(p.devices, item[rspec.LinuxDevice]{d, source})
	return nil
}

func sameNode(a, b rspec.LinuxDevice) bool {
	return a.Type == b.Type && a.Major == b.Major && a.Minor == b.Minor
}

func describeNode(d rspec.LinuxDevice) string {
	return fmt.Sprintf("%s %d:%d", d.Type, d.Major, d.Minor)
}

func (p *plan) addMount(m rspec.Mount, source source) error {
	for _, have := range p.mounts {
		if have.v.Destination != m.Destination {
			continue
		}
		if sameMount(have.v, m) {
			return nil
		}
		return fmt.Errorf("%w: mount at %s: %s mounts %s, %s mounts %s", ErrConflict, m.Destination,
			have.source, have.v.Source, source, m.Source)
	}
	for _, have := range p.ctr.GetMounts() {
		if have.GetDestination() != m.Destination {
			continue
		}
		if sameMount(have.ToOCI(nil), m) {
			return nil
		}
		return fmt.Errorf("%w: mount at %s: %s mounts %s, but the container already mounts %s there", ErrConflict,
			m.Destination, source, m.Source, have.GetSource())
	}
	p.mounts = append(p.mounts, item[rspec.Mount]{m, source})
	return nil
}

func sameMount(a, b rspec.Mount) bool {
	return a.Source == b.Source && a.Type == b.Type && slices.Equal(a.Options, b.Options)
}

// addEnv adds KEY=VALUE. Two sources setting a key differently conflict; a
// value the container has is overridden, as a runtime applying CDI does.
func (p *plan) addEnv(kv string, source source) error {
	key, _, _ := strings.Cut(kv, "=")
	for _, have := range p.env {
		if k, _, _ := strings.Cut(have.v, "="); k != key {
			continue
		}
		if have.v == kv {
			return nil
		}
		return fmt.Errorf("%w: environment variable %s: %s sets %q, %s sets %q", ErrConflict, key,
			have.source, have.v, source, kv)
	}
	if slices.Contains(p.ctr.GetEnv(), kv) {
		return nil
	}
	p.env = append(p.env, item[string]{kv, source})
	return nil
}

// addHook adds a hook unless the same one is there already at that stage.
func (p *plan) addHook(h resolve.Hook, source source) {
	for _, have := range p.hooks {
		if have.v.Stage == h.Stage && reflect.DeepEqual(have.v.Hook, h.Hook) {
			return
		}
	}
	for _, have := range containerHooks(p.ctr.GetHooks(), h.Stage) {
		if reflect.DeepEqual(have.ToOCI(), h.Hook) {
			return
		}
	}
	p.hooks = append(p.hooks, item[resolve.Hook]{h, source})
}

// containerHooks returns the container's hooks of a CDI stage.
func containerHooks(h *api.Hooks, stage string) []*api.Hook {
	if h == nil {
		return nil
	}
	return *hookStage(h, stage)
}

// hookStage returns the NRI field of a CDI hook stage; resolve.Device only
// carries stages CDI knows, so every stage has one.
func hookStage(h *api.Hooks, stage string) *[]*api.Hook {
	switch stage {
	case "prestart":
		return &h.Prestart
	case "createRuntime":
		return &h.CreateRuntime
	case "createContainer":
		return &h.CreateContainer
	case "startContainer":
		return &h.StartContainer
	case "poststart":
		return &h.Poststart
	default:
		return &h.Poststop
	}
}

// adjustment renders the plan: in runtime mode the CDI devices go by name
// and only the plain device nodes and mounts as adjustments; in plugin mode
// everything goes as plain adjustments. nil when there is nothing to do.
func (p *plan) adjustment(mode config.Mode) *api.ContainerAdjustment {
	adjust := &api.ContainerAdjustment{}
	changed := false
	keep := func(s source) bool { return mode == config.ModePlugin || !s.cdi }
	if mode == config.ModeRuntime {
		for _, name := range p.cdi {
			adjust.AddCDIDevice(&api.CDIDevice{Name: name})
			changed = true
		}
	}
	for _, d := range p.devices {
		if keep(d.source) {
			adjust.AddDevice(api.FromOCILinuxDevices([]rspec.LinuxDevice{d.v})[0])
			changed = true
		}
	}
	for _, m := range p.mounts {
		if keep(m.source) {
			adjust.AddMount(api.FromOCIMounts([]rspec.Mount{m.v})[0])
			changed = true
		}
	}
	hooks := &api.Hooks{}
	for _, e := range p.env {
		if keep(e.source) {
			key, value, _ := strings.Cut(e.v, "=")
			adjust.AddEnv(key, value)
			changed = true
		}
	}
	for _, h := range p.hooks {
		if keep(h.source) {
			stage := hookStage(hooks, h.v.Stage)
			*stage = append(*stage, api.FromOCIHookSlice([]rspec.Hook{h.v.Hook})...)
		}
	}
	if hooks.Strip() != nil {
		adjust.AddHooks(hooks)
		changed = true
	}
	if !changed {
		return nil
	}
	return adjust
}
