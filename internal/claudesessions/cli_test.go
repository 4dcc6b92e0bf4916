package claudesessions

// Tests with the real, pinned Claude Code CLI against the fake model on
// 127.0.0.1, in an isolated HOME (claudetest). They skip without
// $TROUPE_CLAUDE_BIN (and fail under CI=true).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/engine/claude/claudetest"
	"github.com/troupe-dev/troupe/internal/fakemodel"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// patience bounds each wait on the real CLI (about 1 s a run).
const patience = 60 * time.Second

type ccRig struct {
	bin  string
	dir  string // the sessions' project folder
	home string
	env  []string
	m    *Machine
}

func newCCRig(t *testing.T) *ccRig {
	t.Helper()
	bin := claudetest.Bin(t)
	model := fakemodel.New(fakemodel.Options{})
	if err := model.Start(""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { model.Close() })
	dir := filepath.Join(t.TempDir(), "proj")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	dir, _ = filepath.EvalSymlinks(dir)
	home := claudetest.Home(t, dir)
	r := &ccRig{bin: bin, dir: dir, home: home, env: claudetest.Env(t, home, model.URL())}
	r.m = NewMachine(MachineOptions{Dir: filepath.Join(home, ".claude")})
	return r
}

// print runs one `claude -p` turn in dir and returns its session id.
func (r *ccRig) print(t *testing.T, dir string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.bin, append([]string{"-p", "--output-format", "json"}, args...)...)
	cmd.Dir, cmd.Env = dir, r.env
	out, err := cmd.Output()
	var res struct {
		SessionID string `json:"session_id"`
		IsError   bool   `json:"is_error"`
		Result    string `json:"result"`
	}
	if jerr := json.Unmarshal(out, &res); jerr != nil || res.IsError || err != nil {
		t.Fatalf("claude -p %v: %v %v: %s", args, err, jerr, out)
	}
	return res.SessionID
}

// live is a `claude -p` with stream-json input: it stays up (registered,
// idle) between turns until its stdin closes.
type live struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	id    string
	done  chan struct{}
}

func (r *ccRig) startLive(t *testing.T, prompt string) *live {
	t.Helper()
	cmd := exec.Command(r.bin, "-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose")
	cmd.Dir, cmd.Env = r.dir, r.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	l := &live{cmd: cmd, stdin: in, done: make(chan struct{})}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); <-l.done })
	msg, _ := json.Marshal(map[string]any{"type": "user", "message": map[string]any{"role": "user", "content": prompt}})
	if _, err := in.Write(append(msg, '\n')); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	go func() { // reads the child's stdout until it ends (owned: ends with the child)
		defer close(l.done)
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			var ev struct {
				Type      string `json:"type"`
				SessionID string `json:"session_id"`
			}
			if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Type == "result" {
				select {
				case got <- ev.SessionID:
				default:
				}
			}
		}
		cmd.Wait()
	}()
	select {
	case l.id = <-got:
	case <-l.done:
		t.Fatal("claude ended before its first result")
	case <-time.After(patience):
		t.Fatal("no result from claude")
	}
	return l
}

func (l *live) exit(t *testing.T) {
	t.Helper()
	l.stdin.Close()
	select {
	case <-l.done:
	case <-time.After(patience):
		t.Fatal("claude did not exit at the end of its input")
	}
}

func (l *live) kill(t *testing.T) {
	t.Helper()
	syscall.Kill(l.cmd.Process.Pid, syscall.SIGKILL)
	<-l.done
}

func (r *ccRig) get(t *testing.T, id string) Session {
	t.Helper()
	s, err := r.m.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return s
}

func (r *ccRig) regFile(pid int) string {
	return filepath.Join(r.home, ".claude", "sessions", fmt.Sprintf("%d.json", pid))
}

// TestRealCLILiveness: C8 and C9 against the pinned CLI: a running
// session is live (idle) and refused for resume, while a fork of it gets a
// new id and leaves its transcript byte for byte; at its exit it is dead
// and can be claimed; a SIGKILLed one leaves its registry file and reads
// dead; so does its file when the pid is another process's; an unreadable
// /proc reads live.
func TestRealCLILiveness(t *testing.T) {
	r := newCCRig(t)
	ctx := context.Background()
	a := r.startLive(t, "first [[text:A1]]")
	s := r.get(t, a.id)
	// idle, or still busy just after its result
	if !s.Live || (s.Liveness.Status != "idle" && s.Liveness.Status != "busy") || !slices.Contains(s.Liveness.PIDs, a.cmd.Process.Pid) || s.Liveness.Doubt != "" {
		t.Fatalf("running session: live %v %+v", s.Live, s.Liveness)
	}
	if s.Cwd != r.dir || s.Prompt != "first [[text:A1]]" || s.Messages < 2 {
		t.Errorf("indexed %+v", s.Summary)
	}
	_, err := r.m.ClaimResume(ctx, a.id, Holder{PID: os.Getpid()})
	var le *LiveError
	if !errors.As(err, &le) || !errors.Is(err, troupe.ErrConflict) || !strings.Contains(err.Error(), "troupe fork "+a.id) || !strings.Contains(err.Error(), "troupe observe "+a.id) {
		t.Fatalf("resume of a live session: %v; want a refusal naming fork and observe", err)
	}

	// Fork of the live one: a new id, the original untouched.
	before, err := os.ReadFile(s.Path)
	if err != nil {
		t.Fatal(err)
	}
	forked := r.print(t, r.dir, "--resume", a.id, "--fork-session", "forked [[text:F1]]")
	if forked == a.id || forked == "" {
		t.Fatalf("fork id %q", forked)
	}
	after, _ := os.ReadFile(s.Path)
	if !bytes.Equal(before, after) {
		t.Errorf("the fork changed the original transcript (%d → %d bytes)", len(before), len(after))
	}
	if f := r.get(t, forked); f.Live || f.Cwd != r.dir || f.Messages <= s.Messages {
		t.Errorf("fork: live %v cwd %q messages %d (original %d)", f.Live, f.Cwd, f.Messages, s.Messages)
	}

	// Exit: dead, its registry file gone, free to claim.
	a.exit(t)
	if _, err := os.Stat(r.regFile(a.cmd.Process.Pid)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("registry file after a normal exit: %v", err)
	}
	if s := r.get(t, a.id); s.Live {
		t.Errorf("exited session reads live: %+v", s.Liveness)
	}
	c, err := r.m.ClaimResume(ctx, a.id, Holder{PID: os.Getpid()})
	if err != nil {
		t.Fatalf("claim a dead session: %v", err)
	}
	if _, err := r.m.ClaimResume(ctx, a.id, Holder{PID: os.Getpid()}); !errors.Is(err, troupe.ErrConflict) {
		t.Errorf("second claim while held: %v", err)
	}
	if !r.m.Release(a.id, c.Token) {
		t.Error("release")
	}

	// SIGKILL: the registry file stays behind, the session reads dead.
	b := r.startLive(t, "second [[text:B1]]")
	b.kill(t)
	stale, err := os.ReadFile(r.regFile(b.cmd.Process.Pid))
	if err != nil {
		t.Fatalf("SIGKILL left no registry file (the CLI changed?): %v", err)
	}
	if s := r.get(t, b.id); s.Live {
		t.Errorf("SIGKILLed session reads live: %+v", s.Liveness)
	}
	if snap := r.m.Reg.Read(); snap.Stale < 1 {
		t.Errorf("stale files = %d", snap.Stale)
	}

	// The pid reused by another program: its file names a live pid whose
	// start time differs.
	other := exec.Command("sleep", "60")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Process.Kill(); other.Wait() })
	var rf map[string]any
	json.Unmarshal(stale, &rf)
	rf["pid"] = other.Process.Pid
	reused, _ := json.Marshal(rf)
	os.WriteFile(r.regFile(other.Process.Pid), reused, 0o600)
	if s := r.get(t, b.id); s.Live {
		t.Errorf("a reused pid reads live: %+v", s.Liveness)
	}
	// Control: with the other process's own start time it would be live.
	st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", other.Process.Pid))
	start, _ := ProcStartTime(st)
	rf["procStart"] = start
	reused, _ = json.Marshal(rf)
	os.WriteFile(r.regFile(other.Process.Pid), reused, 0o600)
	if s := r.get(t, b.id); !s.Live {
		t.Errorf("control: a file matching a running process reads dead")
	}
	os.Remove(r.regFile(other.Process.Pid))

	// Unreadable /proc: live, in doubt, refused.
	c3 := r.startLive(t, "third [[text:C1]]")
	m := NewMachine(MachineOptions{Dir: filepath.Join(r.home, ".claude"), ReadStat: func(pid int) ([]byte, error) {
		return nil, &fs.PathError{Op: "open", Path: fmt.Sprintf("/proc/%d/stat", pid), Err: syscall.EACCES}
	}})
	s3, err := m.Get(ctx, c3.id)
	if err != nil || !s3.Live || !strings.Contains(s3.Liveness.Doubt, "permission denied") {
		t.Errorf("unreadable /proc: %v live %v %+v", err, s3.Live, s3.Liveness)
	}
	if _, err := m.ClaimResume(ctx, c3.id, Holder{Name: "test"}); !errors.Is(err, troupe.ErrConflict) {
		t.Errorf("resume with /proc unreadable: %v", err)
	}
}

// TestRealCLIFollowAndAppend: the index reads a growing live transcript
// from its last offset, and Follow returns the new turn.
func TestRealCLIFollowAndAppend(t *testing.T) {
	r := newCCRig(t)
	ctx := context.Background()
	a := r.startLive(t, "one [[text:ONE]]")
	s := r.get(t, a.id)
	msg, _ := json.Marshal(map[string]any{"type": "user", "message": map[string]any{"role": "user", "content": "two [[text:TWO]]"}})
	a.stdin.Write(append(msg, '\n'))
	c, err := r.m.Follow(ctx, a.id, s.Offset, patience)
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for c.Next < c.Size || len(texts) < 2 {
		for _, e := range c.Entries {
			texts = append(texts, e.Role+": "+e.Text)
		}
		if slices.Contains(texts, "assistant: TWO") {
			break
		}
		if c, err = r.m.Follow(ctx, a.id, c.Next, patience); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Contains(texts, "user: two [[text:TWO]]") || !slices.Contains(texts, "assistant: TWO") || !c.Live {
		t.Errorf("followed %q (live %v)", texts, c.Live)
	}
	rep, err := r.m.Index.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := r.get(t, a.id)
	if rep.Read > 1 || n.Messages <= s.Messages || n.Offset <= s.Offset {
		t.Errorf("append: %+v; messages %d → %d", rep, s.Messages, n.Messages)
	}
	a.exit(t)
}
