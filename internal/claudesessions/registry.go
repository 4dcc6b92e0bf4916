package claudesessions

import (
	"errors"
	"fmt"
	"github.com/troupe-dev/troupe/internal/claudefmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/troupe-dev/troupe/internal/procstat"
)

// ProcStartTime reads field 22 (starttime, clock ticks after boot) of a
// /proc/<pid>/stat line. The second field, the command name, is in
// parentheses and may hold spaces and parentheses itself: the fields after
// it start after the last ')'.
func ProcStartTime(stat []byte) (string, error) {
	st, err := procstat.Parse(stat)
	if err != nil {
		return "", err
	}
	return st.StartString(), nil
}

// Liveness is what the registry says of one session at one query.
type Liveness struct {
	Live       bool
	Status     string // idle, busy, waiting, or "" when the CLI does not say
	WaitingFor string
	PIDs       []int  // the live processes naming the session
	Doubt      string // why it reads as live without proof; "" when proved
}

// Registry reads the CLI's session registry. It caches nothing: every
// Read lists the folder and checks each pid again (C8).
type Registry struct {
	// Dir is <config>/sessions.
	Dir string
	// Proc is the proc file system; default "/proc". Tests point it
	// elsewhere.
	Proc string
	// ReadStat, when set, replaces reading <Proc>/<pid>/stat (tests).
	ReadStat func(pid int) ([]byte, error)
}

// Snapshot is one read of the registry.
type Snapshot struct {
	At       time.Time
	Sessions map[string]Liveness // live sessions only, by id
	// Unknown lists registry files that could not be read or decoded
	// while their pid may run: some session is live and troupe cannot
	// tell which, so no session can be proved dead (resume is refused).
	Unknown []string
	Stale   int // files of dead processes (SIGKILLed, or pid reused)
}

// Read lists the registry and checks every file's process.
func (r *Registry) Read() Snapshot {
	s := Snapshot{At: time.Now(), Sessions: map[string]Liveness{}}
	es, err := os.ReadDir(r.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return s
	}
	if err != nil {
		s.Unknown = append(s.Unknown, fmt.Sprintf("%s: %v", r.Dir, err))
		return s
	}
	self := r.selfPIDNS()
	for _, e := range es {
		name := e.Name()
		pidText, ok := strings.CutSuffix(name, ".json")
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid <= 0 {
			continue
		}
		path := filepath.Join(r.Dir, name)
		f, err := r.readFile(path)
		if err != nil {
			// Unreadable: if its process may run, some session is live.
			if alive, _ := r.exists(pid); alive {
				s.Unknown = append(s.Unknown, fmt.Sprintf("%s: %v", path, err))
			}
			continue
		}
		lv, live := r.check(f, self)
		if !live {
			s.Stale++
			continue
		}
		if old, ok := s.Sessions[f.SessionID]; ok { // two processes on one session
			lv.PIDs = append(old.PIDs, lv.PIDs...)
			if old.Doubt == "" {
				lv.Doubt = "" // one of them is proved live
			}
			if statusRank[old.Status] > statusRank[lv.Status] {
				lv.Status, lv.WaitingFor = old.Status, old.WaitingFor
			}
		}
		s.Sessions[f.SessionID] = lv
	}
	return s
}

// readFile reads one registry file: a regular file, no link followed,
// without blocking, bounded.
func (r *Registry) readFile(path string) (claudefmt.RegistryFile, error) {
	var last error
	for range 2 { // a file read while the CLI writes it may be cut: once more
		rf, err := claudefmt.ReadRegistryFile(path)
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			return rf, err
		}
		last = err
		time.Sleep(5 * time.Millisecond)
	}
	return claudefmt.RegistryFile{}, last
}

// namespaceGone reports whether the pid namespace of domain
// ("linux:<machine-id>:pid:[<inode>]") is of this machine and holds no
// process any more: a session troupe ran in a sandbox (its own pid
// namespace) whose processes are all gone. Another machine's, or one this
// cannot tell, is not gone.
func (r *Registry) namespaceGone(domain string) bool {
	rest, ok := strings.CutPrefix(domain, "linux:")
	if !ok {
		return false
	}
	mid, ns, ok := strings.Cut(rest, ":")
	if !ok || !strings.HasPrefix(ns, "pid:[") {
		return false
	}
	own, err := os.ReadFile("/etc/machine-id")
	if err != nil || strings.TrimSpace(string(own)) != mid {
		return false
	}
	proc := r.Proc
	if proc == "" {
		proc = "/proc"
	}
	entries, err := os.ReadDir(proc)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		if l, err := os.Readlink(filepath.Join(proc, e.Name(), "ns", "pid")); err != nil || l != ns {
			continue
		}
		// A zombie (killed with its sandbox, not reaped yet) keeps the
		// namespace but runs nothing.
		if b, err := os.ReadFile(filepath.Join(proc, e.Name(), "stat")); err == nil {
			if st, err := procstat.Parse(b); err == nil && st.Zombie() {
				continue
			}
		}
		return false
	}
	return true
}

// check applies C8 to one file: live iff the pid exists and its start
// time equals procStart; unreadable or in doubt reads as live.
func (r *Registry) check(f claudefmt.RegistryFile, selfNS string) (Liveness, bool) {
	lv := Liveness{Live: true, Status: f.Status, WaitingFor: f.WaitingFor, PIDs: []int{f.PID}}
	if f.PIDDomain != "" && selfNS != "" && !strings.HasSuffix(f.PIDDomain, ":"+selfNS) {
		if r.namespaceGone(f.PIDDomain) {
			return Liveness{}, false // its sandbox's namespace ended with it
		}
		lv.Doubt = "its process is in another pid namespace (" + f.PIDDomain + "): troupe cannot check it"
		return lv, true
	}
	stat, err := r.readStat(f.PID)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, errNoProcess) {
		return Liveness{}, false
	}
	if err != nil {
		lv.Doubt = fmt.Sprintf("cannot read /proc/%d/stat (%v)", f.PID, err)
		return lv, true
	}
	start, err := ProcStartTime(stat)
	if err != nil {
		lv.Doubt = fmt.Sprintf("/proc/%d/stat: %v", f.PID, err)
		return lv, true
	}
	if f.ProcStart == "" {
		lv.Doubt = "its registry file has no procStart"
		return lv, true
	}
	if start != f.ProcStart {
		return Liveness{}, false // the pid is another process now
	}
	return lv, true
}

var errNoProcess = errors.New("no such process")

// statusRank orders statuses when two processes name one session.
var statusRank = map[string]int{"": 0, "idle": 1, "busy": 2, "waiting": 3}

func (r *Registry) proc() string {
	if r.Proc == "" {
		return "/proc"
	}
	return r.Proc
}

func (r *Registry) readStat(pid int) ([]byte, error) {
	var b []byte
	var err error
	if r.ReadStat != nil {
		b, err = r.ReadStat(pid)
	} else {
		b, err = os.ReadFile(filepath.Join(r.proc(), strconv.Itoa(pid), "stat"))
	}
	if errors.Is(err, syscall.ESRCH) { // the process went between the open and the read
		return nil, errNoProcess
	}
	return b, err
}

// exists reports whether pid may run: its /proc entry exists or cannot be
// checked.
func (r *Registry) exists(pid int) (bool, error) {
	_, err := r.readStat(pid)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, errNoProcess) {
		return false, nil
	}
	return true, err
}

// selfPIDNS is "pid:[<inode>]" of this process's pid namespace, as the
// CLI writes it at the end of pidDomain; "" when unknown.
func (r *Registry) selfPIDNS() string {
	l, err := os.Readlink(filepath.Join(r.proc(), "self", "ns", "pid"))
	if err != nil {
		return ""
	}
	return l
}
