// Package pidfd holds process handles (pidfd_open(2), Linux 5.3 or later)
// registered in Go's poller. Waiting for a process to exit parks a
// goroutine on the poller (epoll), not an OS thread in a blocking wait, so
// a daemon with a thousand children does not hold a thousand threads; and
// a signal sent through a handle never reaches another process that reused
// the pid.
//
// Concurrency: every method of Process is safe for concurrent use, except
// that one Wait at a time may run; Close ends a Wait in progress.
//
// Who may import: the packages that own child processes (internal/proc,
// internal/task), internal/cli (troupe stop waits for the daemon to exit)
// and tests. It depends on nothing of troupe.
package pidfd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// Process is a handle on one process.
type Process struct {
	pid int
	f   *os.File
}

// Open opens a handle on the process pid. A process that does not exist
// fails with an error matching unix.ESRCH. The handle pins that process:
// once it is open, a reuse of pid is another process.
func Open(pid int) (*Process, error) {
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
	return &Process{pid: pid, f: f}, nil
}

// PID is the process's id.
func (p *Process) PID() int { return p.pid }

// Close closes the handle; a Wait in progress returns an error.
func (p *Process) Close() error { return p.f.Close() }

// Wait returns nil once the process has exited (a zombie counts: Wait does
// not reap it), or ctx's cause when ctx ends first; it may be called again
// after that. It parks the calling goroutine on the poller.
func (p *Process) Wait(ctx context.Context) error {
	rc, err := p.f.SyscallConn()
	if err != nil {
		return fmt.Errorf("wait for process %d: %w", p.pid, err)
	}
	// A deadline in the past wakes the parked reader; an earlier Wait's
	// is cleared first.
	if err := p.f.SetReadDeadline(time.Time{}); err != nil {
		return fmt.Errorf("wait for process %d: %w", p.pid, err)
	}
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

// pollIn reports whether fd is readable now: for a pidfd, whether its
// process has exited.
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

// Reap collects the exit status of the process if it has exited and is a
// child of this process, so that it does not stay a zombie. It does
// nothing for a process still running or for any other process's child.
func (p *Process) Reap() {
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

// Signal sends sig to the process. A process that already exited is not
// an error.
func (p *Process) Signal(sig unix.Signal) error {
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

// SignalGroupButLeader sends sig to every process of the process group
// pgid but its leader (pid pgid): a sandbox's bubblewrap, which forwards no
// signal and whose death would SIGKILL the program before its own handler
// ran. Each is signalled through a handle opened, then checked to be in
// the group still, so a pid reused meanwhile is not hit.
func SignalGroupButLeader(pgid int, sig unix.Signal) error {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == pgid {
			continue
		}
		if g, err := unix.Getpgid(pid); err != nil || g != pgid {
			continue
		}
		h, err := Open(pid)
		if err != nil {
			continue // gone
		}
		if g, err := unix.Getpgid(pid); err == nil && g == pgid {
			h.Signal(sig)
		}
		h.Close()
	}
	return nil
}
