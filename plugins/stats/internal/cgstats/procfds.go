package cgstats

import (
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// readProcs counts the processes of a cgroup.procs file and, with proc
// (the host's /proc) set, their open files and sockets, as cAdvisor counts
// them: every entry of /proc/<pid>/fd, and those that link to "socket:";
// and returns the first process, with proc set.
// A process that exits meanwhile counts no files, as in cAdvisor; one
// whose fds may not be listed (without CAP_SYS_PTRACE, a process with
// capabilities the plugin lacks) leaves the cgroup's counts out.
func readProcs(path, proc string) (p *Pids, first string, err error) {
	p = &Pids{FDsRead: proc != ""}
	var each func(pid string)
	if proc != "" {
		each = func(pid string) {
			if first == "" {
				first = pid
			}
			if p.FDsRead && !countFDs(filepath.Join(proc, pid, "fd"), p) {
				p.FDsRead, p.FDs, p.Sockets = false, 0, 0
			}
		}
	}
	n, err := countProcs(path, each)
	if err != nil {
		return nil, "", err
	}
	p.Processes = n
	return p, first, nil
}

// countFDs adds the open files in dir to p, and says whether it could list
// them (or the process is gone). The links are read relative to the
// directory into one buffer: a path and a string per file cost as much
// as the system calls.
func countFDs(dir string, p *Pids) bool {
	d, err := os.Open(dir)
	if err != nil {
		return notExist(err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return notExist(err)
	}
	p.FDs += uint64(len(names))
	fd := int(d.Fd())
	var buf [len("socket:")]byte
	for _, name := range names {
		// A link longer than buf is cut, which is all the prefix needs.
		if n, err := unix.Readlinkat(fd, name, buf[:]); err == nil && string(buf[:n]) == "socket:" {
			p.Sockets++
		}
	}
	return true
}
