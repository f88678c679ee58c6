// Package fsread reads files that someone else may have replaced with
// something that is not a file: a configuration, a shared-state record, a
// checkpoint, a seccomp profile, a CDI spec, a health-check file.
//
// os.ReadFile of a FIFO blocks until a writer appears, and of a huge file
// fills memory; on an NRI request path either outlives the runtime's 2 s
// timeout, after which the runtime creates the container without the
// plugin. So every such read goes through here: the file is opened with
// O_NONBLOCK (a FIFO opens at once, and nothing is ever read from it), the
// opened descriptor is checked to be a regular file, and at most a limit is
// read. Anything else is an error naming the path and what it is, or the
// limit.
package fsread

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

var (
	// ErrNotRegular: the path is a FIFO, a socket, a device node, a
	// directory, or (for NoFollow) a symbolic link.
	ErrNotRegular = errors.New("not a regular file")
	// ErrTooLarge: the file is larger than the caller's limit.
	ErrTooLarge = errors.New("larger than the limit")
)

// Flags are the open(2) flags of every read: opening a FIFO with O_NONBLOCK
// returns at once, even without a writer.
const Flags = os.O_RDONLY | syscall.O_NONBLOCK

// File reads the regular file at path, following symbolic links, if it
// holds at most limit bytes.
func File(path string, limit int64) ([]byte, error) { return read(path, Flags, limit) }

// NoFollow is File for a path that must not be a symbolic link (files the
// suite writes itself, which are never links).
func NoFollow(path string, limit int64) ([]byte, error) {
	return read(path, Flags|syscall.O_NOFOLLOW, limit)
}

func read(path string, flags int, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, flags, 0)
	if errors.Is(err, syscall.ELOOP) && flags&syscall.O_NOFOLLOW != 0 {
		return nil, fmt.Errorf("reading %s: it is a symbolic link: %w", path, ErrNotRegular)
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	defer f.Close()
	return Opened(f, path, limit)
}

// Opened reads f, opened with Flags (through an os.Root, say), as File
// reads path: only if it is a regular file of at most limit bytes.
func Opened(f *os.File, path string, limit int64) ([]byte, error) {
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("reading %s: it is %s: %w", path, describe(info.Mode()), ErrNotRegular)
	}
	if info.Size() > limit {
		return nil, tooLarge(path, limit)
	}
	// The size is checked again while reading: the file may grow, and
	// files of /proc and /sys report a size of 0 or 4096 whatever they hold.
	// Sized to the file up front: growing to a checkpoint of megabytes
	// copied and cleared it a dozen times. The margin is what ReadFrom
	// wants free to read on, so that the end is seen without growing.
	buf := bytes.NewBuffer(make([]byte, 0, min(info.Size(), limit)+bytes.MinRead))
	if _, err := buf.ReadFrom(io.LimitReader(f, limit+1)); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	data := buf.Bytes()
	if int64(len(data)) > limit {
		return nil, tooLarge(path, limit)
	}
	return data, nil
}

func tooLarge(path string, limit int64) error {
	return fmt.Errorf("reading %s: %w of %s", path, ErrTooLarge, Size(limit))
}

// describe names a file type in words for an error message.
func describe(mode fs.FileMode) string {
	switch t := mode.Type(); {
	case t&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case t&fs.ModeSocket != 0:
		return "a socket"
	case t&fs.ModeCharDevice != 0:
		return "a character device"
	case t&fs.ModeDevice != 0:
		return "a block device"
	case t&fs.ModeDir != 0:
		return "a directory"
	case t&fs.ModeSymlink != 0:
		return "a symbolic link"
	default:
		return "a file of type " + t.String()
	}
}

// Size writes a limit for people: "1 MiB", "4 KiB", "1000 bytes".
func Size(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
