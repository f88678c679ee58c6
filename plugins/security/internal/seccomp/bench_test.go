package seccomp

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// containerdCaps are the capabilities containerd gives a container by default.
var containerdCaps = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW",
	"CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE",
	"CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE",
}

// BenchmarkBuild measures what a CreateContainer pays for its seccomp policy: a cache
// hit, and the conversion a miss does once per profile version and variant.
func BenchmarkBuild(b *testing.B) {
	dir := b.TempDir()
	writeProfile(b, dir, "rules300.json", generatedProfile(b, 300))
	s := newStore(b, dir, Rule{Names: []string{"io_uring_setup", "userfaultfd"}})
	for _, bc := range []struct{ name, profile string }{
		{"default", ""},
		{"rules300", "rules300.json"},
	} {
		req := Request{Profile: bc.profile, Capabilities: containerdCaps}
		src, err := s.lookup(bc.profile)
		require.NoError(b, err)
		b.Run(bc.name+"/cached", func(b *testing.B) {
			_, err := s.Build(req)
			require.NoError(b, err)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Build(req); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(bc.name+"/uncached", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.compile(src, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkLoadProfile measures validating a 300-rule file, which a reload does once per
// changed file.
func BenchmarkLoadProfile(b *testing.B) {
	data := []byte(generatedProfile(b, 300))
	table := hostSyscalls()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := parseProfile("rules300.json", data, table); err != nil {
			b.Fatal(err)
		}
	}
}
