package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/engine/acp/opencodetest"
	"github.com/troupe-dev/troupe/internal/sandbox"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// acpTeam: the pinned OpenCode as any ACP agent (engine = "acp", which
// troupe knows nothing of but its command), sandboxed by default, and the
// same without its sandbox.
const acpTeam = `
[[agent]]
name = "a"
engine = "acp"
command = %[1]q
args = ["acp"]
env = { %[2]s }

[[agent]]
name = "open"
engine = "acp"
command = %[1]q
args = ["acp"]
env = { %[2]s }
sandbox = false
`

// TestAttackSandboxACP: a generic ACP agent's shell (OpenCode's bash tool,
// allowed without asking) tries to read the daemon's token, write the
// team, plant a git hook and change git's config: every one refused,
// under bubblewrap and under Landlock. Unsandboxed, the same agent reads
// the token: the attack is real.
func TestAttackSandboxACP(t *testing.T) {
	for _, m := range []sandbox.Mechanism{sandbox.Bubblewrap, sandbox.Landlock} {
		t.Run(string(m), func(t *testing.T) { testAttackSandboxACP(t, m) })
	}
}

func testAttackSandboxACP(t *testing.T, mechanism sandbox.Mechanism) {
	needMechanism(t, mechanism)
	bin := opencodetest.Bin(t)
	model := startModel(t)
	state, proj := t.TempDir(), filepath.Join(t.TempDir(), "app")
	env := append(opencodetest.Env(t, model.URL(), map[string]any{"bash": "allow"}), sandbox.MechanismEnv+"="+string(mechanism))
	// troupe passes an ACP agent only the usual variables (XDG_ among
	// them): OpenCode's own go in its team's env table. Its state folders
	// exist, as after a first run of it: in the sandbox HOME is read-only
	// and a missing folder cannot be made (sandbox.EngineState names
	// OpenCode's, writable).
	var agentEnv []string
	home := ""
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "OPENCODE_") || strings.HasPrefix(k, "npm_config_") {
			agentEnv = append(agentEnv, fmt.Sprintf("%s = %q", k, v))
		}
		if k == "HOME" {
			home = v
			for _, d := range []string{".config/opencode", ".local/share/opencode", ".local/state/opencode", ".cache/opencode"} {
				if err := os.MkdirAll(filepath.Join(v, d), 0o700); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	writeTeam(t, proj, fmt.Sprintf(acpTeam, bin, strings.Join(agentEnv, ", ")))
	for name, body := range map[string]string{".git/config": "[core]\n", ".git/hooks/README": "hooks"} {
		os.MkdirAll(filepath.Dir(filepath.Join(proj, name)), 0o755)
		if err := os.WriteFile(filepath.Join(proj, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctx, _, cl, p := serveProject(t, state, proj, env, 3*time.Minute)
	tok, err := os.ReadFile(filepath.Join(state, "token"))
	if err != nil {
		t.Fatal(err)
	}
	as := []attack{
		{"read the token", "grep -q . " + filepath.Join(state, "token")},
		{"write the team", "echo '# pwned' >> .troupe/team.toml"},
		{"plant a hook", "echo 'echo pwned' > .git/hooks/x"},
		{"write git config", "printf '[core]\\nhooksPath=/x\\n' >> .git/config"},
	}
	if mechanism == sandbox.Bubblewrap {
		// The person's own OpenCode loads its plugins from its config
		// folder (read-only there under bubblewrap alone: sandbox.Policy.Whole).
		as = append(as, attack{"plant an OpenCode plugin", "mkdir -p " + home + "/.config/opencode/plugin && echo 'export default 1' > " + home + "/.config/opencode/plugin/x.js"})
	}
	if err := os.WriteFile(filepath.Join(proj, "attacks.sh"), []byte(script(as)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ask := func(agent troupe.AgentID, cmd string) string {
		t.Helper()
		b, _ := json.Marshal(map[string]string{"command": cmd, "description": "attacks"})
		req, err := cl.Ask(ctx, p.ID, agent, "[[tool:bash "+string(b)+"]]", 0)
		if err != nil {
			t.Fatalf("ask %s: %v", agent, err)
		}
		if req.State != troupe.ReqAnswered {
			t.Fatalf("ask %s = %s: %s", agent, req.State, req.Error)
		}
		return req.Answer
	}
	out := ask("a", "sh attacks.sh")
	if !strings.Contains(out, "attacks done") {
		t.Fatalf("the attacks did not run: %q", out)
	}
	for i, a := range as {
		if strings.Contains(out, fmt.Sprintf("ESCAPED:%d", i)) {
			t.Errorf("acp agent: %s: got out of the sandbox", a.name)
		}
	}
	team, _ := os.ReadFile(filepath.Join(proj, ".troupe", "team.toml"))
	config, _ := os.ReadFile(filepath.Join(proj, ".git", "config"))
	if strings.Contains(string(team)+string(config), "pwned") || strings.Contains(string(config), "hooksPath") || strings.Contains(out, strings.TrimSpace(string(tok))) {
		t.Errorf("the team file or git config changed, or the token shows:\n%s\n%s", team, config)
	}
	if _, err := os.Stat(filepath.Join(proj, ".git", "hooks", "x")); err == nil {
		t.Errorf("a hook was planted")
	}
	agents, err := cl.Agents(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range agents {
		if a.Sandboxed != (a.Name == "a") {
			t.Errorf("agent %s: sandboxed %v", a.Name, a.Sandboxed)
		}
	}
	// Unsandboxed, the same read gets out.
	if out := ask("open", "sh -c "+shellQuote(script(as[:1]))); !strings.Contains(out, "ESCAPED:0") {
		t.Errorf("unsandboxed acp agent: the token read was refused: the attack proves nothing (%q)", out)
	}
}

// shellQuote quotes s for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
