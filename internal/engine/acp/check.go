package acp

import (
	"fmt"
	"slices"
	"time"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// DefaultToolTimeout is how long the agent's MCP client lets one call of a
// troupe tool run when the agent's tool_timeout does not say. OpenCode
// 1.18.33 gives each MCP call the server's timeout, else its
// experimental.mcp_timeout, else nothing, which leaves the MCP SDK's
// default request timeout: 60 s (read in the binary). A generic ACP agent
// is assumed to be as strict.
const DefaultToolTimeout = 60 * time.Second

// optToolTimeout is the one option of [agent.acp] and [agent.opencode]:
// for opencode it also sets OpenCode's experimental.mcp_timeout; for acp
// it tells troupe the limit the agent's own MCP client applies.
const optToolTimeout = "tool_timeout"

type options struct {
	toolTimeout time.Duration // 0: not set
}

// Check implements engine.Engine: structured mode only; an acp agent names
// its command; permission_mode is Claude's, not the protocol's; the
// options table holds only tool_timeout, a duration of at least 1s.
func (e *Engine) Check(agent troupe.AgentSpec) error {
	if agent.Mode == troupe.ModeTerminal {
		return &troupe.FieldError{Field: "mode", Msg: fmt.Sprintf(`the %s engine has no terminal mode: remove mode, or set it to "structured"`, e.f.engine)}
	}
	if agent.Command == "" && e.f.command == "" {
		return &troupe.FieldError{Field: "command", Msg: `an acp agent needs the program that speaks the Agent Client Protocol on stdio: set command (and args), e.g. command = "opencode", args = ["acp"]`}
	}
	if agent.PermissionMode != "" {
		return &troupe.FieldError{Field: "permission_mode", Msg: fmt.Sprintf("the %s engine takes no permission_mode: the agent's own configuration sets what it asks, and troupe answers its requests", e.f.engine)}
	}
	if agent.Model != "" && e.f.engine == troupe.EngineACP {
		return &troupe.FieldError{Field: "model", Msg: "the acp engine cannot choose a model: set it in the agent's own configuration, or pass it in args"}
	}
	_, err := e.parseOptions(agent.Options)
	return err
}

// parseOptions parses the [agent.<engine>] table; a bad key is a
// *troupe.FieldError naming it.
func (e *Engine) parseOptions(opts map[string]any) (options, error) {
	var o options
	keys := make([]string, 0, len(opts))
	for k := range opts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	prefix := string(e.f.engine) + "."
	for _, k := range keys {
		switch k {
		case optToolTimeout:
			s, ok := opts[k].(string)
			d, err := time.ParseDuration(s)
			if !ok || err != nil || d < time.Second {
				return o, &troupe.FieldError{Field: prefix + k, Msg: fmt.Sprintf(`must be a duration of at least 1s like "30m", not %v`, opts[k])}
			}
			o.toolTimeout = d
		default:
			return o, &troupe.FieldError{Field: prefix + k, Msg: fmt.Sprintf("unknown option: the [agent.%s] table takes only %s", e.f.engine, optToolTimeout)}
		}
	}
	return o, nil
}
