package seccomp

import (
	"slices"
	"sync"

	"github.com/containerd/nri/pkg/api"
)

// maxVariants bounds the builds kept per profile version. Real nodes see a handful of
// capability sets; past the bound the cache starts over rather than grow without limit.
const maxVariants = 128

// variantKey says which build of a source a container gets.
type variantKey struct {
	complain bool
	// caps has bit i set when the container holds source.caps[i]. A validated profile
	// names only known capabilities, fewer than 64.
	caps uint64
}

// variants caches the builds of one source version. It lives in the source, so a
// reloaded profile drops its builds with its old version.
type variants struct {
	mu     sync.Mutex
	builds map[variantKey]*api.LinuxSeccomp
}

// get returns the cached build for key, building it on a miss. Building under the lock
// makes concurrent misses of one key build once.
func (v *variants) get(key variantKey, build func() (*api.LinuxSeccomp, error)) (*api.LinuxSeccomp, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if p, ok := v.builds[key]; ok {
		return p, nil
	}
	p, err := build()
	if err != nil {
		return nil, err
	}
	if v.builds == nil || len(v.builds) >= maxVariants {
		v.builds = map[variantKey]*api.LinuxSeccomp{}
	}
	v.builds[key] = p
	return p, nil
}

func (v *variants) len() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.builds)
}

// key picks the variant of src for a request; capabilities the profile does not
// condition on do not matter.
func (src *source) key(req Request) variantKey {
	k := variantKey{complain: req.Complain}
	for _, c := range req.Capabilities {
		if i, ok := slices.BinarySearch(src.caps, c); ok && i < 64 {
			k.caps |= 1 << i
		}
	}
	return k
}
