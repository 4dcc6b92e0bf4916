// Package codextest helps tests drive the real, pinned Codex CLI offline:
// it finds the binary (Bin) and makes an isolated CODEX_HOME whose
// config.toml points the model provider at a fake model on 127.0.0.1 and
// turns off every other traffic, with the environment that goes with it
// (Env). The facts behind it are in docs/engines/codex-opencode.md
// ("Codex: configuration", "Network", "Driving the real CLIs in tests").
//
// It has no goroutines. Who may import: tests only.
package codextest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/engine/enginetest"
)

// EnvBin names the pinned CLI's path; `make test` sets it.
const EnvBin = "TROUPE_CODEX_BIN"

// Bin returns the pinned Codex CLI ($TROUPE_CODEX_BIN). When it is unset or
// missing the test fails if CI=true and is skipped otherwise.
func Bin(t testing.TB) string {
	t.Helper()
	return enginetest.PinnedCLI(t, EnvBin, "the native binary of an install of @openai/codex@0.171.0")
}

// APIKey is the key the offline environment gives the CLI.
const APIKey = "test"

// Config is the config.toml of a test's CODEX_HOME for a fake model at
// modelURL (no /v1): the provider "fake" (Responses API, no retries, so a
// failing model fails the turn at once), no approvals and no sandbox, no
// analytics, plugins or update checks (no other host is
// reached: docs/engines/codex-opencode.md, "Network").
func Config(modelURL string) string {
	return `model = "fake-model"
model_provider = "fake"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[model_providers.fake]
name = "Fake"
base_url = "` + strings.TrimSuffix(modelURL, "/") + `/v1"
wire_api = "responses"
env_key = "OPENAI_API_KEY"
request_max_retries = 0
stream_max_retries = 0
stream_idle_timeout_ms = 600000

[analytics]
enabled = false

[features]
plugins = false
`
}

// Home makes an isolated HOME with a CODEX_HOME (HOME/.codex) holding
// Config(modelURL), and returns HOME and CODEX_HOME.
func Home(t testing.TB, modelURL string) (home, codexHome string) {
	t.Helper()
	home = filepath.Join(t.TempDir(), "home")
	codexHome = filepath.Join(home, ".codex")
	if err := os.MkdirAll(codexHome, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(Config(modelURL)), 0o600); err != nil {
		t.Fatal(err)
	}
	return home, codexHome
}

// Env is the offline environment of a CLI under test, as KEY=VALUE
// entries: HOME, CODEX_HOME, PATH, a locale, the fake provider's key, and a
// TMPDIR that is not /tmp (Codex refuses to make its helper links there).
func Env(t testing.TB, home, codexHome string) []string {
	t.Helper()
	tmp := filepath.Join(home, "tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	return []string{
		"HOME=" + home,
		"CODEX_HOME=" + codexHome,
		"PATH=" + os.Getenv("PATH"),
		"LANG=C.UTF-8",
		"TMPDIR=" + tmp,
		"OPENAI_API_KEY=" + APIKey,
	}
}
