package fakemodel

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestCapturedRequests reads the requests the real CLIs sent (the fuzz seed
// corpus) the way the server does.
func TestCapturedRequests(t *testing.T) {
	for _, tc := range []struct {
		file, prompt, result, side string
		tool                       string // one of the offered tools
	}{
		{file: "claude_first_turn", prompt: "hello", tool: "Bash"},
		{file: "claude_tool_result", result: "agent bob answers: 42 (question was: what is 6*7?)", tool: "Write"},
		{file: "claude_interrupted", prompt: "after interrupt [[text:AFTER]]", tool: "Read"},
		{file: "claude_title_schema", side: SideSchema},
		{file: "claude_classifier", side: SideClassifier},
		{file: "codex_first_turn", prompt: "hello", tool: "exec_command"},
		{file: "codex_tool_output", result: "Chunk ID", tool: "exec_command"},
		{file: "opencode_title", side: SideTitle},
		{file: "opencode_turn", prompt: "hello", tool: "bash"},
		{file: "opencode_tool_result", result: "hi-from-shell", tool: "bash"},
	} {
		path, body := readSeed(t, filepath.Join("testdata", "fuzz", "FuzzParse", tc.file))
		req := Request{API: apiOf("POST", path)}
		if err := parseBody(&req, body); err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		if req.Prompt != tc.prompt && tc.result == "" && tc.side == "" ||
			req.AfterTool != (tc.result != "") || !strings.Contains(req.ToolResult, tc.result) || req.Side != tc.side ||
			tc.tool != "" && !strings.Contains(","+strings.Join(req.Tools, ",")+",", ","+tc.tool+",") {
			t.Errorf("%s: prompt %q, after tool %v %q, side %q, tools %v", tc.file, req.Prompt, req.AfterTool,
				clipLog(req.ToolResult), req.Side, req.Tools)
		}
	}
}

// readSeed reads a two-value seed file: string(path), []byte(body).
func readSeed(t *testing.T, name string) (string, []byte) {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 3 {
		t.Fatalf("%s: %d lines", name, len(lines))
	}
	path, err1 := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "string("), ")"))
	body, err2 := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[2], "[]byte("), ")"))
	if err1 != nil || err2 != nil {
		t.Fatalf("%s: %v %v", name, err1, err2)
	}
	return path, []byte(body)
}
