package seccomp

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	mobyseccomp "github.com/moby/profiles/seccomp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
)

func TestLoadProfile(t *testing.T) {
	tests := []struct {
		name    string
		content string
		wantErr string // "" means valid
	}{
		{name: "valid", content: denyMkdir},
		{name: "valid with caps-gated and arch-gated rules", content: `{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[
			{"names":["mount"],"action":"SCMP_ACT_ALLOW","includes":{"caps":["CAP_SYS_ADMIN"]}},
			{"names":["s390_runtime_instr"],"action":"SCMP_ACT_ALLOW","includes":{"arches":["s390x"]}},
			{"name":"read","action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":3,"op":"SCMP_CMP_GE"}]}]}`},
		{name: "malformed JSON", content: `{"defaultAction": "SCMP_ACT_ALLOW",`, wantErr: "decoding JSON"},
		{name: "trailing data", content: denyMkdir + `{}`, wantErr: "unexpected data after the profile"},
		{name: "unknown key", content: `{"defaultAction":"SCMP_ACT_ALLOW","syscall":[]}`, wantErr: `unknown field "syscall"`},
		{name: "missing default action", content: `{"syscalls":[{"names":["read"],"action":"SCMP_ACT_ALLOW"}]}`, wantErr: "defaultAction: missing"},
		{name: "unknown default action", content: `{"defaultAction":"SCMP_ACT_DENY"}`, wantErr: `defaultAction: unknown value "SCMP_ACT_DENY", expected one of SCMP_ACT_ALLOW`},
		{name: "unknown syscall", content: `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["read"],"action":"SCMP_ACT_LOG"},{"names":["mkdri"],"action":"SCMP_ACT_ERRNO"}]}`, wantErr: `syscalls[1]: names: "mkdri" is not a Linux syscall`},
		{name: "unknown action", content: `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["mkdir"],"action":"SCMP_ACT_REFUSE"}]}`, wantErr: `syscalls[0]: action: unknown value "SCMP_ACT_REFUSE"`},
		{name: "no names", content: `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"action":"SCMP_ACT_ERRNO"}]}`, wantErr: "syscalls[0]: names: empty"},
		{name: "name and names", content: `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"name":"read","names":["write"],"action":"SCMP_ACT_LOG","excludes":{"caps":["CAP_SYS_ADMIN"]}}]}`, wantErr: "name and names: both set"},
		{name: "argument index", content: `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["read"],"action":"SCMP_ACT_ERRNO","args":[{"index":6,"value":1,"op":"SCMP_CMP_EQ"}]}]}`, wantErr: "syscalls[0]: args[0].index: 6, expected 0 to 5"},
		{name: "argument operator", content: `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["read"],"action":"SCMP_ACT_ERRNO","args":[{"index":0,"value":1,"op":"SCMP_CMP_LIKE"}]}]}`, wantErr: `args[0].op: unknown value "SCMP_CMP_LIKE"`},
		{name: "errnoRet with allow", content: `{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["read"],"action":"SCMP_ACT_ALLOW","errnoRet":1}]}`, wantErr: "syscalls[0]: errnoRet: set with action SCMP_ACT_ALLOW"},
		{name: "unknown capability", content: `{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["mount"],"action":"SCMP_ACT_ALLOW","includes":{"caps":["CAP_SYSADMIN"]}}]}`, wantErr: `includes.caps[0]: unknown value "CAP_SYSADMIN"`},
		{name: "unknown filter arch", content: `{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["read"],"action":"SCMP_ACT_ALLOW","excludes":{"arches":["vax"]}}]}`, wantErr: `excludes.arches[0]: unknown value "vax"`},
		{name: "unknown architecture", content: `{"defaultAction":"SCMP_ACT_ALLOW","architectures":["SCMP_ARCH_PDP11"]}`, wantErr: `architectures[0]: unknown value "SCMP_ARCH_PDP11"`},
		{name: "unknown flag", content: `{"defaultAction":"SCMP_ACT_ALLOW","flags":["SECCOMP_FILTER_FLAG_FAST"]}`, wantErr: `flags[0]: unknown value`},
		{name: "notify without listener", content: `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["mkdir"],"action":"SCMP_ACT_NOTIFY"}]}`, wantErr: "needs listenerPath"},
		{name: "architectures and archMap", content: `{"defaultAction":"SCMP_ACT_ALLOW","architectures":["SCMP_ARCH_X86_64"],"archMap":[{"architecture":"SCMP_ARCH_X86_64","subArchitectures":null}]}`, wantErr: "both 'architectures' and 'archMap'"},
		{name: "bad kernel version", content: `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["read"],"action":"SCMP_ACT_LOG","includes":{"minKernel":"five"}}]}`, wantErr: "invalid kernel version"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeProfile(t, dir, "p.json", tt.content)
			s := newStore(t, dir)
			loaded, invalid, errs := s.Status()
			p, buildErr := s.Build(Request{Profile: "p.json"})
			if tt.wantErr == "" {
				require.NoError(t, buildErr)
				assert.Equal(t, 1, loaded)
				assert.Equal(t, 0, invalid)
				assert.NotEmpty(t, p.DefaultAction)
				return
			}
			assert.Equal(t, 0, loaded)
			assert.Equal(t, 1, invalid)
			require.Error(t, errs["p.json"])
			assert.ErrorIs(t, errs["p.json"], ErrInvalidProfile)
			assert.ErrorContains(t, errs["p.json"], tt.wantErr)
			assert.ErrorContains(t, errs["p.json"], `"p.json"`, "the error names the file")
			assert.ErrorIs(t, buildErr, ErrInvalidProfile, "a never-valid profile is not applied")
			assert.ErrorIs(t, s.Reload(), ErrInvalidProfile, "Reload reports it too")
		})
	}
}

func TestProfileNames(t *testing.T) {
	dir := t.TempDir()
	writeProfile(t, dir, "deny-mkdir.json", denyMkdir)
	writeProfile(t, dir, "team/strict.json", denyMkdir)
	writeProfile(t, dir, "bad name.json", denyMkdir)
	writeProfile(t, dir, ".editor-swap.json", `{`)
	writeProfile(t, dir, "notes.txt", `not a profile`)
	s := newStore(t, dir)

	tests := []struct {
		profile string
		wantErr error
	}{
		{"deny-mkdir.json", nil},
		{"team/strict.json", nil},
		{"", nil}, // the runtime default
		{"missing.json", ErrNotFound},
		{"deny-mkdir", ErrNotFound},
		{"notes.txt", ErrNotFound},
		{"../deny-mkdir.json", ErrInvalidName},
		{"team/../deny-mkdir.json", ErrInvalidName},
		{"/etc/deny-mkdir.json", ErrInvalidName},
		{filepath.Join(dir, "deny-mkdir.json"), ErrInvalidName},
		{"bad name.json", ErrInvalidName},
		{"team//strict.json", ErrInvalidName},
		{"./deny-mkdir.json", ErrInvalidName},
		{".editor-swap.json", ErrInvalidName},
		{"ünicode.json", ErrInvalidName},
	}
	for _, tt := range tests {
		t.Run(tt.profile, func(t *testing.T) {
			p, err := s.Build(Request{Profile: tt.profile})
			if tt.wantErr == nil {
				require.NoError(t, err)
				assert.NotNil(t, p)
				return
			}
			assert.ErrorIs(t, err, tt.wantErr)
			assert.ErrorContains(t, err, tt.profile)
		})
	}

	loaded, invalid, errs := s.Status()
	assert.Equal(t, 2, loaded, "hidden and non-JSON files are not profiles")
	assert.Equal(t, 1, invalid)
	assert.ErrorIs(t, errs["bad name.json"], ErrInvalidName, "a file no request can name is reported")
}

func TestNoProfileDirectory(t *testing.T) {
	s := newStore(t, "")
	_, err := s.Build(Request{Profile: "deny-mkdir.json"})
	assert.ErrorIs(t, err, ErrNotFound)
	assert.ErrorContains(t, err, "no profile directory configured")
	require.NoError(t, s.Reload())
	_, err = s.Build(Request{})
	require.NoError(t, err, "the runtime default needs no directory")
}

func TestUnreadableDirectory(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "absent")
	_, err := NewStore(Options{Dir: missing, Log: quietLog()})
	require.Error(t, err)
	assert.ErrorContains(t, err, missing)
	assert.ErrorIs(t, err, os.ErrNotExist)
}

func TestDirectoryThatIsAFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "profiles.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"defaultAction": "SCMP_ACT_ALLOW"}`), 0o644))
	_, err := NewStore(Options{Dir: file, Log: quietLog()})
	assert.ErrorIs(t, err, ErrNotDirectory)
	assert.ErrorContains(t, err, file)
}

func TestReload(t *testing.T) {
	const denyRmdir = `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["rmdir"],"action":"SCMP_ACT_ERRNO","errnoRet":1}]}`
	dir := t.TempDir()
	writeProfile(t, dir, "p.json", denyMkdir)
	s := newStore(t, dir)

	v1, err := s.Build(Request{Profile: "p.json"})
	require.NoError(t, err)
	assert.Equal(t, []string{"SCMP_ACT_ERRNO"}, actionsFor(v1, "mkdir"))
	v1src, err := s.lookup("p.json")
	require.NoError(t, err)

	// Unchanged content: same version, cache kept.
	require.NoError(t, s.Reload())
	again, err := s.Build(Request{Profile: "p.json"})
	require.NoError(t, err)
	assert.Same(t, v1, again)

	// Changed: the new version is used and the old version's builds are gone with it.
	writeProfile(t, dir, "p.json", denyRmdir)
	require.NoError(t, s.Reload())
	v2, err := s.Build(Request{Profile: "p.json"})
	require.NoError(t, err)
	assert.Empty(t, actionsFor(v2, "mkdir"))
	assert.Equal(t, []string{"SCMP_ACT_ERRNO"}, actionsFor(v2, "rmdir"))
	v2src, err := s.lookup("p.json")
	require.NoError(t, err)
	assert.NotSame(t, v1src, v2src)
	assert.Equal(t, 1, v2src.builds.len())

	// An invalid replacement is reported and the last valid version stays.
	writeProfile(t, dir, "p.json", `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["rmdir"],"action":"SCMP_ACT_NOPE"}]}`)
	err = s.Reload()
	assert.ErrorIs(t, err, ErrInvalidProfile)
	assert.ErrorContains(t, err, `"p.json"`)
	kept, err := s.Build(Request{Profile: "p.json"})
	require.NoError(t, err)
	assert.Same(t, v2, kept)
	loaded, invalid, errs := s.Status()
	assert.Equal(t, 1, loaded)
	assert.Equal(t, 1, invalid)
	assert.ErrorContains(t, errs["p.json"], "SCMP_ACT_NOPE")

	// Fixed again: no longer invalid.
	writeProfile(t, dir, "p.json", denyMkdir)
	require.NoError(t, s.Reload())
	_, invalid, _ = s.Status()
	assert.Equal(t, 0, invalid)

	// Removed: not found, and its invalid state goes too.
	require.NoError(t, os.Remove(filepath.Join(dir, "p.json")))
	require.NoError(t, s.Reload())
	_, err = s.Build(Request{Profile: "p.json"})
	assert.ErrorIs(t, err, ErrNotFound)
	loaded, invalid, _ = s.Status()
	assert.Equal(t, [2]int{0, 0}, [2]int{loaded, invalid})
}

func TestReloadReportsEachInvalidFile(t *testing.T) {
	dir := t.TempDir()
	writeProfile(t, dir, "good.json", denyMkdir)
	writeProfile(t, dir, "a/broken.json", `{`)
	writeProfile(t, dir, "b/unknown.json", `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["frobnicate"],"action":"SCMP_ACT_ERRNO"}]}`)
	s := newStore(t, dir)
	err := s.Reload()
	require.Error(t, err)
	var joined interface{ Unwrap() []error }
	require.True(t, errors.As(err, &joined))
	require.Len(t, joined.Unwrap(), 2)
	assert.ErrorContains(t, joined.Unwrap()[0], `"a/broken.json"`)
	assert.ErrorContains(t, joined.Unwrap()[1], `"b/unknown.json"`)
	assert.ErrorContains(t, joined.Unwrap()[1], `"frobnicate"`)
	_, err = s.Build(Request{Profile: "good.json"})
	assert.NoError(t, err, "valid files load beside invalid ones")
}

func TestConfigMapLayout(t *testing.T) {
	// A mounted ConfigMap: the files are symlinks through "..data" to a hidden directory.
	dir := t.TempDir()
	writeProfile(t, dir, "..2026_01_01/deny-mkdir.json", denyMkdir)
	require.NoError(t, os.Symlink("..2026_01_01", filepath.Join(dir, "..data")))
	require.NoError(t, os.Symlink("..data/deny-mkdir.json", filepath.Join(dir, "deny-mkdir.json")))
	s := newStore(t, dir)
	loaded, invalid, _ := s.Status()
	assert.Equal(t, [2]int{1, 0}, [2]int{loaded, invalid})
	p, err := s.Build(Request{Profile: "deny-mkdir.json"})
	require.NoError(t, err)
	assert.Equal(t, []string{"SCMP_ACT_ERRNO"}, actionsFor(p, "mkdir"))
}

func TestCapabilityGatedDefault(t *testing.T) {
	s := newStore(t, "")
	withAdmin, err := s.Build(Request{Capabilities: []string{"CAP_CHOWN", "CAP_SYS_ADMIN"}})
	require.NoError(t, err)
	without, err := s.Build(Request{Capabilities: []string{"CAP_CHOWN"}})
	require.NoError(t, err)

	assert.Equal(t, "SCMP_ACT_ERRNO", without.DefaultAction)
	assert.Contains(t, actionsFor(withAdmin, "mount"), "SCMP_ACT_ALLOW")
	assert.NotContains(t, actionsFor(without, "mount"), "SCMP_ACT_ALLOW", "mount needs CAP_SYS_ADMIN")
	assert.Contains(t, actionsFor(without, "read"), "SCMP_ACT_ALLOW")
	// clone3 cannot be filtered by its flags: allowed with CAP_SYS_ADMIN, ENOSYS without.
	assert.Equal(t, []string{"SCMP_ACT_ALLOW"}, actionsFor(withAdmin, "clone3"))
	assert.Equal(t, []string{"SCMP_ACT_ERRNO"}, actionsFor(without, "clone3"))

	// Capabilities the profile does not condition on, and their order, do not make a new build.
	same, err := s.Build(Request{Capabilities: []string{"CAP_NET_RAW", "CAP_CHOWN"}})
	require.NoError(t, err)
	assert.Same(t, without, same)
	reordered, err := s.Build(Request{Capabilities: []string{"CAP_SYS_ADMIN", "CAP_KILL"}})
	require.NoError(t, err)
	assert.Same(t, withAdmin, reordered)
	assert.Equal(t, 2, s.fallback.builds.len())
}

func TestArch(t *testing.T) {
	s := newStore(t, "")
	native, err := s.Build(Request{})
	require.NoError(t, err)
	explicit, err := s.Build(Request{Arch: runtime.GOARCH})
	require.NoError(t, err)
	assert.Same(t, native, explicit, "the node's arch named or not is one build")

	foreign := "arm64"
	if runtime.GOARCH == "arm64" {
		foreign = "amd64"
	}
	_, err = s.Build(Request{Arch: foreign})
	assert.ErrorIs(t, err, ErrUnsupportedArch)
	assert.ErrorContains(t, err, foreign)
}

func TestSyscallTables(t *testing.T) {
	tests := []struct {
		goarch, syscall string
		onNode, known   bool
	}{
		{"amd64", "arch_prctl", true, true},
		{"amd64", "mkdir", true, true},
		{"amd64", "socketcall", true, true}, // the 32-bit ABI of an amd64 node
		{"arm64", "mkdirat", true, true},
		{"arm64", "arch_prctl", false, true},
		{"arm64", "set_tls", true, true},            // arm, the 32-bit ABI of arm64
		{"s390x", "s390_runtime_instr", true, true}, // no table: any known name
		{"amd64", "mkdri", false, false},
		{"arm64", "", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.goarch+"/"+tt.syscall, func(t *testing.T) {
			table := newSyscallTable(tt.goarch)
			assert.Equal(t, tt.onNode, table.onNode(tt.syscall))
			assert.Equal(t, tt.known, table.known(tt.syscall))
		})
	}
}

func TestDockerDefaultAsNamedProfile(t *testing.T) {
	// Operators start named profiles from Docker's default, which names the syscalls of
	// every architecture: it must load, and build the same policy as the runtime default.
	data, err := json.Marshal(mobyseccomp.DefaultProfile())
	require.NoError(t, err)
	dir := t.TempDir()
	writeProfile(t, dir, "docker-default.json", string(data))
	s := newStore(t, dir)
	for _, caps := range [][]string{nil, {"CAP_SYS_ADMIN", "CAP_SYS_PTRACE"}} {
		named, err := s.Build(Request{Profile: "docker-default.json", Capabilities: caps})
		require.NoError(t, err)
		def, err := s.Build(Request{Capabilities: caps})
		require.NoError(t, err)
		assert.True(t, proto.Equal(def, named), "caps %v", caps)
	}
}
