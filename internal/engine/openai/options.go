package openai

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/troupe-dev/troupe/internal/permission"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// Defaults of the [agent.openai] options.
const (
	DefaultMaxSteps         = 50
	DefaultMaxContextTokens = 32000
	// MinContextTokens is the smallest max_context_tokens taken: below it
	// the instructions and the tools alone would not fit.
	MinContextTokens = 2048
	// MaxMaxSteps bounds max_steps.
	MaxMaxSteps = 1000
)

// The [agent.openai] options.
const (
	optBaseURL          = "base_url"
	optAPIKeyEnv        = "api_key_env"
	optMaxContextTokens = "max_context_tokens"
	optMaxSteps         = "max_steps"
)

var optionNames = []string{optAPIKeyEnv, optBaseURL, optMaxContextTokens, optMaxSteps}

// The permission modes an openai agent takes (as Claude Code's of the same
// names; what each allows, asks or denies is internal/permission's table):
// default asks the person before a write, an edit or a command;
// acceptEdits allows writes and edits and asks before a command;
// bypassPermissions allows all; plan and dontAsk change nothing that
// allowed_tools does not name.
// gatedTroupeTools are troupe's own tools that pass the permission gate
// (a command, an edit): allowed_tools may name them to allow them without
// asking.
var gatedTroupeTools = []string{"run_in_background", "memory_write"}

var permissionModes = []string{permission.Default, permission.AcceptEdits, permission.Bypass, permission.Plan, permission.DontAsk}

// options are an agent's [agent.openai] table, parsed, with defaults.
type options struct {
	baseURL          string // without a trailing slash, like http://127.0.0.1:8080/v1
	apiKeyEnv        string // "": no key sent
	maxContextTokens int
	maxSteps         int
}

// envName is a variable name api_key_env may give.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Check implements engine.Engine: structured mode, a model, a permission
// mode this engine knows, allowed_tools naming workspace tools, and an
// [agent.openai] table with base_url (an http or https URL) and the
// optional api_key_env (a variable's name, never the key), max_context_tokens
// and max_steps.
func (e *Engine) Check(agent troupe.AgentSpec) error {
	if agent.Mode == troupe.ModeTerminal {
		return &troupe.FieldError{Field: "mode", Msg: `an openai agent has no terminal mode (troupe runs its loop): remove mode, or set it to "structured"`}
	}
	if strings.TrimSpace(agent.Model) == "" {
		return &troupe.FieldError{Field: "model", Msg: `an openai agent needs the model its server serves: set model, like model = "qwen2.5-coder:7b"`}
	}
	if agent.PermissionMode != "" && !slices.Contains(permissionModes, agent.PermissionMode) {
		return &troupe.FieldError{Field: "permission_mode", Msg: fmt.Sprintf("%q is not a permission mode of an openai agent: use one of %s", agent.PermissionMode, strings.Join(permissionModes, ", "))}
	}
	for _, t := range agent.AllowedTools {
		if !slices.Contains(workspaceToolNames, t) && !slices.Contains(gatedTroupeTools, t) {
			return &troupe.FieldError{Field: "allowed_tools", Msg: fmt.Sprintf("%q is not a tool of an openai agent that can be allowed: use some of %s, %s (troupe's other tools are always there)", t, strings.Join(workspaceToolNames, ", "), strings.Join(gatedTroupeTools, ", "))}
		}
	}
	_, err := parseOptions(agent.Options)
	return err
}

// parseOptions parses the [agent.openai] table; a bad key is a
// *troupe.FieldError naming it.
func parseOptions(opts map[string]any) (options, error) {
	o := options{maxContextTokens: DefaultMaxContextTokens, maxSteps: DefaultMaxSteps}
	keys := make([]string, 0, len(opts))
	for k := range opts {
		keys = append(keys, k)
	}
	slices.Sort(keys) // the first bad key, the same every time
	for _, k := range keys {
		field := "openai." + k
		v := opts[k]
		switch k {
		case optBaseURL:
			s, ok := v.(string)
			u, err := url.Parse(s)
			if !ok || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
				return o, &troupe.FieldError{Field: field, Msg: fmt.Sprintf(`must be the http(s) URL of an OpenAI-compatible API, up to its /v1, like "http://127.0.0.1:8080/v1", with no user, query or fragment (the key goes in api_key_env), not %v`, redactURL(v))}
			}
			o.baseURL = strings.TrimRight(s, "/")
		case optAPIKeyEnv:
			s, ok := v.(string)
			if !ok || !envName.MatchString(s) {
				return o, &troupe.FieldError{Field: field, Msg: `must be the NAME of the environment variable that holds the key (in the agent's env or the daemon's environment), like api_key_env = "OPENAI_API_KEY": never the key itself`}
			}
			o.apiKeyEnv = s
		case optMaxContextTokens:
			n, ok := intOf(v)
			if !ok || n < MinContextTokens {
				return o, &troupe.FieldError{Field: field, Msg: fmt.Sprintf("must be a whole number of tokens of at least %d (the model's context window), like max_context_tokens = 32000, not %v", MinContextTokens, v)}
			}
			o.maxContextTokens = int(min(n, 1<<30))
		case optMaxSteps:
			n, ok := intOf(v)
			if !ok || n < 1 || n > MaxMaxSteps {
				return o, &troupe.FieldError{Field: field, Msg: fmt.Sprintf("must be a whole number from 1 to %d (model requests in one turn), like max_steps = 50, not %v", MaxMaxSteps, v)}
			}
			o.maxSteps = int(n)
		default:
			return o, &troupe.FieldError{Field: field, Msg: "unknown option: the [agent.openai] table takes only " + strings.Join(optionNames, ", ")}
		}
	}
	if o.baseURL == "" {
		return o, &troupe.FieldError{Field: "openai." + optBaseURL, Msg: `missing: an openai agent needs the URL of its model server, like [agent.openai] base_url = "http://127.0.0.1:11434/v1"`}
	}
	return o, nil
}

// intOf reads a TOML integer as a decoder gives it.
func intOf(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case int:
		return int64(x), true
	}
	return 0, false
}

// redactURL shows a bad base_url without a password it may hold.
func redactURL(v any) any {
	s, ok := v.(string)
	if !ok {
		return v
	}
	if u, err := url.Parse(s); err == nil && u.User != nil {
		u.User = url.User("REDACTED")
		return u.String()
	}
	return fmt.Sprintf("%q", s)
}
