package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/engine/enginetest"
	"github.com/troupe-dev/troupe/internal/fakemodel"
	"github.com/troupe-dev/troupe/internal/permission"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// failingStore is a MemStore that fails to store an answer of the model
// holding "DIE-NOW": the session's death (enginetest's Die).
type failingStore struct{ *MemStore }

func (f failingStore) AppendChat(ctx context.Context, k troupe.RuntimeKey, conv string, es []troupe.ConversationEntry) error {
	for _, e := range es {
		if strings.Contains(string(e.Data), `"role":"assistant"`) && strings.Contains(string(e.Data), "DIE-NOW") {
			return errors.New("disk on fire")
		}
	}
	return f.MemStore.AppendChat(ctx, k, conv, es)
}

// TestSessionContract runs the engine.Session contract suite: answers are
// the fake model's text, a hang is a command that sleeps (killed by the
// interrupt), a death is a conversation the store refuses.
func TestSessionContract(t *testing.T) {
	t.Parallel()
	enginetest.Run(t, enginetest.Harness{
		Start: func(t *testing.T, _ []enginetest.Turn) engine.Session {
			r := newRig(t, failingStore{NewMemStore()})
			a := r.agent(nil)
			a.PermissionMode = permission.Bypass
			return r.start(engine.StartSpec{Agent: a})
		},
		Message: func(turn enginetest.Turn) string {
			switch turn.Kind {
			case enginetest.Hang:
				return "[[text:" + turn.Text + "]] [[tool:run_command {\"command\":\"sleep 3600\"}]]"
			case enginetest.Die:
				return "[[text:" + turn.Text + " DIE-NOW]]"
			}
			return "[[text:" + turn.Text + "]]"
		},
		Patience: patience,
	})
}

// TestTextTurn: a text answer streams as output, ends the turn with its
// text and usage; the request carries the model, the instructions, the
// message, the tools, the stream flags and the key as a bearer token.
func TestTextTurn(t *testing.T) {
	r := newRig(t, nil)
	s := r.start(engine.StartSpec{Instructions: "You are x.", Tools: &testTools{}})
	ev := <-s.Events()
	if ev.Kind != engine.EventSession || !strings.HasPrefix(ev.SessionID, "oai-") {
		t.Fatalf("first event %+v, want the conversation id", ev)
	}
	evs, end := turn(t, s, "t1", "hello [[text:hi there]]")
	if end.Error != "" || end.Text != "hi there" {
		t.Fatalf("turn end %+v", end)
	}
	var out string
	var usage *engine.Usage
	for _, e := range evs {
		switch e.Kind {
		case engine.EventOutput:
			out += e.Text
		case engine.EventUsage:
			usage = e.Usage
		}
	}
	if out != "hi there" || usage == nil || usage.InputTokens == 0 {
		t.Errorf("output %q usage %+v", out, usage)
	}
	q := r.model.Requests()[0]
	if q.API != fakemodel.ChatCompletions || q.Model != "test-model" || !q.Stream {
		t.Fatalf("request %+v", q)
	}
	if got := q.Header.Get("Authorization"); got != "Bearer "+testKey {
		t.Errorf("Authorization %q", got)
	}
	if b := bodyOf(q); !containsAll(b, `"role":"system"`, "You are x.", ": message from the person you work for]", "hello") {
		t.Errorf("messages %s", b)
	}
	if !containsAll(strings.Join(q.Tools, ","), "list_agents", "ask_agent", "read_file", "write_file", "edit_file", "list_dir", "search_text", "run_command") {
		t.Errorf("tools offered %v", q.Tools)
	}
	if a := s.Activity(); a.Count < 3 {
		t.Errorf("activity %+v after a streamed answer: every chunk counts", a)
	}
}

// TestToolLoopReadsEditsAndRuns: the model reads a file, edits it, runs a
// command that sees the edit, lists its team with a troupe tool, then
// answers; each result reaches the model, the file really changed.
func TestToolLoopReadsEditsAndRuns(t *testing.T) {
	r := newRig(t, nil)
	os.WriteFile(filepath.Join(r.dir, "greet.txt"), []byte("line one\nhello wrold\nline three\n"), 0o644)
	r.model.Push(
		fakemodel.Reply{Text: "let me look", Calls: []fakemodel.ToolCall{call("read_file", `{"path":"greet.txt","start_line":2,"end_line":2}`)}},
		fakemodel.Reply{Calls: []fakemodel.ToolCall{call("edit_file", `{"path":"greet.txt","old_string":"wrold","new_string":"world"}`)}},
		fakemodel.Reply{Calls: []fakemodel.ToolCall{call("run_command", `{"command":"grep -c world greet.txt && echo done >&2"}`), call("list_agents", `{}`)}},
		fakemodel.Reply{Text: "fixed the typo"},
	)
	ap := &approver{allow: map[string]bool{"edit_file": true, "run_command": true}}
	tt := &testTools{}
	s := r.start(engine.StartSpec{Tools: tt, Approver: ap})
	evs, end := turn(t, s, "t1", "fix the typo in greet.txt")
	if end.Error != "" || end.Text != "fixed the typo" {
		t.Fatalf("turn end %+v", end)
	}
	res := results(evs)
	if len(res) != 4 {
		t.Fatalf("results %+v", res)
	}
	if res[0].IsError || !strings.Contains(res[0].Output, "hello wrold") || strings.Contains(res[0].Output, "line one") {
		t.Errorf("read_file of line 2: %+v", res[0])
	}
	if res[1].IsError || !strings.Contains(res[1].Output, "edited greet.txt") {
		t.Errorf("edit_file: %+v", res[1])
	}
	if res[2].IsError || !containsAll(res[2].Output, "exit status 0", "1\n", "done") {
		t.Errorf("run_command: %+v", res[2])
	}
	if res[3].IsError || res[3].Output != "agents: alice, bob" {
		t.Errorf("list_agents: %+v", res[3])
	}
	// A command's call states its limit (the default 120 s): the runtime
	// counts it as activity that long.
	for _, ev := range evs {
		if ev.Kind == engine.EventToolCall && (ev.Tool.Name == "run_command") != (ev.Tool.Limit == 120*time.Second) {
			t.Errorf("call %s states the limit %v", ev.Tool.Name, ev.Tool.Limit)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(r.dir, "greet.txt")); string(b) != "line one\nhello world\nline three\n" {
		t.Errorf("file after the edit: %q", b)
	}
	if got := ap.tools(); strings.Join(got, ",") != "edit_file,run_command" {
		t.Errorf("asked the person about %v, want edit_file then run_command (default mode)", got)
	}
	// The model saw each result, in a tool message after its call.
	qs := r.model.Requests()
	if len(qs) != 4 || !qs[1].AfterTool || !strings.Contains(qs[1].ToolResult, "hello wrold") ||
		!strings.Contains(qs[3].ToolResult, "agents: alice, bob") {
		t.Errorf("requests: %d, second's tool result %q", len(qs), qs[1].ToolResult)
	}
}

// TestEscapesAreRefused: paths out of the folder (.., absolute, a symbolic
// link out, a link inside that leads out) are tool errors and nothing of
// the file outside reaches the model; a FIFO and a device are tool errors
// at once.
func TestEscapesAreRefused(t *testing.T) {
	r := newRig(t, nil)
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.txt")
	os.WriteFile(secret, []byte("TOP-SECRET-CONTENT"), 0o644)
	os.Symlink(outside, filepath.Join(r.dir, "out"))
	os.Symlink(secret, filepath.Join(r.dir, "link.txt"))
	if err := syscall.Mkfifo(filepath.Join(r.dir, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	rel, _ := filepath.Rel(r.dir, secret)
	calls := []fakemodel.ToolCall{
		call("read_file", `{"path":"`+rel+`"}`),
		call("read_file", `{"path":"`+secret+`"}`),
		call("read_file", `{"path":"out/secret.txt"}`),
		call("read_file", `{"path":"link.txt"}`),
		call("read_file", `{"path":"pipe"}`),
		call("write_file", `{"path":"../escaped.txt","content":"x"}`),
		call("write_file", `{"path":"out/escaped.txt","content":"x"}`),
		call("edit_file", `{"path":"link.txt","old_string":"TOP","new_string":"BOTTOM"}`),
		call("list_dir", `{"path":"out"}`),
		call("search_text", `{"pattern":"SECRET","path":"out"}`),
		call("write_file", `{"path":"pipe","content":"x"}`),
	}
	// A device inside the folder (a zero source: reading it never ends),
	// where the test may make one (root); elsewhere the other cases run.
	if syscall.Mknod(filepath.Join(r.dir, "zero"), syscall.S_IFCHR|0o644, 1<<8|5) == nil {
		calls = append(calls, call("read_file", `{"path":"zero"}`), call("write_file", `{"path":"zero","content":"x"}`),
			call("edit_file", `{"path":"zero","old_string":"a","new_string":"b"}`))
	} else {
		t.Log("no device made (not root): the device cases are not run")
	}
	r.model.Push(fakemodel.Reply{Calls: calls}, fakemodel.Reply{Text: "done"})
	a := r.agent(nil)
	a.PermissionMode = permission.Bypass
	s := r.start(engine.StartSpec{Agent: a})
	evs, end := turn(t, s, "t1", "try to get out")
	if end.Error != "" {
		t.Fatalf("turn end %+v", end)
	}
	res := results(evs)
	if len(res) != len(calls) {
		t.Fatalf("%d results for %d calls", len(res), len(calls))
	}
	for i, u := range res {
		if !u.IsError || strings.Contains(u.Output, "TOP-SECRET") {
			t.Errorf("call %d %s: %+v, want a tool error without the file", i, calls[i].Args, u)
		}
	}
	for _, q := range r.model.Requests() {
		if strings.Contains(bodyOf(q), "TOP-SECRET") {
			t.Fatal("the secret reached the model")
		}
	}
	if b, _ := os.ReadFile(secret); string(b) != "TOP-SECRET-CONTENT" {
		t.Errorf("the file outside changed: %q", b)
	}
	for _, p := range []string{filepath.Join(filepath.Dir(r.dir), "escaped.txt"), filepath.Join(outside, "escaped.txt")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was written", p)
		}
	}
}

// TestBadArgumentsAndUnknownTools: arguments that are not JSON, not an
// object, and a tool nobody offered are tool errors the model sees; the
// loop goes on to its answer.
func TestBadArgumentsAndUnknownTools(t *testing.T) {
	r := newRig(t, nil)
	r.model.Push(
		fakemodel.Reply{Calls: []fakemodel.ToolCall{
			{Name: "read_file", Args: json.RawMessage(`{"path": "a.txt"`), Raw: true},
			{Name: "read_file", Args: json.RawMessage(`["a.txt"]`), Raw: true},
			{Name: "rm_rf", Args: json.RawMessage(`{}`), Raw: true},
			{Name: "list_dir", Args: json.RawMessage(`"{\"path\":\".\"}"`), Raw: true}, // encoded twice: taken
		}},
		fakemodel.Reply{Text: "sorry"},
	)
	s := r.start(engine.StartSpec{})
	evs, end := turn(t, s, "t1", "go")
	if end.Error != "" || end.Text != "sorry" {
		t.Fatalf("turn end %+v", end)
	}
	res := results(evs)
	if len(res) != 4 {
		t.Fatalf("results %+v", res)
	}
	want := []string{"not valid JSON", "not a JSON object", `unknown tool "rm_rf"`, ""}
	for i, w := range want {
		if w == "" {
			if res[i].IsError {
				t.Errorf("result %d: %+v", i, res[i])
			}
			continue
		}
		if !res[i].IsError || !strings.Contains(res[i].Output, w) {
			t.Errorf("result %d = %+v, want an error with %q", i, res[i], w)
		}
	}
	q := r.model.Requests()[1]
	if !containsAll(q.ToolResult, "not valid JSON", "unknown tool") {
		t.Errorf("the model saw %q", q.ToolResult)
	}
}

// TestMaxStepsEndsTheTurn: a model that calls tools for ever is stopped at
// max_steps requests, with the reason; every call has its result, so the
// next turn's request is one the API takes.
func TestMaxStepsEndsTheTurn(t *testing.T) {
	r := newRig(t, nil)
	r.model.SetScript(func(q fakemodel.Request) fakemodel.Reply {
		if strings.Contains(q.Prompt, "stop") {
			return fakemodel.Reply{Text: "stopped"}
		}
		return fakemodel.Reply{Calls: []fakemodel.ToolCall{call("list_dir", `{}`)}}
	})
	s := r.start(engine.StartSpec{Agent: r.agent(map[string]any{optMaxSteps: int64(3)})})
	_, end := turn(t, s, "t1", "loop")
	if !containsAll(end.Error, "max_steps = 3", "list_dir") {
		t.Fatalf("turn end %+v", end)
	}
	if n := len(r.model.Requests()); n != 3 {
		t.Errorf("%d model requests, want 3", n)
	}
	if _, end := turn(t, s, "t2", "stop"); end.Error != "" || end.Text != "stopped" {
		t.Fatalf("next turn %+v", end)
	}
	last := r.model.Requests()[3]
	var msgs []chatMessage
	b, _ := json.Marshal(last.Body["messages"])
	json.Unmarshal(b, &msgs)
	calls, answered := 0, 0
	for _, m := range msgs {
		calls += len(m.ToolCalls)
		if m.Role == "tool" {
			answered++
		}
	}
	if calls != 3 || answered != 3 {
		t.Errorf("next request has %d calls and %d results", calls, answered)
	}
}

// TestRetriesThenSucceeds: 429 and 503 are tried again (each try is
// activity) and the turn gets the answer; too many fail it.
func TestRetriesThenSucceeds(t *testing.T) {
	r := newRig(t, nil)
	r.model.Push(fakemodel.Reply{Status: 429}, fakemodel.Reply{Status: 503}, fakemodel.Reply{Text: "made it"})
	s := r.start(engine.StartSpec{})
	before := s.Activity()
	_, end := turn(t, s, "t1", "go")
	if end.Error != "" || end.Text != "made it" {
		t.Fatalf("turn end %+v", end)
	}
	if n := len(r.model.Requests()); n != 3 {
		t.Errorf("%d requests, want 3", n)
	}
	if a := s.Activity(); a.Count < before.Count+4 {
		t.Errorf("activity %+v from %+v: retries count", a, before)
	}
	r.model.Push(fakemodel.Reply{Status: 500}, fakemodel.Reply{Status: 500}, fakemodel.Reply{Status: 500}, fakemodel.Reply{Status: 500})
	_, end = turn(t, s, "t2", "again")
	if !containsAll(end.Error, "500", "fake error 500", "gave up after 4 tries") {
		t.Fatalf("turn end %+v", end)
	}
}

// TestUsageLimitEndsTheTurn: a 429 whose reset is further than a retry
// waits ends the turn at once with the reset time (the runtime waits for
// it); one without a reset time ends it after the retries, with none; a
// short one is waited for in the engine and answered; other failures
// carry no limit.
func TestUsageLimitEndsTheTurn(t *testing.T) {
	r := newRig(t, nil)
	s := r.start(engine.StartSpec{})
	before := time.Now()
	_, end := turn(t, s, "t1", "go [[limit:1h]]")
	if end.Limit == nil || end.Limit.Until.Sub(before) < 59*time.Minute || end.Limit.Until.Sub(before) > 61*time.Minute || !containsAll(end.Error, "429", "Rate limit") {
		t.Fatalf("turn end %+v (limit %+v), want a limit resetting in 1h", end, end.Limit)
	}
	if n := len(r.model.Requests()); n != 1 {
		t.Errorf("%d requests, want 1: an hour is not waited in the engine", n)
	}
	_, end = turn(t, s, "t2", "go [[limit:1h quiet]]")
	if end.Limit == nil || !end.Limit.Until.IsZero() || !containsAll(end.Error, "gave up after 4 tries") {
		t.Fatalf("quiet limit: turn end %+v (limit %+v), want a limit without a reset after the retries", end, end.Limit)
	}
	_, end = turn(t, s, "t3", "go [[limit:1s]] [[text:waited]]")
	if end.Limit != nil || end.Error != "" || end.Text != "waited" {
		t.Fatalf("a 1 s limit: turn end %+v, want it waited in the engine and answered", end)
	}
	r.model.Push(fakemodel.Reply{Status: 500}, fakemodel.Reply{Status: 500}, fakemodel.Reply{Status: 500}, fakemodel.Reply{Status: 500})
	if _, end = turn(t, s, "t4", "go"); end.Limit != nil || end.Error == "" {
		t.Fatalf("500s: turn end %+v, want failed without a limit", end)
	}
}

// TestRetryAfter reads every header form a server uses, bounded.
func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		h    http.Header
		want time.Duration
	}{
		{http.Header{"Retry-After": {"30"}}, 30 * time.Second},
		{http.Header{"Retry-After": {now.Add(time.Hour).Format(http.TimeFormat)}}, time.Hour},
		{http.Header{"Retry-After": {now.Add(-time.Hour).Format(http.TimeFormat)}}, 0},
		{http.Header{"Retry-After": {"99999999999"}}, maxServerWait},
		{http.Header{"Retry-After": {"soon"}}, 0},
		{http.Header{"X-Ratelimit-Reset-Requests": {"6m0s"}, "X-Ratelimit-Reset-Tokens": {"17ms"}}, 6 * time.Minute},
		{http.Header{"X-Ratelimit-Reset-Tokens": {"1m30s"}}, 90 * time.Second},
		{http.Header{}, 0},
	} {
		if got := retryAfter(c.h, now); got != c.want {
			t.Errorf("retryAfter(%v) = %v, want %v", c.h, got, c.want)
		}
	}
}

// TestRefusalEndsTurnAtOnce: 401 and 404 end the turn with the server's
// message, without a retry.
func TestRefusalEndsTurnAtOnce(t *testing.T) {
	for _, status := range []int{401, 404} {
		r := newRig(t, nil)
		r.model.Push(fakemodel.Reply{Status: status}, fakemodel.Reply{Text: "not asked"})
		s := r.start(engine.StartSpec{})
		_, end := turn(t, s, "t1", "go")
		if !containsAll(end.Error, http.StatusText(status), "fake error") {
			t.Errorf("%d: turn end %+v", status, end)
		}
		if n := len(r.model.Requests()); n != 1 {
			t.Errorf("%d: %d requests, want 1", status, n)
		}
	}
}

// TestKeyNeverShown: a server that quotes the key in its refusal (as some
// do) has it redacted from the turn's error; the key is in no event.
func TestKeyNeverShown(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": "Incorrect API key provided: " + strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")}})
	}))
	defer srv.Close()
	r := newRig(t, nil)
	a := r.agent(map[string]any{optBaseURL: srv.URL + "/v1"})
	s := r.start(engine.StartSpec{Agent: a})
	evs, end := turn(t, s, "t1", "go")
	if !strings.Contains(end.Error, "Incorrect API key provided: [key redacted]") || strings.Contains(end.Error, testKey) {
		t.Errorf("turn end %+v", end)
	}
	for _, ev := range evs {
		if b, _ := json.Marshal(ev); strings.Contains(string(b), testKey) {
			t.Errorf("event shows the key: %s", b)
		}
	}
	// A stream whose chunk is not JSON and quotes the key (at the start
	// and where the error's quote of the chunk is cut): redacted too, and
	// no part of it shown.
	garbage := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: %s %s%s\n\n", k, strings.Repeat("x", 190-len(k)), k)
	}))
	defer garbage.Close()
	s2 := r.start(engine.StartSpec{Agent: r.agent(map[string]any{optBaseURL: garbage.URL + "/v1"})})
	evs, end = turn(t, s2, "t2", "go")
	if !strings.Contains(end.Error, "not JSON: [key redacted]") || strings.Contains(end.Error, testKey[:8]) {
		t.Errorf("turn end %+v", end)
	}
	for _, ev := range evs {
		if b, _ := json.Marshal(ev); strings.Contains(string(b), testKey[:8]) {
			t.Errorf("event shows the key: %s", b)
		}
	}
	// A missing variable is a start error naming it, not the key.
	a.Options[optAPIKeyEnv] = "NO_SUCH_KEY_VAR"
	if _, err := r.eng.Start(context.Background(), engine.StartSpec{Key: testKeyOf, Agent: a, Dir: r.dir}); err == nil || !strings.Contains(err.Error(), "NO_SUCH_KEY_VAR") {
		t.Errorf("start without the key: %v", err)
	}
}

// TestConversationContinuesAfterRestart: a new session given the first's
// id (as the runtime does after a restart) sends the model the earlier
// exchange, tool calls and results included.
func TestConversationContinuesAfterRestart(t *testing.T) {
	r := newRig(t, nil)
	r.model.Push(fakemodel.Reply{Calls: []fakemodel.ToolCall{call("list_dir", `{}`)}}, fakemodel.Reply{Text: "noted"})
	s1 := r.start(engine.StartSpec{})
	id := (<-s1.Events()).SessionID
	turn(t, s1, "t1", "remember heliotrope")
	if err := s1.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	s2 := r.start(engine.StartSpec{Resume: id})
	if got := (<-s2.Events()).SessionID; got != id {
		t.Fatalf("resumed conversation %q, want %q", got, id)
	}
	_, end := turn(t, s2, "t2", "which word? [[text:heliotrope]]")
	if end.Text != "heliotrope" {
		t.Fatalf("turn end %+v", end)
	}
	qs := r.model.Requests()
	if b := bodyOf(qs[len(qs)-1]); !containsAll(b, "remember heliotrope", `"tool_calls"`, `"role":"tool"`, "noted", "which word?") {
		t.Errorf("the resumed request lacks the earlier exchange: %s", b)
	}
	// A new conversation (no Resume) forgets the old one.
	s3 := r.start(engine.StartSpec{})
	if (<-s3.Events()).SessionID == id {
		t.Fatal("a new session reused the conversation")
	}
	if es, _ := r.store.ChatHistory(context.Background(), testKeyOf, id); len(es) != 0 {
		t.Errorf("the old conversation still holds %d messages", len(es))
	}
}

// TestCrashLeavesNoCallWithoutResult: a conversation stored up to a tool
// call (the daemon died while it ran) is loaded with a result for it.
func TestCrashLeavesNoCallWithoutResult(t *testing.T) {
	r := newRig(t, nil)
	a, _ := json.Marshal(chatMessage{Role: "assistant", ToolCalls: []toolCall{{ID: "c1", Type: "function", Function: functionCall{Name: "list_dir", Arguments: "{}"}}}})
	u, _ := json.Marshal(chatMessage{Role: "user", Content: "first"})
	r.store.AppendChat(context.Background(), testKeyOf, "oai-old", []troupe.ConversationEntry{{Turn: 1, Data: u}, {Turn: 1, Data: a}})
	s := r.start(engine.StartSpec{Resume: "oai-old"})
	turn(t, s, "t2", "again")
	b := bodyOf(r.model.Requests()[0])
	if !containsAll(b, `"tool_call_id":"c1"`, "troupe stopped before this call ended") {
		t.Errorf("request %s", b)
	}
}

// TestContextBudgetDropsOldestTurns: past max_context_tokens the oldest
// turns go, from the request and the store, and a notice says so.
func TestContextBudgetDropsOldestTurns(t *testing.T) {
	r := newRig(t, nil)
	a := r.agent(map[string]any{optMaxContextTokens: int64(MinContextTokens)})
	a.AllowedTools = []string{"read_file"} // a short tools list
	s := r.start(engine.StartSpec{Agent: a})
	id := (<-s.Events()).SessionID
	big := strings.Repeat("lorem ipsum ", 100) // 1.2 KB: about 400 tokens
	var notice string
	for i := range 6 {
		evs, end := turn(t, s, troupe.TurnID("t"+string(rune('1'+i))), "turn "+string(rune('A'+i))+" "+big+" [[text:ok]]")
		if end.Error != "" {
			t.Fatalf("turn %d: %+v", i, end)
		}
		for _, ev := range evs {
			if ev.Kind == engine.EventNotice {
				notice = ev.Text
			}
		}
	}
	if !containsAll(notice, "dropped the", "oldest turns", "max_context_tokens = 2048") {
		t.Fatalf("notice %q", notice)
	}
	qs := r.model.Requests()
	last := bodyOf(qs[len(qs)-1])
	if strings.Contains(last, "turn A ") || !strings.Contains(last, "turn F ") {
		t.Errorf("last request still has turn A or lacks turn D")
	}
	if len(last)/bytesPerToken > MinContextTokens {
		t.Errorf("last request is %d bytes, past the budget", len(last))
	}
	es, _ := r.store.ChatHistory(context.Background(), testKeyOf, id)
	if len(es) == 0 || es[0].Turn == 1 {
		t.Errorf("the store kept turn 1: %d entries", len(es))
	}
}

// TestPermissionModes: default asks before writes, edits and commands;
// acceptEdits only before commands; bypassPermissions never; a denial is
// a tool error with the person's reason; allowed_tools is the workspace
// tools offered.
func TestPermissionModes(t *testing.T) {
	calls := []fakemodel.ToolCall{
		call("write_file", `{"path":"a.txt","content":"one"}`),
		call("edit_file", `{"path":"a.txt","old_string":"one","new_string":"two"}`),
		call("run_command", `{"command":"true"}`),
		call("read_file", `{"path":"a.txt"}`),
	}
	for _, c := range []struct {
		mode  string
		asked string
	}{{"", "write_file,edit_file,run_command"}, {permission.AcceptEdits, "run_command"}, {permission.Bypass, ""}} {
		r := newRig(t, nil)
		r.model.Push(fakemodel.Reply{Calls: calls}, fakemodel.Reply{Text: "done"})
		ap := &approver{mode: c.mode, allow: map[string]bool{"write_file": true, "edit_file": true}}
		a := r.agent(nil)
		a.PermissionMode = c.mode
		s := r.start(engine.StartSpec{Agent: a, Approver: ap})
		evs, _ := turn(t, s, "t1", "go")
		if got := strings.Join(ap.tools(), ","); got != c.asked {
			t.Errorf("mode %q asked %q, want %q", c.mode, got, c.asked)
		}
		res := results(evs)
		cmdDenied := res[2].IsError && strings.Contains(res[2].Output, "the person said no")
		if cmdDenied != (c.mode != permission.Bypass) {
			t.Errorf("mode %q: run_command %+v", c.mode, res[2])
		}
		if b, _ := os.ReadFile(filepath.Join(r.dir, "a.txt")); string(b) != "two" {
			t.Errorf("mode %q: a.txt = %q", c.mode, b)
		}
		perms := 0
		for _, ev := range evs {
			if ev.Kind == engine.EventPermission {
				perms++
			}
		}
		if perms != 3 { // every write, edit and command goes to the gate, settled by the mode or by the person
			t.Errorf("mode %q: %d permission events for 3 writes, edits and commands", c.mode, perms)
		}
	}
	// No approver: what would be asked is denied.
	r := newRig(t, nil)
	r.model.Push(fakemodel.Reply{Calls: calls[:1]}, fakemodel.Reply{Text: "done"})
	evs, _ := turn(t, r.start(engine.StartSpec{}), "t1", "go")
	if res := results(evs); !res[0].IsError || !strings.Contains(res[0].Output, engine.ErrNoApprover.Error()) {
		t.Errorf("without an approver: %+v", res)
	}
	// allowed_tools: only those workspace tools, troupe's always.
	r = newRig(t, nil)
	a := r.agent(nil)
	a.AllowedTools = []string{"read_file"}
	s := r.start(engine.StartSpec{Agent: a, Tools: &testTools{}})
	turn(t, s, "t1", "[[text:hi]]")
	if got := strings.Join(r.model.Requests()[0].Tools, ","); got != "list_agents,ask_agent,read_file" {
		t.Errorf("tools offered %q", got)
	}
	// Naming only a troupe tool allows it and keeps all six workspace tools.
	r = newRig(t, nil)
	a = r.agent(nil)
	a.AllowedTools = []string{"run_in_background"}
	if err := r.eng.Check(a); err != nil {
		t.Fatalf("allowed_tools = [run_in_background]: %v", err)
	}
	s = r.start(engine.StartSpec{Agent: a, Tools: &testTools{}})
	turn(t, s, "t1", "[[text:hi]]")
	if got := strings.Join(r.model.Requests()[0].Tools, ","); got != "list_agents,ask_agent,read_file,write_file,edit_file,list_dir,search_text,run_command" {
		t.Errorf("tools offered %q", got)
	}
}

// TestInterruptStopsCommandAndStream: an interrupt ends a running command
// (its process group gone) and a stream the model holds open.
func TestInterruptStopsCommandAndStream(t *testing.T) {
	r := newRig(t, nil)
	pidFile := filepath.Join(r.dir, "pid")
	r.model.Push(fakemodel.Reply{Text: "sleeping", Calls: []fakemodel.ToolCall{call("run_command", `{"command":"echo $$ > pid; sleep 3600"}`)}})
	a := r.agent(nil)
	a.PermissionMode = permission.Bypass
	s := r.start(engine.StartSpec{Agent: a})
	send(t, s, "t1", "sleep")
	deadline := time.Now().Add(patience)
	for {
		if b, err := os.ReadFile(pidFile); err == nil && strings.TrimSpace(string(b)) != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the command never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.Interrupt(context.Background())
	evs, end := untilEnd(t, s, "t1")
	if end.Error != "interrupted" {
		t.Fatalf("turn end %+v", end)
	}
	if res := results(evs); len(res) != 1 || !containsAll(res[0].Output, "stopped: the turn was interrupted") {
		t.Errorf("results %+v", res)
	}
	b, _ := os.ReadFile(pidFile)
	var pid int
	if _, err := fmtSscan(strings.TrimSpace(string(b)), &pid); err != nil || syscall.Kill(pid, 0) == nil {
		t.Errorf("the command's shell %d is still there (%v)", pid, err)
	}
	// A stream held open by the model.
	hold := make(chan struct{})
	defer close(hold)
	r.model.Push(fakemodel.Reply{Text: "never", Hold: hold})
	send(t, s, "t2", "wait")
	if _, err := r.model.WaitRequests(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	s.Interrupt(context.Background())
	if _, end := untilEnd(t, s, "t2"); end.Error != "interrupted" {
		t.Fatalf("turn end %+v", end)
	}
}

// TestBrokenAndOddServers: a stream cut mid-answer ends the turn with that
// reason (what was said is kept) and the next turn works; a server that
// answers JSON instead of a stream is read; a server that is gone is
// tried again, then the turn fails saying so.
func TestBrokenAndOddServers(t *testing.T) {
	r := newRig(t, nil)
	s := r.start(engine.StartSpec{})
	r.model.Push(fakemodel.Reply{Text: "half an answer", Drop: true})
	if _, end := turn(t, s, "t1", "go"); !strings.Contains(end.Error, "model stream broke") || end.Text != "half an answer" {
		t.Fatalf("dropped stream: %+v", end)
	}
	if _, end := turn(t, s, "t2", "[[text:whole]]"); end.Error != "" || end.Text != "whole" {
		t.Fatalf("after the drop: %+v", end)
	}

	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"choices":[{"index":0,"message":{"role":"assistant","content":"not streamed"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":2}}`))
	}))
	defer plain.Close()
	s2 := r.start(engine.StartSpec{Agent: r.agent(map[string]any{optBaseURL: plain.URL + "/v1"})})
	if evs, end := turn(t, s2, "t1", "go"); end.Error != "" || end.Text != "not streamed" || len(evs) == 0 {
		t.Fatalf("JSON answer: %+v %+v", end, evs)
	}

	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<html>a web page</html>"))
	}))
	defer page.Close()
	s4 := r.start(engine.StartSpec{Agent: r.agent(map[string]any{optBaseURL: page.URL})})
	if _, end := turn(t, s4, "t1", "go"); !containsAll(end.Error, "text/html, not an event stream", "base_url") {
		t.Fatalf("a web page: %+v", end)
	}

	gone := httptest.NewServer(http.NotFoundHandler())
	url := gone.URL
	gone.Close()
	s3 := r.start(engine.StartSpec{Agent: r.agent(map[string]any{optBaseURL: url + "/v1"})})
	if _, end := turn(t, s3, "t1", "go"); !containsAll(end.Error, "reach model server", "gave up after 4 tries") {
		t.Fatalf("server gone: %+v", end)
	}
}

// TestCommandLeavingItsGroupDoesNotHoldTheTurn: a command whose child
// leaves its process group (setsid) and keeps its output open returns once
// the command ended (after a short grace), saying so; the escapee is not
// waited for.
func TestCommandLeavingItsGroupDoesNotHoldTheTurn(t *testing.T) {
	r := newRig(t, nil)
	r.model.Push(fakemodel.Reply{Calls: []fakemodel.ToolCall{call("run_command", `{"command":"setsid sh -c 'echo $$ > esc.pid; exec sleep 60' & sleep 0.2; echo started"}`)}},
		fakemodel.Reply{Text: "done"})
	a := r.agent(nil)
	a.PermissionMode = permission.Bypass
	s := r.start(engine.StartSpec{Agent: a})
	evs, end := turn(t, s, "t1", "go")
	b, _ := os.ReadFile(filepath.Join(r.dir, "esc.pid"))
	var pid int
	fmtSscan(strings.TrimSpace(string(b)), &pid)
	if pid > 0 {
		defer syscall.Kill(pid, syscall.SIGKILL)
	}
	if end.Error != "" {
		t.Fatalf("turn end %+v", end)
	}
	res := results(evs)
	if len(res) != 1 || res[0].IsError || !containsAll(res[0].Output, "started", "outside its group") {
		t.Fatalf("result %+v", res)
	}
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		t.Fatalf("the escapee %d is gone: the test proves nothing", pid)
	}
}

// TestCommandEnvironmentIsBuilt: a command gets the passed variables and
// the agent's env, never the model's key (C11), even from the agent's env.
func TestCommandEnvironmentIsBuilt(t *testing.T) {
	r := newRig(t, nil)
	r.model.Push(fakemodel.Reply{Calls: []fakemodel.ToolCall{call("run_command", `{"command":"env"}`)}}, fakemodel.Reply{Text: "done"})
	a := r.agent(nil)
	a.PermissionMode = permission.Bypass
	a.Env = map[string]string{"TEST_OPENAI_KEY": testKey, "GREETING": "bonjour"}
	s := r.start(engine.StartSpec{Agent: a})
	evs, _ := turn(t, s, "t1", "go")
	res := results(evs)
	if len(res) != 1 || !containsAll(res[0].Output, "GREETING=bonjour", "PATH=/usr/bin:/bin") || strings.Contains(res[0].Output, testKey) || strings.Contains(res[0].Output, "TEST_OPENAI_KEY") {
		t.Errorf("env of the command: %+v", res)
	}
	if q := r.model.Requests()[0]; q.Header.Get("Authorization") != "Bearer "+testKey {
		t.Errorf("the key from the agent's env was not sent: %q", q.Header.Get("Authorization"))
	}
}

// TestBudgetLearnsTheServersCount: a model whose tokenizer makes 2 bytes a
// token (the server's usage says so) gets requests within the budget at
// that rate, not at the 3 bytes a token assumed before it counted.
func TestBudgetLearnsTheServersCount(t *testing.T) {
	var mu sync.Mutex
	var sizes []int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		sizes = append(sizes, len(b))
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":1}}\n\ndata: [DONE]\n\n", len(b)/2)
	}))
	defer srv.Close()
	r := newRig(t, nil)
	a := r.agent(map[string]any{optBaseURL: srv.URL + "/v1", optMaxContextTokens: int64(MinContextTokens)})
	a.AllowedTools = []string{"read_file"}
	s := r.start(engine.StartSpec{Agent: a})
	notices := 0
	for i := range 10 {
		evs, end := turn(t, s, troupe.TurnID(fmt.Sprint("t", i)), strings.Repeat("x", 500))
		if end.Error != "" {
			t.Fatalf("turn %d: %+v", i, end)
		}
		for _, ev := range evs {
			if ev.Kind == engine.EventNotice {
				notices++
			}
		}
	}
	budget := MinContextTokens - MinContextTokens/4 // tokens, the reserve taken
	mu.Lock()
	defer mu.Unlock()
	for i, n := range sizes[1:] {
		if n/2 > budget+50 { // +50: the request's envelope, not counted
			t.Errorf("request %d: %d bytes, %d tokens at the server's count, over the budget of %d", i+2, n, n/2, budget)
		}
	}
	if notices == 0 {
		t.Error("no turn was dropped")
	}
}

// TestGitFilesAreNotWritten: write_file and edit_file refuse git's own
// files (.git/config, a hook, a worktree's .git file), written directly
// or through a symbolic link (of the file or of a folder) into .git: git
// runs what they name, so an agent without run_command could run commands
// through them. Reading them is allowed.
func TestGitFilesAreNotWritten(t *testing.T) {
	r := newRig(t, nil)
	gitDir := filepath.Join(r.dir, ".git")
	os.MkdirAll(filepath.Join(gitDir, "hooks"), 0o755)
	os.WriteFile(filepath.Join(gitDir, "config"), []byte("[core]\n\tbare = false\n"), 0o644)
	os.MkdirAll(filepath.Join(r.dir, "sub"), 0o755)
	os.WriteFile(filepath.Join(r.dir, "sub", ".git"), []byte("gitdir: /elsewhere\n"), 0o644)
	os.Symlink(".git/config", filepath.Join(r.dir, "cfg"))
	os.Symlink(".git/hooks", filepath.Join(r.dir, "h"))
	calls := []fakemodel.ToolCall{
		call("write_file", `{"path":".git/config","content":"[core]\n\tfsmonitor = touch pwned\n"}`),
		call("write_file", `{"path":".git/hooks/post-merge","content":"#!/bin/sh\ntouch pwned\n"}`),
		call("write_file", `{"path":"./.GIT/config","content":"x"}`),
		call("edit_file", `{"path":".git/config","old_string":"bare = false","new_string":"fsmonitor = touch pwned"}`),
		call("write_file", `{"path":"sub/.git","content":"gitdir: ../evil\n"}`),
		call("write_file", `{"path":"cfg","content":"[core]\n\tfsmonitor = touch pwned\n"}`),
		call("edit_file", `{"path":"cfg","old_string":"bare = false","new_string":"fsmonitor = touch pwned"}`),
		call("write_file", `{"path":"h/post-merge","content":"#!/bin/sh\ntouch pwned\n"}`),
		call("write_file", `{"path":"`+filepath.Join(r.dir, ".git", "config")+`","content":"x"}`),
	}
	r.model.Push(fakemodel.Reply{Calls: append(calls, call("read_file", `{"path":".git/config"}`))}, fakemodel.Reply{Text: "done"})
	a := r.agent(nil)
	a.PermissionMode = permission.Bypass
	s := r.start(engine.StartSpec{Agent: a})
	evs, end := turn(t, s, "t1", "go")
	if end.Error != "" {
		t.Fatalf("turn end %+v", end)
	}
	res := results(evs)
	if len(res) != len(calls)+1 {
		t.Fatalf("%d results for %d calls", len(res), len(calls)+1)
	}
	for i, u := range res[:len(calls)] {
		if !u.IsError || !strings.Contains(u.Output, "git's own files") {
			t.Errorf("call %d %s: %+v, want a refusal naming git's own files", i, calls[i].Args, u)
		}
	}
	if last := res[len(calls)]; last.IsError || !strings.Contains(last.Output, "bare = false") {
		t.Errorf("reading .git/config: %+v", last)
	}
	if b, _ := os.ReadFile(filepath.Join(gitDir, "config")); string(b) != "[core]\n\tbare = false\n" {
		t.Errorf(".git/config changed: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(r.dir, "sub", ".git")); string(b) != "gitdir: /elsewhere\n" {
		t.Errorf("sub/.git changed: %q", b)
	}
	if _, err := os.Stat(filepath.Join(gitDir, "hooks", "post-merge")); err == nil {
		t.Error("a hook was made")
	}
}

// TestEndlessAnswerIsCut: a server that streams an answer, reasoning, or
// chunks that bring nothing, without end (a model repeating itself, a
// broken server) does not hold the turn: the text is cut at maxStepText
// and the rest not read; reasoning past the same bound, or maxEmptyChunks
// empty chunks in a row, end the turn with an error saying why.
func TestEndlessAnswerIsCut(t *testing.T) {
	endless := func(field string) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			chunk := []byte(`data: {"choices":[{"index":0,"delta":{"` + field + `":"` + strings.Repeat("again ", 2000) + `"}}]}` + "\n\n")
			for r.Context().Err() == nil {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		}))
	}
	r := newRig(t, nil)
	text := endless("content")
	defer text.Close()
	s := r.start(engine.StartSpec{Agent: r.agent(map[string]any{optBaseURL: text.URL + "/v1"})})
	if _, end := turn(t, s, "t1", "go"); end.Error != "" || !strings.Contains(end.Text, "[cut: the answer passed") || len(end.Text) > maxStepText+100 {
		t.Errorf("endless text: error %q, %d bytes of text", end.Error, len(end.Text))
	}
	nothing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte(`data: {"choices":[{"index":0,"delta":{"content":"a start"}}]}` + "\n\n"))
		chunk := []byte(strings.Repeat(`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":""}}]}}]}`+"\n\n", 100))
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	defer nothing.Close()
	s3 := r.start(engine.StartSpec{Agent: r.agent(map[string]any{optBaseURL: nothing.URL + "/v1"})})
	if _, end := turn(t, s3, "t1", "go"); !strings.Contains(end.Error, "chunks in a row with nothing in them") || end.Text != "a start" {
		t.Errorf("endless empty chunks: %+v", end)
	}
	thinking := endless("reasoning_content")
	defer thinking.Close()
	s2 := r.start(engine.StartSpec{Agent: r.agent(map[string]any{optBaseURL: thinking.URL + "/v1"})})
	if _, end := turn(t, s2, "t1", "go"); !strings.Contains(end.Error, "reasoning passed") {
		t.Errorf("endless reasoning: %+v", end.Error)
	}
}
