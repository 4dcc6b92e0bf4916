package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/term"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// runnerTermTeam is a generic terminal agent (a scripted REPL, kept in
// the project) on runner r1.
const runnerTermTeam = `
[[agent]]
name = "repl"
engine = "terminal"
command = "/bin/sh"
args = ["repl.sh"]
runner = "r1"

[agent.terminal]
idle = "repl>"
busy = "working..."
`

// TestRunnerTerminalAgent: a terminal-mode agent on a runner process
// answers its turns (the runner's engine types them into its own
// terminal, in its own clone), and the person attaches to that terminal
// through the daemon's API WebSocket as to a local one: the screen, their
// keys reaching the program and its output coming back, their window
// size; detached, the agent goes on.
func TestRunnerTerminalAgent(t *testing.T) {
	state := t.TempDir()
	proj := gitProject(t, runnerTermTeam)
	if err := os.WriteFile(filepath.Join(proj, "repl.sh"), []byte(termREPL), 0o755); err != nil {
		t.Fatal(err)
	}
	gitIn(t, proj, "add", "repl.sh")
	gitIn(t, proj, "commit", "-q", "-m", "the repl")
	ctx, d, cl, p := serveProject(t, state, proj, append(os.Environ(), "HOME="+t.TempDir()), 3*time.Minute,
		"--runners", "127.0.0.1:0", "--runner-beat", "1s")
	r := startRunner(t, state, "r1", filepath.Join(t.TempDir(), "r1.creds"))
	ask := func(text string) string {
		t.Helper()
		req, err := cl.Ask(ctx, p.ID, "repl", text, 0)
		if err != nil || req.State != troupe.ReqAnswered {
			t.Fatalf("ask repl %q: %+v, %v\ndaemon:\n%s\nrunner:\n%s", text, req, err, d.logs.String(), r.logs.String())
		}
		return req.Answer
	}
	if got := ask("hello repl"); !strings.Contains(got, "HELLO REPL") {
		t.Fatalf("repl answered %q", got)
	}

	a, err := cl.AttachTerminal(ctx, p.ID, "repl")
	if err != nil {
		t.Fatalf("attach: %v\nrunner:\n%s", err, r.logs.String())
	}
	defer a.Close()
	if a.Cols != term.DefaultCols || a.Rows != term.DefaultRows {
		t.Errorf("attached to a %d×%d terminal", a.Cols, a.Rows)
	}
	e := term.NewEmulator(a.Cols, a.Rows, nil)
	defer e.Close()
	wait := func(want string) {
		t.Helper()
		for !term.Contains(e.Text(), want) {
			b, err := a.Read(ctx)
			if err != nil {
				t.Fatalf("read the attached terminal waiting for %q: %v; screen:\n%s", want, err, e.Text())
			}
			e.Write(b)
		}
	}
	wait("HELLO REPL") // the snapshot: the screen as the turn left it
	if err := a.Type(ctx, []byte("typed by hand\r")); err != nil {
		t.Fatal(err)
	}
	wait("REPL HEARD: TYPED BY HAND")
	if err := a.Resize(ctx, 100, 30); err != nil {
		t.Fatal(err)
	}
	if err := a.Type(ctx, []byte("size\r")); err != nil {
		t.Fatal(err)
	}
	wait("size is 30 100")
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if got := ask("still there"); !strings.Contains(got, "STILL THERE") {
		t.Fatalf("repl answered %q after the person detached", got)
	}
}
