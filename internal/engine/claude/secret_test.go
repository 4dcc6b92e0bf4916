package claude

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// TestCLIMCPTokenNotInEnvironOrCmdline: the live Claude Code process (and
// every process under it) has the MCP token neither in its environment nor
// on its command line, which other processes of the user can read in
// /proc; it gets it from the 0600 --mcp-config file, and uses it.
func TestCLIMCPTokenNotInEnvironOrCmdline(t *testing.T) {
	r := newRig(t)
	m := newFakeMCP(t)
	const tok = "trp_fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
	s := r.start(t, troupe.AgentSpec{}, engine.StartSpec{MCP: engine.MCPAccess{URL: m.URL, Token: tok}})
	if _, end := drive.RunTurn(t, s, "t1", "hello"); end.Error != "" {
		t.Fatalf("turn: %+v", end)
	}
	pids := descendants(s.PID())
	for _, pid := range pids {
		for _, f := range []string{"environ", "cmdline"} {
			b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/" + f)
			if err != nil {
				continue // exited meanwhile
			}
			if strings.Contains(string(b), tok[4:]) {
				t.Errorf("/proc/%d/%s holds the MCP token", pid, f)
			}
		}
	}
	if got := m.Auth(); got != "Bearer "+tok {
		t.Errorf("the CLI reached the MCP endpoint with %q, want the session's token", got)
	}
	t.Logf("checked %d processes", len(pids))
}

// descendants returns pid and every process under it.
func descendants(pid int) []int {
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(out[i]) + "/task")
		for _, task := range tasks {
			b, _ := os.ReadFile("/proc/" + strconv.Itoa(out[i]) + "/task/" + task.Name() + "/children")
			for _, f := range strings.Fields(string(b)) {
				if c, err := strconv.Atoi(f); err == nil {
					out = append(out, c)
				}
			}
		}
	}
	return out
}
