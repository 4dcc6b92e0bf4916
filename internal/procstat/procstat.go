// Package procstat is the one reader of /proc/<pid>/stat: a process's state,
// parent, group, session and start time. The start time (field 22, clock
// ticks after boot) is what tells a process from a later one that reused
// its pid: pid + start time is a process's identity (C8), and Claude Code's
// session registry records it as procStart.
//
// Concurrency: stateless; every function is safe for concurrent use.
//
// Who may import: anything that checks a process by its pid (internal/task,
// internal/claudesessions, internal/engine/claude, tests). It depends on
// nothing of troupe.
package procstat

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
)

// Stat is what /proc/<pid>/stat says about a process.
type Stat struct {
	State   byte   // field 3: R, S, D, Z, …
	PPID    int    // field 4
	PGRP    int    // field 5
	Session int    // field 6
	Start   uint64 // field 22: start time, clock ticks after boot
}

// Zombie reports whether the process has exited and waits to be reaped:
// it holds its pid but runs nothing.
func (s Stat) Zombie() bool { return s.State == 'Z' }

// StartString is the start time as the kernel writes it (decimal), the
// form Claude Code's registry records as procStart.
func (s Stat) StartString() string { return strconv.FormatUint(s.Start, 10) }

// Read reads /proc/<pid>/stat. A process that does not exist fails with an
// error matching fs.ErrNotExist (or ESRCH, when it went between the open
// and the read).
func Read(pid int) (Stat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Stat{}, err
	}
	st, err := Parse(b)
	if err != nil {
		return Stat{}, fmt.Errorf("read /proc/%d/stat: %w", pid, err)
	}
	return st, nil
}

// Parse parses the contents of /proc/<pid>/stat. The command name (field
// 2) is in parentheses and may itself hold spaces and parentheses, so the
// fields are counted from the last ')'.
func Parse(b []byte) (Stat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return Stat{}, errors.New("parse /proc stat: no ')' after the command name")
	}
	f := bytes.Fields(b[i+1:])
	// f[0] is field 3; field n is f[n-3].
	if len(f) < 20 {
		return Stat{}, fmt.Errorf("parse /proc stat: %d fields after the command name, want at least 20", len(f))
	}
	if len(f[0]) != 1 {
		return Stat{}, fmt.Errorf("parse /proc stat: bad state %q", f[0])
	}
	st := Stat{State: f[0][0]}
	var err error
	for _, x := range []struct {
		dst   *int
		field int
	}{{&st.PPID, 4}, {&st.PGRP, 5}, {&st.Session, 6}} {
		if *x.dst, err = strconv.Atoi(string(f[x.field-3])); err != nil {
			return Stat{}, fmt.Errorf("parse /proc stat: field %d: %w", x.field, err)
		}
	}
	if st.Start, err = strconv.ParseUint(string(f[22-3]), 10, 64); err != nil {
		return Stat{}, fmt.Errorf("parse /proc stat: field 22: %w", err)
	}
	return st, nil
}
