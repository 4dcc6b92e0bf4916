package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/engine/codex/codextest"
	"github.com/troupe-dev/troupe/internal/sandbox"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// TestAttackSandboxClaudeAndCodexShells (C16): the pinned Claude Code's
// Bash tool and Codex's exec_command, run on the fake model with every
// command allowed, try to read the daemon's token, write the team file,
// plant a git hook and change git's config, and read HOME's ssh key:
// every one refused by troupe's sandbox (their own sandboxes are off in
// it). OpenCode's shell is held to the same by TestAttackSandboxACP.
func TestAttackSandboxClaudeAndCodexShells(t *testing.T) {
	if r := sandbox.Detect(); r.Mechanism == sandbox.None {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the sandbox needs bubblewrap (apt-get install bubblewrap): %s", r.Why)
		}
		t.Skipf("no sandbox here: %s", r.Why)
	}
	for _, c := range shellCLIs() {
		t.Run(c.name, func(t *testing.T) {
			r := c.rig(t)
			home := ""
			for _, kv := range r.env {
				if v, ok := strings.CutPrefix(kv, "HOME="); ok {
					home = v
				}
			}
			for name, body := range map[string]string{
				filepath.Join(r.proj, ".git", "config"):          "[core]\n",
				filepath.Join(r.proj, ".git", "hooks", "README"): "hooks",
				filepath.Join(home, ".ssh", "id_x"):              "SSH-PRIVATE-KEY",
			} {
				os.MkdirAll(filepath.Dir(name), 0o755)
				if err := os.WriteFile(name, []byte(body), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			as := []attack{
				{"read the token", "grep -q . " + filepath.Join(r.state, "token")},
				{"write the team", "echo '# pwned' >> .troupe/team.toml"},
				{"plant a hook", "echo 'echo pwned' > .git/hooks/pre-commit"},
				{"write git config", "printf '[core]\\nhooksPath=/x\\n' >> .git/config"},
				{"read ssh", "grep -q KEY " + filepath.Join(home, ".ssh", "id_x")},
				// Commands the person's own, unsandboxed CLIs would run.
				{"plant an MCP server for Claude", "echo '{\"mcpServers\":{}}' > " + filepath.Join(home, ".claude.json")},
				{"plant a hook for Claude", "echo '{\"hooks\":{}}' > " + filepath.Join(home, ".claude", "settings.json")},
				{"plant a notify command for Codex", "echo 'notify = [\"x\"]' >> " + filepath.Join(home, ".codex", "config.toml")},
			}
			if err := os.WriteFile(filepath.Join(r.proj, "attacks.sh"), []byte(script(as)+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			req := r.ask("x", c.call("sh attacks.sh"))
			if req.State != troupe.ReqAnswered || !strings.Contains(req.Answer, "attacks done") {
				t.Fatalf("the attacks did not run: %s %q %s", req.State, req.Answer, req.Error)
			}
			for i, a := range as {
				if strings.Contains(req.Answer, fmt.Sprintf("ESCAPED:%d", i)) {
					t.Errorf("%s: %s: got out of the sandbox", c.name, a.name)
				}
			}
			tok, _ := os.ReadFile(filepath.Join(r.state, "token"))
			team, _ := os.ReadFile(filepath.Join(r.proj, ".troupe", "team.toml"))
			config, _ := os.ReadFile(filepath.Join(r.proj, ".git", "config"))
			if strings.Contains(string(team)+string(config), "pwned") || strings.Contains(string(config), "hooksPath") ||
				strings.Contains(req.Answer, strings.TrimSpace(string(tok))) {
				t.Errorf("the team file or git config changed, or the token shows:\n%s\n%s", team, config)
			}
			if _, err := os.Stat(filepath.Join(r.proj, ".git", "hooks", "pre-commit")); err == nil {
				t.Error("a hook was planted")
			}
		})
	}
}

// shellCLI is a real CLI whose shell tool the fake model can call: a
// daemon rig with one agent of it allowed every command, and the model's
// script that runs a command through that tool.
type shellCLI struct {
	name string
	rig  func(t *testing.T) *claudeRig
	call func(cmd string) string
}

// shellCLIs are the pinned Claude Code (Bash) and Codex (exec_command).
func shellCLIs() []shellCLI {
	return []shellCLI{
		{"claude", func(t *testing.T) *claudeRig {
			return newClaudeRigWith(t, func(bin string) string {
				return fmt.Sprintf("[[agent]]\nname = \"x\"\nengine = \"claude\"\ncommand = %q\npermission_mode = \"bypassPermissions\"\n", bin)
			})
		}, func(cmd string) string {
			b, _ := json.Marshal(map[string]string{"command": cmd, "description": "a command"})
			return "[[tool:Bash " + string(b) + "]]"
		}},
		{"codex", func(t *testing.T) *claudeRig { return newEngineRig(t, "codex", codextest.Bin(t), "2m") },
			func(cmd string) string {
				b, _ := json.Marshal(map[string]string{"cmd": cmd})
				return "[[tool:exec_command " + string(b) + "]]"
			}},
	}
}
