package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/client"
	"github.com/troupe-dev/troupe/internal/events"
	"github.com/troupe-dev/troupe/internal/troupe"
)

func copyDir(t testing.TB, from, to string) {
	t.Helper()
	if out, err := exec.Command("cp", "-r", from, to).CombinedOutput(); err != nil {
		t.Fatalf("cp -r: %v %s", err, out)
	}
}

func TestBinaryDemoTeamAnswersAnAsk(t *testing.T) {
	state, demo := t.TempDir(), filepath.Join(t.TempDir(), "demo")
	copyDir(t, "../../examples/demo", demo)
	startDaemon(t, state, "--project", demo)
	out := mustTroupe(t, state, demo, "ask", "lead", "is the sky blue?")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || lines[0] != "Let me ask the researcher." ||
		lines[1] != `The researcher says: I looked into "is the sky blue?": it checks out.` ||
		!strings.HasPrefix(lines[2], "Meanwhile I run the checks: started task ") {
		t.Fatalf("demo ask printed %q", out)
	}
	inbox := mustTroupe(t, state, demo, "inbox", "researcher")
	if !strings.Contains(inbox, "lead") || !strings.Contains(inbox, "ask") || !strings.Contains(inbox, "delivered") {
		t.Fatalf("researcher's inbox does not show the lead's ask: %s", inbox)
	}
	// The background job ends a second later and wakes the lead (through
	// MCP, run_in_background; the completion comes back to its inbox).
	cl, _ := client.FromStateDir(state)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, _ := cl.ResolveProject(ctx, demo)
	waitTaskMessages(t, ctx, cl, p.ID, "lead", 1)
	var ms []troupe.Message
	listJSON(mustTroupe(t, state, demo, "inbox", "lead", "--json"), "messages", &ms)
	last := ms[len(ms)-1]
	if last.Kind != troupe.KindTask || last.State != troupe.MsgDelivered || !strings.Contains(last.Text, "all 42 checks passed") {
		t.Fatalf("lead's last message = %+v; want the delivered completion of its background job", last)
	}
}

// waitTaskMessages follows events until agent has handled n task
// completions (their turns ended).
func waitTaskMessages(t *testing.T, ctx context.Context, cl *client.Client, p troupe.ProjectID, agent troupe.AgentID, n int) {
	t.Helper()
	done := func() bool {
		ms, err := allMessages(ctx, cl, p, agent)
		if err != nil {
			t.Fatal(err)
		}
		c := 0
		for _, m := range ms {
			if m.Kind == troupe.KindTask && m.To == agent && m.State.Final() {
				c++
			}
		}
		return c >= n
	}
	waitFor(t, ctx, cl, fmt.Sprintf("%s to handle %d task completions", agent, n), done)
}

const crashTeam = `
[[agent]]
name = "lead"
engine = "fake"

[[agent]]
name = "worker"
engine = "fake"
`

func TestBinaryAgentCrashMidTurn(t *testing.T) {
	state, proj := t.TempDir(), t.TempDir()
	writeTeam(t, proj, crashTeam)
	startDaemon(t, state, "--project", proj)
	_, errs, code := runCLI(t, state, proj, "ask", "worker", "!say starting\n!crash")
	if code == 0 || !strings.Contains(errs, "worker") || !strings.Contains(errs, "exit status 3") || !strings.Contains(errs, "crashing on purpose") {
		t.Fatalf("ask of a crashing agent: exit %d, stderr %q; want a clear error", code, errs)
	}
	var as []api.Agent
	listJSON(mustTroupe(t, state, proj, "agents", "--json"), "agents", &as)
	if as[1].Name != "worker" || as[1].State != troupe.StateFailed || !strings.Contains(as[1].Reason, "exit status 3") {
		t.Fatalf("worker after crash = %+v, want failed with the reason", as[1])
	}
	if out := mustTroupe(t, state, proj, "ask", "worker", "hello"); out != "echo: hello\n" {
		t.Fatalf("ask after crash = %q, want the restarted agent's echo", out)
	}
}

// TestC1_CopiedProjectsNeverCrossTalk: projects B and C are cp -r copies
// of A, same agent ids. For a sustained run (4 s of continuous load), A and
// B get concurrent asks (the lead asks the researcher through MCP) and
// sends, on real fake-agent processes; C, which nobody asks or watches, gets
// sends only, which must wake it. Every answer and every message stays in
// its project.
func TestC1_CopiedProjectsNeverCrossTalk(t *testing.T) {
	state, a := t.TempDir(), t.TempDir()
	writeTeam(t, a, `
[[agent]]
name = "lead"
engine = "fake"
[agent.fake]
respond = "!ask researcher {text}\n!say {result}"

[[agent]]
name = "researcher"
engine = "fake"
`)
	b, c := filepath.Join(t.TempDir(), "copy-b"), filepath.Join(t.TempDir(), "copy-c")
	copyDir(t, a, b)
	copyDir(t, a, c)
	startDaemon(t, state, "--project", a, "--project", b, "--project", c)
	cl, err := client.FromStateDir(state)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var ps []api.Project
	for _, dir := range []string{a, b, c} {
		p, err := cl.ResolveProject(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	if ps[0].ID == ps[1].ID || ps[0].ID == ps[2].ID || ps[1].ID == ps[2].ID {
		t.Fatal("copied projects share an id")
	}
	// The load lasts 4 s and until it means something (10 asks to A and
	// to B, 10 sends to C), a minute at most: a slow machine loads longer.
	var mu sync.Mutex
	sent := map[troupe.ProjectID]int{}
	asked := map[troupe.ProjectID]int{}
	enough := make(chan struct{})
	var enoughOnce sync.Once
	counted := func() { // mu held
		if asked[ps[0].ID] >= 10 && asked[ps[1].ID] >= 10 && sent[ps[2].ID] >= 10 {
			enoughOnce.Do(func() { close(enough) })
		}
	}
	done := make(chan struct{})
	go func() {
		<-time.After(4 * time.Second) // the length of the load, not a wait for a result
		select {
		case <-enough:
		case <-time.After(time.Minute): // the check below says it was too light
		}
		close(done)
	}()
	var wg sync.WaitGroup
	for pi, p := range ps {
		for w := range 2 {
			if pi < 2 { // A and B are asked
				wg.Go(func() {
					for i := 0; ; i++ {
						select {
						case <-done:
							return
						default:
						}
						mark := fmt.Sprintf("%s#ask%d-%d", p.ID, w, i)
						req, err := cl.Ask(ctx, p.ID, "lead", mark, 0)
						if err != nil || req.Answer != "echo: "+mark {
							t.Errorf("ask lead in %s: %+v %v; want echo: %s", p.Name, req, err, mark)
							return
						}
						mu.Lock()
						asked[p.ID]++
						counted()
						mu.Unlock()
					}
				})
			}
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-done:
						return
					default:
					}
					if _, err := cl.Send(ctx, p.ID, "researcher", fmt.Sprintf("%s#send%d-%d", p.ID, w, i)); err != nil {
						t.Errorf("send: %v", err)
						return
					}
					mu.Lock()
					sent[p.ID]++
					counted()
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	waitSettled(t, ctx, cl, ps[0].ID, ps[1].ID, ps[2].ID)
	for _, p := range ps {
		ms, err := allMessages(ctx, cl, p.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		sends := 0
		for _, m := range ms {
			if m.Project != p.ID || !strings.Contains(m.Text, string(p.ID)+"#") {
				t.Errorf("project %s holds a message of another project: %+v", p.ID, m)
			}
			if m.State != troupe.MsgDelivered {
				t.Errorf("message %d in %s ended %s (%s), want delivered", m.ID, p.ID, m.State, m.Reason)
			}
			if m.From == troupe.Person && m.To == "researcher" {
				sends++
			}
		}
		if sends != sent[p.ID] {
			t.Errorf("project %s: %d sends recorded, %d accepted", p.ID, sends, sent[p.ID])
		}
	}
	if asked[ps[0].ID] < 10 || asked[ps[1].ID] < 10 || sent[ps[2].ID] < 10 {
		t.Fatalf("the load was too light to mean anything: asks %v, sends %v", asked, sent)
	}
	t.Logf("4 s of load: asks %v, sends %v; no cross-delivery", asked, sent)
}

// waitSettled follows the event stream until no message of the projects is
// queued or in a turn.
func waitSettled(t *testing.T, ctx context.Context, cl *client.Client, ps ...troupe.ProjectID) {
	t.Helper()
	settled := func() bool {
		for _, p := range ps {
			ms, err := allMessages(ctx, cl, p, "")
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range ms {
				if !m.State.Final() {
					return false
				}
			}
		}
		return true
	}
	waitFor(t, ctx, cl, "the inboxes to settle", settled)
}

// waitFor follows the event stream until done holds: it checks it first,
// then after every turn that ends or state an agent takes (no polling).
func waitFor(t testing.TB, ctx context.Context, cl *client.Client, what string, done func() bool) {
	t.Helper()
	st, err := cl.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if done() {
		return
	}
	_, err = cl.Events(ctx, st.LastEvent, nil, func(ev events.Event) error {
		if (ev.Type == "turn.ended" || ev.Type == "agent.state") && done() {
			return errStop
		}
		return nil
	})
	if !errors.Is(err, errStop) {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// TestC6_SIGKILLLosesNothing kills the daemon with SIGKILL at many points of
// a run of sends and asks, restarts it, and checks that every accepted
// message ends delivered (marked redelivered when it was in a turn at the
// kill) and every accepted ask is answered.
func TestC6_SIGKILLLosesNothing(t *testing.T) {
	state, proj := t.TempDir(), t.TempDir()
	writeTeam(t, proj, `
[[agent]]
name = "worker"
engine = "fake"
[agent.fake]
respond = "!sleep 20ms\n!say done {text}"
journal = "worker.journal"

[[agent]]
name = "helper"
engine = "fake"
[agent.fake]
journal = "helper.journal"
`)
	accepted := map[int64]bool{}
	var asks []troupe.RequestID
	var pid troupe.ProjectID
	const runs = 8
	for run := range runs {
		d := startDaemon(t, state, "--project", proj)
		cl, err := client.FromStateDir(state)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		p, err := cl.ResolveProject(ctx, proj)
		if err != nil {
			t.Fatal(err)
		}
		pid = p.ID
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := range 6 {
			wg.Go(func() {
				for j := 0; ctx.Err() == nil; j++ {
					text := fmt.Sprintf("r%d-g%d-%d", run, i, j)
					if i == 0 {
						req, err := cl.Ask(ctx, p.ID, "worker", text, 0.001)
						if err == nil {
							mu.Lock()
							asks = append(asks, req.ID)
							mu.Unlock()
						}
						continue
					}
					m, err := cl.Send(ctx, p.ID, []troupe.AgentID{"worker", "helper"}[i%2], text)
					if err == nil {
						mu.Lock()
						accepted[m.ID] = true
						mu.Unlock()
					}
				}
			})
		}
		// Kill at a different point each run: some runs die while turns
		// are in flight, some while appends are.
		<-time.After(time.Duration(30+run*37) * time.Millisecond)
		d.cmd.Process.Signal(syscall.SIGKILL)
		<-d.done
		cancel()
		wg.Wait()
		killStragglers(t, proj)
	}
	if len(accepted) < runs*2 {
		t.Fatalf("only %d messages accepted over %d runs: the test did not load the daemon", len(accepted), runs)
	}
	d := startDaemon(t, state, "--project", proj)
	cl, _ := client.FromStateDir(state)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	waitSettled(t, ctx, cl, pid)
	ms, err := allMessages(ctx, cl, pid, "")
	if err != nil {
		t.Fatal(err)
	}
	byID := map[int64]troupe.Message{}
	redelivered := 0
	for _, m := range ms {
		byID[m.ID] = m
		if m.Redelivered {
			redelivered++
		}
	}
	// What the agents themselves received, from their journals.
	received := map[int64]int{}
	for _, name := range []string{"worker.journal", "helper.journal"} {
		raw, err := os.ReadFile(filepath.Join(proj, name))
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.SplitSeq(strings.TrimSpace(string(raw)), "\n") {
			var e struct{ ID int64 }
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				continue // a line cut by the SIGKILL of its writer
			}
			received[e.ID]++
		}
	}
	for id := range accepted {
		m, ok := byID[id]
		switch {
		case !ok:
			t.Errorf("accepted message %d is lost", id)
		case m.State != troupe.MsgDelivered:
			t.Errorf("message %d ended %s (%s), want delivered", id, m.State, m.Reason)
		case received[id] == 0:
			t.Errorf("message %d is marked delivered but its agent never got it", id)
		case received[id] > 1 && !m.Redelivered:
			t.Errorf("message %d reached its agent %d times without being marked redelivered", id, received[id])
		}
	}
	for _, id := range asks {
		req, err := cl.Request(ctx, pid, id, 60)
		if err != nil || req.State != troupe.ReqAnswered || !strings.HasPrefix(req.Answer, "done ") {
			t.Errorf("ask %s after the kills: %+v %v; want answered", id, req, err)
		}
	}
	twice := 0
	for _, n := range received {
		if n > 1 {
			twice++
		}
	}
	t.Logf("%d messages and %d asks accepted over %d SIGKILLs; %d marked redelivered, %d received more than once (all marked)", len(accepted), len(asks), runs, redelivered, twice)
	d.stop(syscall.SIGTERM)
}

// killStragglers kills fake agents orphaned by a SIGKILLed daemon (their
// stdin closes, so they exit on their own; this only makes sure). They run
// in the project's folder.
func killStragglers(t *testing.T, dir string) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if err != nil || cwd != dir {
			continue
		}
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err == nil {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// allMessages reads project p's whole conversation (agent: only messages
// from or to it), oldest first, following it page by page.
func allMessages(ctx context.Context, cl *client.Client, p troupe.ProjectID, agent troupe.AgentID) ([]troupe.Message, error) {
	var all []troupe.Message
	for after := int64(0); ; {
		ms, err := cl.Messages(ctx, p, agent, after, api.MaxMessages)
		all = append(all, ms...)
		if err != nil || len(ms) < api.MaxMessages {
			return all, err
		}
		after = ms[len(ms)-1].ID
	}
}
