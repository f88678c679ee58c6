package state

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nri-suite/nri-suite/common/fsread"
)

// LockWait is how long a writer waits for a directory's lock: well inside
// NRI's 2 s request timeout, so that a plugin whose handler writes (a
// device record in CreateContainer, a checkpoint in Synchronize) answers
// the runtime with an error instead of being dropped by it. A write takes
// milliseconds, so a lock held this long belongs to a stuck process.
const LockWait = 500 * time.Millisecond

// ErrLockHeld matches the error of a lock not obtained within LockWait.
var ErrLockHeld = errors.New("lock held")

// inProcess serializes, by lock file, the writers of this process before
// they take the flock, so that they queue on a mutex instead of polling the
// flock against each other, which is unfair: under load one of them could
// lose for LockWait to its siblings.
var inProcess sync.Map // lock file -> *sync.Mutex

// stuck holds the lock files that some write of this process found held
// for LockWait: the next writes try them once and fail at once, until one
// gets the lock. A request writing many records (a Synchronize) thus
// waits LockWait once, not once per record.
var stuck sync.Map

// lockDir takes the writers' lock of dir and returns its release: first the
// in-process mutex of its lock file, then the flock. The kernel drops the
// flock when its holder dies, so a killed writer never blocks others; a
// live one that holds it past LockWait fails the caller with an error
// naming the lock file and its holder.
func lockDir(dir string) (func(), error) {
	path := filepath.Join(dir, lockName)
	m, _ := inProcess.LoadOrStore(path, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		mu.Unlock()
		return nil, fmt.Errorf("opening lock file: %w", err)
	}
	fail := func(err error) (func(), error) {
		_ = f.Close()
		mu.Unlock()
		return nil, err
	}
	deadline := time.Now().Add(LockWait)
	for delay := time.Millisecond; ; delay = min(2*delay, 20*time.Millisecond) {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			stuck.Delete(path)
			// Closing the descriptor releases the flock.
			return func() { _ = f.Close(); mu.Unlock() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			return fail(fmt.Errorf("locking %s: %w", path, err))
		}
		if _, known := stuck.Load(path); known || time.Now().After(deadline) {
			stuck.Store(path, struct{}{})
			return fail(fmt.Errorf("%w: %s is held by %s for longer than %v (the lock of the writers of %s: the suite's plugins and tools)",
				ErrLockHeld, path, holders(f), LockWait, dir))
		}
		time.Sleep(delay)
	}
}

// holders names the processes /proc/locks says hold a lock on f, for the
// error of a lock that stays held: "pid 1234 (nri-device-inj)".
func holders(f *os.File) string {
	const unknown = "a process not visible from here (another PID namespace)"
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return unknown
	}
	locks, err := fsread.File("/proc/locks", 4<<20)
	if err != nil {
		return unknown
	}
	// "1: FLOCK  ADVISORY  WRITE 3568 fe:00:9978009 0 EOF"; waiters have
	// "->" after the number.
	id := fmt.Sprintf("%02x:%02x:%d", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
	var names []string
	scanner := bufio.NewScanner(bytes.NewReader(locks))
	for scanner.Scan() {
		fields := strings.Fields(scanner.Text())
		if len(fields) < 6 || fields[1] == "->" || fields[5] != id {
			continue
		}
		pid, err := strconv.Atoi(fields[4])
		if err != nil || pid <= 0 {
			continue
		}
		name := fmt.Sprintf("pid %d", pid)
		if comm, err := fsread.File(fmt.Sprintf("/proc/%d/comm", pid), 64); err == nil {
			name += " (" + strings.TrimSpace(string(comm)) + ")"
		}
		names = append(names, name)
	}
	if len(names) == 0 {
		return unknown
	}
	return strings.Join(names, ", ")
}
