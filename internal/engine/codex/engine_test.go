package codex

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/troupe"
)

func TestCheck(t *testing.T) {
	e := New(Options{})
	cases := []struct {
		name  string
		agent troupe.AgentSpec
		field string // "" when valid
	}{
		{"empty", troupe.AgentSpec{}, ""},
		{"structured", troupe.AgentSpec{Mode: troupe.ModeStructured}, ""},
		{"terminal", troupe.AgentSpec{Mode: troupe.ModeTerminal}, "mode"},
		{"tool_timeout", troupe.AgentSpec{Options: map[string]any{"tool_timeout": "2h"}}, ""},
		{"tool_timeout short", troupe.AgentSpec{Options: map[string]any{"tool_timeout": "10ms"}}, "codex.tool_timeout"},
		{"tool_timeout number", troupe.AgentSpec{Options: map[string]any{"tool_timeout": int64(30)}}, "codex.tool_timeout"},
		{"unknown", troupe.AgentSpec{Options: map[string]any{"sandbox": "x"}}, "codex.sandbox"},
		{"config", troupe.AgentSpec{Options: map[string]any{"config": map[string]any{
			"model_reasoning_effort": "high", "sandbox_workspace_write.network_access": true,
			"model_providers.x": map[string]any{"base_url": "http://h/v1", "request_max_retries": int64(1)},
			"notify":            []any{"a", "b"}, "x.y": 1.5}}}, ""},
		{"config not a table", troupe.AgentSpec{Options: map[string]any{"config": "model=o3"}}, "codex.config"},
		{"config bad key", troupe.AgentSpec{Options: map[string]any{"config": map[string]any{"a b": 1}}}, "codex.config.a b"},
		{"config troupe's server", troupe.AgentSpec{Options: map[string]any{"config": map[string]any{"mcp_servers.troupe.url": "x"}}}, "codex.config.mcp_servers.troupe.url"},
		{"config bad value", troupe.AgentSpec{Options: map[string]any{"config": map[string]any{"t": time.Now()}}}, "codex.config.t"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := e.Check(c.agent)
			if c.field == "" {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				return
			}
			var fe *troupe.FieldError
			if !errors.As(err, &fe) || fe.Field != c.field {
				t.Fatalf("Check: %v, want a FieldError on %s", err, c.field)
			}
		})
	}
}

func TestTOMLValue(t *testing.T) {
	cases := []struct {
		in   any
		want string
	}{
		{"a\"b\\c\n\x01é", `"a\"b\\c\n\u0001é"`},
		{true, "true"},
		{int64(-3), "-3"},
		{2.0, "2.0"},
		{1e21, "1e+21"},
		{[]any{int64(1), "x"}, `[1, "x"]`},
		{map[string]any{"b": int64(1), "a c": "v"}, `{"a c" = "v", "b" = 1}`},
		{[]map[string]any{{"k": false}}, `[{"k" = false}]`},
	}
	for _, c := range cases {
		got, err := tomlValue(c.in)
		if err != nil || got != c.want {
			t.Errorf("tomlValue(%#v) = %s, %v; want %s", c.in, got, err, c.want)
		}
	}
}

func TestToolCallLimit(t *testing.T) {
	e := New(Options{})
	if d := e.ToolCallLimit(troupe.AgentSpec{}); d != DefaultToolTimeout {
		t.Fatalf("default %v", d)
	}
	if d := e.ToolCallLimit(troupe.AgentSpec{Options: map[string]any{"tool_timeout": "2h"}}); d != 2*time.Hour {
		t.Fatalf("tool_timeout %v", d)
	}
}

// TestArgvKeepsTokenOut: the token is never on the command line (C2): the
// MCP server names the variable that holds it.
func TestArgvKeepsTokenOut(t *testing.T) {
	o, err := parseOptions(map[string]any{"config": map[string]any{"model": "o3"}})
	if err != nil {
		t.Fatal(err)
	}
	a := argv("/bin/codex", troupe.AgentSpec{Args: []string{"--enable", "x"}}, o,
		engine.MCPAccess{URL: "http://127.0.0.1:9/mcp", Token: "secret-token"}, 90*time.Minute)
	joined := strings.Join(a, " ")
	if strings.Contains(joined, "secret-token") {
		t.Fatalf("token in argv: %q", a)
	}
	want := []string{"/bin/codex", "app-server", "--enable", "x",
		"-c", `mcp_servers.troupe={url = "http://127.0.0.1:9/mcp", bearer_token_env_var = "TROUPE_MCP_TOKEN", required = true, startup_timeout_sec = 30, tool_timeout_sec = 5400}`,
		"-c", "mcp_optional_startup_grace_ms=0",
		"-c", `model="o3"`}
	if !slices.Equal(a, want) {
		t.Fatalf("argv\n%q\nwant\n%q", a, want)
	}
	if a := argv("codex", troupe.AgentSpec{}, options{}, engine.MCPAccess{}, time.Minute); !slices.Equal(a, []string{"codex", "app-server"}) {
		t.Fatalf("argv without MCP %q", a)
	}
}

func TestChildEnv(t *testing.T) {
	environ := []string{
		"HOME=/h", "PATH=/bin", "OPENAI_API_KEY=k", "CODEX_HOME=/c", "HTTPS_PROXY=p", "LC_ALL=C",
		"ANTHROPIC_API_KEY=no", "CLAUDE_CONFIG_DIR=no", "CLAUDECODE=1", "AWS_SECRET_ACCESS_KEY=no", "TROUPE_MCP_TOKEN=stale", "SECRET=no",
	}
	env := childEnv(environ, map[string]string{"FOO": "bar", "PATH": "/agent/bin", "TROUPE_MCP_TOKEN": "agent"}, "tok")
	want := []string{"CODEX_HOME=/c", "FOO=bar", "HOME=/h", "HTTPS_PROXY=p", "LC_ALL=C", "OPENAI_API_KEY=k", "PATH=/agent/bin", "TROUPE_MCP_TOKEN=tok"}
	if !slices.Equal(env, want) {
		t.Fatalf("env\n%q\nwant\n%q", env, want)
	}
	if env := childEnv(environ, nil, ""); slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, envToken+"=") }) {
		t.Fatalf("a token without an MCP endpoint: %q", env)
	}
}

func TestStartRefusals(t *testing.T) {
	e := New(Options{Environ: func() []string { return nil }})
	dir := t.TempDir()
	cases := []struct {
		name string
		spec engine.StartSpec
		want string
	}{
		{"terminal", engine.StartSpec{Dir: dir, Agent: troupe.AgentSpec{Name: "a", Mode: troupe.ModeTerminal}}, "terminal mode"},
		{"no dir", engine.StartSpec{Agent: troupe.AgentSpec{Name: "a"}}, "working directory"},
		{"no command", engine.StartSpec{Dir: dir, Agent: troupe.AgentSpec{Name: "a", Command: "/nonexistent/codex"}}, "not found"},
		{"bad option", engine.StartSpec{Dir: dir, Agent: troupe.AgentSpec{Name: "a", Options: map[string]any{"x": 1}}}, "codex.x"},
		{"not codex", engine.StartSpec{Dir: dir, Agent: troupe.AgentSpec{Name: "a", Command: "true"}}, "initialize codex app-server"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := e.Start(context.Background(), c.spec)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Start: %v, want %q", err, c.want)
			}
		})
	}
}
