package claude

import (
	"context"
	"errors"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/sandbox"
	"github.com/troupe-dev/troupe/internal/troupe"
)

func TestCheck(t *testing.T) {
	e := New(Options{})
	tests := []struct {
		name  string
		agent troupe.AgentSpec
		field string // "" when valid
	}{
		{"empty", troupe.AgentSpec{}, ""},
		{"structured", troupe.AgentSpec{Mode: troupe.ModeStructured}, ""},
		{"terminal", troupe.AgentSpec{Mode: troupe.ModeTerminal}, ""},
		{"terminal bad mode", troupe.AgentSpec{Mode: troupe.ModeTerminal, PermissionMode: "yolo"}, "permission_mode"},
		{"acceptEdits", troupe.AgentSpec{PermissionMode: "acceptEdits"}, ""},
		{"default mode", troupe.AgentSpec{PermissionMode: "default"}, ""},
		{"plan", troupe.AgentSpec{PermissionMode: "plan"}, ""},
		{"bad mode", troupe.AgentSpec{PermissionMode: "yolo"}, "permission_mode"},
		{"mode case", troupe.AgentSpec{PermissionMode: "AcceptEdits"}, "permission_mode"},
		{"tool_timeout", troupe.AgentSpec{Options: map[string]any{"tool_timeout": "45m"}}, ""},
		{"tool_timeout short", troupe.AgentSpec{Options: map[string]any{"tool_timeout": "500ms"}}, "claude.tool_timeout"},
		{"tool_timeout number", troupe.AgentSpec{Options: map[string]any{"tool_timeout": 30}}, "claude.tool_timeout"},
		{"unknown key", troupe.AgentSpec{Options: map[string]any{"model": "x"}}, "claude.model"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := e.Check(tt.agent)
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				return
			}
			fe, ok := errors.AsType[*troupe.FieldError](err)
			if !ok || fe.Field != tt.field || fe.Msg == "" {
				t.Fatalf("Check = %v, want a FieldError on %s", err, tt.field)
			}
			if !errors.Is(err, troupe.ErrInvalid) {
				t.Errorf("not ErrInvalid: %v", err)
			}
		})
	}
}

func TestToolCallLimit(t *testing.T) {
	tests := []struct {
		name      string
		agent     troupe.AgentSpec
		environ   []string
		want      time.Duration
		personSet bool
	}{
		{"default", troupe.AgentSpec{}, nil, DefaultToolTimeout, false},
		{"option", troupe.AgentSpec{Options: map[string]any{"tool_timeout": "2h"}}, nil, 2 * time.Hour, false},
		{"daemon env", troupe.AgentSpec{}, []string{"MCP_TOOL_TIMEOUT=120000"}, 2 * time.Minute, true},
		{"option over daemon env", troupe.AgentSpec{Options: map[string]any{"tool_timeout": "1h"}}, []string{"MCP_TOOL_TIMEOUT=120000"}, time.Hour, true},
		{"agent env", troupe.AgentSpec{Env: map[string]string{"MCP_TOOL_TIMEOUT": "90000"}, Options: map[string]any{"tool_timeout": "1h"}}, nil, 90 * time.Second, true},
		{"ignored value", troupe.AgentSpec{}, []string{"MCP_TOOL_TIMEOUT=10"}, DefaultToolTimeout, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parseOptions(tt.agent.Options)
			if err != nil {
				t.Fatal(err)
			}
			got, personSet := toolLimit(tt.agent, o, tt.environ)
			if got != tt.want || personSet != tt.personSet {
				t.Errorf("toolLimit = %v, %v; want %v, %v", got, personSet, tt.want, tt.personSet)
			}
			environ := tt.environ
			if e := New(Options{Environ: func() []string { return environ }}); e.ToolCallLimit(tt.agent) != tt.want {
				t.Errorf("ToolCallLimit = %v, want %v", e.ToolCallLimit(tt.agent), tt.want)
			}
		})
	}
}

// C11: the person's Claude login and settings pass as they are; other
// engines' keys, the nested-session markers and anything else do not; the
// agent's env comes last; MCP_TOOL_TIMEOUT is set unless the person did.
func TestChildEnv(t *testing.T) {
	environ := []string{
		"HOME=/home/p", "USER=p", "LOGNAME=p", "SHELL=/bin/zsh", "PATH=/usr/bin", "LANG=en_US.UTF-8", "LC_ALL=C", "TERM=xterm",
		"TMPDIR=/tmp/p", "XDG_CONFIG_HOME=/home/p/.config",
		"ANTHROPIC_API_KEY=sk-ant", "ANTHROPIC_BASE_URL=https://gw", "CLAUDE_CONFIG_DIR=/home/p/.claude2",
		"CLAUDE_CODE_USE_BEDROCK=1", "CLAUDE_CODE_MAX_RETRIES=3", "DISABLE_TELEMETRY=1", "IS_SANDBOX=1",
		"HTTPS_PROXY=http://proxy:3128", "https_proxy=http://proxy:3128", "NO_PROXY=localhost",
		"NODE_EXTRA_CA_CERTS=/etc/ca.pem", "SSL_CERT_FILE=/etc/ssl.pem",
		"AWS_REGION=eu-west-1", "AWS_PROFILE=work", "CLOUD_ML_REGION=us-east5", "GOOGLE_APPLICATION_CREDENTIALS=/k.json", "ANTHROPIC_VERTEX_PROJECT_ID=proj",
		// never
		"CLAUDECODE=1", "CLAUDE_CODE_ENTRYPOINT=cli", "CLAUDE_CODE_SSE_PORT=1234",
		"OPENAI_API_KEY=sk-openai", "CODEX_HOME=/home/p/.codex", "GITHUB_TOKEN=ghp", "GEMINI_API_KEY=g", "TROUPE_TOKEN=t", "SECRET=s",
	}
	env := childEnv(environ, map[string]string{"FOO": "bar", "HOME": "/agent/home", "CLAUDECODE": "1"}, 30*time.Minute, false)
	got := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		got[k] = v
	}
	for _, kv := range environ[:27] {
		k, v, _ := strings.Cut(kv, "=")
		if k == "HOME" {
			continue
		}
		if got[k] != v {
			t.Errorf("%s = %q, want %q passed", k, got[k], v)
		}
	}
	for _, kv := range environ[27:] {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := got[k]; ok {
			t.Errorf("%s passed to the child", k)
		}
	}
	if got["FOO"] != "bar" || got["HOME"] != "/agent/home" {
		t.Errorf("agent env not applied last: FOO=%q HOME=%q", got["FOO"], got["HOME"])
	}
	if got["MCP_TOOL_TIMEOUT"] != "1800000" {
		t.Errorf("MCP_TOOL_TIMEOUT = %q, want 1800000", got["MCP_TOOL_TIMEOUT"])
	}
	if !slices.IsSorted(env) {
		t.Error("env not sorted")
	}
	env = childEnv([]string{"MCP_TOOL_TIMEOUT=5000"}, nil, 5*time.Second, true)
	if !slices.Equal(env, []string{"MCP_TOOL_TIMEOUT=5000"}) {
		t.Errorf("the person's MCP_TOOL_TIMEOUT: env %q", env)
	}
}

func TestArgv(t *testing.T) {
	l := &launch{
		command: "/usr/bin/claude",
		agent: troupe.AgentSpec{Args: []string{"--debug"}, Model: "sonnet", PermissionMode: "acceptEdits",
			AllowedTools: []string{"Bash(git *)", "Edit"}},
		mcpFile: "/tmp/x/mcp.json",
		instr:   "be nice",
	}
	base := []string{"/usr/bin/claude", "--debug", "-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose", "--include-partial-messages"}
	tail := []string{"--model", "sonnet", "--permission-mode", "acceptEdits", "--append-system-prompt", "be nice", "--mcp-config", "/tmp/x/mcp.json",
		"--allowedTools", "mcp__troupe", "Bash(git *)", "Edit", "--permission-prompt-tool", "stdio"}
	want := slices.Concat(base, []string{"--session-id", "abc"}, tail)
	if got := l.argv("abc", false); !slices.Equal(got, want) {
		t.Errorf("new session argv\n%q\nwant\n%q", got, want)
	}
	want = slices.Concat(base, []string{"--resume", "abc"}, tail)
	if got := l.argv("abc", true); !slices.Equal(got, want) {
		t.Errorf("resume argv\n%q\nwant\n%q", got, want)
	}
	// In troupe's sandbox, Claude Code's own is off (it cannot run nested).
	l.sandbox = &sandbox.Policy{On: true}
	if got := l.argv("abc", false); !slices.Contains(got, "--settings") || got[slices.Index(got, "--settings")+1] != noOwnSandbox {
		t.Errorf("sandboxed argv %q: want --settings %s", got, noOwnSandbox)
	}
	minimal := (&launch{command: "claude"}).argv("id", false)
	for _, flag := range []string{"--model", "--permission-mode", "--append-system-prompt", "--mcp-config", "--strict-mcp-config", "--settings"} {
		if slices.Contains(minimal, flag) {
			t.Errorf("minimal argv has %s: %q", flag, minimal)
		}
	}
}

func TestNewSessionID(t *testing.T) {
	re := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	a, b := newSessionID(), newSessionID()
	if !re.MatchString(a) || a == b {
		t.Errorf("ids %s %s: want distinct UUIDs v4", a, b)
	}
}

func TestStartMissingCLI(t *testing.T) {
	e := New(Options{Environ: func() []string { return nil }})
	_, err := e.Start(context.Background(), engine.StartSpec{
		Key: troupe.RuntimeKey{Project: "p", Agent: "a"}, Dir: t.TempDir(),
		Agent: troupe.AgentSpec{Name: "a", Command: "claude-not-installed-here"},
	})
	if err == nil || !strings.Contains(err.Error(), "install Claude Code") || !strings.Contains(err.Error(), "command") {
		t.Fatalf("Start = %v, want a missing-CLI error saying what to do", err)
	}
}

// The MCP config, with the session's token, is a 0600 file in a private
// folder, never on the command line, and is gone after Close. The "CLI"
// here is sh reading its input to the end.
func TestMCPConfigFile(t *testing.T) {
	e := New(Options{Environ: func() []string { return []string{"PATH=" + os.Getenv("PATH")} }})
	ses, err := e.Start(context.Background(), engine.StartSpec{
		Key: troupe.RuntimeKey{Project: "p", Agent: "a"}, Dir: t.TempDir(),
		Agent: troupe.AgentSpec{Name: "a", Command: "sh", Args: []string{"-c", "cat >/dev/null"}},
		MCP:   engine.MCPAccess{URL: "http://127.0.0.1:1/mcp", Token: "secret-token-42"},
	})
	if err != nil {
		t.Fatal(err)
	}
	s := ses.(*Session)
	defer drive.Close(t, s)
	if ev := <-s.Events(); ev.Kind != engine.EventSession || ev.SessionID != s.ID() {
		t.Errorf("first event %+v, want the session id %s", ev, s.ID())
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(s.PID()) + "/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(cmdline), "secret-token-42") {
		t.Error("the token is on the command line")
	}
	file := s.launch.mcpFile
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mcp config mode %v, want 0600", fi.Mode().Perm())
	}
	if di, err := os.Stat(s.tmpDir); err != nil || di.Mode().Perm() != 0o700 {
		t.Errorf("private folder: %v, %v", di, err)
	}
	b, _ := os.ReadFile(file)
	if !strings.Contains(string(b), `"Authorization":"Bearer secret-token-42"`) || !strings.Contains(string(b), `"timeout":1800000`) || !strings.Contains(string(b), `"type":"http"`) {
		t.Errorf("mcp config %s", b)
	}
	if !strings.Contains(string(cmdline), file) {
		t.Errorf("--mcp-config %s not on the command line %q", file, cmdline)
	}
	drive.Close(t, s)
	if _, err := os.Stat(s.tmpDir); !os.IsNotExist(err) {
		t.Errorf("private folder after Close: %v", err)
	}
	if err := s.Err(); err != nil {
		t.Errorf("Err after Close = %v", err)
	}
}
