package seccomp

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConcurrentBuildAndReload runs builds beside reloads that replace the profile, the way
// NRI handlers and the directory watch do; the race detector checks the locking.
func TestConcurrentBuildAndReload(t *testing.T) {
	dir := t.TempDir()
	writeProfile(t, dir, "p.json", denyMkdir)
	s := newStore(t, dir, Rule{Names: []string{"userfaultfd"}})

	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				req := Request{Profile: "p.json", Complain: i%2 == 0}
				if g%2 == 0 {
					req.Profile = ""
					req.Capabilities = []string{"CAP_SYS_ADMIN"}
				}
				p, err := s.Build(req)
				if err == nil && len(rulesFor(p, "userfaultfd")) != 1 {
					err = fmt.Errorf("build %d of goroutine %d lacks the extra rule", i, g)
				}
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := range 20 {
		writeProfile(t, dir, "p.json", fmt.Sprintf(`{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["mkdir"],"action":"SCMP_ACT_ERRNO","errnoRet":%d}]}`, i+1))
		require.NoError(t, s.Reload())
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
	p, err := s.Build(Request{Profile: "p.json"})
	require.NoError(t, err)
	assert.Equal(t, uint32(20), rulesFor(p, "mkdir")[0].ErrnoRet.GetValue(), "the last version wins")
}
