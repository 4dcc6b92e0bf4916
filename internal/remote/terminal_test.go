package remote

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nats-io/nats.go"

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

// TestTerminalBurstThroughTheWindow: a burst of output three windows
// long, with two viewers attached: one reads it all as it comes, the
// other reads nothing until then. The runner stops the stalled one's
// output at the window (the daemon holds no more than the window and a
// message for it) and sends it the rest as it reads, whole and in order.
func TestTerminalBurstThroughTheWindow(t *testing.T) {
	rg := termRig(t)
	rg.runner("r1")
	s := rg.startTerm(termAgent(t))
	defer s.Close(rg.ctx)
	s.(*session).term.window = termChunk // the smallest a runner takes
	tm, slow := attach(t, s)
	defer slow.Detach()
	_, fast := attach(t, s)
	defer fast.Detach()
	fs := newScreen(t, fast, term.DefaultCols, term.DefaultRows)
	fs.wait("repl>")
	const n = 8000 // about 190 KB, three windows
	if err := fast.Type(rg.ctx, []byte(fmt.Sprintf("burst %d\r", n))); err != nil {
		t.Fatal(err)
	}
	last := fmt.Sprintf("line %d of the burst", n)
	fs.wait(last)
	burstLines(t, fs.raw, n)
	// The program wrote it all; the stalled viewer got the window.
	rv := slow.(*remoteViewer)
	w := tm.(*remoteTerm).window
	rv.mu.Lock()
	held, most := rv.queued, rv.maxQueue
	rv.mu.Unlock()
	if most > w+termChunk || held > w+termChunk {
		t.Errorf("the daemon held %d bytes for the stalled viewer (%d at most), more than the window %d and a message", held, most, w)
	}
	ss := newScreen(t, slow, term.DefaultCols, term.DefaultRows)
	ss.wait(last)
	burstLines(t, ss.raw, n)
}

// TestTerminalViewerGap: an output message out of sequence (one lost on
// the way) closes the viewer with the reason instead of showing a corrupt
// screen.
func TestTerminalViewerGap(t *testing.T) {
	rg := termRig(t)
	rg.runner("r1")
	s := rg.startTerm(termAgent(t))
	defer s.Close(rg.ctx)
	_, v := attach(t, s)
	defer v.Detach()
	m := &nats.Msg{Subject: termSubject("r1", v.(*remoteViewer).id), Data: []byte("x"), Header: nats.Header{hdrSeq: []string{"1000"}}}
	if err := rg.srv.Conn().PublishMsg(m); err != nil {
		t.Fatal(err)
	}
	drain(t, v)
	if !strings.Contains(v.Reason(), "out of sequence (message 1000 where") {
		t.Fatalf("viewer ended with %q, want the gap", v.Reason())
	}
}

// drain reads v's output until it closes.
func drain(t *testing.T, v engine.TerminalViewer) {
	t.Helper()
	timeout := time.After(patience)
	for {
		select {
		case _, ok := <-v.Output():
			if !ok {
				return
			}
		case <-timeout:
			t.Fatal("the viewer's output did not close")
		}
	}
}

// TestTerminalViewerRunnerLost: the runner of an attached terminal goes
// unreachable: the viewer closes with that reason.
func TestTerminalViewerRunnerLost(t *testing.T) {
	rg := termRig(t)
	_, stop := rg.runner("r1")
	s := rg.startTerm(termAgent(t))
	defer s.Close(rg.ctx)
	tm, v := attach(t, s)
	defer v.Detach()
	stop()
	drain(t, v)
	if !strings.Contains(v.Reason(), "unreachable (runner r1") {
		t.Fatalf("viewer ended with %q, want the runner unreachable", v.Reason())
	}
	if tm.InUse() {
		t.Error("in use after its viewer was closed")
	}
}

// fakeViewer is a terminal's viewer the test feeds.
type fakeViewer struct {
	out      chan []byte
	mu       sync.Mutex
	reason   string
	detached bool
}

func (f *fakeViewer) Snapshot() []byte                   { return nil }
func (f *fakeViewer) Output() <-chan []byte              { return f.out }
func (f *fakeViewer) Type(context.Context, []byte) error { return nil }
func (f *fakeViewer) Resize(int, int) error              { return nil }
func (f *fakeViewer) Reason() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reason
}
func (f *fakeViewer) Detach() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.detached = true
}

// cut is the terminal cutting the viewer (its queue full).
func (f *fakeViewer) cut(reason string) {
	f.mu.Lock()
	f.reason = reason
	f.mu.Unlock()
	close(f.out)
}

// sent is what a pump published.
type sent struct {
	mu   sync.Mutex
	seqs []uint64
	data []byte
	end  string
}

func (s *sent) send(seq uint64, data []byte, end string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seqs = append(s.seqs, seq)
	if end != "" {
		s.end = string(data)
	} else {
		s.data = append(s.data, data...)
	}
	return nil
}

func (s *sent) get() (n int, end string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.data), s.end
}

// TestPumpWindowAndCut: a runner's pump sends no more than the window
// the daemon has not credited, in order and numbered; a credit lets more
// through; the terminal cutting the viewer while the pump waits for
// credit ends it with that reason at once (not after the lease).
func TestPumpWindowAndCut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeViewer{out: make(chan []byte, 64)}
		var want []byte
		for i := range 12 {
			c := bytes.Repeat([]byte{byte('a' + i)}, 16<<10)
			want = append(want, c...)
			f.out <- c
		}
		rv := newRunnerView("v1", "s1", f, termChunk)
		var out sent
		done := make(chan struct{})
		go func() { rv.pump(context.Background(), out.send); close(done) }()
		synctest.Wait()
		if n, _ := out.get(); n != termChunk {
			t.Fatalf("sent %d bytes with no credit, the window is %d", n, termChunk)
		}
		rv.credit(termChunk)
		synctest.Wait()
		if n, _ := out.get(); n != 2*termChunk {
			t.Fatalf("sent %d bytes after one window's credit", n)
		}
		rv.credit(2 * termChunk)
		synctest.Wait()
		out.mu.Lock()
		if !bytes.Equal(out.data, want) {
			t.Errorf("the output came out of order or incomplete (%d of %d bytes)", len(out.data), len(want))
		}
		for i, s := range out.seqs {
			if s != uint64(i+1) {
				t.Errorf("message %d numbered %d", i, s)
			}
		}
		out.mu.Unlock()
		// Stalled on credit, the terminal cuts the viewer.
		f.out <- bytes.Repeat([]byte("z"), termChunk)
		f.out <- []byte("more")
		synctest.Wait()
		f.cut("the viewer fell behind the terminal's output: detached")
		time.Sleep(stallCheck)
		synctest.Wait()
		if _, end := out.get(); !strings.Contains(end, "fell behind") {
			t.Fatalf("end %q after the cut", end)
		}
		<-done
		if !f.detached {
			t.Error("the pump did not detach its viewer")
		}
	})
}

// TestPumpLease: a viewer whose daemon keeps crediting lives on; one not
// heard from for viewerLease is detached on the runner with the reason.
func TestPumpLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeViewer{out: make(chan []byte, 1)}
		rv := newRunnerView("v1", "s1", f, termWindow)
		var out sent
		done := make(chan struct{})
		go func() { rv.pump(context.Background(), out.send); close(done) }()
		for range 3 * int(viewerLease/creditEvery) {
			time.Sleep(creditEvery)
			rv.credit(0)
		}
		synctest.Wait()
		if _, end := out.get(); end != "" {
			t.Fatalf("a credited viewer ended: %q", end)
		}
		time.Sleep(viewerLease + stallCheck)
		synctest.Wait()
		if _, end := out.get(); !strings.Contains(end, "not heard from") {
			t.Fatalf("end %q after the lease", end)
		}
		<-done
		if !f.detached {
			t.Error("the pump did not detach its viewer")
		}
	})
}

// TestPumpEndAfterOutput: a viewer that ends (its program ended) with
// output still queued, within the window: the output goes first, then
// the end with its reason.
func TestPumpEndAfterOutput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeViewer{out: make(chan []byte, 4)}
		f.out <- []byte("last words")
		f.cut("the program ended")
		rv := newRunnerView("v1", "s1", f, termWindow)
		var out sent
		rv.pump(context.Background(), out.send)
		if string(out.data) != "last words" || out.end != "the program ended" || !slices.Equal(out.seqs, []uint64{1, 2}) {
			t.Fatalf("sent %q (seqs %v), end %q", out.data, out.seqs, out.end)
		}
	})
}
