package task

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
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

// pidfd is a process handle from pidfd_open(2), registered in Go's poller:
// it becomes readable when the process exits, and signals sent through it
// never reach another process that reused the pid.
type pidfd struct {
	pid int
	f   *os.File
}

// openPidfd opens a pidfd on pid. A process that does not exist fails with
// an error matching unix.ESRCH.
func openPidfd(pid int) (*pidfd, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		if errors.Is(err, unix.ENOSYS) {
			return nil, fmt.Errorf("open pidfd of %d: pidfd_open is missing (Linux 5.3 or later is needed): %w", pid, err)
		}
		return nil, fmt.Errorf("open pidfd of %d: %w", pid, err)
	}
	// Non-blocking, os.NewFile registers the fd in Go's poller (epoll):
	// waiting for the exit then parks a goroutine, not a thread.
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("open pidfd of %d: %w", pid, err)
	}
	f := os.NewFile(uintptr(fd), "pidfd:"+strconv.Itoa(pid))
	if err := f.SetReadDeadline(time.Time{}); err != nil {
		f.Close()
		return nil, fmt.Errorf("open pidfd of %d: not pollable: %w", pid, err)
	}
	return &pidfd{pid: pid, f: f}, nil
}

func (p *pidfd) Close() error { return p.f.Close() }

// pollIn reports whether fd is readable now.
func pollIn(fd uintptr) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return err == nil && n > 0
	}
}

// wait returns nil once the process has exited (a zombie counts), or ctx's
// cause when ctx ends first.
func (p *pidfd) wait(ctx context.Context) error {
	rc, err := p.f.SyscallConn()
	if err != nil {
		return fmt.Errorf("wait for process %d: %w", p.pid, err)
	}
	// A deadline in the past wakes the parked reader.
	stop := context.AfterFunc(ctx, func() { p.f.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	var done bool
	err = rc.Read(func(fd uintptr) bool {
		done = pollIn(fd)
		return done
	})
	switch {
	case done:
		return nil
	case ctx.Err() != nil:
		return context.Cause(ctx)
	}
	return fmt.Errorf("wait for process %d: %w", p.pid, err)
}

// reap collects the exit status of the process if it is a child of this
// process (a supervisor started by an earlier Manager of the same process,
// as in tests), so that it does not stay a zombie. It does nothing for any
// other process.
func (p *pidfd) reap() {
	rc, err := p.f.SyscallConn()
	if err != nil {
		return
	}
	rc.Control(func(fd uintptr) {
		var info unix.Siginfo
		for {
			err := unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOHANG, nil)
			if !errors.Is(err, unix.EINTR) {
				return // nil, or ECHILD: not our child
			}
		}
	})
}

// signal sends sig to the process. A process that already exited is not an
// error.
func (p *pidfd) signal(sig unix.Signal) error {
	var err error
	rc, cerr := p.f.SyscallConn()
	if cerr != nil {
		return cerr
	}
	rc.Control(func(fd uintptr) { err = unix.PidfdSendSignal(int(fd), sig, nil, 0) })
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	return err
}

// attachProcess opens a pidfd on the process pid if it is the one that
// started at start (clock ticks since boot): a reused pid is someone else.
// It returns nil, nil when that process is gone. A zombie still counts as
// there: its pidfd reports the exit at once.
func attachProcess(pid int, start uint64) (*pidfd, error) {
	if pid <= 0 {
		return nil, nil
	}
	p, err := openPidfd(pid)
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
		p, err := openPidfd(pid)
		if err != nil {
			continue
		}
		// Re-check through the pinned process: pid may have been reused
		// between the scan and the open.
		if st, err := readProcStat(pid); err == nil && st.Session == sid && st.State != 'Z' {
			if p.signal(unix.SIGKILL) == nil {
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
