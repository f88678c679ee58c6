package seccomp

import (
	"encoding/json"
	"errors"
	"path"
	"strings"
	"testing"

	mobyseccomp "github.com/moby/profiles/seccomp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// FuzzLoadProfile checks that any bytes either fail validation with ErrInvalidProfile or
// give a profile that builds, in every mode, without error: validation is complete.
func FuzzLoadProfile(f *testing.F) {
	def, err := json.Marshal(mobyseccomp.DefaultProfile())
	require.NoError(f, err)
	f.Add(def)
	f.Add([]byte(denyMkdir))
	f.Add([]byte(`{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["mount"],"action":"SCMP_ACT_ALLOW","includes":{"caps":["CAP_SYS_ADMIN"],"minKernel":"4.8"}},{"name":"clone","action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":2114060288,"op":"SCMP_CMP_MASKED_EQ"}],"excludes":{"caps":["CAP_SYS_ADMIN"],"arches":["s390x"]}}]}`))
	f.Add([]byte(`{"defaultAction":"SCMP_ACT_ALLOW","archMap":[{"architecture":"SCMP_ARCH_X86_64","subArchitectures":["SCMP_ARCH_X86"]}],"flags":["SECCOMP_FILTER_FLAG_LOG"],"listenerPath":"/run/l.sock","syscalls":[{"names":["mkdir"],"action":"SCMP_ACT_NOTIFY"}]}`))
	f.Add([]byte(`{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["mkdri"],"action":"SCMP_ACT_ERRNO"}]}`))
	f.Add([]byte(`{"defaultAction":"SCMP_ACT_KILL","syscalls":[null]}`))
	f.Add([]byte(`{`))
	f.Add([]byte(`null`))
	f.Add([]byte(``))

	s := newStore(f, "", Rule{Names: []string{"userfaultfd"}})
	f.Fuzz(func(t *testing.T, data []byte) {
		src, err := parseProfile("fuzz.json", data, s.table)
		if err != nil {
			assert.True(t, errors.Is(err, ErrInvalidProfile), "error without ErrInvalidProfile: %v", err)
			return
		}
		for _, req := range []Request{
			{},
			{Complain: true},
			{Capabilities: capabilities()},
		} {
			p, err := s.compile(src, req)
			require.NoError(t, err, "a validated profile failed to build for %+v", req)
			require.NotEmpty(t, p.DefaultAction)
			assert.Len(t, rulesFor(p, "userfaultfd"), 1, "the extra rule is merged")
			if req.Complain {
				assertNoRefusal(t, p)
			}
		}
	})
}

// FuzzProfileName checks that an accepted name stays inside the profile directory and
// names something the loader could load.
func FuzzProfileName(f *testing.F) {
	for _, seed := range []string{
		"deny-mkdir.json", "team/strict.json", "../etc/passwd", "/etc/passwd", "a/../../b",
		"a//b", "./a", "a/", ".hidden", "a/.b/c", "a b", "ü", "a\x00b", "..", "...",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := validateName(name)
		if err != nil {
			assert.ErrorIs(t, err, ErrInvalidName)
			return
		}
		assert.False(t, path.IsAbs(name))
		assert.Equal(t, name, path.Clean(name))
		assert.False(t, strings.HasPrefix(path.Join("/profiles", name), "/profiles/.."))
		assert.NotContains(t, name, "..")
		for _, seg := range strings.Split(name, "/") {
			assert.NotEmpty(t, seg)
			assert.False(t, strings.HasPrefix(seg, "."), "hidden segment %q", seg)
		}
	})
}
