package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/client"
	"github.com/troupe-dev/troupe/internal/engine/claude/claudetest"
	"github.com/troupe-dev/troupe/internal/events"
	"github.com/troupe-dev/troupe/internal/fakemodel"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// The tests of this file run the real, pinned Claude Code CLI as troupe
// agents, against a scripted model on 127.0.0.1, each with an isolated
// HOME and the offline environment (claudetest). Markers in a prompt tell
// the model what to do (internal/fakemodel): [[text:X]] answers X,
// [[tool:NAME {json}]] calls a tool, [[slow:…]], [[silent:…]], [[error:N]].

// claudeTeam is a Claude agent ("claude"), a scripted helper that answers,
// and a scripted asker that asks the Claude agent what it is asked.
const claudeTeam = `
[[agent]]
name = "claude"
engine = "claude"
command = %[1]q
turn_timeout = "%[2]s"
env = { ENABLE_TOOL_SEARCH = "false" }
allowed_tools = ["mcp__troupe__run_in_background"]

[[agent]]
name = "helper"
engine = "fake"

[agent.fake]
respond = "!say helper knows: {text}"

[[agent]]
name = "asker"
engine = "fake"

[agent.fake]
respond = """
!ask claude {text}
!say asker got: {result}
"""
`

// claudeRig is a daemon whose agents reach a fake model.
type claudeRig struct {
	t     testing.TB
	model *fakemodel.Server
	env   []string
	state string
	proj  string
	d     *daemon
	cl    *client.Client
	p     troupe.ProjectID
	ctx   context.Context
}

// newClaudeRig starts a fake model and a daemon with proj holding team
// (claudeTeam when empty, with a turn_timeout of window).
func newClaudeRig(t testing.TB, window string, projects ...string) *claudeRig {
	t.Helper()
	return newClaudeRigWith(t, func(bin string) string { return fmt.Sprintf(claudeTeam, bin, window) }, projects...)
}

// newClaudeRigWith is newClaudeRig with the team team(bin) gives for the
// pinned CLI at bin.
func newClaudeRigWith(t testing.TB, team func(bin string) string, projects ...string) *claudeRig {
	t.Helper()
	bin := claudetest.Bin(t)
	model := fakemodel.New(fakemodel.Options{})
	if err := model.Start(""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { model.Close() })
	r := &claudeRig{t: t, model: model, state: t.TempDir(), proj: filepath.Join(t.TempDir(), "app")}
	writeTeam(t, r.proj, team(bin))
	home := claudetest.Home(t, append([]string{r.proj}, projects...)...)
	r.env = claudetest.Env(t, home, model.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	r.ctx = ctx
	r.start()
	// Before the temp dirs go (cleanups run last-in first-out): the daemon
	// stops its Claude sessions by escalation, and no CLI of an earlier,
	// killed daemon is still writing into the test's HOME.
	t.Cleanup(func() {
		r.d.stop(syscall.SIGTERM)
		waitNoProcessIn(t, append([]string{r.proj}, projects...)...)
	})
	return r
}

// waitNoProcessIn kills what still runs in dirs (the orphaned CLIs of a
// daemon killed with SIGKILL end at the end of their input, but may still
// be writing) and waits for each to be gone (a pidfd, no polling).
func waitNoProcessIn(t testing.TB, dirs ...string) {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if err != nil || !slices.Contains(dirs, cwd) {
			continue
		}
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue // gone already
		}
		unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
		if n, _ := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 10_000); n == 0 {
			t.Errorf("process %d still runs in %v 10 s after SIGKILL", pid, dirs)
		}
		unix.Close(fd)
	}
}

func (r *claudeRig) start() {
	r.t.Helper()
	r.d = startDaemonEnv(r.t, r.state, r.env, "--project", r.proj)
	cl, err := client.FromStateDir(r.state)
	if err != nil {
		r.t.Fatal(err)
	}
	p, err := cl.ResolveProject(r.ctx, r.proj)
	if err != nil {
		r.t.Fatal(err)
	}
	r.cl, r.p = cl, p.ID
}

// ask asks agent as the person and returns the request as it ended.
func (r *claudeRig) ask(agent troupe.AgentID, text string) troupe.Request {
	r.t.Helper()
	return r.askIn(r.p, agent, text)
}

func (r *claudeRig) askIn(p troupe.ProjectID, agent troupe.AgentID, text string) troupe.Request {
	r.t.Helper()
	req, err := r.cl.Ask(r.ctx, p, agent, text, 0)
	if err != nil {
		r.t.Fatalf("ask %s %q: %v", agent, text, err)
	}
	return req
}

func (r *claudeRig) answer(agent troupe.AgentID, text string) string {
	r.t.Helper()
	req := r.ask(agent, text)
	if req.State != troupe.ReqAnswered {
		r.t.Fatalf("ask %s %q = %s: %s", agent, text, req.State, req.Error)
	}
	return req.Answer
}

func (r *claudeRig) agent(name troupe.AgentID) api.Agent {
	r.t.Helper()
	as, err := r.cl.Agents(r.ctx, r.p)
	if err != nil {
		r.t.Fatal(err)
	}
	for _, a := range as {
		if a.Name == name {
			return a
		}
	}
	r.t.Fatalf("no agent %s", name)
	return api.Agent{}
}

// waitPrompt waits until the model has been asked with a prompt holding s.
func (r *claudeRig) waitPrompt(s string) fakemodel.Request {
	r.t.Helper()
	for n := 1; ; n++ {
		reqs, err := r.model.WaitRequests(r.ctx, n)
		if err != nil {
			r.t.Fatalf("waiting for a model request with %q: %v", s, err)
		}
		if q := reqs[n-1]; strings.Contains(q.Prompt, s) {
			return q
		}
	}
}

// waitState follows the event stream until agent is in state.
func (r *claudeRig) waitState(agent troupe.AgentID, state troupe.AgentState) {
	r.t.Helper()
	st, err := r.cl.Status(r.ctx)
	if err != nil {
		r.t.Fatal(err)
	}
	if r.agent(agent).State == state {
		return
	}
	_, err = r.cl.Events(r.ctx, st.LastEvent, nil, func(ev events.Event) error {
		if ev.Agent == agent && ev.Type == "agent.state" && r.agent(agent).State == state {
			return errStop
		}
		return nil
	})
	if !errors.Is(err, errStop) {
		r.t.Fatalf("waiting for %s to be %s: %v (it is %s)", agent, state, err, r.agent(agent).State)
	}
}

// TestClaudeAgentWorksWithTheTeam: the Claude agent answers the person
// over several turns of one conversation, asks a teammate through troupe's
// MCP tools, is asked by a teammate, and is woken by a message and by the
// end of a background task it started.
func TestClaudeAgentWorksWithTheTeam(t *testing.T) {
	r := newClaudeRig(t, "2m")
	if got := r.answer("claude", "hello [[text:pong]]"); got != "pong" {
		t.Fatalf("answer = %q, want pong", got)
	}
	sid := r.agent("claude").SessionID
	if sid == "" {
		t.Fatal("troupe agents shows no session id for the Claude agent")
	}
	for i := range 4 {
		want := fmt.Sprintf("turn-%d", i+2)
		if got := r.answer("claude", "[[text:"+want+"]]"); got != want {
			t.Fatalf("turn %d: answer = %q", i+2, got)
		}
	}
	if got := r.agent("claude").SessionID; got != sid {
		t.Errorf("session id changed over five turns: %s then %s", sid, got)
	}
	for _, q := range r.model.Requests() {
		if q.Side == "" && q.SessionID != "" && q.SessionID != sid {
			t.Errorf("a model request of session %s, want every one of %s", q.SessionID, sid)
		}
	}

	// Claude → helper → back, through mcp__troupe__ask_agent.
	got := r.answer("claude", `[[tool:mcp__troupe__ask_agent {"to":"helper","question":"is the build green?"}]]`)
	if got != "TOOL_RESULT_SEEN: helper knows: is the build green?" {
		t.Fatalf("claude's ask of helper gave %q", got)
	}
	// asker (fake) → Claude → back.
	if got := r.answer("asker", "[[text:claude says hi]]"); got != "asker got: claude says hi" {
		t.Fatalf("asker's ask of claude gave %q", got)
	}

	// A message wakes it.
	if _, err := r.cl.Send(r.ctx, r.p, "claude", "fyi: the release is friday"); err != nil {
		t.Fatal(err)
	}
	r.waitPrompt("fyi: the release is friday")

	// A background task it starts wakes it when it ends.
	got = r.answer("claude", `[[tool:mcp__troupe__run_in_background {"command":"echo task-output-$((40+2))"}]]`)
	if !strings.Contains(got, "started task") {
		t.Fatalf("run_in_background gave %q", got)
	}
	q := r.waitPrompt("task-output-42")
	if !strings.Contains(q.Prompt, "a background task you started has ended") {
		t.Errorf("the task's completion reached the model as %q", q.Prompt)
	}
}

// TestClaudeInterruptAndPermissions: an interrupt ends a streaming turn;
// a tool the agent may not use waits on the person (state waiting) while
// the rest of the team works, and runs or not as the person decides.
func TestClaudeInterruptAndPermissions(t *testing.T) {
	r := newClaudeRig(t, "2m")
	done := make(chan troupe.Request, 1)
	go func() { req, _ := r.cl.Ask(r.ctx, r.p, "claude", "[[slow:60s every 200ms]]", 0); done <- req }()
	r.waitPrompt("[[slow:60s")
	r.waitState("claude", troupe.StateBusy)
	if err := r.cl.Interrupt(r.ctx, r.p, "claude"); err != nil {
		t.Fatal(err)
	}
	if req := <-done; req.State != troupe.ReqFailed || !strings.Contains(req.Error, "interrupted") {
		t.Fatalf("interrupted ask = %s %q, want failed: interrupted", req.State, req.Error)
	}
	if got := r.answer("claude", "[[text:after the interrupt]]"); got != "after the interrupt" {
		t.Fatalf("next answer = %q", got)
	}

	for _, tc := range []struct {
		file   string
		allow  bool
		reason string
	}{{"allowed.txt", true, ""}, {"denied.txt", false, "not on a friday"}} {
		go func() {
			req, _ := r.cl.Ask(r.ctx, r.p, "claude", `[[tool:Bash {"command":"touch `+tc.file+` && echo wrote `+tc.file+`"}]]`, 0)
			done <- req
		}()
		r.waitState("claude", troupe.StateWaiting)
		// The rest of the team works meanwhile.
		if got := r.answer("helper", "still there?"); got != "helper knows: still there?" {
			t.Fatalf("helper answered %q while claude waited", got)
		}
		ps, err := r.cl.Permissions(r.ctx, r.p)
		if err != nil || len(ps) != 1 || ps[0].Tool != "Bash" || ps[0].Agent != "claude" {
			t.Fatalf("permissions = %+v, %v; want claude's one Bash request", ps, err)
		}
		if tc.allow {
			_, err = r.cl.Allow(r.ctx, ps[0].ID)
		} else {
			_, err = r.cl.Deny(r.ctx, ps[0].ID, tc.reason)
		}
		if err != nil {
			t.Fatal(err)
		}
		req := <-done
		exists := fileExists(filepath.Join(r.proj, tc.file))
		switch {
		case tc.allow && (req.Answer != "TOOL_RESULT_SEEN: wrote "+tc.file || !exists):
			t.Errorf("allowed: answer %q, file made %v", req.Answer, exists)
		case !tc.allow && (!strings.Contains(req.Answer, tc.reason) || exists):
			t.Errorf("denied: answer %q (want the reason %q), file made %v", req.Answer, tc.reason, exists)
		}
	}
}

// TestClaudeResumesAfterDaemonSIGKILL: the conversation survives a SIGKILL
// of the daemon: the next session resumes it (same session id) and the
// model is sent the earlier exchange. The model server restarts too (a new
// process numbers its messages afresh): the resumed conversation, tool
// calls included, still holds together.
func TestClaudeResumesAfterDaemonSIGKILL(t *testing.T) {
	r := newClaudeRig(t, "2m")
	got := r.answer("claude", `remember the word heliotrope [[tool:mcp__troupe__ask_agent {"to":"helper","question":"first"}]]`)
	if got != "TOOL_RESULT_SEEN: helper knows: first" {
		t.Fatalf("answer = %q", got)
	}
	sid := r.agent("claude").SessionID
	r.d.stop(syscall.SIGKILL)
	r.model.Close()
	r.model = fakemodel.New(fakemodel.Options{})
	if err := r.model.Start(""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.model.Close() })
	for i, kv := range r.env {
		if strings.HasPrefix(kv, "ANTHROPIC_BASE_URL=") {
			r.env[i] = "ANTHROPIC_BASE_URL=" + r.model.URL()
		}
	}
	r.start()
	if got := r.agent("claude").SessionID; got != sid {
		t.Fatalf("after the restart troupe agents shows session %q, want %q", got, sid)
	}
	got = r.answer("claude", `which word? [[tool:mcp__troupe__ask_agent {"to":"helper","question":"second"}]]`)
	if got != "TOOL_RESULT_SEEN: helper knows: second" {
		t.Fatalf("answer after the restart = %q", got)
	}
	q := r.waitPrompt("which word?")
	if q.SessionID != sid {
		t.Errorf("the resumed session is %s, want %s", q.SessionID, sid)
	}
	if b, _ := json.Marshal(q.Body["messages"]); !strings.Contains(string(b), "remember the word heliotrope") {
		t.Errorf("the model was not sent the earlier conversation: %.300s", b)
	}
}

// TestClaudeFailuresAreReported: a model error, a model that stays silent
// past the turn_timeout, an unreachable model and a missing CLI each leave
// the agent failed with the reason, give the asker a clear error, and the
// next message works again.
func TestClaudeFailuresAreReported(t *testing.T) {
	r := newClaudeRig(t, "8s")
	req := r.ask("claude", "[[error:500]]")
	if req.State != troupe.ReqFailed || !strings.Contains(req.Error, "API Error: 500") {
		t.Fatalf("model 500: ask = %s %q", req.State, req.Error)
	}
	r.waitState("claude", troupe.StateFailed) // the asker hears first
	if a := r.agent("claude"); !strings.Contains(a.Reason, "API Error: 500") {
		t.Errorf("model 500: agent %s (%s), want failed with the CLI's text", a.State, a.Reason)
	}
	if got := r.answer("claude", "[[text:back]]"); got != "back" {
		t.Fatalf("after the 500: %q", got)
	}

	req = r.ask("claude", "[[silent:1h]]")
	if req.State != troupe.ReqNoReply || !strings.Contains(req.Error, "8s") {
		t.Fatalf("silent model: ask = %s %q, want no_reply after the 8s window", req.State, req.Error)
	}
	r.waitState("claude", troupe.StateFailed)
	if a := r.agent("claude"); !strings.Contains(a.Reason, "no output for 8s") {
		t.Errorf("silent model: agent %s (%s)", a.State, a.Reason)
	}
	if got := r.answer("claude", "[[text:awake]]"); got != "awake" {
		t.Fatalf("after the silence: %q", got)
	}

	// The model goes away: the CLI's own words reach the asker.
	r.model.Close()
	req = r.ask("claude", "anyone there?")
	if req.State != troupe.ReqFailed || !strings.Contains(req.Error, "Connection refused") {
		t.Fatalf("unreachable model: ask = %s %q", req.State, req.Error)
	}

	// A CLI that is not there (a new command: the person approves it).
	st, err := r.cl.Status(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	writeTeam(t, r.proj, fmt.Sprintf(claudeTeam, "/nonexistent/claude", "8s"))
	waitReload(t, r.ctx, r.cl, r.p, st.LastEvent)
	mustTroupe(t, r.state, r.proj, "team", "approve")
	r.waitTeam(func(a api.Agent) bool { return a.Name == "claude" && a.State == troupe.StateStopped })
	req = r.ask("claude", "hello")
	if req.State != troupe.ReqFailed || !strings.Contains(req.Error, "not found") || !strings.Contains(req.Error, "install Claude Code") {
		t.Fatalf("missing CLI: ask = %s %q", req.State, req.Error)
	}
}

// waitTeam follows events until an agent of the team satisfies ok.
func (r *claudeRig) waitTeam(ok func(api.Agent) bool) {
	r.t.Helper()
	check := func() bool {
		as, _ := r.cl.Agents(r.ctx, r.p)
		for _, a := range as {
			if ok(a) {
				return true
			}
		}
		return false
	}
	st, err := r.cl.Status(r.ctx)
	if err != nil {
		r.t.Fatal(err)
	}
	if check() {
		return
	}
	if _, err := r.cl.Events(r.ctx, st.LastEvent, nil, func(events.Event) error {
		if check() {
			return errStop
		}
		return nil
	}); !errors.Is(err, errStop) {
		r.t.Fatalf("waiting for the team: %v", err)
	}
}

// TestC1_ClaudeAgentsOfCopiedProjectsNeverCrossTalk: the same team in a
// project and its cp -r copy; concurrent asks to both Claude agents each
// get their own answer.
func TestC1_ClaudeAgentsOfCopiedProjectsNeverCrossTalk(t *testing.T) {
	copyOf := filepath.Join(t.TempDir(), "copy")
	r := newClaudeRig(t, "2m", copyOf)
	copyDir(t, r.proj, copyOf)
	pb, err := r.cl.AddProject(r.ctx, copyOf)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, p := range []troupe.ProjectID{r.p, pb.ID} {
		for i := range 3 {
			wg.Go(func() {
				want := fmt.Sprintf("%s-%d", p, i)
				req, err := r.cl.Ask(r.ctx, p, "claude", "[[text:"+want+"]]", 0)
				if err != nil || req.Answer != want {
					t.Errorf("ask in %s = %q, %v; want %q", p, req.Answer, err, want)
				}
			})
		}
	}
	wg.Wait()
	if a, b := r.agent("claude").SessionID, agentIn(t, r, pb.ID, "claude").SessionID; a == b || a == "" || b == "" {
		t.Errorf("the two projects' Claude agents have sessions %q and %q, want two", a, b)
	}
}

func agentIn(t *testing.T, r *claudeRig, p troupe.ProjectID, name troupe.AgentID) api.Agent {
	t.Helper()
	as, err := r.cl.Agents(r.ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range as {
		if a.Name == name {
			return a
		}
	}
	t.Fatalf("no agent %s in %s", name, p)
	return api.Agent{}
}

// TestC4_ClaudeSlowModelAnswersSilentModelGetsNoReply: with a 6 s window
// (a CLI on a loaded 2-core machine can be quiet for 2 s before its model
// request), a model that streams for 15 s (a chunk every 500 ms) is
// answered, and one that stays silent gets no reply after one window.
func TestC4_ClaudeSlowModelAnswersSilentModelGetsNoReply(t *testing.T) {
	r := newClaudeRig(t, "6s")
	r.answer("claude", "[[text:warm]]") // the CLI's start is not the model's silence
	if got := r.answer("claude", "[[text:steady]] [[slow:15s every 500ms]]"); !strings.HasPrefix(got, "steady") {
		t.Fatalf("slow model: answer %q", got)
	}
	start := time.Now()
	req := r.ask("claude", "[[silent:1h]]")
	if req.State != troupe.ReqNoReply || !strings.Contains(req.Error, "6s") {
		t.Fatalf("silent model: %s %q, want no_reply after the 6s window", req.State, req.Error)
	}
	if took := time.Since(start); took > time.Minute {
		t.Errorf("no reply came after %v, far beyond one 6s window", took)
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
