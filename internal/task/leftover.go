package task

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/troupe-dev/troupe/internal/clip"
	"github.com/troupe-dev/troupe/internal/pidfd"
	"github.com/troupe-dev/troupe/internal/procstat"
)

// Stopped is what a supervisor found still running of a task when its job
// ended (exit, kill or timeout) and stopped: every descendant of the job,
// those that left its process group or its session (setsid, a double
// fork) included, since the supervisor is their subreaper (contract C11).
type Stopped struct {
	Count  int    `json:"count"`  // processes stopped
	Signal string `json:"signal"` // the strongest signal it took: "SIGTERM" or "SIGKILL"
	// Procs are the first maxStoppedListed of them.
	Procs []StoppedProc `json:"procs,omitempty"`
	// Remaining counts processes still there after the escalation (stuck
	// in the kernel); normally 0.
	Remaining int `json:"remaining,omitempty"`
}

// StoppedProc is one process a supervisor stopped.
type StoppedProc struct {
	PID     int    `json:"pid"`
	Command string `json:"command"` // its command line, cut at maxStoppedCommand bytes
	// Escaped says how it had left the job: "setsid" (its own session),
	// "own group" (its own process group), or "" (still in the job's group).
	Escaped string `json:"escaped,omitempty"`
}

const (
	maxStoppedListed  = 16
	maxStoppedCommand = 200
)

// Statement says what was stopped, e.g. "stopped 2 leftover processes
// with SIGTERM: sleep 1000 (pid 12, setsid), sh -c … (pid 14)".
func (s *Stopped) Statement() string {
	if s == nil || s.Count == 0 {
		return ""
	}
	var sb strings.Builder
	noun := "processes"
	if s.Count == 1 {
		noun = "process"
	}
	fmt.Fprintf(&sb, "stopped %d leftover %s with %s", s.Count, noun, s.Signal)
	for i, p := range s.Procs {
		if i == 0 {
			sb.WriteString(": ")
		} else {
			sb.WriteString(", ")
		}
		fmt.Fprintf(&sb, "%s (pid %d", p.Command, p.PID)
		if p.Escaped != "" {
			sb.WriteString(", " + p.Escaped)
		}
		sb.WriteString(")")
	}
	if more := s.Count - len(s.Procs); more > 0 {
		fmt.Fprintf(&sb, " and %d more", more)
	}
	if s.Remaining > 0 {
		fmt.Fprintf(&sb, "; %d could not be stopped", s.Remaining)
	}
	return sb.String()
}

// becomeSubreaper makes this process the reaper of its orphaned
// descendants: a process of the job that daemonizes (setsid, double fork)
// is re-parented to it, not to init, so it can be found and stopped.
func becomeSubreaper() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("become child subreaper: %w", err)
	}
	return nil
}

// descendant is a live process under this one.
type descendant struct {
	pid   int
	start uint64
	stat  procstat.Stat
}

// descendants lists the live (not zombie) descendants of process root,
// from /proc: children by PPid, recursively.
func descendants(root int) []descendant {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	kids := map[int][]descendant{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		st, err := procstat.Read(pid)
		if err != nil {
			continue
		}
		kids[st.PPID] = append(kids[st.PPID], descendant{pid: pid, start: st.Start, stat: st})
	}
	var out []descendant
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, d := range kids[p] {
			queue = append(queue, d.pid)
			if d.stat.State != 'Z' {
				out = append(out, d)
			}
		}
	}
	return out
}

// signalDescendant sends sig to d if the pid is still d (same start time):
// a pid freed and reused since the scan is someone else.
func signalDescendant(d descendant, sig unix.Signal) {
	p, err := pidfd.Open(d.pid)
	if err != nil {
		return
	}
	defer p.Close()
	if st, err := procstat.Read(d.pid); err == nil && st.Start == d.start && st.State != 'Z' {
		p.Signal(sig)
	}
}

// reapOrphans collects the exit status of every child of this process
// that has ended. Call it only once the job itself was waited for: it
// would take the job's status otherwise.
func reapOrphans() {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
	}
}

// cmdline is pid's command line, spaces between its arguments, cut at
// maxStoppedCommand bytes; its name in /proc/<pid>/stat when unreadable.
func cmdline(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || len(b) == 0 {
		return "pid " + strconv.Itoa(pid)
	}
	b = bytes.TrimRight(b, "\x00")
	b = bytes.ReplaceAll(b, []byte{0}, []byte{' '})
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	s, _ = clip.Ellipsis(s, maxStoppedCommand)
	return s
}

// stopLeftovers stops every descendant of this process (the job's main
// process has ended and was waited for) by escalation: SIGTERM to each,
// up to grace for them to go, then SIGKILL, up to grace again. New ones
// (forked meanwhile) are found by scanning again. It reaps what ends and
// returns what it stopped; nil when nothing was left. jobSession and
// jobGroup are the job's, to say how each process had escaped.
func stopLeftovers(jobSession, jobGroup int, grace time.Duration) *Stopped {
	self := os.Getpid()
	var s Stopped
	seen := map[int]bool{}
	termed := map[int]bool{}
	deadline := time.Now().Add(grace)
	killAt := deadline
	giveUp := deadline.Add(grace)
	pause := time.Millisecond
	for {
		reapOrphans()
		ds := descendants(self)
		if len(ds) == 0 {
			break
		}
		now := time.Now()
		if now.After(giveUp) {
			s.Remaining = len(ds)
			break
		}
		for _, d := range ds {
			if !seen[d.pid] {
				seen[d.pid] = true
				s.Count++
				if len(s.Procs) < maxStoppedListed {
					p := StoppedProc{PID: d.pid, Command: cmdline(d.pid)}
					switch {
					case d.stat.Session != jobSession:
						p.Escaped = "setsid"
					case d.stat.PGRP != jobGroup:
						p.Escaped = "own group"
					}
					s.Procs = append(s.Procs, p)
				}
			}
			switch {
			case now.After(killAt):
				signalDescendant(d, unix.SIGKILL)
				s.Signal = "SIGKILL"
			case !termed[d.pid]:
				termed[d.pid] = true
				signalDescendant(d, unix.SIGTERM)
				if s.Signal == "" {
					s.Signal = "SIGTERM"
				}
			}
		}
		// Bounded polling: the leftovers are not all our children, so no
		// wait call covers them.
		time.Sleep(pause)
		pause = min(2*pause, 50*time.Millisecond)
	}
	reapOrphans()
	if s.Count == 0 {
		return nil
	}
	return &s
}
