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
	"testing"
)

func TestProcStartTimeCommWithSpacesAndParens(t *testing.T) {
	rest := "S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 424242 20 21"
	for _, comm := range []string{"claude", "a b", "x) (y", ") ) (", "((", "evil) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 999"} {
		line := fmt.Sprintf("123 (%s) %s\n", comm, rest)
		got, err := ProcStartTime([]byte(line))
		if err != nil || got != "424242" {
			t.Errorf("comm %q: got %q, %v; want 424242", comm, got, err)
		}
	}
	for _, bad := range []string{"", "123 claude S 1", "1 (c) S 1 2 3", "1 (c) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 notanumber"} {
		if got, err := ProcStartTime([]byte(bad)); err == nil {
			t.Errorf("%q: got %q, want an error", bad, got)
		}
	}
	// This very process: the field matches what the kernel says of us.
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Skip("no /proc")
	}
	if _, err := ProcStartTime(b); err != nil {
		t.Errorf("own stat: %v", err)
	}
}

func TestParseRegistryFixtures(t *testing.T) {
	files, _ := filepath.Glob("testdata/registry/example_*.json")
	if len(files) < 6 {
		t.Fatalf("fixtures: %v", files)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r, err := claudefmt.ParseRegistryFile(b)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if r.PID <= 0 || r.SessionID == "" || r.ProcStart == "" || r.Cwd == "" {
			t.Errorf("%s: %+v", f, r)
		}
		if strings.Contains(f, "waiting_permission") && (r.Status != "waiting" || r.WaitingFor != "permission prompt") {
			t.Errorf("%s: status %q waitingFor %q", f, r.Status, r.WaitingFor)
		}
		if strings.Contains(f, "2.1.197") && r.Status != "" {
			t.Errorf("%s: status %q from a version that writes none", f, r.Status)
		}
	}
	for _, bad := range []string{"", "{", "[]", `{"pid":0,"sessionId":"x"}`, `{"pid":12}`, `{"pid":"12","sessionId":"x"}`} {
		if _, err := claudefmt.ParseRegistryFile([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// fakeProc is a proc file system of the test's own making: pid → the
// start time its stat says (or an error to return).
type fakeProc map[int]any

func (p fakeProc) read(pid int) ([]byte, error) {
	switch v := p[pid].(type) {
	case nil:
		return nil, fs.ErrNotExist
	case error:
		return nil, v
	case string:
		return []byte(fmt.Sprintf("%d (claude code) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 %s 20 21\n", pid, v)), nil
	}
	panic("fakeProc")
}

func writeReg(t *testing.T, dir string, pid int, sid, start, status string) {
	t.Helper()
	b := fmt.Sprintf(`{"pid":%d,"sessionId":%q,"cwd":"/w","procStart":%q,"status":%q}`, pid, sid, start, status)
	if start == "-" {
		b = fmt.Sprintf(`{"pid":%d,"sessionId":%q,"cwd":"/w"}`, pid, sid)
	}
	if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(pid)+".json"), []byte(b), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestRegistryLivenessC8: live iff the pid runs with the recorded start
// time; a killed process's file and a reused pid read dead; anything that
// cannot be checked reads live, saying why.
func TestRegistryLivenessC8(t *testing.T) {
	dir := t.TempDir()
	proc := fakeProc{
		101: "5000",                                         // live, busy
		102: "7777",                                         // pid reused: another start time
		104: &fs.PathError{Op: "open", Err: syscall.EACCES}, // unreadable
		105: "garbage stat",                                 // unparsable (no fields)
		106: "6000",                                         // no procStart in the file
		108: "8000",                                         // second process on session a
		109: &fs.PathError{Op: "read", Err: syscall.ESRCH},  // went away mid-read
		110: "9000",                                         // its file is garbage
	}
	proc[105] = errors.New("odd")
	writeReg(t, dir, 101, "a", "5000", "busy")
	writeReg(t, dir, 102, "reused", "5000", "idle")
	writeReg(t, dir, 103, "killed", "5000", "idle") // no such pid
	writeReg(t, dir, 104, "unreadable", "5000", "idle")
	writeReg(t, dir, 105, "odd", "5000", "idle")
	writeReg(t, dir, 106, "nostart", "-", "")
	writeReg(t, dir, 108, "a", "8000", "waiting")
	writeReg(t, dir, 109, "gone", "1", "idle")
	os.WriteFile(filepath.Join(dir, "110.json"), []byte(`{"pid":110,"sessi`), 0o600)
	os.WriteFile(filepath.Join(dir, "111.json"), []byte(`not json`), 0o600) // its process is gone: ignored
	os.WriteFile(filepath.Join(dir, "notapid.json"), []byte(`{}`), 0o600)
	os.WriteFile(filepath.Join(dir, "101.abc.key"), []byte(`{}`), 0o600)
	r := &Registry{Dir: dir, ReadStat: proc.read}
	s := r.Read()
	want := map[string]struct {
		live   bool
		status string
		doubt  bool
	}{
		"a": {true, "waiting", false}, "reused": {false, "", false}, "killed": {false, "", false},
		"unreadable": {true, "idle", true}, "odd": {true, "idle", true}, "nostart": {true, "", true}, "gone": {false, "", false},
	}
	for id, w := range want {
		lv, live := s.Sessions[id]
		if live != w.live || lv.Status != w.status || (lv.Doubt != "") != w.doubt {
			t.Errorf("%s: live %v status %q doubt %q; want live %v status %q doubt %v", id, live, lv.Status, lv.Doubt, w.live, w.status, w.doubt)
		}
	}
	if got := s.Sessions["a"].PIDs; len(got) != 2 {
		t.Errorf("session a: pids %v, want both processes", got)
	}
	if s.Stale != 3 {
		t.Errorf("stale = %d, want 3 (killed, reused, gone)", s.Stale)
	}
	if len(s.Unknown) != 1 || !strings.Contains(s.Unknown[0], "110.json") {
		t.Errorf("unknown = %v, want the garbage file of running pid 110 only", s.Unknown)
	}
}

// A pid in another pid namespace cannot be checked: live, in doubt.
func TestRegistryOtherPIDNamespaceReadsLive(t *testing.T) {
	dir := t.TempDir()
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		t.Skip("no /proc/self/ns/pid")
	}
	b := `{"pid":1,"sessionId":"x","procStart":"1","pidDomain":"linux:m:pid:[1]"}`
	os.WriteFile(filepath.Join(dir, "1.json"), []byte(b), 0o600)
	r := &Registry{Dir: dir, ReadStat: fakeProc{}.read}
	if lv, ok := r.Read().Sessions["x"]; !ok || !strings.Contains(lv.Doubt, "namespace") {
		t.Errorf("other namespace: %+v %v (ours %s)", lv, ok, ns)
	}
	b = fmt.Sprintf(`{"pid":1,"sessionId":"x","procStart":"1","pidDomain":"linux:m:%s"}`, ns)
	os.WriteFile(filepath.Join(dir, "1.json"), []byte(b), 0o600)
	if _, ok := r.Read().Sessions["x"]; ok {
		t.Errorf("our namespace, no such pid: read live")
	}
}

// An unreadable /proc entry (here a directory where stat should be) reads live.
func TestRegistryUnreadableProcReadsLive(t *testing.T) {
	dir, proc := t.TempDir(), t.TempDir()
	writeReg(t, dir, 4242, "s", "100", "idle")
	if err := os.MkdirAll(filepath.Join(proc, "4242", "stat"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := &Registry{Dir: dir, Proc: proc}
	lv, ok := r.Read().Sessions["s"]
	if !ok || lv.Doubt == "" {
		t.Errorf("unreadable /proc/4242/stat: %+v live=%v, want live in doubt", lv, ok)
	}
}

// A session of this machine whose pid namespace holds no process any more
// (an agent's sandbox that ended with it) reads as not live.
func TestRegistryGonePIDNamespaceReadsNotLive(t *testing.T) {
	mid, err := os.ReadFile("/etc/machine-id")
	if err != nil {
		t.Skip("no /etc/machine-id")
	}
	dir := t.TempDir()
	b := fmt.Sprintf(`{"pid":1,"sessionId":"x","procStart":"1","pidDomain":"linux:%s:pid:[4294967295]"}`, strings.TrimSpace(string(mid)))
	os.WriteFile(filepath.Join(dir, "1.json"), []byte(b), 0o600)
	r := &Registry{Dir: dir, ReadStat: fakeProc{}.read}
	if lv, ok := r.Read().Sessions["x"]; ok {
		t.Errorf("a namespace no process is in: read live %+v", lv)
	}
}
