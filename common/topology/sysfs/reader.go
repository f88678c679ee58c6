package sysfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/nri-suite/nri-suite/common/topology/cpuset"
)

// reader reads files relative to a sysfs root and reports each file it read.
type reader struct {
	root   string
	onRead func(rel string)
}

func (r *reader) abs(rel string) string {
	return filepath.Join(r.root, filepath.FromSlash(rel))
}

// read returns the content of a file without its trailing newline.
func (r *reader) read(rel string) (string, error) {
	abs := r.abs(rel)
	data, err := os.ReadFile(abs)
	if err != nil {
		var pathErr *fs.PathError
		if errors.As(err, &pathErr) {
			err = pathErr.Err // the path is already in our message
		}
		return "", fmt.Errorf("read %s: %w", abs, err)
	}
	if r.onRead != nil {
		r.onRead(rel)
	}
	return strings.TrimRight(string(data), "\n"), nil
}

// readOptional is read for a file that may be absent: found is false then.
func (r *reader) readOptional(rel string) (content string, found bool, err error) {
	content, err = r.read(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	return content, err == nil, err
}

// invalid is the error for a file whose content is not what was expected.
func (r *reader) invalid(rel, content, expected string) error {
	return fmt.Errorf("parse %s: got %q, expected %s", r.abs(rel), content, expected)
}

func (r *reader) cpuSet(rel string) (cpuset.CPUSet, error) {
	content, err := r.read(rel)
	if err != nil {
		return cpuset.CPUSet{}, err
	}
	return r.parseCPUSet(rel, content)
}

func (r *reader) parseCPUSet(rel, content string) (cpuset.CPUSet, error) {
	set, err := cpuset.Parse(content)
	if err != nil {
		return cpuset.CPUSet{}, fmt.Errorf("parse %s: expected a cpu list: %w", r.abs(rel), err)
	}
	return set, nil
}

// id parses the content of a file holding a non-negative id.
func (r *reader) id(rel, what string, content string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(content))
	if err != nil || n < 0 {
		return 0, r.invalid(rel, content, what+" (a non-negative integer)")
	}
	return n, nil
}

// intFile reads a file holding a non-negative integer.
func (r *reader) intFile(rel, what string) (int, error) {
	content, err := r.read(rel)
	if err != nil {
		return 0, err
	}
	return r.id(rel, what, content)
}

// uintFile reads a file holding a counter.
func (r *reader) uintFile(rel, what string) (uint64, error) {
	content, err := r.read(rel)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(strings.TrimSpace(content), 10, 64)
	if err != nil {
		return 0, r.invalid(rel, content, what+" (a non-negative integer)")
	}
	return n, nil
}

// numberedEntries maps the number of each entry of a directory named prefix
// followed by a number (node3, index2) to the entry's name; found is false
// when the directory is absent.
func (r *reader) numberedEntries(rel, prefix string) (numbers map[int]string, found bool, err error) {
	entries, err := os.ReadDir(r.abs(rel))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("list %s: %w", r.abs(rel), err)
	}
	numbers = map[int]string{}
	for _, e := range entries {
		digits, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok {
			continue
		}
		if n, err := strconv.Atoi(digits); err == nil && n >= 0 && digits == strconv.Itoa(n) {
			numbers[n] = e.Name()
		}
	}
	return numbers, true, nil
}
