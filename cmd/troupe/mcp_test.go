package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	req, err := cl.Ask(ctx, p.ID, "lead", "!env TROUPE_MCP_TOKEN", 0)
	_, tok, _ := strings.Cut(strings.TrimSpace(req.Answer), "=")
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
	req, _ = cl.Ask(ctx, p.ID, "lead", "!env TROUPE_MCP_TOKEN", 0)
	if _, nt, _ := strings.Cut(strings.TrimSpace(req.Answer), "="); nt == tok || !strings.HasPrefix(nt, "trp_") {
		t.Fatalf("new session token %q (old %q)", nt, tok)
	}
	if code := list(); code != http.StatusUnauthorized {
		t.Fatalf("old token after restart: status %d, want 401", code)
	}
}
