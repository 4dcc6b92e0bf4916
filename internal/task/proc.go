package task

import (
	"errors"
	"io/fs"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/troupe-dev/troupe/internal/pidfd"
	"github.com/troupe-dev/troupe/internal/procstat"
)

// attachProcess opens a pidfd on the process pid if it is the one that
// started at start (clock ticks since boot): a reused pid is someone else.
// It returns nil, nil when that process is gone. A zombie still counts as
// there: its pidfd reports the exit at once.
func attachProcess(pid int, start uint64) (*pidfd.Process, error) {
	if pid <= 0 {
		return nil, nil
	}
	p, err := pidfd.Open(pid)
	if errors.Is(err, unix.ESRCH) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	// The pidfd pins the process that had pid when it was opened; reading
	// the start time after opening it checks that this is the right one.
	st, err := procstat.Read(pid)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		p.Close()
		return nil, nil
	case err != nil:
		// /proc unreadable: the pidfd is still a process with that pid,
		// and most likely ours. When in doubt, it is live.
		return p, nil
	case st.Start != start:
		p.Close()
		return nil, nil
	}
	return p, nil
}

// killSession SIGKILLs every live process of the session sid (the session
// of a supervisor that died) and returns how many it killed. The session
// id is the supervisor's pid, which the kernel does not reuse while the
// session has members; if a process with that pid exists with another
// start time, the pid was reused, so the session is empty and nothing is
// touched.
func killSession(sid int, start uint64) int {
	if sid <= 1 {
		return 0
	}
	if st, err := procstat.Read(sid); err == nil && st.Start != start {
		return 0
	}
	killed := 0
	for _, pid := range sessionMembers(sid) {
		p, err := pidfd.Open(pid)
		if err != nil {
			continue
		}
		// Re-check through the pinned process: pid may have been reused
		// between the scan and the open.
		if st, err := procstat.Read(pid); err == nil && st.Session == sid && st.State != 'Z' {
			if p.Signal(unix.SIGKILL) == nil {
				killed++
			}
		}
		p.Close()
	}
	return killed
}

// sessionMembers lists the pids of the live (not zombie) processes of
// session sid, from /proc.
func sessionMembers(sid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		if st, err := procstat.Read(pid); err == nil && st.Session == sid && st.State != 'Z' {
			pids = append(pids, pid)
		}
	}
	return pids
}
