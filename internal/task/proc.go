package task

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/troupe-dev/troupe/internal/pidfd"
)

// procStat is what /proc/<pid>/stat says about a process.
type procStat struct {
	State   byte   // field 3: R, S, D, Z, …
	PPID    int    // field 4
	PGRP    int    // field 5
	Session int    // field 6
	Start   uint64 // field 22: start time, clock ticks since boot
}

// readProcStat reads /proc/<pid>/stat. A process that does not exist fails
// with an error matching fs.ErrNotExist.
func readProcStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	st, err := parseProcStat(b)
	if err != nil {
		return procStat{}, fmt.Errorf("read /proc/%d/stat: %w", pid, err)
	}
	return st, nil
}

// parseProcStat parses the contents of /proc/<pid>/stat. The command name
// (field 2) is in parentheses and may itself hold spaces and parentheses,
// so the fields are counted from the last ')'.
func parseProcStat(b []byte) (procStat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, errors.New("no ')' after the command name")
	}
	f := bytes.Fields(b[i+1:])
	// f[0] is field 3; field n is f[n-3].
	if len(f) < 20 {
		return procStat{}, fmt.Errorf("%d fields after the command name, want at least 20", len(f))
	}
	if len(f[0]) != 1 {
		return procStat{}, fmt.Errorf("bad state %q", f[0])
	}
	st := procStat{State: f[0][0]}
	var err error
	for _, x := range []struct {
		dst   *int
		field int
	}{{&st.PPID, 4}, {&st.PGRP, 5}, {&st.Session, 6}} {
		if *x.dst, err = strconv.Atoi(string(f[x.field-3])); err != nil {
			return procStat{}, fmt.Errorf("field %d: %w", x.field, err)
		}
	}
	if st.Start, err = strconv.ParseUint(string(f[22-3]), 10, 64); err != nil {
		return procStat{}, fmt.Errorf("field 22: %w", err)
	}
	return st, nil
}

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
	st, err := readProcStat(pid)
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
	if st, err := readProcStat(sid); err == nil && st.Start != start {
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
		if st, err := readProcStat(pid); err == nil && st.Session == sid && st.State != 'Z' {
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
		if st, err := readProcStat(pid); err == nil && st.Session == sid && st.State != 'Z' {
			pids = append(pids, pid)
		}
	}
	return pids
}
