package catalog

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The runtime orders plugins by index and a node has one port of each
// number: the table must keep both unique, and All in index order.
func TestPluginsAreDistinctAndOrdered(t *testing.T) {
	names, indexes, ports := map[string]bool{}, map[string]bool{}, map[int]bool{StatsPort: true}
	for i, p := range All {
		assert.Regexp(t, regexp.MustCompile(`^[0-9]{2}$`), p.Index, p.Name)
		assert.False(t, names[p.Name], "name %s twice", p.Name)
		assert.False(t, indexes[p.Index], "index %s twice", p.Index)
		assert.False(t, ports[p.Port], "port %d twice", p.Port)
		names[p.Name], indexes[p.Index], ports[p.Port] = true, true, true
		if i > 0 {
			assert.Less(t, All[i-1].Index, p.Index, "All is in index order")
		}
	}
}

func TestIDAndAddr(t *testing.T) {
	assert.Equal(t, "90-stats", Stats.ID())
	assert.Equal(t, "127.0.0.1:9130", TopologyAware.LoopbackAddr())
}
