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
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/troupe-dev/troupe/internal/events"
	"github.com/troupe-dev/troupe/internal/fakemodel"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// openaiKey is the key the daemon's environment holds for the openai
// agents of these tests; it must show nowhere.
const openaiKey = "sk-troupe-test-5f2c9a1e7b"

// openaiTeam is an openai agent "x" on the fake model, beside a scripted
// helper.
const openaiTeam = `
[[agent]]
name = "x"
engine = "openai"
model = "fake-coder"
permission_mode = %q
turn_timeout = "2m"

[agent.openai]
base_url = %q
api_key_env = "TROUPE_TEST_OPENAI_KEY"

[[agent]]
name = "helper"
engine = "fake"

[agent.fake]
respond = "!say helper knows: {text}"
`

// newOpenAIRig starts a fake model (script: nil for DefaultScript) and a
// daemon whose project at proj (made by setup when not nil) has
// openaiTeam in permission mode mode.
func newOpenAIRig(t *testing.T, script fakemodel.Script, mode string, setup func(dir string)) *claudeRig {
	t.Helper()
	model := fakemodel.New(fakemodel.Options{Script: script})
	if err := model.Start(""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { model.Close() })
	r := &claudeRig{t: t, model: model, state: t.TempDir(), proj: filepath.Join(t.TempDir(), "app")}
	writeTeam(t, r.proj, fmt.Sprintf(openaiTeam, mode, model.URL()+"/v1"))
	if setup != nil {
		setup(r.proj)
	}
	// The commands the agent runs build Go: the test's own caches, no
	// toolchain download.
	var goenv []string
	for _, v := range []string{"GOCACHE", "GOPATH", "GOMODCACHE"} {
		out, err := exec.Command("go", "env", v).Output()
		if err != nil {
			t.Fatal(err)
		}
		goenv = append(goenv, v+"="+strings.TrimSpace(string(out)))
	}
	r.env = append(append(os.Environ(), "HOME="+t.TempDir(), "GOTOOLCHAIN=local", "GOFLAGS=", "TROUPE_TEST_OPENAI_KEY="+openaiKey), goenv...)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	r.ctx = ctx
	r.start()
	t.Cleanup(func() {
		r.d.stop(syscall.SIGTERM)
		waitNoProcessIn(t, r.proj)
		if strings.Contains(r.d.logs.String(), openaiKey) {
			t.Error("the daemon's log shows the model key")
		}
	})
	return r
}

// TestOpenAIAgentWorksWithTheTeamAndResumes: an openai agent asks a
// teammate through troupe's ask_agent (in process), answers the person,
// and after a SIGKILL of the daemon continues the same conversation: the
// model is sent the earlier exchange, which the store kept.
func TestOpenAIAgentWorksWithTheTeamAndResumes(t *testing.T) {
	r := newOpenAIRig(t, nil, "default", nil)
	got := r.answer("x", `remember the word heliotrope [[tool:ask_agent {"to":"helper","question":"is it green?"}]]`)
	if got != "TOOL_RESULT_SEEN: helper knows: is it green?" {
		t.Fatalf("ask of the helper through ask_agent: %q", got)
	}
	q := r.model.Requests()[0]
	if q.Header.Get("Authorization") != "Bearer "+openaiKey || q.Model != "fake-coder" {
		t.Errorf("request: model %q, authorization %q", q.Model, q.Header.Get("Authorization"))
	}
	sid := r.agent("x").SessionID
	if !strings.HasPrefix(sid, "oai-") {
		t.Fatalf("session id %q", sid)
	}
	r.d.stop(syscall.SIGKILL)
	r.start()
	if got := r.agent("x").SessionID; got != sid {
		t.Fatalf("after the restart the conversation is %q, want %q", got, sid)
	}
	if got := r.answer("x", "which word? [[text:heliotrope]]"); got != "heliotrope" {
		t.Fatalf("answer after the restart: %q", got)
	}
	q = r.waitPrompt("which word?")
	body, _ := json.Marshal(q.Body["messages"])
	if !strings.Contains(string(body), "remember the word heliotrope") || !strings.Contains(string(body), "helper knows: is it green?") {
		t.Errorf("the model was not sent the earlier exchange: %.400s", body)
	}
}

// TestOpenAIAgentAsksThePersonBeforeACommand: in the default mode a
// command waits for the person (troupe permissions, troupe allow), then
// runs; a denial reaches the model as a tool error.
func TestOpenAIAgentAsksThePersonBeforeACommand(t *testing.T) {
	r := newOpenAIRig(t, nil, "default", nil)
	done := make(chan troupe.Request, 1)
	go func() {
		req, _ := r.cl.Ask(r.ctx, r.p, "x", `[[tool:run_command {"command":"echo ran > proof.txt"}]]`, 0)
		done <- req
	}()
	var id string
	waitFor(t, r.ctx, r.cl, "the permission request", func() bool {
		ps, _ := r.cl.Permissions(r.ctx, r.p)
		if len(ps) == 1 {
			id = string(ps[0].ID)
		}
		return id != ""
	})
	if _, err := os.Stat(filepath.Join(r.proj, "proof.txt")); err == nil {
		t.Fatal("the command ran before the person allowed it")
	}
	mustTroupe(t, r.state, r.proj, "allow", id)
	req := <-done
	if req.State != troupe.ReqAnswered || !strings.Contains(req.Answer, "exit status 0") {
		t.Fatalf("ask = %s %q %q", req.State, req.Answer, req.Error)
	}
	if b, _ := os.ReadFile(filepath.Join(r.proj, "proof.txt")); string(b) != "ran\n" {
		t.Errorf("proof.txt = %q", b)
	}
	// The turn's record (the journal, written in batches, drained by a
	// clean stop) shows the request, the decision and the call.
	r.d.stop(syscall.SIGTERM)
	r.start()
	log := mustTroupe(t, r.state, r.proj, "log", "x")
	if !strings.Contains(log, "permission run_command") || !strings.Contains(log, "allowed") || !strings.Contains(log, "tool run_command") {
		t.Errorf("troupe log x:\n%s", log)
	}
}

// The seeded bug of the done-when test: Add subtracts.
const (
	calcMod  = "module calc\n\ngo 1.24\n"
	calcGo   = "package calc\n\n// Add returns the sum of a and b.\nfunc Add(a, b int) int {\n\treturn a - b\n}\n"
	calcTest = "package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif got := Add(2, 3); got != 5 {\n\t\tt.Fatalf(\"Add(2, 3) = %d, want 5\", got)\n\t}\n}\n"
)

// fixerScript plays a model that fixes the failing test: run the tests,
// read the failing test, read the code, edit it, run the tests again,
// report. Each step looks at the tool results it got, as a model would:
// a result it did not expect ends the turn saying so.
func fixerScript(q fakemodel.Request) fakemodel.Reply {
	if q.API != fakemodel.ChatCompletions {
		return fakemodel.DefaultScript(q)
	}
	var msgs []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	b, _ := json.Marshal(q.Body["messages"])
	json.Unmarshal(b, &msgs)
	var results []string
	for _, m := range msgs {
		if m.Role == "tool" {
			results = append(results, m.Content)
		}
	}
	step := func(text, name, args string) fakemodel.Reply {
		return fakemodel.Reply{Text: text, Calls: []fakemodel.ToolCall{{Name: name, Args: json.RawMessage(args)}}}
	}
	last := ""
	if len(results) > 0 {
		last = results[len(results)-1]
	}
	switch len(results) {
	case 0:
		return step("Let me run the tests.", "run_command", `{"command":"go test ./..."}`)
	case 1:
		if !strings.Contains(last, "FAIL") || !strings.Contains(last, "calc_test.go") {
			return fakemodel.Reply{Text: "unexpected: the tests did not fail: " + last}
		}
		return step("TestAdd fails; reading it.", "read_file", `{"path":"calc_test.go"}`)
	case 2:
		if !strings.Contains(last, "Add(2, 3)") {
			return fakemodel.Reply{Text: "unexpected test file: " + last}
		}
		return step("Now the code.", "read_file", `{"path":"calc.go"}`)
	case 3:
		if !strings.Contains(last, "return a - b") {
			return fakemodel.Reply{Text: "unexpected code: " + last}
		}
		return step("Add subtracts: fixing.", "edit_file", `{"path":"calc.go","old_string":"return a - b","new_string":"return a + b"}`)
	case 4:
		if !strings.HasPrefix(last, "edited calc.go") {
			return fakemodel.Reply{Text: "the edit failed: " + last}
		}
		return step("Running the tests again.", "run_command", `{"command":"go test ./..."}`)
	default:
		if strings.Contains(last, "exit status 0") && strings.Contains(last, "ok") {
			return fakemodel.Reply{Text: "Fixed: Add returned a - b; it returns a + b now and go test passes."}
		}
		return fakemodel.Reply{Text: "still failing: " + last}
	}
}

// TestOpenAIAgentFixesASeededBug is the done-when test of the openai
// engine: an agent on the fake model, asked by the person, runs the
// failing test, reads it and the code, edits the code, runs go test again
// and reports; the file really changed and go test really passes.
func TestOpenAIAgentFixesASeededBug(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatal("go is not on PATH: the agent's commands need it")
	}
	r := newOpenAIRig(t, fixerScript, "bypassPermissions", func(dir string) {
		for name, src := range map[string]string{"go.mod": calcMod, "calc.go": calcGo, "calc_test.go": calcTest} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	})
	got := r.answer("x", "The tests of this package fail: fix the bug.")
	if !strings.HasPrefix(got, "Fixed:") {
		t.Fatalf("the agent's answer: %q", got)
	}
	b, err := os.ReadFile(filepath.Join(r.proj, "calc.go"))
	if err != nil || !strings.Contains(string(b), "return a + b") || strings.Contains(string(b), "return a - b") {
		t.Fatalf("calc.go after the fix: %q, %v", b, err)
	}
	cmd := exec.Command("go", "test", "./...")
	cmd.Dir = r.proj
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go test after the fix: %v\n%s", err, out)
	}
	if n := len(r.model.Requests()); n != 6 {
		t.Errorf("%d model requests, want 6 (five tool steps and the report)", n)
	}
}

// TestC1_OpenAIConversationsOfCopiedProjectsNeverMix: a project and its
// cp -r copy (same agent names) each run an openai agent at the same time;
// each agent's conversation holds its own project's words only.
func TestC1_OpenAIConversationsOfCopiedProjectsNeverMix(t *testing.T) {
	r := newOpenAIRig(t, nil, "default", nil)
	copyProj := filepath.Join(t.TempDir(), "app-copy")
	copyDir(t, r.proj, copyProj)
	mustTroupe(t, r.state, copyProj, "project", "add", copyProj)
	pc, err := r.cl.ResolveProject(r.ctx, copyProj)
	if err != nil {
		t.Fatal(err)
	}
	ps := map[troupe.ProjectID]string{r.p: "alpha", pc.ID: "omega"}
	done := make(chan error, len(ps))
	for p, word := range ps {
		go func() {
			for i := range 3 {
				req, err := r.cl.Ask(r.ctx, p, "x", fmt.Sprintf("remember %s-%d [[text:ok %s-%d]]", word, i, word, i), 0)
				if err != nil || req.State != troupe.ReqAnswered || req.Answer != fmt.Sprintf("ok %s-%d", word, i) {
					done <- fmt.Errorf("project %s: ask %d = %+v, %v", p, i, req, err)
					return
				}
			}
			done <- nil
		}()
	}
	for range ps {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range r.model.Requests() {
		body, _ := json.Marshal(q.Body["messages"])
		if strings.Contains(string(body), "alpha-") && strings.Contains(string(body), "omega-") {
			t.Fatalf("a request mixes both projects' conversations: %.300s", body)
		}
	}
	// Each project's last request holds its own three turns.
	for p, word := range ps {
		req, err := r.cl.Ask(r.ctx, p, "x", "list "+word+" [[text:listed]]", 0)
		if err != nil || req.State != troupe.ReqAnswered {
			t.Fatalf("project %s: %+v, %v", p, req, err)
		}
		q := r.waitPrompt("list " + word)
		body, _ := json.Marshal(q.Body["messages"])
		for i := range 3 {
			if !strings.Contains(string(body), fmt.Sprintf("remember %s-%d", word, i)) {
				t.Errorf("project %s lacks its turn %d: %.300s", p, i, body)
			}
		}
	}
	as, err := r.cl.Agents(r.ctx, pc.ID)
	if err != nil {
		t.Fatal(err)
	}
	var other string
	for _, ag := range as {
		if ag.Name == "x" {
			other = ag.SessionID
		}
	}
	if mine := r.agent("x").SessionID; mine == "" || other == "" || mine == other {
		t.Errorf("conversations %q and %q: want two", mine, other)
	}
}

// TestOpenAICommandEndsAtItsLimitWhenTheDaemonDies: a command an openai
// agent runs is timed by the daemon, and by a backstop (coreutils timeout)
// too: when the daemon is killed mid-command, the command still ends
// within a few seconds of its limit instead of running on.
func TestOpenAICommandEndsAtItsLimitWhenTheDaemonDies(t *testing.T) {
	if _, err := exec.LookPath("timeout"); err != nil {
		t.Fatal("coreutils timeout is not on PATH: the backstop needs it")
	}
	r := newOpenAIRig(t, nil, "bypassPermissions", nil)
	// The command says it started through a FIFO the test reads (its
	// write waits for the reader: no polling), then execs sleep.
	ready := filepath.Join(r.proj, "ready.fifo")
	if err := unix.Mkfifo(ready, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := r.cl.Send(r.ctx, r.p, "x", `[[tool:run_command {"command":"echo up > ready.fifo; exec sleep 120","timeout_seconds":2}]]`); err != nil {
		t.Fatal(err)
	}
	read := make(chan error, 1)
	go func() { _, err := os.ReadFile(ready); read <- err }()
	select {
	case err := <-read:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		os.WriteFile(ready, nil, 0) // frees the reader
		t.Fatal("the command never started")
	}
	// The shell that wrote, found by its command line (its pid in its
	// sandbox's namespace is another); exec keeps its pid, so its pidfd is
	// the sleep's.
	pid := processIn(r.proj, "/bin/sh\x00-c\x00echo up > ready.fifo")
	if pid == 0 {
		pid = processIn(r.proj, "sleep\x00120")
	}
	if pid == 0 {
		t.Fatal("the command is not found in the project's folder")
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatalf("the command %d is already gone: %v", pid, err)
	}
	defer unix.Close(fd)
	r.d.stop(syscall.SIGKILL)
	// Limit 2 s, backstop at 4 s, its SIGKILL 2 s later: gone well within 20 s.
	if n, _ := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 20_000); n == 0 {
		unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
		t.Fatalf("the command %d still runs 20 s after the daemon died; its limit was 2 s", pid)
	}
	r.start() // for the rig's clean stop
}

// processIn is the pid of a process working in dir whose command line
// starts with cmdline (NUL-separated), 0 if none.
func processIn(dir, cmdline string) int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if err != nil || cwd != dir {
			continue
		}
		if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && strings.HasPrefix(string(b), cmdline) {
			return pid
		}
	}
	return 0
}

// TestOpenAIQuietCommandIsWork (C3, issue 22): a command that prints
// nothing for twice the agent's turn_timeout, within its own limit, is
// work, not silence: the ask is answered, and while it runs troupe agents
// says what runs.
func TestOpenAIQuietCommandIsWork(t *testing.T) {
	r := newOpenAIRig(t, nil, "bypassPermissions", func(dir string) {
		file := filepath.Join(dir, ".troupe", "team.toml")
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(file, []byte(strings.Replace(string(b), `turn_timeout = "2m"`, `turn_timeout = "2s"`, 1)), 0o644)
	})
	st, err := r.cl.Status(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan troupe.Request, 1)
	go func() {
		req, _ := r.cl.Ask(r.ctx, r.p, "x", `[[tool:run_command {"command":"sleep 4; echo slept","timeout_seconds":30}]]`, 0)
		done <- req
	}()
	// The command's call is on the feed: troupe follows it from there.
	_, err = r.cl.Events(r.ctx, st.LastEvent, nil, func(ev events.Event) error {
		if ev.Agent == "x" && ev.Type == events.TypeAgentToolCall {
			return errStop
		}
		return nil
	})
	if !errors.Is(err, errStop) {
		t.Fatalf("no tool call on the feed: %v", err)
	}
	if out := mustTroupe(t, r.state, r.proj, "agents"); !strings.Contains(out, "running: sleep 4; echo slept for") {
		t.Errorf("troupe agents while the command runs:\n%s", out)
	}
	req := <-done
	if req.State != troupe.ReqAnswered || !strings.Contains(req.Answer, "slept") {
		t.Fatalf("ask = %s %q (%s), want answered with the command's output", req.State, req.Answer, req.Error)
	}
	if a := r.agent("x"); a.Doing != "" {
		t.Errorf("after the turn the agent still runs %q", a.Doing)
	}
}

// TestOpenAIUsageLimitWaitsAndRetries (issue 22): a model that refuses
// with HTTP 429 for 32 s (longer than the engine waits itself) leaves the
// agent limited, not failed: the person's ask returns at once saying until
// when (troupe ask prints it), troupe agents shows the state, and after
// the reset the question runs again without anyone doing anything and is
// answered; nothing failed.
func TestOpenAIUsageLimitWaitsAndRetries(t *testing.T) {
	r := newOpenAIRig(t, nil, "default", nil)
	start := time.Now()
	// It stopped waiting before the answer: exit code 3, the reset time said.
	_, out, code := runCLI(t, r.state, r.proj, "ask", "x", "go [[limit:32s]] [[text:after the reset]]")
	if code != 3 || !strings.Contains(out, "x is limited until") || time.Since(start) > 20*time.Second {
		t.Fatalf("troupe ask of a limited agent: exit %d, printed %q after %v; want 3 and the reset time at once", code, out, time.Since(start))
	}
	if a := r.agent("x"); a.State != troupe.StateLimited || !strings.Contains(a.Reason, "429") {
		t.Errorf("agent x: %s %q, want limited with the server's words", a.State, a.Reason)
	}
	if agents := mustTroupe(t, r.state, r.proj, "agents"); !strings.Contains(agents, "limited") {
		t.Errorf("troupe agents:\n%s", agents)
	}
	var req troupe.Request
	waitFor(t, r.ctx, r.cl, "the question answered after the reset", func() bool {
		ms, err := allMessages(r.ctx, r.cl, r.p, "")
		if err != nil {
			return false
		}
		for _, m := range ms {
			if m.Kind == troupe.KindAsk && m.Request != "" {
				req, err = r.cl.Request(r.ctx, r.p, m.Request, 0)
				return err == nil && req.State != troupe.ReqPending
			}
		}
		return false
	})
	if req.State != troupe.ReqAnswered || req.Answer != "after the reset" || time.Since(start) < 30*time.Second {
		t.Fatalf("request %+v after %v, want answered after the 32 s limit", req, time.Since(start))
	}
	ms, _ := allMessages(r.ctx, r.cl, r.p, "")
	for _, m := range ms {
		if m.State == troupe.MsgFailed || m.State == troupe.MsgExpired {
			t.Errorf("message %d %s: %s (%s)", m.ID, m.Kind, m.State, m.Reason)
		}
	}
	if a := r.agent("x"); a.State == troupe.StateLimited || a.State == troupe.StateFailed {
		t.Errorf("agent x after the reset: %s %q", a.State, a.Reason)
	}
}
