package state

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nri-suite/nri-suite/internal/golden"
)

// TestGoldenRecords pins every shared record's file, as this version writes
// it, to testdata/golden/<kind>-v<version>.json: a change of a field's name,
// type or encoding that did not bump the kind's version fails here, before
// another plugin (or a plugin's older self, beside it during a roll) misreads it.
func TestGoldenRecords(t *testing.T) {
	since := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	checkGolden(t, PluginStatusKind, PluginStatusVersion, PluginStatus{
		Name: "topology-aware", Index: 30, PID: 4242, Started: ProcessStart{BootID: "3f0c2a", Ticks: 1234},
		Version: "v0.1.0", Connected: true, Ready: true, LastSynchronize: since, Updated: since.Add(time.Second),
	})
	checkGolden(t, ContainerDevicesKind, ContainerDevicesVersion, ContainerDevices{
		ContainerID: "c1", PodUID: "u1", Namespace: "default", Pod: "web", Container: "app",
		Devices: []InjectedDevice{{Name: "vendor.com/gpu=0", Kind: DeviceKindCDI, Path: "/dev/gpu0", Type: "c",
			Major: 195, Minor: 1, NUMANode: 1, LocalCPUs: "4-7"}},
	})
	checkGolden(t, DeviceHealthKind, DeviceHealthVersion, DeviceHealthSet{
		Devices: map[string]DeviceHealth{"vendor.com/gpu=0": {Health: HealthUnhealthy, Message: "check ecc failed", Since: since}},
	})
	checkGolden(t, ContainerHealthKind, ContainerHealthVersion, ContainerHealth{
		ContainerID: "c1", PodUID: "u1", Namespace: "default", Pod: "web", Container: "app",
		Resources: []ResourceHealth{{ResourceID: "vendor.com/gpu=0", Health: HealthUnhealthy, Message: "check ecc failed"}},
	})
	checkGolden(t, PlacementKind, PlacementVersion, PlacementRecord{
		ContainerID: "c1", PodUID: "u1", Namespace: "default", Pod: "web", Container: "app", Pool: "exclusive",
		CPUs: "6-7", Mems: "1", PoolRecord: SharedPoolRecord, CPULessMemory: true, NUMANodes: []int{1},
		MemoryBytes: 64 << 20, Reason: "Guaranteed with integer CPUs", Unplaced: true,
	})
	checkGolden(t, PoolRecordKind, PoolRecordVersion, PoolRecord{Pool: "shared", CPUs: "0-1,4-7", Mems: "0-1", MemsWithCPULess: "0-2"})
}

// TestPreviousVersionsRefused: a record of a kind's previous schema
// version, as that version wrote it, is refused with a message naming both
// versions, and not misread as the current one.
func TestPreviousVersionsRefused(t *testing.T) {
	root := t.TempDir()
	for _, tc := range []struct {
		kind    string
		version int
		read    func(root string) error
	}{
		{PluginStatusKind, 1, func(root string) error { return readOne(PluginStatuses(root)) }},
		{PlacementKind, 1, func(root string) error { return readOne(PlacementRecords(root)) }},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			old, err := os.ReadFile(goldenPath(tc.kind, tc.version))
			require.NoError(t, err)
			require.NoError(t, os.MkdirAll(filepath.Join(root, tc.kind), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(root, tc.kind, "old.json"), old, 0o644))
			err = tc.read(root)
			require.ErrorIs(t, err, ErrWrongVersion)
			assert.ErrorContains(t, err, "schema version "+strconv.Itoa(tc.version)+", want ")
		})
	}
}

func readOne[T any](records *Records[T], err error) error {
	if err != nil {
		return err
	}
	_, found, err := records.Read("old")
	if err == nil && !found {
		return errors.New("the old record was not found")
	}
	return err
}

// checkGolden checks that sample, whose fields must all be set, encodes to
// kind's golden file of version and that the file decodes to sample.
func checkGolden[T any](t *testing.T, kind string, version int, sample T) {
	t.Helper()
	golden.RequireAllSet(t, kind, sample)
	encoded, err := encode(version, sample)
	require.NoError(t, err)
	path := goldenPath(kind, version)
	file := golden.File(t, path, kind+" records", encoded)
	decoded, err := decode[T](file, version)
	require.NoError(t, err)
	assert.Equal(t, sample, decoded, "%s decodes back to what was written", path)
}

func goldenPath(kind string, version int) string {
	return filepath.Join("testdata", "golden", kind+"-v"+strconv.Itoa(version)+".json")
}
