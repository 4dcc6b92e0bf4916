package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/client"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// TestMCPAgentCallsEveryTool: a fake agent calls each of troupe's tools
// through the daemon's MCP endpoint with its own session token, as a real
// CLI would, and gets working answers (or tool errors it can act on).
func TestMCPAgentCallsEveryTool(t *testing.T) {
	state, proj := t.TempDir(), t.TempDir()
	writeTeam(t, proj, ownerTeam)
	os.MkdirAll(filepath.Join(proj, ".troupe", "memory"), 0o755)
	startDaemon(t, state, "--project", proj)
	cl, _ := client.FromStateDir(state)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, _ := cl.ResolveProject(ctx, proj)
	script := strings.Join([]string{
		`!tool list_agents {}`, `!say list_agents: {result}`,
		`!tool ask_agent {"to":"worker","question":"ping"}`, `!say ask_agent: {result}`,
		`!tool send_message {"to":"worker","text":"fyi"}`, `!say send_message: {result}`,
		`!tool delegate {"to":"worker","task":"tidy up"}`, `!say delegate: {result}`,
		`!tool run_in_background {"command":"echo bg-done"}`, `!say run_in_background: {result}`,
		`!tool task_status {}`, `!say task_status: {result}`,
		`!tool task_output {"task_id":"nope"}`, `!say task_output: {result}`,
		`!tool task_kill {"task_id":"nope"}`, `!say task_kill: {result}`,
		`!tool memory_write {"name":"Build Notes","description":"how we build","body":"run make test before pushing"}`, `!say memory_write: {result}`,
		`!tool memory_search {"query":"pushing"}`, `!say memory_search: {result}`,
		`!tool memory_read {"name":"build-notes"}`, `!say memory_read: {result}`,
		`!tool memory_read {"name":"../../etc/passwd"}`, `!say memory_escape: {result}`,
		`!tool ask_agent {"to":"ghost","question":"q"}`, `!say unknown_agent: {result}`,
		`!tool ask_agent {"to":"lead","question":"q"}`, `!say self: {result}`,
	}, "\n")
	req, err := cl.Ask(ctx, p.ID, "lead", script, 0)
	if err != nil || req.State != troupe.ReqAnswered {
		t.Fatalf("ask: %+v %v", req, err)
	}
	want := map[string]string{
		"list_agents":       `"name":"worker"`,
		"ask_agent":         "echo: ping",
		"send_message":      "sent to worker",
		"delegate":          "delegated to worker",
		"run_in_background": "started task",
		"task_status":       `"command": "echo bg-done"`,
		"task_output":       "error: ",
		"task_kill":         "error: ",
		"memory_write":      "saved note build-notes",
		"memory_search":     "build-notes",
		"memory_read":       "run make test before pushing",
		"memory_escape":     "error: ",
		"unknown_agent":     "the agents are lead, worker",
		"self":              "cannot message itself",
	}
	got, current := map[string]string{}, ""
	for _, line := range strings.Split(req.Answer, "\n") { // results may span lines
		if k, v, ok := strings.Cut(line, ": "); ok && want[k] != "" {
			current, line = k, v
		}
		got[current] += line + "\n"
	}
	for tool, want := range want {
		if !strings.Contains(got[tool], want) {
			t.Errorf("%s answered %q, want it to contain %q", tool, got[tool], want)
		}
	}
	if _, err := os.Stat(filepath.Join(proj, ".troupe", "memory", "build-notes.md")); err != nil {
		t.Errorf("memory_write wrote no note file: %v", err)
	}
	// reply answers the ask being handled: its text wins over the turn's
	// final output.
	req, err = cl.Ask(ctx, p.ID, "lead", "!tool reply {\"text\":\"explicit answer\"}\n!say final output", 0)
	if err != nil || req.Answer != "explicit answer" {
		t.Fatalf("ask answered by reply = %+v %v; want the replied text", req, err)
	}
}

// TestC2_SessionTokenDiesWithItsSession: the MCP token a session got at
// launch works while it runs and is refused once the session ended.
func TestC2_SessionTokenDiesWithItsSession(t *testing.T) {
	state, proj := t.TempDir(), t.TempDir()
	writeTeam(t, proj, ownerTeam)
	d := startDaemon(t, state, "--project", proj)
	cl, _ := client.FromStateDir(state)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, _ := cl.ResolveProject(ctx, proj)
	req, err := cl.Ask(ctx, p.ID, "lead", "!token", 0)
	tok := strings.TrimSpace(req.Answer)
	if err != nil || !strings.HasPrefix(tok, "trp_") {
		t.Fatalf("token: %q %v", tok, err)
	}
	list := func() int {
		r, _ := http.NewRequest("POST", "http://"+d.addr+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json, text/event-stream")
		r.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := list(); code != http.StatusOK {
		t.Fatalf("the live session's token: status %d, want 200", code)
	}
	if req, err := cl.Ask(ctx, p.ID, "lead", "!crash", 0); err != nil || req.State != troupe.ReqFailed {
		t.Fatalf("ask of a crashing turn: %+v %v, want failed", req, err)
	}
	if code := list(); code != http.StatusUnauthorized {
		t.Fatalf("the dead session's token: status %d, want 401", code)
	}
	// The restarted session has a new token; the old one stays dead.
	req, _ = cl.Ask(ctx, p.ID, "lead", "!token", 0)
	if nt := strings.TrimSpace(req.Answer); nt == tok || !strings.HasPrefix(nt, "trp_") {
		t.Fatalf("new session token %q (old %q)", nt, tok)
	}
	if code := list(); code != http.StatusUnauthorized {
		t.Fatalf("old token after restart: status %d, want 401", code)
	}
}

type bearerRT struct{ tok string }

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.tok)
	return http.DefaultTransport.RoundTrip(r)
}

// sessionToken asks agent to say its MCP token (the fake's !token).
func sessionToken(t *testing.T, ctx context.Context, cl *client.Client, p troupe.ProjectID, agent troupe.AgentID) string {
	t.Helper()
	req, err := cl.Ask(ctx, p, agent, "!token", 0)
	tok := strings.TrimSpace(req.Answer)
	if err != nil || !strings.HasPrefix(tok, "trp_") {
		t.Fatalf("token of %s: %+v %v", agent, req, err)
	}
	return tok
}

// TestMCPGoSDKClientOnTheDaemon: the official go-sdk client, holding a live
// session's token, lists and calls every tool on the daemon's /mcp. A token
// of project A reaches nothing of project B (a copy, same agent names).
// The session started with the index of the project's memory notes.
func TestMCPGoSDKClientOnTheDaemon(t *testing.T) {
	state, a := t.TempDir(), t.TempDir()
	writeTeam(t, a, ownerTeam)
	os.MkdirAll(filepath.Join(a, ".troupe", "memory"), 0o755)
	os.WriteFile(filepath.Join(a, ".troupe", "memory", "deploy.md"),
		[]byte("---\nname: deploy\ndescription: how we deploy the app\nmetadata:\n  type: howto\n---\nRun make release, then tag.\n"), 0o644)
	b := filepath.Join(t.TempDir(), "copy")
	copyDir(t, a, b)
	d := startDaemon(t, state, "--project", a, "--project", b)
	cl, _ := client.FromStateDir(state)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pa, _ := cl.ResolveProject(ctx, a)
	pb, _ := cl.ResolveProject(ctx, b)

	req, err := cl.Ask(ctx, pa.ID, "lead", "!instructions", 0)
	if err != nil || !strings.Contains(req.Answer, "- deploy: how we deploy the app") || !strings.Contains(req.Answer, `You are "lead"`) {
		t.Fatalf("session instructions = %q %v; want the memory index", req.Answer, err)
	}
	tokA := sessionToken(t, ctx, cl, pa.ID, "lead")
	tb, err := cl.RunTask(ctx, pb.ID, api.RunTaskRequest{Command: "echo in-B", Owner: "lead"})
	if err != nil {
		t.Fatal(err)
	}

	c := sdk.NewClient(&sdk.Implementation{Name: "go-sdk-test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: "http://" + d.addr + "/mcp",
		HTTPClient: &http.Client{Transport: bearerRT{tokA}}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != 12 {
		t.Fatalf("tools: %d %v", len(tools.Tools), err)
	}
	call := func(tool string, args map[string]any) (string, bool) {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		var s strings.Builder
		for _, ct := range res.Content {
			if tc, ok := ct.(*sdk.TextContent); ok {
				s.WriteString(tc.Text)
			}
		}
		return s.String(), res.IsError
	}
	out, _ := call("run_in_background", map[string]any{"command": "echo from-sdk"})
	_, idA, _ := strings.Cut(out, "started task ")
	idA, _, _ = strings.Cut(idA, ";")
	for _, c := range []struct {
		tool    string
		args    map[string]any
		want    string
		isError bool
	}{
		{"list_agents", map[string]any{}, `"you":true`, false},
		{"ask_agent", map[string]any{"to": "worker", "question": "hello"}, "echo: hello", false},
		{"send_message", map[string]any{"to": "worker", "text": "note"}, "sent to worker", false},
		{"delegate", map[string]any{"to": "worker", "task": "x"}, "delegated", false},
		{"reply", map[string]any{"text": "x"}, "no question to answer", true},
		{"task_status", map[string]any{"task_id": idA}, `"command": "echo from-sdk"`, false},
		{"task_output", map[string]any{"task_id": idA}, "", false},
		{"task_kill", map[string]any{"task_id": "nope"}, "", true},
		{"memory_search", map[string]any{"query": "release"}, "deploy", false},
		{"memory_read", map[string]any{"name": "deploy"}, "Run make release", false},
		{"memory_write", map[string]any{"name": "n2", "description": "d", "body": "b"}, "saved note n2", false},
		// Project B is out of reach, even by its task id.
		{"task_status", map[string]any{"task_id": string(tb.ID)}, "not found", true},
		{"task_kill", map[string]any{"task_id": string(tb.ID)}, "not found", true},
		{"task_output", map[string]any{"task_id": string(tb.ID)}, "not found", true},
	} {
		got, isErr := call(c.tool, c.args)
		if isErr != c.isError || !strings.Contains(got, c.want) {
			t.Errorf("%s %v = %q (error %v), want %q (error %v)", c.tool, c.args, got, isErr, c.want, c.isError)
		}
	}
	if _, err := os.Stat(filepath.Join(b, ".troupe", "memory", "n2.md")); err == nil {
		t.Error("A's memory_write wrote into B")
	}
	// task_kill on a running job: its completion says it was killed.
	out, _ = call("run_in_background", map[string]any{"command": "sleep 300"})
	_, idK, _ := strings.Cut(out, "started task ")
	idK, _, _ = strings.Cut(idK, ";")
	if got, isErr := call("task_kill", map[string]any{"task_id": idK}); isErr || !strings.Contains(got, "being stopped") {
		t.Fatalf("task_kill = %q (error %v)", got, isErr)
	}
	waitTaskMessages(t, ctx, cl, pa.ID, "lead", 2)
	ms, _ := allMessages(ctx, cl, pa.ID, "lead")
	killed := false
	for _, m := range ms {
		if m.Kind == troupe.KindTask && strings.Contains(m.Text, idK) && strings.Contains(m.Text, "killed") {
			killed = true
		}
	}
	if !killed {
		t.Errorf("no completion of task %s saying it was killed reached lead", idK)
	}
	if ms, _ := allMessages(ctx, cl, pb.ID, "worker"); len(ms) != 0 {
		t.Errorf("A's token reached B's worker: %+v", ms)
	}
}

// TestC4_AskReturnsARequestIDBeforeTheClientsToolTimeout: the lead's MCP
// client gives up on a tool call after 2 s (like a real CLI's tool
// timeout). Its ask of a researcher who needs 4 s returns a request id in
// time; the answer then arrives in the lead's inbox and wakes it.
func TestC4_AskReturnsARequestIDBeforeTheClientsToolTimeout(t *testing.T) {
	state, proj := t.TempDir(), t.TempDir()
	writeTeam(t, proj, `
[[agent]]
name = "lead"
engine = "fake"
[agent.fake]
tool_timeout = "2s"

[[agent]]
name = "researcher"
engine = "fake"
`)
	startDaemon(t, state, "--project", proj)
	cl, _ := client.FromStateDir(state)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, _ := cl.ResolveProject(ctx, proj)
	req, err := cl.Ask(ctx, p.ID, "lead", `!tool ask_agent {"to":"researcher","question":"!sleep 4s\n!say the slow answer"}`+"\n!say {result}", 0)
	if err != nil || !strings.Contains(req.Answer, "has not answered yet (request r") {
		t.Fatalf("lead's ask with a 2s client limit = %+v %v; want a request id, not a client timeout", req, err)
	}
	// The reply lands in the lead's inbox and wakes it.
	waitFor(t, ctx, cl, "the late answer to wake the lead", func() bool {
		ms, _ := allMessages(ctx, cl, p.ID, "lead")
		for _, m := range ms {
			if m.Kind == troupe.KindReply && m.To == "lead" && m.Text == "the slow answer" && m.State == troupe.MsgDelivered {
				return true
			}
		}
		return false
	})
}
