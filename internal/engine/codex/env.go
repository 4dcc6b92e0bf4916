package codex

import (
	"slices"
	"strings"

	"github.com/troupe-dev/troupe/internal/proc"
)

// passedVars are the daemon's variables a Codex child gets by name: the
// person's session (home, user, shell, locale, terminal), their proxy and
// certificates, and Codex's logging.
var passedVars = []string{
	"HOME", "USER", "LOGNAME", "SHELL", "PATH", "LANG", "TERM", "TMPDIR", "TZ",
	"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "no_proxy", "all_proxy",
	"SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS",
	"RUST_LOG",
}

// passedPrefixes are the prefixes of the daemon's variables a Codex child
// gets: its login and settings (OPENAI_*, CODEX_*, which covers CODEX_HOME
// and CODEX_API_KEY, AZURE_OPENAI_* for an Azure provider), locale and XDG
// dirs. Never another engine's keys (ANTHROPIC_*, CLAUDE_*, ...). A custom
// provider's env_key with another name is given through the agent's env.
var passedPrefixes = []string{"OPENAI_", "CODEX_", "AZURE_OPENAI_", "LC_", "XDG_"}

// envToken is the variable of the child's environment that carries the
// session's MCP bearer token (bearer_token_env_var).
const envToken = "TROUPE_MCP_TOKEN"

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
// the MCP token when there is one (always troupe's, whatever the sources
// said).
func childEnv(environ []string, agentEnv map[string]string, token string) []string {
	var extra []string
	for _, kv := range environ {
		if k, _, ok := strings.Cut(kv, "="); ok && passed(k) && k != envToken {
			extra = append(extra, kv)
		}
	}
	for k, v := range agentEnv {
		if k != envToken {
			extra = append(extra, k+"="+v)
		}
	}
	if token != "" {
		extra = append(extra, envToken+"="+token)
	}
	return proc.Env(nil, nil, extra...)
}
