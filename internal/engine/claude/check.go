package claude

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// PermissionModes are the values of permission_mode Claude Code 2.1.328
// takes (its --help lists all but "default", which it also accepts).
var PermissionModes = []string{"acceptEdits", "auto", "bypassPermissions", "manual", "dontAsk", "plan", "default"}

// DefaultToolTimeout is how long Claude Code lets one call of a troupe tool
// run when neither the agent's tool_timeout nor MCP_TOOL_TIMEOUT says.
// Claude Code's own default is 1e8 ms for the call but, for an HTTP MCP
// server, 5 minutes without a response (CLAUDE_CODE_MCP_TOOL_IDLE_TIMEOUT);
// troupe sets both through the server's "timeout" so the limit it reports
// (ToolCallLimit) is the one the CLI applies.
const DefaultToolTimeout = 30 * time.Minute

// optToolTimeout is the one [agent.claude] option.
const optToolTimeout = "tool_timeout"

// options are an agent's [agent.claude] table, parsed.
type options struct {
	toolTimeout time.Duration // 0: not set
}

// Check implements engine.Engine: either mode (structured, terminal),
// permission_mode is one Claude Code knows, and the
// [agent.claude] table holds only tool_timeout, a duration of at least 1s.
func (e *Engine) Check(agent troupe.AgentSpec) error {
	if agent.PermissionMode != "" && !slices.Contains(PermissionModes, agent.PermissionMode) {
		return &troupe.FieldError{Field: "permission_mode", Msg: fmt.Sprintf("%q is not a Claude Code permission mode: use one of %s", agent.PermissionMode, strings.Join(PermissionModes, ", "))}
	}
	if _, err := parseOptions(agent.Options); err != nil {
		return err
	}
	return nil
}

// parseOptions parses the [agent.claude] table; a bad key is a
// *troupe.FieldError naming it.
func parseOptions(opts map[string]any) (options, error) {
	var o options
	keys := make([]string, 0, len(opts))
	for k := range opts {
		keys = append(keys, k)
	}
	slices.Sort(keys) // the first bad key, the same every time
	for _, k := range keys {
		switch k {
		case optToolTimeout:
			s, ok := opts[k].(string)
			d, err := time.ParseDuration(s)
			if !ok || err != nil || d < time.Second {
				return o, &troupe.FieldError{Field: "claude." + k, Msg: fmt.Sprintf(`must be a duration of at least 1s like "30m", not %v`, opts[k])}
			}
			o.toolTimeout = d
		default:
			return o, &troupe.FieldError{Field: "claude." + k, Msg: fmt.Sprintf("unknown option: the [agent.claude] table takes only %s", optToolTimeout)}
		}
	}
	return o, nil
}

// envMCPToolTimeout is Claude Code's limit of one MCP tool call, in ms.
const envMCPToolTimeout = "MCP_TOOL_TIMEOUT"

// parseMillis reads MCP_TOOL_TIMEOUT as Claude Code does; it ignores
// values under 1000 ms.
func parseMillis(s string) (time.Duration, bool) {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n < 1000 {
		return 0, false
	}
	return time.Duration(n) * time.Millisecond, true
}

// toolLimit is the effective limit of one troupe tool call for the agent,
// and whether the person set MCP_TOOL_TIMEOUT themselves (so troupe leaves
// the variable alone): the agent's env MCP_TOOL_TIMEOUT, else its
// tool_timeout option, else the daemon's MCP_TOOL_TIMEOUT, else
// DefaultToolTimeout.
func toolLimit(agent troupe.AgentSpec, o options, environ []string) (time.Duration, bool) {
	if v, ok := agent.Env[envMCPToolTimeout]; ok {
		d, valid := parseMillis(v)
		if !valid {
			d = DefaultToolTimeout
		}
		return d, true
	}
	daemon, personSet := lookup(environ, envMCPToolTimeout)
	if o.toolTimeout > 0 {
		return o.toolTimeout, personSet
	}
	if personSet {
		if d, ok := parseMillis(daemon); ok {
			return d, true
		}
	}
	return DefaultToolTimeout, personSet
}

func lookup(environ []string, key string) (string, bool) {
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}
