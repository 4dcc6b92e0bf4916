package cli

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/journal"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// TestLogRendering: `troupe log` shows each turn, oldest first: when, what
// it was given, its text, thinking folded to its first line, tool calls
// with input and result summaries, permission decisions, usage and cost,
// its checkpoint, its error, and what was not kept.
func TestLogRendering(t *testing.T) {
	at := time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)
	usage := &journal.Usage{InputTokens: 1200, OutputTokens: 340, CacheReadTokens: 800, CostUSD: 0.0213}
	l := api.AgentLog{Agent: "dev", Turns: []journal.Turn{
		{ID: "t2", StartedAt: at.Add(time.Minute), DurationMS: 250, EndedAt: at.Add(time.Minute + 250*time.Millisecond),
			Messages: []journal.Message{{ID: 3, From: "lead", Kind: "message", Text: "and now\nbreak it"}},
			Events: []journal.Event{
				{Kind: journal.KindPermission, Permission: &journal.Permission{ID: "p1", Tool: "Bash", Input: `{"command":"rm -rf /"}`, Reason: "Bash is not in the allowed_tools of agent \"dev\""}},
				{Kind: journal.KindOutput, Text: strings.Repeat("y", 40), Cut: true, Size: 200000},
			},
			Error: "the agent's process died: exit status 3", Dropped: 4},
		{ID: "t1", StartedAt: at, DurationMS: 1500, EndedAt: at.Add(1500 * time.Millisecond), Usage: usage,
			Messages: []journal.Message{{ID: 1, From: "@person", Kind: "ask", Text: "what is in the folder?"}, {ID: 2, From: "lead", Kind: "message", Text: "hurry"}},
			Events: []journal.Event{
				{Kind: journal.KindSession, SessionID: "sess-1"},
				{Kind: journal.KindThinking, Text: "I should list it.\nThen count the files."},
				{Kind: journal.KindToolCall, Tool: &journal.Tool{ID: "c1", Name: "Bash", Input: `{"command":"ls -la"}`}},
				{Kind: journal.KindToolResult, Tool: &journal.Tool{ID: "c1", Output: "a.go\nb.go\nc.go\n"}},
				{Kind: journal.KindToolCall, Tool: &journal.Tool{ID: "c2", Name: "mcp__troupe__ask_agent", Input: `{"to":"lead","question":"ok?"}`}},
				{Kind: journal.KindToolResult, Tool: &journal.Tool{ID: "c2", Output: "no reply from lead", IsError: true}},
				{Kind: journal.KindPermission, Permission: &journal.Permission{ID: "p0", Tool: "Read", Input: `{}`, Allow: true}},
				{Kind: journal.KindUsage, Usage: usage},
				{Kind: journal.KindOutput, Text: "Three files:\na.go, b.go, c.go\n"},
				{Kind: journal.KindCheckpoint, Text: "checkpoint 4: 2 files changed, +10 −1"},
			}},
		{ID: "t0", StartedAt: at.Add(-time.Hour), Messages: []journal.Message{{ID: 0, From: "@person", Kind: "message", Text: "hi"}}},
	}}
	var b bytes.Buffer
	renderLog(&b, l, time.UTC)
	golden(t, "log.golden", b.Bytes())

	b.Reset()
	renderLog(&b, api.AgentLog{Agent: "dev"}, time.UTC)
	if b.String() != "dev has no turns kept yet\n" {
		t.Errorf("empty log: %q", b.String())
	}
}
