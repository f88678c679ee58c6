package netns

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Sweep deletes the namespaces with its prefix and no other.
func TestSweep(t *testing.T) {
	requireRoot(t)
	t.Parallel()
	prefix := uniqueName(t, "sweep-") + "-"
	a := newNamespace(t, prefix+"a")
	b := newNamespace(t, prefix+"b")
	keep := newNamespace(t, uniqueName(t, "keep-"))

	require.NoError(t, Sweep(prefix))
	assert.False(t, listed(t, a.Name()))
	assert.False(t, listed(t, b.Name()))
	assert.True(t, listed(t, keep.Name()))
	assert.NoError(t, a.Close(), "Close after Sweep")
	assert.NoError(t, Sweep(prefix), "nothing left to sweep")
}

// A prefix that is not this package's is refused, so that Sweep never
// deletes someone else's namespaces (no root needed).
func TestSweepRefusesForeignPrefix(t *testing.T) {
	for _, prefix := range []string{"", "cni-", "nri-"} {
		assert.EqualError(t, Sweep(prefix), `sweeping network namespaces: prefix "`+prefix+`" does not start with nri-cluster-`)
	}
}
