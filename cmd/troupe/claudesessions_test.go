package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/engine/claude/claudetest"
)

// The tests of this file drive `troupe sessions`, `resume`, `fork` and
// `observe` against Claude Code sessions the pinned CLI made in the rig's
// isolated HOME (the daemon lists that HOME's ~/.claude).

// runCLIEnv runs the CLI in dir with env (the claude it starts inherits it).
func runCLIEnv(t testing.TB, env []string, state, dir string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, append([]string{"--state-dir", state}, args...)...)
	cmd.Dir, cmd.Env = dir, env
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// claudePrint runs one `claude -p` turn in dir and returns its session id.
func claudePrint(t testing.TB, env []string, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(claudetest.Bin(t), append([]string{"-p", "--output-format", "json"}, args...)...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.Output()
	var res struct {
		SessionID string `json:"session_id"`
		IsError   bool   `json:"is_error"`
	}
	if json.Unmarshal(out, &res) != nil || res.IsError || err != nil {
		t.Fatalf("claude -p %v: %v: %s", args, err, out)
	}
	return res.SessionID
}

// liveClaude starts a stream-json claude in dir, gives it one turn and
// leaves it running (live, registered); send more with write.
func liveClaude(t testing.TB, env []string, dir, prompt string) (id string, write func(string), stop func()) {
	t.Helper()
	cmd := exec.Command(claudetest.Bin(t), "-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose")
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	ids := make(chan string, 1)
	go func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			var ev struct{ Type, Session_ID string }
			if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Type == "result" {
				select {
				case ids <- ev.Session_ID:
				default:
				}
			}
		}
		cmd.Wait()
	}()
	write = func(p string) {
		b, _ := json.Marshal(map[string]any{"type": "user", "message": map[string]any{"role": "user", "content": p}})
		in.Write(append(b, '\n'))
	}
	stop = func() { in.Close(); syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); <-done }
	t.Cleanup(stop)
	write(prompt)
	select {
	case id = <-ids:
	case <-done:
		t.Fatal("claude ended before its first result")
	case <-time.After(time.Minute):
		t.Fatal("no result from the live claude")
	}
	return id, write, stop
}

func listSessions(t testing.TB, env []string, state string, args ...string) api.ClaudeSessionList {
	t.Helper()
	out, errs, code := runCLIEnv(t, env, state, "/", append([]string{"sessions", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("troupe sessions: exit %d: %s", code, errs)
	}
	var l api.ClaudeSessionList
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatalf("sessions JSON: %v: %s", err, out)
	}
	return l
}

func findSession(l api.ClaudeSessionList, id string) (api.ClaudeSession, bool) {
	for _, s := range l.Sessions {
		if s.ID == id {
			return s, true
		}
	}
	return api.ClaudeSession{}, false
}

// lastCwd is the cwd of the transcript's last conversation line.
func lastCwd(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cwd := ""
	for l := range bytes.SplitSeq(b, []byte{'\n'}) {
		var v struct{ Cwd string }
		if json.Unmarshal(l, &v) == nil && v.Cwd != "" {
			cwd = v.Cwd
		}
	}
	return cwd
}

// TestBinaryClaudeSessionsResumeInOriginalCwd: `troupe sessions` lists a
// session with the folder read from its transcript; `troupe resume` run
// from another folder runs claude in the original one (the lines it adds
// carry that cwd); a session whose folder is gone is refused saying so.
func TestBinaryClaudeSessionsResumeInOriginalCwd(t *testing.T) {
	r := newClaudeRig(t, "2m")
	bin := claudetest.Bin(t)
	orig := filepath.Join(t.TempDir(), "orig.dir")
	os.Mkdir(orig, 0o755)
	orig, _ = filepath.EvalSymlinks(orig)
	sid := claudePrint(t, r.env, orig, "hello from orig [[text:H1]]")

	l := listSessions(t, r.env, r.state, "--search", "hello from orig")
	s, ok := findSession(l, sid)
	if !ok || s.Cwd != orig || !s.CwdExists || s.Live || s.Messages < 1 || s.Title != "hello from orig [[text:H1]]" {
		t.Fatalf("listed %+v (found %v)", s, ok)
	}
	if one, err := r.cl.ClaudeSession(r.ctx, sid); err != nil || one.Messages != 2 || one.MessagesPartial {
		t.Errorf("one session: %d messages (partial %v), %v; want 2", one.Messages, one.MessagesPartial, err)
	}
	if l := listSessions(t, r.env, r.state, "--project", filepath.Dir(orig)); len(l.Sessions) != 1 {
		t.Errorf("--project %s: %d sessions, want 1", filepath.Dir(orig), len(l.Sessions))
	}
	if l := listSessions(t, r.env, r.state, "--live"); len(l.Sessions) != 0 {
		t.Errorf("--live: %d sessions, want none", len(l.Sessions))
	}

	elsewhere := t.TempDir()
	out, errs, code := runCLIEnv(t, r.env, r.state, elsewhere, "resume", sid, "--claude", bin, "--", "-p", "again [[text:H2]]", "--output-format", "json")
	if code != 0 {
		t.Fatalf("resume: exit %d: %s", code, errs)
	}
	var res struct{ Session_ID, Result string }
	json.Unmarshal([]byte(out), &res)
	if res.Session_ID != sid || res.Result != "H2" || !strings.Contains(errs, "in "+orig) {
		t.Errorf("resume answered %+v; stderr %q", res, errs)
	}
	if got := lastCwd(t, s.Path); got != orig {
		t.Errorf("the resumed turn ran in %q, want the original folder %q", got, orig)
	}
	if s, err := r.cl.ClaudeSession(r.ctx, sid); err != nil || s.Messages != 4 || s.HeldBy != "" {
		t.Errorf("after resume: messages %d held by %q, %v", s.Messages, s.HeldBy, err)
	}

	gone := filepath.Join(t.TempDir(), "gone")
	os.Mkdir(gone, 0o755)
	gid := claudePrint(t, r.env, gone, "soon gone [[text:G]]")
	os.RemoveAll(gone)
	_, errs, code = runCLIEnv(t, r.env, r.state, elsewhere, "resume", gid, "--claude", bin)
	if code == 0 || !strings.Contains(errs, "no longer a folder") || !strings.Contains(errs, gone) {
		t.Errorf("resume of a session whose folder is gone: exit %d: %s", code, errs)
	}
}

// TestBinaryClaudeLiveSessionResumeRefusedForkObserve: C9 through the
// CLI: a live session's resume is refused with the reason and both ways
// out; `troupe fork` of it makes a new session and leaves its transcript
// byte for byte; `troupe observe` follows what it adds until Ctrl-C.
func TestBinaryClaudeLiveSessionResumeRefusedForkObserve(t *testing.T) {
	r := newClaudeRig(t, "2m")
	bin := claudetest.Bin(t)
	id, write, stop := liveClaude(t, r.env, r.proj, "live one [[text:L1]]")
	_, errs, code := runCLIEnv(t, r.env, r.state, "/", "resume", id, "--claude", bin, "--", "-p", "no [[text:NO]]")
	if code == 0 || !strings.Contains(errs, "is live") || !strings.Contains(errs, "troupe fork "+id) || !strings.Contains(errs, "troupe observe "+id) {
		t.Fatalf("resume of a live session: exit %d: %s", code, errs)
	}
	l := listSessions(t, r.env, r.state, "--live")
	s, ok := findSession(l, id)
	if !ok || !s.Live || s.Status == "" || len(s.PIDs) != 1 {
		t.Fatalf("--live lists %+v (found %v)", s, ok)
	}
	before, _ := os.ReadFile(s.Path)
	out, errs, code := runCLIEnv(t, r.env, r.state, "/", "fork", id, "--claude", bin, "--", "-p", "fork [[text:F1]]", "--output-format", "json")
	var res struct{ Session_ID, Result string }
	json.Unmarshal([]byte(out), &res)
	if code != 0 || res.Session_ID == "" || res.Session_ID == id || res.Result != "F1" {
		t.Fatalf("fork: exit %d %+v: %s", code, res, errs)
	}
	if after, _ := os.ReadFile(s.Path); !bytes.Equal(before, after) {
		t.Errorf("fork changed the live session's transcript")
	}

	// observe: what the live session adds shows up; Ctrl-C ends it.
	obs := exec.Command(binary, "--state-dir", r.state, "observe", id)
	obs.Env = r.env
	pr, pw := io.Pipe()
	obs.Stdout = pw
	if err := obs.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	waitLine := func(want string) {
		t.Helper()
		deadline := time.After(time.Minute)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("observe ended before %q", want)
				}
				if strings.Contains(l, want) {
					return
				}
			case <-deadline:
				t.Fatalf("observe never printed %q", want)
			}
		}
	}
	waitLine("observing " + id)
	write("two [[text:OBSERVED-2]]")
	waitLine("assistant: OBSERVED-2")
	stop()
	waitLine("no longer live")
	obs.Process.Signal(syscall.SIGINT)
	err := obs.Wait()
	pw.Close()
	if err != nil {
		t.Errorf("observe after Ctrl-C: %v", err)
	}
}

// TestBinaryClaudeResumeAsAgent: a dead session handed to a team's Claude
// agent is what its next session resumes; a non-Claude agent is refused.
func TestBinaryClaudeResumeAsAgent(t *testing.T) {
	r := newClaudeRig(t, "2m")
	sid := claudePrint(t, r.env, r.proj, "remember the word PELICAN [[text:OK]]")
	_, errs, code := runCLIEnv(t, r.env, r.state, r.proj, "resume", sid, "--as", "helper")
	if code == 0 || !strings.Contains(errs, "only a Claude agent") {
		t.Errorf("hand-off to a fake agent: exit %d: %s", code, errs)
	}
	// A session started in another folder (here a subfolder) would not be
	// found by the agent's CLI: refused, naming both folders.
	sub := filepath.Join(r.proj, "sub")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	elsewhere := claudePrint(t, r.env, sub, "started elsewhere [[text:OK]]")
	_, errs, code = runCLIEnv(t, r.env, r.state, r.proj, "resume", elsewhere, "--as", "claude")
	if code == 0 || !strings.Contains(errs, "/sub, and agent claude works in") {
		t.Errorf("hand-off of a session started in a subfolder: exit %d: %s", code, errs)
	}
	out, errs, code := runCLIEnv(t, r.env, r.state, r.proj, "resume", sid, "--as", "claude")
	if code != 0 || !strings.Contains(out, "handed to agent claude") {
		t.Fatalf("hand-off: exit %d: %s %s", code, out, errs)
	}
	if a := r.agent("claude"); a.SessionID != sid {
		t.Errorf("agent's session id %q, want %q", a.SessionID, sid)
	}
	r.answer("claude", "what word? [[text:PELICAN]]")
	q := r.waitPrompt("what word?")
	if q.SessionID != sid {
		t.Errorf("the agent's turn ran in session %q, want the handed-off %q", q.SessionID, sid)
	}
	body, _ := json.Marshal(q.Body["messages"])
	if !strings.Contains(string(body), "remember the word PELICAN") {
		t.Errorf("the agent's request lacks the handed-off history")
	}
	// Now the agent's session runs: a second hand-off, and a resume in a
	// terminal, are refused.
	l := listSessions(t, r.env, r.state)
	if s, _ := findSession(l, sid); s.Agent == nil || s.Agent.Agent != "claude" {
		t.Errorf("listing does not say troupe's agent ran it: %+v", s.Agent)
	}
	_, errs, code = runCLIEnv(t, r.env, r.state, r.proj, "resume", sid, "--claude", claudetest.Bin(t))
	if code == 0 || !strings.Contains(errs, "troupe fork") {
		t.Errorf("resume while the agent runs the session: exit %d: %s", code, errs)
	}
}
