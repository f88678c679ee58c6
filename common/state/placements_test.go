package state

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestResolve(t *testing.T) {
	pools := map[string]PoolRecord{SharedPoolRecord: {Pool: "shared", CPUs: "2-15", Mems: "0,1", MemsWithCPULess: "0-3"}}
	tests := []struct {
		name      string
		rec       PlacementRecord
		wantCPUs  string
		wantMems  string
		wantError string
	}{
		{name: "own cpusets", rec: PlacementRecord{ContainerID: "a", Pool: "exclusive", CPUs: "0-1", Mems: "0"},
			wantCPUs: "0-1", wantMems: "0"},
		{name: "the shared pool's", rec: PlacementRecord{ContainerID: "b", Pool: "shared", PoolRecord: SharedPoolRecord},
			wantCPUs: "2-15", wantMems: "0,1"},
		{name: "the shared pool's with CPU-less memory", rec: PlacementRecord{ContainerID: "c", Pool: "shared", PoolRecord: SharedPoolRecord, CPULessMemory: true},
			wantCPUs: "2-15", wantMems: "0-3"},
		{name: "a pool not published", rec: PlacementRecord{ContainerID: "d", Pool: "shared", PoolRecord: "elsewhere"},
			wantError: `container d: pool record "elsewhere" is not published`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cpus, mems, err := tc.rec.Resolve(pools)
			if tc.wantError != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantError)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.wantCPUs, cpus)
			assert.Equal(t, tc.wantMems, mems)
		})
	}
}
