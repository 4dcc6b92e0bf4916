package main

import (
	"encoding/json"
	"os"
	"strings"
	"syscall"
	"testing"
)

// TestCLIGrammar: the exit codes (0 done, 1 error, 2 usage, 3 stopped
// waiting), a usage line after a usage error, one "troupe:" and no tag
// word at the end of an error, JSON from status --json with no daemon,
// and sessions read without one.
func TestCLIGrammar(t *testing.T) {
	state, proj := t.TempDir(), t.TempDir()
	cli := func(args ...string) (string, string, int) {
		t.Helper()
		return runCLIEnv(t, append(os.Environ(), "HOME="+t.TempDir(), "CLAUDE_CONFIG_DIR="), state, proj, args...)
	}

	// No daemon yet.
	for _, tc := range []struct {
		args  []string
		usage string
	}{
		{[]string{"ask"}, "usage: troupe ask AGENT TEXT..."},
		{[]string{"bogus"}, "usage: troupe COMMAND"},
		{[]string{"agents", "--bogus"}, "usage: troupe agents"},
		{[]string{"memory", "bogus"}, "usage: troupe memory COMMAND"},
		{[]string{"memory", "show"}, "usage: troupe memory show NAME"},
		{[]string{"task", "kill"}, "usage: troupe task kill ID"},
	} {
		_, errOut, code := cli(tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.usage) || !strings.HasPrefix(errOut, "troupe: ") {
			t.Errorf("troupe %s: exit %d, stderr %q; want 2 and %q", strings.Join(tc.args, " "), code, errOut, tc.usage)
		}
	}
	_, errOut, code := cli("agents")
	if code != 1 || strings.Count(errOut, "troupe:") != 1 || !strings.Contains(errOut, "the daemon is not running") || !strings.Contains(errOut, "troupe serve") {
		t.Errorf("agents with no daemon: exit %d, %q", code, errOut)
	}
	out, _, code := cli("status", "--json")
	var st struct {
		Running  bool   `json:"running"`
		StateDir string `json:"state_dir"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || code != 1 || st.Running || st.StateDir != state {
		t.Errorf("status --json with no daemon: exit %d, %v, %q", code, err, out)
	}
	if out, errOut, code := cli("sessions", "--json"); code != 0 || !strings.Contains(out, `"sessions"`) || !strings.Contains(errOut, "the daemon is not running") {
		t.Errorf("sessions with no daemon: exit %d\n%s%s", code, out, errOut)
	}

	writeTeam(t, proj, "[[agent]]\nname = \"dev\"\nengine = \"fake\"\n")
	d := startDaemon(t, state, "--project", proj)
	defer d.stop(syscall.SIGTERM)
	if out, _, code := cli("status", "--json"); code != 0 || !strings.Contains(out, `"running": true`) {
		t.Errorf("status --json: exit %d %q", code, out)
	}
	_, errOut, code = cli("ask", "dev", "--wait", "300ms", "!sleep 2s")
	if code != 3 || !strings.Contains(errOut, "dev has not answered within 300ms") || !strings.Contains(errOut, "troupe inbox dev") {
		t.Errorf("ask --wait that times out: exit %d, %q; want 3", code, errOut)
	}
	out, _, code = cli("ask", "dev", "--wait", "300ms", "--json", "!sleep 2s")
	var req struct{ State string }
	if err := json.Unmarshal([]byte(out), &req); err != nil || code != 3 || req.State != "pending" {
		t.Errorf("ask --wait --json that times out: exit %d, %v, %q", code, err, out)
	}
	if out, _, code := cli("ask", "dev", "hello"); code != 0 || !strings.Contains(out, "hello") {
		t.Errorf("ask answered: exit %d %q", code, out)
	}
	// One fault, the same words whatever the command.
	for _, args := range [][]string{{"log", "nobody"}, {"ask", "nobody", "hi"}, {"send", "nobody", "hi"}, {"task", "run", "--owner", "nobody", "true"},
		{"diff", "nobody"}, {"reset", "nobody"}, {"checkpoints", "nobody"}} {
		_, errOut, code := cli(args...)
		if code != 1 || !strings.Contains(errOut, `no agent named "nobody" in this project: the agents are dev`) {
			t.Errorf("troupe %s: exit %d, %q; want the one wording of an unknown agent", strings.Join(args, " "), code, errOut)
		}
	}
	// An error from the daemon: its sentence, no tag word after it.
	_, errOut, code = cli("allow", "nope")
	if code != 1 || !strings.Contains(errOut, "no permission request nope") || strings.HasSuffix(strings.TrimSpace(errOut), ": not found") {
		t.Errorf("allow of an unknown request: exit %d, %q", code, errOut)
	}
}
