package seccomp

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/containerd/nri/pkg/api"
	"github.com/sirupsen/logrus"

	"github.com/nri-suite/nri-suite/common/fsread"
)

var (
	// ErrNotFound: the requested profile is not in the profile directory.
	ErrNotFound = errors.New("seccomp profile not found")
	// ErrInvalidName: a profile name that could escape the profile directory or name no file.
	ErrInvalidName = errors.New("invalid seccomp profile name")
	// ErrInvalidProfile: a profile file that does not parse or validate.
	ErrInvalidProfile = errors.New("invalid seccomp profile")
	// ErrUnsupportedArch: a request for an architecture other than the node's.
	ErrUnsupportedArch = errors.New("unsupported architecture")
	// ErrNotDirectory: the profile directory is something else, a file for one.
	ErrNotDirectory = errors.New("not a directory")
)

// maxProfileSize bounds a profile file; Docker's default profile is about 20 KiB.
const maxProfileSize = 4 << 20

// Options configure a Store.
type Options struct {
	// Dir is the profile directory; "" means no named profiles.
	Dir string
	// ExtraRules are merged into every built profile.
	ExtraRules []Rule
	// Log receives load and reload outcomes; nil means logrus's standard logger.
	Log logrus.FieldLogger
}

// Request says what one container gets.
type Request struct {
	// Profile is "" for the runtime default profile, else a name in the profile directory
	// ("deny-mkdir.json", "team/strict.json").
	Profile string
	// Complain turns errors and kills into SCMP_ACT_LOG.
	Complain bool
	// Arch is a GOARCH ("amd64"); "" means the node's, the only one supported.
	Arch string
	// Capabilities are the container's bounding capabilities ("CAP_SYS_ADMIN").
	Capabilities []string
}

// Store holds the runtime default profile and the valid profiles of a directory, and
// builds NRI seccomp policies from them.
type Store struct {
	dir      string
	rules    extraRules
	table    *syscallTable
	log      logrus.FieldLogger
	fallback *source // the runtime default profile

	reloadMu sync.Mutex // one Reload at a time
	mu       sync.RWMutex
	files    map[string]*entry
}

// entry is what the store knows of one file in the directory.
type entry struct {
	hash [sha256.Size]byte // of the content last read, to skip unchanged files
	good *source           // the last valid version; nil if the file was never valid
	err  error             // why the current content is not in use; nil when it is
}

// NewStore validates the extra rules and loads the profile directory. Invalid profile
// files do not fail it: they are logged and counted in Status, like on a reload; an
// unreadable directory does.
func NewStore(opts Options) (*Store, error) {
	table := hostSyscalls()
	rules, err := compileRules(opts.ExtraRules, table)
	if err != nil {
		return nil, err
	}
	s := &Store{
		dir:      opts.Dir,
		rules:    rules,
		table:    table,
		log:      opts.Log,
		fallback: defaultSource(),
		files:    map[string]*entry{},
	}
	if s.log == nil {
		s.log = logrus.StandardLogger()
	}
	if s.dir == "" {
		return s, nil
	}
	// Said plainly, and as ErrNotDirectory for the caller to name its key,
	// rather than as whatever reading it as a directory fails with.
	if info, err := os.Stat(s.dir); err == nil && !info.IsDir() {
		return nil, fmt.Errorf("seccomp profile directory %s: %w: expected a directory of <name>.json profiles", s.dir, ErrNotDirectory)
	}
	invalid, err := s.reload()
	if err != nil {
		return nil, err
	}
	s.logInvalid(invalid)
	return s, nil
}

// Reload re-reads the profile directory. Files that are new or changed and valid replace
// their old version and drop its cached builds; removed files are forgotten. An invalid
// file is reported in the returned error (one line per file) and in Status, and its last
// valid version, if any, stays in use.
func (s *Store) Reload() error {
	if s.dir == "" {
		return nil
	}
	invalid, err := s.reload()
	if err != nil {
		return err
	}
	return errors.Join(invalid...)
}

// reload returns the errors of the invalid files, or err when the directory itself
// cannot be read (then nothing changes).
func (s *Store) reload() (invalid []error, err error) {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	names, err := s.scan()
	if err != nil {
		return nil, fmt.Errorf("reading seccomp profile directory %s: %w", s.dir, err)
	}
	root, err := os.OpenRoot(s.dir)
	if err != nil {
		return nil, fmt.Errorf("reading seccomp profile directory %s: %w", s.dir, err)
	}
	defer root.Close()
	s.mu.RLock()
	old := s.files
	s.mu.RUnlock()

	next := make(map[string]*entry, len(names))
	for _, name := range names {
		e := s.load(root, name, old[name])
		next[name] = e
		if e.err != nil {
			invalid = append(invalid, e.err)
		}
	}
	for name := range old {
		if _, ok := next[name]; !ok {
			s.log.WithField("profile", name).Info("seccomp profile removed")
		}
	}
	s.mu.Lock()
	s.files = next
	s.mu.Unlock()
	return invalid, nil
}

// logInvalid logs one line per invalid file.
func (s *Store) logInvalid(invalid []error) {
	for _, err := range invalid {
		s.log.WithError(err).Warn("seccomp profile is invalid")
	}
}

// scan lists the profile files under the directory as names relative to it, sorted.
// Hidden entries are skipped: editors' temporary files and the "..data" indirection of a
// mounted ConfigMap, whose files appear through the symlinks beside it.
func (s *Store) scan() ([]string, error) {
	var names []string
	err := filepath.WalkDir(s.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path == s.dir {
			return nil
		}
		if strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() || !strings.HasSuffix(d.Name(), ".json") {
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			if info, err := os.Stat(path); err != nil || !info.Mode().IsRegular() {
				return nil // dangling, or a link to a directory: not a profile
			}
		}
		rel, err := filepath.Rel(s.dir, path)
		if err != nil {
			return err
		}
		names = append(names, filepath.ToSlash(rel))
		return nil
	})
	sort.Strings(names)
	return names, err
}

// load reads and validates one file of root, keeping prev's valid version when it is
// invalid.
func (s *Store) load(root *os.Root, name string, prev *entry) *entry {
	log := s.log.WithField("profile", name)
	var kept *source
	if prev != nil {
		kept = prev.good
	}
	fail := func(hash [sha256.Size]byte, err error) *entry {
		err = fmt.Errorf("loading seccomp profile %q from %s: %w", name, s.dir, err)
		if kept != nil {
			log.Warn("seccomp profile became invalid, keeping its previous version")
		}
		return &entry{hash: hash, good: kept, err: err}
	}
	if err := validateName(name); err != nil {
		return fail([sha256.Size]byte{}, err)
	}
	data, err := s.read(root, name)
	if err != nil {
		return fail([sha256.Size]byte{}, err)
	}
	hash := sha256.Sum256(data)
	if prev != nil && prev.hash == hash {
		return prev
	}
	src, err := parseProfile(name, data, s.table)
	if err != nil {
		return fail(hash, err)
	}
	if kept != nil {
		log.Info("seccomp profile changed, loaded its new version")
	} else {
		log.Info("seccomp profile loaded")
	}
	return &entry{hash: hash, good: src}
}

// read reads the profile file name of root. Root follows symlinks only as far as they
// stay inside the directory, whatever a link is swapped for between the scan and the
// read: a link that leads out is refused rather than loaded, as the file it leads to is
// not the administrator's profile. Only the regular files are read: a FIFO would block
// the reload, and with it the watch, until someone wrote to it.
func (s *Store) read(root *os.Root, name string) ([]byte, error) {
	f, err := s.open(root, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := fsread.Opened(f, filepath.Join(s.dir, filepath.FromSlash(name)), maxProfileSize)
	if errors.Is(err, fsread.ErrNotRegular) || errors.Is(err, fsread.ErrTooLarge) {
		return nil, fmt.Errorf("%w: %w", ErrInvalidProfile, err)
	}
	return data, err
}

// open opens name through root, without blocking on a FIFO. Root refuses every link
// that leads out, and also absolute links, even those whose target is inside: when it
// refuses, the path resolved on the host tells the two apart, naming where a link leads
// out to, and an absolute link to inside the directory is opened at its target, through
// root again.
func (s *Store) open(root *os.Root, name string) (*os.File, error) {
	const flags = fsread.Flags
	f, openErr := root.OpenFile(name, flags, 0)
	if openErr == nil {
		return f, nil
	}
	dir, err := filepath.EvalSymlinks(s.dir)
	if err != nil {
		return nil, openErr
	}
	target, err := filepath.EvalSymlinks(filepath.Join(s.dir, filepath.FromSlash(name)))
	if err != nil {
		return nil, openErr
	}
	rel, err := filepath.Rel(dir, target)
	if err != nil || !filepath.IsLocal(rel) {
		return nil, fmt.Errorf("%w: it leads to %s, outside the profile directory", ErrInvalidProfile, target)
	}
	return root.OpenFile(rel, flags, 0)
}

// Build returns the NRI seccomp policy for a container: the requested profile for the
// container's capabilities, with the extra rules merged and, in complain mode, with its
// refusals turned into logs. The result is cached per profile version and variant and
// shared between callers: it must not be modified.
func (s *Store) Build(req Request) (*api.LinuxSeccomp, error) {
	if req.Arch != "" && req.Arch != s.table.goarch {
		// moby's conversion and the syscall tables are those of the node's kernel, which
		// is also what filters the calls of a foreign-architecture (emulated) container.
		return nil, fmt.Errorf("building seccomp profile for %q: profiles are built for the node's architecture %s: %w", req.Arch, s.table.goarch, ErrUnsupportedArch)
	}
	src, err := s.lookup(req.Profile)
	if err != nil {
		return nil, err
	}
	return src.builds.get(src.key(req), func() (*api.LinuxSeccomp, error) { return s.compile(src, req) })
}

// compile is the uncached build: moby's conversion, extra rules, complain mode, NRI form.
func (s *Store) compile(src *source, req Request) (*api.LinuxSeccomp, error) {
	oci, err := src.setup(specForCaps(req.Capabilities))
	if err != nil {
		return nil, fmt.Errorf("building seccomp profile %q: %w", src.name, err)
	}
	if oci == nil {
		// Validation refuses profiles without a default action, which moby reads as
		// "no seccomp"; never hand that out as a policy.
		return nil, fmt.Errorf("building seccomp profile %q: %w: it disables seccomp", src.name, ErrInvalidProfile)
	}
	oci.Syscalls = s.rules.merge(oci.Syscalls)
	if req.Complain {
		complain(oci)
	}
	return api.FromOCILinuxSeccomp(oci), nil
}

func (s *Store) lookup(name string) (*source, error) {
	if name == "" {
		return s.fallback, nil
	}
	if err := validateName(name); err != nil {
		return nil, err
	}
	if s.dir == "" {
		return nil, fmt.Errorf("seccomp profile %q: no profile directory configured: %w", name, ErrNotFound)
	}
	s.mu.RLock()
	e := s.files[name]
	s.mu.RUnlock()
	switch {
	case e == nil:
		return nil, fmt.Errorf("seccomp profile %q in %s: %w", name, s.dir, ErrNotFound)
	case e.good == nil:
		return nil, e.err
	}
	return e.good, nil
}

// Status counts the profile files in use and those invalid (a file can be both: its
// previous version stays in use), with the reason for each invalid one by name.
func (s *Store) Status() (loaded, invalid int, errs map[string]error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	errs = map[string]error{}
	for name, e := range s.files {
		if e.good != nil {
			loaded++
		}
		if e.err != nil {
			invalid++
			errs[name] = e.err
		}
	}
	return loaded, invalid, errs
}
