package claude

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/troupe-dev/troupe/internal/sandbox"
)

// TestMain lets the test binary be the Landlock mechanism's helper
// (TROUPE_SANDBOX=landlock): it re-runs itself as `sandbox-exec`.
func TestMain(m *testing.M) {
	sandbox.MaybeRunHelper()
	os.Exit(m.Run())
}

// sandboxed is the policy troupe's daemon gives the rig's agent
// (sandbox.Build, as internal/daemon does): its folder writable, HOME's
// Claude Code state writable and the rest of HOME read-only, a state dir
// hidden, a private temporary folder and troupe's private folder for the
// agent; on the mechanism Detect finds (TROUPE_SANDBOX=landlock forces
// Landlock). Without one the test fails under CI=true, else runs
// unsandboxed (the zero Policy).
func (r *rig) sandboxed(t *testing.T) sandbox.Policy {
	t.Helper()
	if d := sandbox.Detect(); d.Mechanism == sandbox.None {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no sandbox mechanism: %s", d.Why)
		}
		t.Logf("no sandbox mechanism (%s): the TUI runs unsandboxed", d.Why)
		return sandbox.Policy{}
	}
	home, _ := lookup(r.env, "HOME")
	state := filepath.Join(t.TempDir(), "state")
	private := filepath.Join(state, "sandbox", "p1", "agent")
	tmp := filepath.Join(private, "tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	return sandbox.Build(sandbox.Inputs{Workspace: r.dir, Project: r.dir, StateDir: state, Home: home,
		Temp: tmp, Private: private, Default: true})
}

// registry is the folder where the rig's TUI keeps its registry files:
// under bubblewrap the agent's own (<Private>/claude-sessions, bound over
// ~/.claude/sessions in its sandbox), else the person's.
func (r *rig) registry(t *testing.T) string {
	t.Helper()
	if r.sb.Enforcer() == sandbox.Bubblewrap {
		return filepath.Join(r.sb.Private, "claude-sessions")
	}
	home, _ := lookup(r.env, "HOME")
	return filepath.Join(home, ".claude", "sessions")
}
