package seccomp

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSymlinkOutsideDirectory: a profile file that leads out of the directory is invalid,
// even when what it leads to is a valid profile, so that whoever controls the directory's
// links cannot make the plugin load (and report, and apply) files from elsewhere.
func TestSymlinkOutsideDirectory(t *testing.T) {
	outside := t.TempDir()
	writeProfile(t, outside, "p.json", denyMkdir)
	target := filepath.Join(outside, "p.json")

	tests := []struct {
		name   string
		layout func(dir string) // makes dir/evil.json
		points string           // where the error says it points
	}{
		{name: "absolute link to a file elsewhere", points: target, layout: func(dir string) {
			link(t, target, filepath.Join(dir, "evil.json"))
		}},
		{name: "absolute link into /etc", points: "/etc/passwd", layout: func(dir string) {
			link(t, "/etc/passwd", filepath.Join(dir, "evil.json"))
		}},
		{name: "relative link up through ..", points: target, layout: func(dir string) {
			rel, err := filepath.Rel(dir, target)
			require.NoError(t, err)
			link(t, rel, filepath.Join(dir, "evil.json"))
		}},
		{name: "link to a link that leads out", points: target, layout: func(dir string) {
			link(t, target, filepath.Join(dir, ".hidden.json"))
			link(t, ".hidden.json", filepath.Join(dir, "evil.json"))
		}},
		{name: "ConfigMap layout whose ..data leads out", points: target, layout: func(dir string) {
			link(t, outside, filepath.Join(dir, "..data"))
			link(t, "..data/p.json", filepath.Join(dir, "evil.json"))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeProfile(t, dir, "good.json", denyMkdir)
			tt.layout(dir)
			log, hook := logtest.NewNullLogger()
			s, err := NewStore(Options{Dir: dir, Log: log})
			require.NoError(t, err)

			loaded, invalid, errs := s.Status()
			assert.Equal(t, [2]int{1, 1}, [2]int{loaded, invalid}, "good.json loaded, evil.json invalid")
			assert.ErrorIs(t, errs["evil.json"], ErrInvalidProfile)
			assert.ErrorContains(t, errs["evil.json"], `"evil.json"`)
			assert.ErrorContains(t, errs["evil.json"], "leads to "+tt.points+", outside the profile directory")
			_, err = s.Build(Request{Profile: "evil.json"})
			assert.ErrorIs(t, err, ErrInvalidProfile, "never applied")
			assert.ErrorIs(t, s.Reload(), ErrInvalidProfile, "Reload reports it too")

			var line *logrus.Entry
			for _, e := range hook.AllEntries() {
				if e.Level == logrus.WarnLevel && e.Message == "seccomp profile is invalid" {
					line = e
				}
			}
			require.NotNil(t, line, "a warning is logged")
			assert.Contains(t, line.Data[logrus.ErrorKey].(error).Error(), `"evil.json"`)
			assert.Contains(t, line.Data[logrus.ErrorKey].(error).Error(), tt.points)
		})
	}
}

// TestSymlinkInsideDirectory: links that stay inside the directory load, relative (as a
// mounted ConfigMap makes them, see TestConfigMapLayout) or absolute.
func TestSymlinkInsideDirectory(t *testing.T) {
	dir := t.TempDir()
	writeProfile(t, dir, "team/strict.json", denyMkdir)
	link(t, filepath.Join(dir, "team", "strict.json"), filepath.Join(dir, "absolute.json"))
	link(t, "../team/strict.json", filepath.Join(dir, "other", "relative.json"))
	s := newStore(t, dir)
	loaded, invalid, errs := s.Status()
	assert.Equal(t, [2]int{3, 0}, [2]int{loaded, invalid}, "%v", errs)
	for _, name := range []string{"absolute.json", "other/relative.json"} {
		p, err := s.Build(Request{Profile: name})
		require.NoError(t, err, name)
		assert.Equal(t, []string{"SCMP_ACT_ERRNO"}, actionsFor(p, "mkdir"), name)
	}
}

// TestNotARegularFile: a FIFO named like a profile is invalid, and reading it does not
// block the reload (and with it the watch) until someone writes to it.
func TestNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "fifo.json"), 0o644))
	s := newStore(t, dir)
	_, invalid, errs := s.Status()
	assert.Equal(t, 1, invalid)
	assert.ErrorIs(t, errs["fifo.json"], ErrInvalidProfile)
	assert.ErrorContains(t, errs["fifo.json"], "not a regular file")
}

func link(t *testing.T, target, path string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.Symlink(target, path))
}
