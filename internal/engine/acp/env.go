package acp

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/troupe-dev/troupe/internal/proc"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// envRules says which of the daemon's variables an agent's child gets.
type envRules struct {
	vars     []string
	prefixes []string
	opencode bool // add OPENCODE_CONFIG_CONTENT for model and tool_timeout
}

// baseVars are passed to every ACP child: the person's session (home,
// user, shell, locale, terminal), their proxy and certificates.
var baseVars = []string{
	"HOME", "USER", "LOGNAME", "SHELL", "PATH", "LANG", "TERM", "TMPDIR", "TZ",
	"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "no_proxy", "all_proxy",
	"NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE", "SSL_CERT_DIR",
}

// acpEnv: a generic agent gets the base, locale and XDG dirs; anything
// else (its API keys) comes from the agent's env table.
var acpEnv = envRules{vars: baseVars, prefixes: []string{"LC_", "XDG_"}}

// openCodeEnv: OpenCode also gets its own settings (OPENCODE_*, e.g.
// OPENCODE_CONFIG, OPENCODE_DISABLE_*) and the npm config its plugin
// fetcher honours (npm_config_registry). Never a provider's key
// (ANTHROPIC_*, OPENAI_*, ...): those come from the agent's env table or
// OpenCode's own auth file.
var openCodeEnv = envRules{vars: baseVars, prefixes: []string{"LC_", "XDG_", "OPENCODE_", "npm_config_", "NPM_CONFIG_"}, opencode: true}

func (r envRules) passed(key string) bool {
	if slices.Contains(r.vars, key) {
		return true
	}
	for _, p := range r.prefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// envConfigContent is OpenCode's inline config, merged over its files.
const envConfigContent = "OPENCODE_CONFIG_CONTENT"

// build makes the child's environment (C11) from environ (the daemon's):
// the variables passed by name or prefix, then the agent's env table. For
// OpenCode, the agent's model and tool_timeout go in
// OPENCODE_CONFIG_CONTENT ({"model":…, "experimental":{"mcp_timeout":ms}})
// unless the agent's env sets that variable itself.
func (r envRules) build(environ []string, agent troupe.AgentSpec, o options) ([]string, error) {
	vars := make(map[string]string)
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && r.passed(k) {
			vars[k] = v
		}
	}
	for k, v := range agent.Env {
		vars[k] = v
	}
	if _, own := agent.Env[envConfigContent]; r.opencode && !own && (agent.Model != "" || o.toolTimeout > 0) {
		cfg := map[string]any{}
		if agent.Model != "" {
			cfg["model"] = agent.Model
		}
		if o.toolTimeout > 0 {
			cfg["experimental"] = map[string]any{"mcp_timeout": o.toolTimeout.Milliseconds()}
		}
		b, err := json.Marshal(cfg)
		if err != nil {
			return nil, fmt.Errorf("encode opencode config: %w", err)
		}
		vars[envConfigContent] = string(b)
	}
	extra := make([]string, 0, len(vars))
	for k, v := range vars {
		extra = append(extra, k+"="+v)
	}
	return proc.Env(nil, nil, extra...), nil
}
