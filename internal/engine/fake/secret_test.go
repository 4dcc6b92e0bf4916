package fake

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/engine"
)

// TestMCPTokenNotInEnvironOrCmdline: the session's MCP token reaches the
// child (it can say it) through its stdin, never through what other
// processes of the user can read: /proc/<pid>/environ and cmdline.
func TestMCPTokenNotInEnvironOrCmdline(t *testing.T) {
	t.Parallel()
	const tok = "trp_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	s := startAgent(t, Options{}, engine.StartSpec{MCP: engine.MCPAccess{URL: "http://127.0.0.1:1/mcp", Token: tok}})
	if _, end := turn(t, s, "t1", "!token"); end.Text != tok {
		t.Fatalf("the child's token: %q, want %q", end.Text, tok)
	}
	for _, f := range []string{"environ", "cmdline"} {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(s.PID()) + "/" + f)
		if err != nil {
			t.Fatalf("read %s of the live child: %v", f, err)
		}
		if strings.Contains(string(b), tok) || strings.Contains(string(b), tok[4:]) {
			t.Errorf("/proc/<pid>/%s of the child holds the MCP token", f)
		}
		if f == "environ" && !strings.Contains(string(b), EnvMCPURL+"=http://127.0.0.1:1/mcp") {
			t.Errorf("environ lacks %s: the test reads the wrong process", EnvMCPURL)
		}
	}
}
