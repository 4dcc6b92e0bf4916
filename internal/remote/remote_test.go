package remote

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/troupe-dev/troupe/internal/bus"
	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/engine/fake"
	"github.com/troupe-dev/troupe/internal/task"
	"github.com/troupe-dev/troupe/internal/troupe"
	"github.com/troupe-dev/troupe/internal/worktree"
)

func TestMain(m *testing.M) {
	fake.MaybeRunChild()
	task.MaybeRunSupervisor()
	os.Exit(m.Run())
}

// patience bounds every wait: reaching it is a hang, not a pace.
const patience = 30 * time.Second

// rig is a bus, the daemon's side on it, and a project with the agent's
// worktree on the daemon's machine.
type rig struct {
	t       *testing.T
	ctx     context.Context
	srv     *bus.Server
	d       *Daemon
	engines map[troupe.Engine]engine.Engine
	work    string // the agent's worktree on the daemon
}

func newRig(t *testing.T) *rig {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := bus.Start(bus.ServerOptions{Dir: t.TempDir(), Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	engines := map[troupe.Engine]engine.Engine{troupe.EngineFake: fake.New(fake.Options{Command: fake.TestCommand()})}
	d := NewDaemon(DaemonOptions{Conn: srv.Conn(), Engines: engines, Dir: t.TempDir(), Beat: testBeat})
	done := make(chan struct{})
	go func() { d.Run(ctx, nil); close(done) }()
	t.Cleanup(func() { cancel(); <-done; srv.Close() })

	proj := t.TempDir()
	git := func(args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = proj
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+proj,
			"GIT_AUTHOR_NAME=p", "GIT_AUTHOR_EMAIL=p@example.com", "GIT_COMMITTER_NAME=p", "GIT_COMMITTER_EMAIL=p@example.com")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	os.WriteFile(filepath.Join(proj, "README"), []byte("hello\n"), 0o644)
	git("init", "-q", "-b", "main")
	git("add", "-A")
	git("commit", "-q", "-m", "start")
	work, err := worktree.New(t.TempDir()).Dir(ctx, key, agentSpec(), proj)
	if err != nil {
		t.Fatal(err)
	}
	return &rig{t: t, ctx: ctx, srv: srv, d: d, engines: engines, work: work}
}

var key = troupe.RuntimeKey{Project: "p1", Agent: "coder"}

// testBeat is the runners' beat in these tests: short enough to see a
// runner go, long enough that a loaded machine (-race, 2 cores) does not
// miss three in a row.
const testBeat = 500 * time.Millisecond

func agentSpec() troupe.AgentSpec {
	return troupe.AgentSpec{Name: "coder", Engine: troupe.EngineFake, Runner: "r1", Workspace: worktree.Worktree}
}

// runner starts runner name on the bus and waits until the daemon counts
// it connected; stop closes its connection abruptly (a runner gone).
func (rg *rig) runner(name string) (root string, stop func()) {
	t := rg.t
	t.Helper()
	creds, err := rg.srv.AddRunner(name)
	if err != nil {
		t.Fatal(err)
	}
	root = t.TempDir()
	var r *Runner
	nc, err := bus.Dial(rg.ctx, creds, nil, func() { r.Reconnected() })
	if err != nil {
		t.Fatal(err)
	}
	r = NewRunner(RunnerOptions{Conn: nc, Name: name, Root: root, Engines: rg.engines, TaskSupervisor: task.TestSupervisorCommand()})
	ctx, cancel := context.WithCancel(rg.ctx)
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; nc.Close() })
	greeted(t, r)
	return root, nc.Close
}

// greeted waits for runner r's next answered hello.
func greeted(t *testing.T, r *Runner) {
	t.Helper()
	select {
	case <-r.Greeted():
	case <-time.After(patience):
		t.Fatalf("runner not greeted within %v", patience)
	}
}

func (rg *rig) start() engine.Session {
	rg.t.Helper()
	s, err := rg.d.Engine().Start(rg.ctx, engine.StartSpec{Key: key, Agent: agentSpec(), Dir: rg.work, Approver: allow{}})
	if err != nil {
		rg.t.Fatal(err)
	}
	return s
}

// allow approves every permission request: the daemon's approver,
// reached from the runner.
type allow struct{}

func (allow) Approve(context.Context, engine.Permission) (engine.Decision, error) {
	return engine.Decision{Allow: true}, nil
}

// turn sends text and returns the turn's end.
func turn(t *testing.T, s engine.Session, id troupe.TurnID, text string) engine.Event {
	t.Helper()
	if err := s.Send(context.Background(), engine.Input{Turn: id, Messages: []troupe.Message{{ID: 1, From: "@person", Kind: troupe.KindMessage, Text: text}}}); err != nil {
		t.Fatal(err)
	}
	return turnEnd(t, s)
}

// turnEnd waits for the end of the turn in flight.
func turnEnd(t *testing.T, s engine.Session) engine.Event {
	t.Helper()
	timeout := time.After(patience)
	for {
		select {
		case ev, ok := <-s.Events():
			if !ok {
				t.Fatalf("events closed before the turn's end: %v", s.Err())
			}
			if ev.Kind == engine.EventTurnEnd {
				return ev
			}
		case <-timeout:
			t.Fatal("no turn end")
		}
	}
}

// TestSessionRunsOnTheRunner: a session started through the daemon's
// engine runs on the runner, in its clone's worktree; its turn's files
// come back to the daemon's worktree; Close ends it on both sides.
func TestSessionRunsOnTheRunner(t *testing.T) {
	rg := newRig(t)
	root, _ := rg.runner("r1")
	s := rg.start()
	end := turn(t, s, "t1", "!cwd")
	if want := filepath.Join(root, "p1", "repo", "troupe", "worktrees", "coder"); !strings.Contains(end.Text, want) || end.Error != "" {
		t.Fatalf("turn end %+v, want the cwd %s", end, want)
	}
	end = turn(t, s, "t2", "!sh echo from the runner > made.txt")
	if end.Error != "" {
		t.Fatalf("turn end %+v", end)
	}
	if b, err := os.ReadFile(filepath.Join(rg.work, "made.txt")); err != nil || string(b) != "from the runner\n" {
		t.Errorf("the turn's file in the daemon's worktree: %q, %v", b, err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-s.Events(); ok {
		t.Error("events open after Close")
	}
	if s.Err() != nil {
		t.Errorf("Err after Close: %v", s.Err())
	}
	for _, r := range rg.d.Runners() {
		if len(r.Agents) > 0 {
			t.Errorf("runner %s still runs %v after Close", r.Name, r.Agents)
		}
	}
}

// TestARunnerCannotActForAnotherRunnersSession: runner r2, holding r1's
// session id, is refused on every request about it.
func TestARunnerCannotActForAnotherRunnersSession(t *testing.T) {
	rg := newRig(t)
	rg.runner("r1")
	rg.runner("r2")
	s := rg.start().(*session)
	creds, err := rg.srv.AddRunner("r3")
	if err != nil {
		t.Fatal(err)
	}
	nc, err := bus.Dial(rg.ctx, creds, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	for op, body := range map[string]any{
		opTool:    toolReq{Session: s.id, Name: "send_message", Args: json.RawMessage(`{"to":"x","text":"y"}`)},
		opApprove: approveReq{Session: s.id, Permission: engine.Permission{Tool: "Bash"}},
		opMCP:     mcpReq{Session: s.id, Method: "POST", Header: map[string][]string{"Authorization": {"Bearer x"}}},
		opBundle:  bundleReq{Session: s.id},
	} {
		b, _ := json.Marshal(body)
		m, err := nc.Request(bus.FromRunner("r3")+"."+op, b, patience)
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		var rep reply
		json.Unmarshal(m.Data, &rep)
		if !strings.Contains(rep.Error, "no session") {
			t.Errorf("%s with another runner's session: %+v, want refused", op, rep)
		}
		// And r3 cannot reach r1's subjects at all.
		if _, err := nc.Request(bus.FromRunner("r1")+"."+op, b, time.Second); err == nil {
			t.Errorf("%s on runner r1's subject from r3 was answered", op)
		}
	}
	_ = s.Close(context.Background())
}

// TestUnreachableEndsTheTurn: a runner whose connection dies mid-turn is
// unreachable after its missed beats: the turn in flight ends on that
// (engine.Limit.Unreachable, its messages kept by the runtime), and a new
// start is refused with the same reason.
func TestUnreachableEndsTheTurn(t *testing.T) {
	rg := newRig(t)
	_, stop := rg.runner("r1")
	s := rg.start()
	if err := s.Send(context.Background(), engine.Input{Turn: "t1", Messages: []troupe.Message{{ID: 1, From: "@person", Kind: troupe.KindMessage, Text: "!sleep 1m"}}}); err != nil {
		t.Fatal(err)
	}
	stop()
	if ev := turnEnd(t, s); ev.Limit == nil || ev.Limit.Unreachable == nil || ev.Limit.Unreachable.Runner != "r1" || !strings.Contains(ev.Error, "unreachable (runner r1, since") {
		t.Fatalf("turn end %+v", ev)
	}
	_ = s.Close(context.Background())
	_, err := rg.d.Engine().Start(rg.ctx, engine.StartSpec{Key: key, Agent: agentSpec(), Dir: rg.work})
	var u *engine.Unreachable
	if !errors.As(err, &u) || u.Runner != "r1" {
		t.Fatalf("start on a gone runner: %v", err)
	}
}

// relay is a TCP relay between a runner and the bus that a test can
// pause (nothing flows, the connections stay open) and resume.
type relay struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	paused bool
	resume chan struct{} // closed on resume
}

func newRelay(t *testing.T, target string) *relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{ln: ln, target: target, resume: make(chan struct{})}
	close(r.resume)
	var wg sync.WaitGroup
	var conns []net.Conn
	var cmu sync.Mutex
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			cmu.Lock()
			conns = append(conns, c, up)
			cmu.Unlock()
			wg.Go(func() { r.pipe(up, c) })
			wg.Go(func() { r.pipe(c, up) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		r.Resume()
		cmu.Lock()
		for _, c := range conns {
			c.Close()
		}
		cmu.Unlock()
		wg.Wait()
	})
	return r
}

func (r *relay) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			r.mu.Lock()
			wait := r.resume
			r.mu.Unlock()
			<-wait
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			dst.Close()
			return
		}
	}
}

func (r *relay) Pause() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.paused {
		r.paused, r.resume = true, make(chan struct{})
	}
}

func (r *relay) Resume() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.paused {
		r.paused = false
		close(r.resume)
	}
}

// TestAPausedLinkComesBack: the link between a runner and the daemon is
// paused (the TCP connection open, nothing flowing): past its beats the
// runner is unreachable and the turn in flight ends on that; resumed, the
// runner is connected again without restarting, and a new session runs.
func TestAPausedLinkComesBack(t *testing.T) {
	rg := newRig(t)
	creds, err := rg.srv.AddRunner("r1")
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(creds.URL)
	if err != nil {
		t.Fatal(err)
	}
	link := newRelay(t, u.Host)
	creds.URL = "nats://" + link.ln.Addr().String()
	var r *Runner
	nc, err := bus.Dial(rg.ctx, creds, nil, func() { r.Reconnected() })
	if err != nil {
		t.Fatal(err)
	}
	r = NewRunner(RunnerOptions{Conn: nc, Name: "r1", Root: t.TempDir(), Engines: rg.engines})
	ctx, cancel := context.WithCancel(rg.ctx)
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; nc.Close() })
	greeted(t, r)

	s := rg.start()
	if err := s.Send(context.Background(), engine.Input{Turn: "t1", Messages: []troupe.Message{{ID: 1, From: "@person", Kind: troupe.KindMessage, Text: "!sleep 1m"}}}); err != nil {
		t.Fatal(err)
	}
	link.Pause()
	if end := turnEnd(t, s); end.Limit == nil || end.Limit.Unreachable == nil {
		t.Fatalf("turn end while the link is paused: %+v", end)
	}
	_ = s.Close(context.Background())
	select { // a token of a hello during the pause, if any
	case <-r.Greeted():
	default:
	}
	link.Resume()
	greeted(t, r)
	s = rg.start()
	if end := turn(t, s, "t2", "again"); end.Error != "" || !strings.Contains(end.Text, "echo: again") {
		t.Fatalf("a turn after the link came back: %+v", end)
	}
	_ = s.Close(context.Background())
}

// TestAHelloNobodyAnswersIsTriedAgain: a daemon that drops a runner's
// hello (revoked it, or died while answering) does not stall the runner:
// its hello times out and it says hello again at its next beat.
func TestAHelloNobodyAnswersIsTriedAgain(t *testing.T) {
	srv, err := bus.Start(bus.ServerOptions{Dir: t.TempDir(), Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	hellos := make(chan struct{}, 16)
	sub, err := srv.Conn().Subscribe(bus.FromRunner("r1")+"."+opHello, func(*nats.Msg) { hellos <- struct{}{} }) // never answered
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	creds, err := srv.AddRunner("r1")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	nc, err := bus.Dial(ctx, creds, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := NewRunner(RunnerOptions{Conn: nc, Name: "r1", Root: t.TempDir(), TaskSupervisor: task.TestSupervisorCommand(),
		HelloTimeout: 200 * time.Millisecond})
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	defer func() { cancel(); <-done; nc.Close() }()
	for i := range 2 {
		select {
		case <-hellos:
		case <-time.After(patience):
			t.Fatalf("hello %d never came: the runner is stuck on an unanswered hello", i+1)
		}
	}
}
