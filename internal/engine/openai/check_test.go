package openai

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// TestCheck: each bad option is a FieldError naming the key and the fix.
func TestCheck(t *testing.T) {
	e := New(Options{})
	good := func() troupe.AgentSpec {
		return troupe.AgentSpec{Name: "x", Engine: troupe.EngineOpenAI, Model: "m",
			Options: map[string]any{"base_url": "http://127.0.0.1:8080/v1"}}
	}
	if err := e.Check(good()); err != nil {
		t.Fatalf("good agent: %v", err)
	}
	cases := []struct {
		name  string
		edit  func(*troupe.AgentSpec)
		field string
		say   string
	}{
		{"no model", func(a *troupe.AgentSpec) { a.Model = "" }, "model", "needs the model"},
		{"terminal", func(a *troupe.AgentSpec) { a.Mode = troupe.ModeTerminal }, "mode", "no terminal mode"},
		{"permission", func(a *troupe.AgentSpec) { a.PermissionMode = "auto" }, "permission_mode", "acceptEdits"},
		{"allowed tool", func(a *troupe.AgentSpec) { a.AllowedTools = []string{"Bash"} }, "allowed_tools", "read_file"},
		{"no base_url", func(a *troupe.AgentSpec) { delete(a.Options, "base_url") }, "openai.base_url", "missing"},
		{"bad scheme", func(a *troupe.AgentSpec) { a.Options["base_url"] = "ftp://x/v1" }, "openai.base_url", "http(s) URL"},
		{"password in url", func(a *troupe.AgentSpec) { a.Options["base_url"] = "http://u:hunter2@x/v1" }, "openai.base_url", "no user"},
		{"key as env", func(a *troupe.AgentSpec) { a.Options["api_key_env"] = "sk-abc-123" }, "openai.api_key_env", "never the key itself"},
		{"small context", func(a *troupe.AgentSpec) { a.Options["max_context_tokens"] = int64(100) }, "openai.max_context_tokens", "at least"},
		{"context string", func(a *troupe.AgentSpec) { a.Options["max_context_tokens"] = "32k" }, "openai.max_context_tokens", "whole number"},
		{"steps", func(a *troupe.AgentSpec) { a.Options["max_steps"] = int64(0) }, "openai.max_steps", "from 1"},
		{"unknown", func(a *troupe.AgentSpec) { a.Options["temperature"] = 0.2 }, "openai.temperature", "unknown option"},
	}
	for _, c := range cases {
		a := good()
		c.edit(&a)
		err := e.Check(a)
		var fe *troupe.FieldError
		if !errors.As(err, &fe) || fe.Field != c.field || !strings.Contains(fe.Msg, c.say) {
			t.Errorf("%s: %v, want field %s saying %q", c.name, err, c.field, c.say)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: the error shows the password: %v", c.name, err)
		}
	}
}

// FuzzParseArgs: whatever the model writes, parseArgs never panics, and
// what it accepts is one compact JSON object.
func FuzzParseArgs(f *testing.F) {
	for _, s := range []string{"", "{}", `{"path":"a.txt"}`, `{"path": "a.txt"`, `["a"]`, `"{\"a\":1}"`, `"not json"`,
		"null", `{"a":1}{"b":2}`, " \n{\"x\":[1,2,{\"y\":null}]}\t", `{"a":"\u0000"}`, "\xff\xfe", `{"a":1e999}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		args, err := parseArgs(raw)
		if err != nil {
			if args != nil {
				t.Fatalf("error %v with arguments %q", err, args)
			}
			return
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(args, &m) != nil || m == nil {
			t.Fatalf("accepted %q as %q: not a JSON object", raw, args)
		}
	})
}
