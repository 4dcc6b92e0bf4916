package codex

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// DefaultToolTimeout is how long Codex lets one call of a troupe tool run
// (the troupe server's tool_timeout_sec) when the agent's tool_timeout does
// not say: long enough for an ask answered by a teammate's turn.
const DefaultToolTimeout = 30 * time.Minute

// The [agent.codex] options.
const (
	optToolTimeout = "tool_timeout"
	optConfig      = "config"
)

// options are an agent's [agent.codex] table, parsed.
type options struct {
	toolTimeout time.Duration // 0: not set
	config      []string      // "key=toml-value", sorted by key
}

// configKey is a dotted Codex config path, as -c takes it.
var configKey = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`)

// Check implements engine.Engine: the mode is structured (terminal mode is
// a later issue), and the [agent.codex] table holds only tool_timeout (a
// duration of at least 1s) and config (a table of Codex config overrides,
// each a dotted key and a value TOML can say, none of them troupe's own
// MCP server).
func (e *Engine) Check(agent troupe.AgentSpec) error {
	if agent.Mode == troupe.ModeTerminal {
		return &troupe.FieldError{Field: "mode", Msg: `terminal mode of the codex engine is not built yet (a later issue): remove mode, or set it to "structured"`}
	}
	_, err := parseOptions(agent.Options)
	return err
}

// parseOptions parses the [agent.codex] table; a bad key is a
// *troupe.FieldError naming it.
func parseOptions(opts map[string]any) (options, error) {
	var o options
	for _, k := range sortedKeys(opts) {
		switch k {
		case optToolTimeout:
			s, ok := opts[k].(string)
			d, err := time.ParseDuration(s)
			if !ok || err != nil || d < time.Second {
				return o, &troupe.FieldError{Field: "codex." + k, Msg: fmt.Sprintf(`must be a duration of at least 1s like "30m", not %v`, opts[k])}
			}
			o.toolTimeout = d
		case optConfig:
			m, ok := opts[k].(map[string]any)
			if !ok {
				return o, &troupe.FieldError{Field: "codex." + k, Msg: fmt.Sprintf("must be a table of Codex config keys and values, like config = { model_reasoning_effort = \"high\" }, not %v", opts[k])}
			}
			for _, ck := range sortedKeys(m) {
				field := "codex." + k + "." + ck
				if !configKey.MatchString(ck) {
					return o, &troupe.FieldError{Field: field, Msg: "not a Codex config key: use a dotted path of letters, digits, _ and -"}
				}
				if ck == "mcp_servers" || ck == "mcp_servers."+MCPServerName || strings.HasPrefix(ck, "mcp_servers."+MCPServerName+".") {
					return o, &troupe.FieldError{Field: field, Msg: "troupe sets its own MCP server " + MCPServerName + ": remove this key"}
				}
				v, err := tomlValue(m[ck])
				if err != nil {
					return o, &troupe.FieldError{Field: field, Msg: err.Error()}
				}
				o.config = append(o.config, ck+"="+v)
			}
		default:
			return o, &troupe.FieldError{Field: "codex." + k, Msg: fmt.Sprintf("unknown option: the [agent.codex] table takes only %s and %s", optConfig, optToolTimeout)}
		}
	}
	return o, nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys) // the first bad key, the same every time
	return keys
}

// tomlValue encodes v (as a TOML decoder gives it) as a TOML value for -c:
// strings, integers, floats, booleans, arrays and inline tables.
func tomlValue(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return tomlString(x), nil
	case bool:
		return strconv.FormatBool(x), nil
	case int:
		return strconv.Itoa(x), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case float64:
		if math.IsNaN(x) {
			return "nan", nil
		}
		if math.IsInf(x, 0) {
			if x > 0 {
				return "inf", nil
			}
			return "-inf", nil
		}
		s := strconv.FormatFloat(x, 'g', -1, 64)
		if !strings.ContainsAny(s, ".eEn") {
			s += ".0"
		}
		return s, nil
	case []any:
		parts := make([]string, 0, len(x))
		for _, e := range x {
			s, err := tomlValue(e)
			if err != nil {
				return "", err
			}
			parts = append(parts, s)
		}
		return "[" + strings.Join(parts, ", ") + "]", nil
	case []map[string]any:
		parts := make([]string, 0, len(x))
		for _, e := range x {
			s, err := tomlValue(e)
			if err != nil {
				return "", err
			}
			parts = append(parts, s)
		}
		return "[" + strings.Join(parts, ", ") + "]", nil
	case map[string]any:
		parts := make([]string, 0, len(x))
		for _, k := range sortedKeys(x) {
			s, err := tomlValue(x[k])
			if err != nil {
				return "", err
			}
			parts = append(parts, tomlString(k)+" = "+s)
		}
		return "{" + strings.Join(parts, ", ") + "}", nil
	default:
		return "", fmt.Errorf("a value of type %T cannot be a Codex config override: use a string, number, boolean, array or table", v)
	}
}

// tomlString is s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
