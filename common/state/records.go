package state

import (
	"fmt"
	"time"
)

// The record types plugins exchange through the shared state directory. Each
// has a kind (its subdirectory), a schema version to bump on incompatible
// changes, and a constructor binding its Records.

const (
	// PluginStatusKind is the kind of PluginStatus records.
	PluginStatusKind = "plugins"
	// PluginStatusVersion is the schema version of PluginStatus. Version 1
	// had no Started.
	PluginStatusVersion = 2
)

// PluginStatus is how a plugin's runner tells the others (the stats plugin
// first) that it is alive and attached to the runtime.
type PluginStatus struct {
	Name  string `json:"name"`
	Index int    `json:"index"` // NRI index: the plugin's place in the order
	PID   int    `json:"pid"`   // in the publisher's PID namespace
	// Started is when the publishing process started: with PID it tells
	// the process from another that got the same PID later, and tells the
	// newer of two processes of the plugin, whose record the older one
	// must not overwrite.
	Started ProcessStart `json:"started,omitzero"`
	// Version is the plugin's build version.
	Version string `json:"version"`
	// Connected: registered with the runtime.
	Connected bool `json:"connected"`
	// Ready: registered and synchronized, as /readyz reports.
	Ready bool `json:"ready"`
	// LastSynchronize is when the runtime last sent Synchronize (zero: never).
	LastSynchronize time.Time `json:"lastSynchronize,omitzero"`
	// Updated is when the record was published, so that readers can tell a
	// status left behind by a plugin that was killed.
	Updated time.Time `json:"updated"`
}

// ProcessStart is when a process started: the id of the boot
// (/proc/sys/kernel/random/boot_id) and the clock ticks since it (field 22
// of /proc/<pid>/stat). Both are the host kernel's, the same in every PID
// namespace. The zero value is unknown.
type ProcessStart struct {
	BootID string `json:"bootID"`
	Ticks  uint64 `json:"ticks"`
}

// After reports whether s started after other on the same boot; false when
// either is unknown.
func (s ProcessStart) After(other ProcessStart) bool {
	return s.BootID != "" && s.BootID == other.BootID && other.Ticks > 0 && s.Ticks > other.Ticks
}

// Key is the record's key: the NRI plugin id "<idx>-<name>", e.g.
// "30-topology-aware", unique among the plugins of a runtime.
func (s PluginStatus) Key() string { return fmt.Sprintf("%02d-%s", s.Index, s.Name) }

// PluginStatuses binds the PluginStatus records under root (usually
// DefaultDir).
func PluginStatuses(root string) (*Records[PluginStatus], error) {
	return NewRecords[PluginStatus](root, PluginStatusKind, PluginStatusVersion)
}
