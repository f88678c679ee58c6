package classes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/containerd/nri/pkg/api"
	"github.com/intel/goresctrl/pkg/blockio"
	"github.com/intel/goresctrl/pkg/rdt"
	rspec "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/sirupsen/logrus"

	"github.com/nri-suite/nri-suite/common/quote"
)

// ResctrlGroupPrefix starts the names of the resctrl groups of the RDT
// classes: goresctrl creates, configures and removes (when empty) only
// groups of this prefix, leaving the runtimes' and other tools' alone. A
// container's RDT class in its adjustment is its group's name, which both
// runtimes take as the CLOS id.
const ResctrlGroupPrefix = "nri-suite."

// goresctrlMu serializes the calls into goresctrl, whose blockio and rdt
// packages keep their state in package variables.
var goresctrlMu sync.Mutex

// NodeOptions say what of the node a Node touches.
type NodeOptions struct {
	// RDT detects RDT (resctrl) and applies the RDT classes to it. Off, RDT
	// counts as unavailable: a simulation or a test must not reconfigure
	// the host's resctrl.
	RDT bool
	// BlockDevices resolves the block I/O classes' device patterns against
	// the node's block devices, and checks their values with goresctrl.
	BlockDevices bool
}

// Node applies the classes on the node with goresctrl.
type Node struct {
	opts NodeOptions
	log  *logrus.Entry
	// rdtErr says why RDT is unavailable; nil: available.
	rdtErr error
	// monitoring: resctrl monitoring (CMT, MBM) is available, so that a
	// container in a class gets its own monitoring group.
	monitoring bool
	// blockIO are the block I/O classes applied last, which a refused
	// configuration leaves in place.
	blockIO *blockio.Config
}

// NewNode detects RDT if opts.RDT says so, and logs once whether it is
// available.
func NewNode(log *logrus.Entry, opts NodeOptions) *Node {
	n := &Node{opts: opts, log: log, rdtErr: errors.New("not looked for (not on a node)")}
	if !opts.RDT {
		return n
	}
	goresctrlMu.Lock()
	defer goresctrlMu.Unlock()
	rdt.SetLogger(slog.New(&goresctrlLog{entry: log}))
	n.rdtErr = rdt.Initialize(ResctrlGroupPrefix)
	if n.rdtErr != nil {
		log.WithError(n.rdtErr).Info("RDT is unavailable on this node: RDT classes are chosen but not sent to the runtime")
		return n
	}
	n.monitoring = rdt.MonSupported()
	log.WithField("monitoring", n.monitoring).Info("RDT is available: RDT classes are resctrl groups " + ResctrlGroupPrefix + "<class>")
	return n
}

// RDTAvailable reports whether RDT classes are applied and sent.
func (n *Node) RDTAvailable() bool { return n.rdtErr == nil }

// Apply makes cfg's classes those of the node: the block I/O classes'
// devices resolved on the node (a pattern that matches no block device is
// an error naming the class and the pattern), the RDT classes configured as
// resctrl groups where RDT is available. An error leaves the block I/O
// classes as they were; goresctrl may have applied part of an RDT
// configuration it then refused.
func (n *Node) Apply(cfg Config) error {
	goresctrlMu.Lock()
	defer goresctrlMu.Unlock()
	if n.opts.BlockDevices {
		if err := n.applyBlockIO(cfg.blockio); err != nil {
			return err
		}
	}
	if n.rdtErr == nil {
		c := cfg.rdt
		if c == nil {
			c = &rdt.Config{}
		}
		if err := rdt.SetConfig(c, false); err != nil {
			return fmt.Errorf("rdt: applying the classes to resctrl: %w", err)
		}
	}
	return nil
}

// applyBlockIO checks each class on its own, so that an error names it,
// then sets them all, and logs what each resolved to on this node. On an
// error it sets the classes applied before again.
func (n *Node) applyBlockIO(c *blockio.Config) (err error) {
	if c == nil {
		c = &blockio.Config{}
	}
	defer func() {
		blockio.SetLogger(slog.New(&goresctrlLog{entry: n.log}))
		if err != nil {
			// They applied before: only a device gone since can fail
			// them, and force keeps the rest.
			_ = blockio.SetConfig(n.blockIO, true)
			return
		}
		n.blockIO = c
	}()
	for _, name := range slices.Sorted(maps.Keys(c.Classes)) {
		var warnings []slog.Record
		blockio.SetLogger(slog.New(&goresctrlLog{entry: n.log.WithField("class", name), capture: &warnings}))
		err := blockio.SetConfig(&blockio.Config{Classes: map[string][]blockio.DevicesParameters{name: c.Classes[name]}}, false)
		if err != nil {
			return fmt.Errorf("blockio: class %s: %s", quote.Value(name), oneLine(err.Error()))
		}
		if unresolved := unresolvedDevices(warnings); unresolved != "" {
			return fmt.Errorf("blockio: class %s: %s: expected patterns that match block devices of this node", quote.Value(name), unresolved)
		}
	}
	blockio.SetLogger(slog.New(&goresctrlLog{entry: n.log}))
	if err := blockio.SetConfig(c, false); err != nil {
		return fmt.Errorf("blockio: %s", oneLine(err.Error()))
	}
	for _, name := range slices.Sorted(maps.Keys(c.Classes)) {
		resolved, err := blockio.OciLinuxBlockIO(name)
		if err != nil {
			return fmt.Errorf("blockio: class %s: %w", quote.Value(name), err)
		}
		text, _ := json.Marshal(resolved)
		n.log.WithFields(logrus.Fields{"class": name, "blockio": string(text)}).Info("block I/O class resolved on this node")
	}
	return nil
}

// ResolvedBlockIO is what the block I/O class resolves to on this node
// (the spec's linux.resources.blockIO when a runtime resolves it with the
// same configuration): weights and throttles by device number. Only with
// NodeOptions.BlockDevices.
func (n *Node) ResolvedBlockIO(class string) (*rspec.LinuxBlockIO, error) {
	goresctrlMu.Lock()
	defer goresctrlMu.Unlock()
	return blockio.OciLinuxBlockIO(class)
}

// unresolvedDevices is what goresctrl reported of device patterns it could
// not resolve, or "".
func unresolvedDevices(warnings []slog.Record) string {
	var problems []string
	for _, r := range warnings {
		switch r.Message {
		case "failed to resolve block devices":
			r.Attrs(func(a slog.Attr) bool {
				if a.Key == "error" {
					problems = append(problems, oneLine(a.Value.String()))
				}
				return true
			})
		case "no match, parameters ignored":
			if len(problems) == 0 {
				r.Attrs(func(a slog.Attr) bool {
					if a.Key == "devices" {
						problems = append(problems, fmt.Sprintf("devices %v match no block device", a.Value.Any()))
					}
					return true
				})
			}
		}
	}
	return strings.Join(problems, "; ")
}

// oneLine joins the lines of errors.Join's message.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
}

// Adjust sets the classes of a in the adjustment and returns those it set.
// The RDT class is set only where RDT is available (runc fails a container
// whose class the node cannot have), and never the root class, which is no
// group of its own: a container in it is recorded with it, unadjusted.
// Where resctrl monitoring exists, a container in an RDT class also gets
// its own monitoring group (mon_groups/<container id> in the class's group,
// for container_llc_occupancy_bytes and container_memory_bandwidth_bytes).
func (n *Node) Adjust(adjust *api.ContainerAdjustment, a Assignment) (set Assignment, rdtRefused bool) {
	set.BlockIO = a.BlockIO
	if a.BlockIO != "" {
		adjust.SetLinuxBlockIOClass(a.BlockIO)
	}
	switch {
	case a.RDT == "":
	case !n.RDTAvailable():
		rdtRefused = true
	case a.RDT == RootRDTClass:
		set.RDT = a.RDT
	default:
		set.RDT = a.RDT
		adjust.SetLinuxRDTClass(ResctrlGroupPrefix + a.RDT)
		if n.monitoring {
			adjust.SetLinuxRDTEnableMonitoring(true)
		}
	}
	return set, rdtRefused
}

// goresctrlLog sends goresctrl's log/slog records to logrus: its info
// (each configuration step) at debug, warnings and errors as they are. With
// capture set, warnings and errors are kept there instead, for the caller
// to judge.
type goresctrlLog struct {
	entry   *logrus.Entry
	attrs   []slog.Attr
	capture *[]slog.Record
}

func (h *goresctrlLog) Enabled(_ context.Context, level slog.Level) bool {
	return level >= slog.LevelWarn || h.entry.Logger.IsLevelEnabled(logrus.DebugLevel)
}

func (h *goresctrlLog) Handle(_ context.Context, r slog.Record) error {
	if h.capture != nil && r.Level >= slog.LevelWarn {
		r = r.Clone()
		r.AddAttrs(h.attrs...)
		*h.capture = append(*h.capture, r)
		return nil
	}
	fields := logrus.Fields{"component": "goresctrl"}
	add := func(a slog.Attr) bool { fields[a.Key] = a.Value.String(); return true }
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(add)
	entry := h.entry.WithFields(fields)
	switch {
	case r.Level >= slog.LevelError:
		entry.Error(r.Message)
	case r.Level >= slog.LevelWarn:
		entry.Warn(r.Message)
	default:
		entry.Debug(r.Message)
	}
	return nil
}

func (h *goresctrlLog) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(slices.Clip(h.attrs), attrs...)
	return &c
}

// WithGroup is not used by goresctrl; a group's attributes join the others.
func (h *goresctrlLog) WithGroup(string) slog.Handler { return h }
