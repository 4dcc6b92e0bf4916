// Package claudetest helps tests drive the real, pinned Claude Code CLI
// offline: it finds the binary (Bin), makes an isolated HOME pre-seeded as
// the CLI wants it (Home), and builds the offline environment that points
// the CLI at a fake model on 127.0.0.1 and keeps it from every other host
// (Env, Setenv). The facts behind it are in docs/engines/claude-code.md
// ("Environment", "Config files", "Driving the real CLI in tests").
//
// It has no goroutines. Who may import: tests only (of internal/engine/claude,
// internal/claudesessions, and the binary tests of cmd/troupe).
package claudetest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/engine/enginetest"
)

// EnvBin names the pinned CLI's path; `make test` sets it.
const EnvBin = "TROUPE_CLAUDE_BIN"

// Bin returns the pinned Claude Code CLI ($TROUPE_CLAUDE_BIN). When it is
// unset or missing the test fails if CI=true and is skipped otherwise.
func Bin(t testing.TB) string {
	t.Helper()
	return enginetest.PinnedCLI(t, EnvBin, "node_modules/.bin/claude of an install of @anthropic-ai/claude-code@2.1.328")
}

// Home makes an isolated HOME for one test, pre-seeded
// (docs/engines/claude-code.md, "Config files") so the CLI never stops at
// onboarding, the API-key dialog or the trust dialog of dirs (each resolved
// through symlinks, as the CLI keys them).
func Home(t testing.TB, dirs ...string) string {
	t.Helper()
	home := filepath.Join(t.TempDir(), "home")
	if err := os.MkdirAll(filepath.Join(home, ".claude"), 0o700); err != nil {
		t.Fatal(err)
	}
	projects := map[string]any{}
	for _, d := range dirs {
		if real, err := filepath.EvalSymlinks(d); err == nil {
			d = real
		}
		projects[d] = map[string]any{"hasTrustDialogAccepted": true}
	}
	seed := map[string]any{
		"hasCompletedOnboarding": true,
		"customApiKeyResponses":  map[string]any{"approved": []string{APIKey}, "rejected": []string{}},
		"projects":               projects,
	}
	write(t, filepath.Join(home, ".claude.json"), seed)
	write(t, filepath.Join(home, ".claude", "settings.json"), map[string]any{"skipDangerousModePermissionPrompt": true})
	return home
}

func write(t testing.TB, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// APIKey is the key the offline environment gives the CLI.
const APIKey = "test"

// Env is the offline environment of a CLI under test, as KEY=VALUE
// entries: HOME, PATH and TERM, the fake model's URL with a test key, and
// the variables that stop every other traffic (docs/engines/claude-code.md,
// "Environment"): no telemetry, no
// auto-update, no plugin marketplace, no retries, IS_SANDBOX (tests run as
// root), and a private CLAUDE_CODE_TMPDIR (its socket folder), short enough
// for a socket path and removed at the end of the test.
func Env(t testing.TB, home, modelURL string) []string {
	t.Helper()
	tmp, err := os.MkdirTemp("", "cc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	return []string{
		"HOME=" + home,
		"PATH=" + os.Getenv("PATH"),
		"TERM=xterm-256color",
		"LANG=C.UTF-8",
		"ANTHROPIC_BASE_URL=" + modelURL,
		"ANTHROPIC_API_KEY=" + APIKey,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_AUTOUPDATER=1",
		"CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL=1",
		"CLAUDE_CODE_MAX_RETRIES=0",
		"IS_SANDBOX=1",
		"CLAUDE_CODE_TMPDIR=" + tmp,
	}
}

// Setenv puts env's variables in the test process's environment with
// t.Setenv (so the test must not be parallel), for code that builds the
// CLI's environment from its own, like the troupe daemon. Variables that
// would reach the real service or another engine are unset.
func Setenv(t *testing.T, env []string) {
	t.Helper()
	for _, k := range []string{"ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_MODEL", "CLAUDE_CONFIG_DIR", "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX", "HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"} {
		t.Setenv(k, "") // restored after the test
		os.Unsetenv(k)
	}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			t.Setenv(k, v)
		}
	}
}
