// Package opencodetest helps tests drive the real, pinned OpenCode CLI
// offline over ACP: it finds the binary (Bin) and builds an isolated HOME
// with XDG dirs, a config that points OpenCode at a fake model's
// OpenAI-compatible /v1 as its only provider, and the offline environment
// (Env). The facts behind it are in docs/engines/codex-opencode.md
// ("OpenCode: configuration", "Network", "Driving the real CLIs in tests").
//
// It has no goroutines. Who may import: tests only.
package opencodetest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/troupe-dev/troupe/internal/engine/enginetest"
)

// EnvBin names the pinned CLI's path; `make test` sets it.
const EnvBin = "TROUPE_OPENCODE_BIN"

// Bin returns the pinned OpenCode CLI ($TROUPE_OPENCODE_BIN). When it is
// unset or missing the test fails if CI=true and is skipped otherwise.
func Bin(t testing.TB) string {
	t.Helper()
	return enginetest.PinnedCLI(t, EnvBin, "opencode-linux-x64/bin/opencode of an install of opencode-ai@1.18.33")
}

// Model is the model id the config gives OpenCode: the fake provider's.
const Model = "fake/fake-model"

// Config is OpenCode's config for a test: the fake model at modelURL (the
// fake's base URL, without /v1) as an OpenAI-compatible provider, no
// autoupdate, no sharing, and permission (nil: OpenCode's defaults, e.g.
// {"bash":"ask"}).
func Config(modelURL string, permission map[string]any) map[string]any {
	c := map[string]any{
		"$schema":     "https://opencode.ai/config.json",
		"model":       Model,
		"small_model": Model,
		"autoupdate":  false,
		"share":       "disabled",
		"provider": map[string]any{"fake": map[string]any{
			"npm":     "@ai-sdk/openai-compatible",
			"name":    "Fake",
			"options": map[string]any{"baseURL": modelURL + "/v1", "apiKey": "sk-fake"},
			"models": map[string]any{"fake-model": map[string]any{
				"name": "Fake Model", "tool_call": true, "limit": map[string]any{"context": 128000, "output": 4096},
			}},
		}},
	}
	if permission != nil {
		c["permission"] = permission
	}
	return c
}

// Env makes an isolated HOME (with XDG dirs under it) and the config file,
// and returns the offline environment of a CLI under test: 0 DNS lookups
// (docs/engines/codex-opencode.md, "Network"): no models.dev fetch, no
// autoupdate, no LSP download, no default plugins, no sharing, and npm's
// registry on the fake (a 404).
func Env(t testing.TB, modelURL string, permission map[string]any) []string {
	t.Helper()
	home := filepath.Join(t.TempDir(), "home")
	for _, d := range []string{".config", ".local/share", ".local/state", ".cache"} {
		if err := os.MkdirAll(filepath.Join(home, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	b, err := json.Marshal(Config(modelURL, permission))
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(home, "opencode.json")
	if err := os.WriteFile(cfg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{
		"HOME=" + home,
		"PATH=" + os.Getenv("PATH"),
		"LANG=C.UTF-8",
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"XDG_DATA_HOME=" + filepath.Join(home, ".local/share"),
		"XDG_STATE_HOME=" + filepath.Join(home, ".local/state"),
		"XDG_CACHE_HOME=" + filepath.Join(home, ".cache"),
		"OPENCODE_CONFIG=" + cfg,
		"OPENCODE_DISABLE_MODELS_FETCH=1",
		"OPENCODE_DISABLE_AUTOUPDATE=1",
		"OPENCODE_DISABLE_LSP_DOWNLOAD=1",
		"OPENCODE_DISABLE_DEFAULT_PLUGINS=1",
		"OPENCODE_DISABLE_SHARE=1",
		"npm_config_registry=" + modelURL + "/npm/",
	}
}
