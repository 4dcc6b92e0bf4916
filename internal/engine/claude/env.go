package claude

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/troupe-dev/troupe/internal/proc"
)

// passedVars are the daemon's variables a Claude Code child gets by name:
// the person's session (home, user, shell, locale, terminal), their proxy
// and certificates, and the Bedrock/Vertex settings that are not under a
// passed prefix.
var passedVars = []string{
	"HOME", "USER", "LOGNAME", "SHELL", "PATH", "LANG", "TERM", "TMPDIR", "TZ",
	"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "no_proxy", "all_proxy",
	"NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE", "SSL_CERT_DIR",
	"CLOUD_ML_REGION", "GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_PROJECT",
	"IS_SANDBOX",
	// Claude Code settings whose names carry no CLAUDE_ prefix.
	"MAX_THINKING_TOKENS", "MAX_MCP_OUTPUT_TOKENS", "BASH_DEFAULT_TIMEOUT_MS", "BASH_MAX_TIMEOUT_MS",
	"BASH_MAX_OUTPUT_LENGTH", "USE_BUILTIN_RIPGREP", "ENABLE_TOOL_SEARCH",
}

// passedPrefixes are the prefixes of the daemon's variables a Claude Code
// child gets: its login and settings (ANTHROPIC_*, CLAUDE_*, which covers
// CLAUDE_CONFIG_DIR and CLAUDE_CODE_*; proc.Env drops the nested-session
// markers), DISABLE_* and MCP_* knobs, locale, XDG dirs, and AWS for
// Bedrock. Never another engine's keys (OPENAI_*, CODEX_*, ...).
var passedPrefixes = []string{"ANTHROPIC_", "CLAUDE_", "DISABLE_", "MCP_", "LC_", "XDG_", "AWS_"}

// passed reports whether the daemon's variable key goes to the child.
func passed(key string) bool {
	if slices.Contains(passedVars, key) {
		return true
	}
	for _, p := range passedPrefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// childEnv builds the CLI's environment (C11) from environ (the daemon's):
// the variables passed by name or prefix, then the agent's env table, then
// MCP_TOOL_TIMEOUT = limit unless the person set it. The nested-session
// markers never pass (proc.Env).
func childEnv(environ []string, agentEnv map[string]string, limit time.Duration, personSetLimit bool) []string {
	vars := make(map[string]string)
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && passed(k) {
			vars[k] = v
		}
	}
	for k, v := range agentEnv {
		vars[k] = v
	}
	if !personSetLimit {
		vars[envMCPToolTimeout] = strconv.FormatInt(limit.Milliseconds(), 10)
	}
	extra := make([]string, 0, len(vars))
	for k, v := range vars {
		extra = append(extra, k+"="+v)
	}
	return proc.Env(nil, nil, extra...)
}
