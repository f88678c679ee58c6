package resctrl

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tree writes files under a new resctrl root laid out as the kernel's:
// path (relative) -> content.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for path, content := range files {
		full := filepath.Join(root, path)
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(content+"\n"), 0o444))
	}
	return root
}

func TestReader(t *testing.T) {
	root := tree(t, map[string]string{
		"info/L3_MON/mon_features":                                            "llc_occupancy\nmbm_total_bytes\nmbm_local_bytes",
		"schemata":                                                            "L3:0=fffff;1=fffff",
		"mon_data/mon_L3_00/llc_occupancy":                                    "999",
		"mon_groups/c-root/tasks":                                             "",
		"mon_groups/c-root/mon_data/mon_L3_00/llc_occupancy":                  "4096",
		"mon_groups/c-root/mon_data/mon_L3_00/mbm_total_bytes":                "8192",
		"nri-suite.gold/schemata":                                             "L3:0=fff;1=fff",
		"nri-suite.gold/mon_groups/c-gold/tasks":                              "",
		"nri-suite.gold/mon_groups/c-gold/mon_data/mon_L3_01/llc_occupancy":   "2097152",
		"nri-suite.gold/mon_groups/c-gold/mon_data/mon_L3_01/mbm_total_bytes": "Unavailable",
		"nri-suite.gold/mon_groups/c-gold/mon_data/mon_L3_00/llc_occupancy":   "1048576",
		"nri-suite.gold/mon_groups/c-gold/mon_data/mon_L3_00/mbm_total_bytes": "123456789",
		"nri-suite.gold/mon_groups/c-gold/mon_data/mon_L3_00/mbm_local_bytes": "1",
		"nri-suite.gold/mon_groups/c-bad/mon_data/mon_L3_00/llc_occupancy":    "lots",
	})
	r := NewReader(root)
	require.NotNil(t, r)
	groups, err := r.Groups()
	require.NoError(t, err)
	assert.Equal(t, map[string]string{
		"c-root": filepath.Join(root, "mon_groups", "c-root"),
		"c-gold": filepath.Join(root, "nri-suite.gold", "mon_groups", "c-gold"),
		"c-bad":  filepath.Join(root, "nri-suite.gold", "mon_groups", "c-bad"),
	}, groups)

	gold, err := r.Read(groups["c-gold"])
	require.NoError(t, err)
	assert.Equal(t, []Domain{
		{ID: 0, LLCOccupancy: 1 << 20, HasLLCOccupancy: true, MemoryBandwidth: 123456789, HasMemoryBandwidth: true},
		{ID: 1, LLCOccupancy: 2 << 20, HasLLCOccupancy: true},
	}, gold, "by cache id; a counter the kernel calls Unavailable is left out")
	inRoot, err := r.Read(groups["c-root"])
	require.NoError(t, err)
	assert.Equal(t, []Domain{{ID: 0, LLCOccupancy: 4096, HasLLCOccupancy: true, MemoryBandwidth: 8192, HasMemoryBandwidth: true}}, inRoot)

	bad, err := r.Read(groups["c-bad"])
	require.Error(t, err)
	assert.Contains(t, err.Error(), `llc_occupancy: "lots": expected a count of bytes`)
	assert.Equal(t, []Domain{{ID: 0}}, bad)
	_, err = r.Read(filepath.Join(root, "mon_groups", "gone"))
	assert.Error(t, err)
}

func TestNoReaderWithoutMonitoring(t *testing.T) {
	assert.Nil(t, NewReader(filepath.Join(t.TempDir(), "resctrl")), "no resctrl mounted")
	assert.Nil(t, NewReader(tree(t, map[string]string{"info/L3/cbm_mask": "fffff"})), "allocation without monitoring")
}
