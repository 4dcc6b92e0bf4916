package remote

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/engine/terminal"
	"github.com/troupe-dev/troupe/internal/term"
	"github.com/troupe-dev/troupe/internal/troupe"
	"github.com/troupe-dev/troupe/internal/worktree"
)

// replScript is a small REPL: it answers each line in capitals, prints
// its terminal's size on "size", and a burst of n numbered lines on
// "burst n".
const replScript = `printf 'repl> '
while IFS= read -r line; do
  case "$line" in
    size) echo "size is $(stty size)";;
    burst*) n=${line#burst }; i=1; while [ $i -le $n ]; do echo "line $i of the burst"; i=$((i+1)); done;;
    *) printf 'working...'; sleep 0.2; printf '\r\033[K'; echo "heard: $line" | tr a-z A-Z;;
  esac
  printf 'repl> '
done`

// termAgent is a generic terminal agent running replScript on runner r1.
func termAgent(t *testing.T) troupe.AgentSpec {
	t.Helper()
	script := filepath.Join(t.TempDir(), "repl.sh")
	if err := os.WriteFile(script, []byte(replScript), 0o755); err != nil {
		t.Fatal(err)
	}
	return troupe.AgentSpec{Name: "coder", Engine: troupe.EngineTerminal, Mode: troupe.ModeTerminal, Runner: "r1",
		Workspace: worktree.Worktree, Command: "/bin/sh", Args: []string{script},
		Options: map[string]any{"idle": "repl>", "busy": []any{"working..."}}}
}

// termRig is a rig whose daemon and runners have the generic terminal
// engine too.
func termRig(t *testing.T) *rig {
	rg := newRig(t)
	rg.engines[troupe.EngineTerminal] = terminal.New(terminal.Options{StopTimeout: time.Second})
	return rg
}

func (rg *rig) startTerm(a troupe.AgentSpec) engine.Session {
	rg.t.Helper()
	s, err := rg.d.Engine().Start(rg.ctx, engine.StartSpec{Key: key, Agent: a, Dir: rg.work, Approver: allow{}})
	if err != nil {
		rg.t.Fatal(err)
	}
	return s
}

// TestTerminalAgentOnARunner: a terminal-mode agent runs on its runner
// and answers turns: the runner's engine types each turn into its own
// terminal and reads the answer off its screen.
func TestTerminalAgentOnARunner(t *testing.T) {
	rg := termRig(t)
	rg.runner("r1")
	s := rg.startTerm(termAgent(t))
	defer s.Close(rg.ctx)
	if end := turn(t, s, "t1", "hello runner"); end.Error != "" || !strings.Contains(end.Text, "HELLO RUNNER") {
		t.Fatalf("turn end %+v", end)
	}
}

// screen feeds a viewer's snapshot and output to an emulator of cols×rows.
type screen struct {
	t   *testing.T
	v   engine.TerminalViewer
	emu *term.Emulator
	raw []byte
}

func newScreen(t *testing.T, v engine.TerminalViewer, cols, rows int) *screen {
	e := term.NewEmulator(cols, rows, nil)
	t.Cleanup(func() { e.Close() })
	e.Write(v.Snapshot())
	return &screen{t: t, v: v, emu: e}
}

// wait reads output until the screen shows want.
func (sc *screen) wait(want string) {
	sc.t.Helper()
	timeout := time.After(patience)
	for !term.Contains(sc.emu.Text(), want) {
		select {
		case b, ok := <-sc.v.Output():
			if !ok {
				sc.t.Fatalf("output closed (%s) before the screen showed %q:\n%s", sc.v.Reason(), want, sc.emu.Text())
			}
			sc.raw = append(sc.raw, b...)
			sc.emu.Write(b)
		case <-timeout:
			sc.t.Fatalf("the screen did not show %q:\n%s", want, sc.emu.Text())
		}
	}
}

// attach attaches to s's terminal.
func attach(t *testing.T, s engine.Session) (engine.Terminal, engine.TerminalViewer) {
	t.Helper()
	ts, ok := s.(engine.TerminalSession)
	if !ok || ts.Terminal() == nil {
		t.Fatalf("the remote session of a terminal agent has no terminal")
	}
	tm := ts.Terminal()
	v, err := tm.Attach()
	if err != nil {
		t.Fatal(err)
	}
	return tm, v
}

// TestAttachToATerminalOnARunner: the person attaches on the daemon to
// the agent's terminal on its runner: the screen as it is, their keys
// reach the program and its output comes back; a resize reaches the
// program; while attached the terminal is in use (an idle_timeout keeps
// the session); detached, the runner's viewer is gone too.
func TestAttachToATerminalOnARunner(t *testing.T) {
	rg := termRig(t)
	rg.runner("r1")
	s := rg.startTerm(termAgent(t))
	defer s.Close(rg.ctx)
	if end := turn(t, s, "t1", "first turn"); end.Error != "" || !strings.Contains(end.Text, "FIRST TURN") {
		t.Fatalf("turn end %+v", end)
	}
	tm, v := attach(t, s)
	cols, rows := tm.Size()
	if cols != term.DefaultCols || rows != term.DefaultRows {
		t.Errorf("size %d×%d, want the runner's %d×%d", cols, rows, term.DefaultCols, term.DefaultRows)
	}
	if !tm.InUse() {
		t.Error("not in use while a person is attached")
	}
	sc := newScreen(t, v, cols, rows)
	if !term.Contains(sc.emu.Text(), "FIRST TURN") {
		t.Errorf("the snapshot lacks the screen so far:\n%s", sc.emu.Text())
	}
	if err := v.Type(rg.ctx, []byte("typed by hand\r")); err != nil {
		t.Fatal(err)
	}
	sc.wait("HEARD: TYPED BY HAND")
	if err := v.Resize(100, 30); err != nil {
		t.Fatal(err)
	}
	if c, r := tm.Size(); c != 100 || r != 30 {
		t.Errorf("size after the resize %d×%d", c, r)
	}
	if err := v.Type(rg.ctx, []byte("size\r")); err != nil {
		t.Fatal(err)
	}
	sc.wait("size is 30 100")

	id := v.(*remoteViewer).id
	v.Detach()
	if tm.InUse() {
		t.Error("in use after the person detached")
	}
	if _, err := rg.d.request(rg.ctx, "r1", opType, viewerReq{Viewer: id, Keys: []byte("x")}); err == nil || !strings.Contains(err.Error(), "no terminal viewer") {
		t.Errorf("keys for the detached viewer on the runner: %v", err)
	}
	// The agent goes on.
	if end := turn(t, s, "t2", "after detach"); end.Error != "" || !strings.Contains(end.Text, "AFTER DETACH") {
		t.Fatalf("turn after detach %+v", end)
	}
}

// burstLines checks that out holds "line i of the burst" for i = 1..n, in
// order, none missing or repeated.
func burstLines(t *testing.T, out []byte, n int) {
	t.Helper()
	next := 1
	for _, m := range regexp.MustCompile(`line (\d+) of the burst`).FindAllSubmatch(out, -1) {
		i, _ := strconv.Atoi(string(m[1]))
		if i != next {
			t.Fatalf("burst line %d where %d was due", i, next)
		}
		next++
	}
	if next != n+1 {
		t.Fatalf("the burst stopped at line %d of %d", next-1, n)
	}
}

// TestTerminalBurstInOrder: a burst of output many times the window
// comes through whole and in order, the runner waiting for the daemon's
// credit; the daemon never holds more than the window and a message.
func TestTerminalBurstInOrder(t *testing.T) {
	rg := termRig(t)
	rg.runner("r1")
	s := rg.startTerm(termAgent(t))
	defer s.Close(rg.ctx)
	tm, v := attach(t, s)
	defer v.Detach()
	sc := newScreen(t, v, term.DefaultCols, term.DefaultRows)
	sc.wait("repl>")
	const n = 30000 // about 650 KB: ten windows
	if err := v.Type(rg.ctx, []byte(fmt.Sprintf("burst %d\r", n))); err != nil {
		t.Fatal(err)
	}
	sc.wait(fmt.Sprintf("line %d of the burst", n))
	burstLines(t, sc.raw, n)
	rv := v.(*remoteViewer)
	rv.mu.Lock()
	most := rv.maxQueue
	rv.mu.Unlock()
	if w := tm.(*remoteTerm).window; most > w+termChunk {
		t.Errorf("the daemon held %d bytes of output at once, more than the window %d and a message", most, w)
	}
}

// TestTerminalSlowViewerIsCut: a viewer whose reader takes nothing while
// the program floods its terminal: the daemon holds no more than the
// window and a message, the runner stops sending, and its terminal cuts
// the viewer when its own queue is full; the reader then gets what was
// held and the reason.
func TestTerminalSlowViewerIsCut(t *testing.T) {
	rg := termRig(t)
	rg.runner("r1")
	s := rg.startTerm(termAgent(t))
	defer s.Close(rg.ctx)
	tm, v := attach(t, s)
	defer v.Detach()
	if err := v.Type(rg.ctx, []byte("burst 400000\r")); err != nil {
		t.Fatal(err)
	}
	rv := v.(*remoteViewer)
	deadline := time.Now().Add(2 * patience)
	for v.Reason() == "" && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond) // polls the state; no timer is tested
	}
	var held int
	for b := range v.Output() {
		held += len(b)
	}
	if !strings.Contains(v.Reason(), "fell behind") {
		t.Fatalf("the slow viewer ended with %q, want cut for falling behind", v.Reason())
	}
	rv.mu.Lock()
	most := rv.maxQueue
	rv.mu.Unlock()
	if w := tm.(*remoteTerm).window; most > w+termChunk || int64(held) > w+termChunk {
		t.Errorf("the daemon held %d bytes at most, %d at the end; the window is %d", most, held, w)
	}
}
