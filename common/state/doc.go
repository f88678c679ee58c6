// Package state keeps what the nri-suite plugins must not forget and what they
// tell each other.
//
// Two things live here:
//
//   - Checkpoint[T]: one plugin's durable memory (for example topology-aware's
//     placements), a single JSON file that survives plugin and runtime restarts.
//   - Records[T]: the node-local shared state directory (DefaultDir,
//     /run/nri-suite) where one plugin publishes small typed records and any
//     plugin reads them at any time, one file per record:
//     <dir>/<kind>/<key>.json.
//
// Both write through the same routine: a temp file in the target's directory,
// fsync, rename over the target, fsync the directory. A reader or a crash
// therefore sees either the old or the new file, never a torn one. Writers in
// one directory serialize on a lock file (flock), which also makes it safe to
// delete the temp file a killed writer left behind. A writer waits at most
// LockWait (500ms, well inside NRI's 2 s request timeout) for the lock, then
// fails with ErrLockHeld naming the lock file and the process holding it;
// after that, writes to the same directory fail at once until the lock is
// free, so that a request writing many records waits only once.
//
// Files are read only if they are regular files (opened without blocking, so
// that a FIFO put in their place cannot hang a reader, and without following
// links), of at most MaxRecordSize (4 MiB) for a record and MaxCheckpointSize
// (16 MiB) for a checkpoint; writers refuse to write more. Anything else is
// a *CorruptError with ErrUnreadable.
//
// Every file is an envelope carrying a format number, the caller's schema
// version and a sha256 checksum of the payload, so a truncated, hand-edited or
// outdated file is detected instead of being half-decoded. Payloads are decoded
// strictly: an unknown field means the schema changed without a version bump.
//
// A bad checkpoint is moved aside to <name>.corrupt-<UTC timestamp> for
// inspection and reported as a *CorruptError (errors.Is(err, ErrCorrupt)); the
// caller logs it and starts empty. A bad shared record is reported the same
// way but left in place: readers may have a read-only view of the directory,
// and the record's publisher replaces it on its next Publish.
//
// Nothing here removes a file it did not write: Records.Remove and
// Checkpoint.Remove delete a file only if it is a regular file holding an
// envelope (of any version), and report anything else in its place as
// ErrNotOwned, leaving it. The names of temp files (.<name>.tmp) and of the
// lock file (.state.lock) are reserved for this package.
//
// Permissions: checkpoints are private to their plugin (files 0600, new
// directories 0700); shared records are read by every plugin, possibly under
// other users or in other containers (files 0644, new directories 0755).
//
// Records.PublishIf and RemoveIf decide and write under the writers' lock:
// the runner publishes its PluginStatus only over a record of a process of
// the plugin that started no later than itself (ProcessStart), so that an
// old process stopping beside its successor cannot overwrite it.
//
// Record kinds, each defined here so that no plugin imports another:
// "plugins" (PluginStatus, published by every runner, read by the stats
// plugin), "devices" (ContainerDevices: device-injector's devices and their
// locality per container, read by topology-aware and stats), "placements"
// and "pools" (PlacementRecord and PoolRecord: topology-aware's CPUs and
// NUMA nodes per container and its shared pool), "device-health" and
// "container-health" (DeviceHealthSet and ContainerHealth: device-injector's
// health per device and per container, as KEP-4680's allocatedResourcesStatus).
// Kind planned by later work: "readiness" (sidecar-order's sidecar
// readiness, keyed by pod UID).
package state
