package main

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/client"
	"github.com/troupe-dev/troupe/internal/sandbox"
)

// TestBinaryDemoAgentsRunSandboxed: the demo `make run` serves
// (examples/demo, with the mechanism this machine's Detect picks, as make
// run has it) starts its agents inside the sandbox: each agent's process
// is in a pid and mount namespace of its own where the state dir's token
// does not exist (bubblewrap), or runs with no_new_privs set, which
// Landlock's helper sets before it restricts itself (Landlock). A control
// agent added with sandbox = false is seen unsandboxed by the same check,
// and troupe agents --json says the same of each.
func TestBinaryDemoAgentsRunSandboxed(t *testing.T) {
	r := sandbox.Detect()
	if r.Mechanism == sandbox.None {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the demo runs sandboxed and needs bubblewrap (apt-get install bubblewrap): %s", r.Why)
		}
		t.Skipf("no sandbox mechanism here: %s", r.Why)
	}
	state, demo := t.TempDir(), filepath.Join(t.TempDir(), "demo")
	copyDir(t, "../../examples/demo", demo)
	team, err := os.ReadFile(filepath.Join(demo, ".troupe", "team.toml"))
	if err != nil {
		t.Fatal(err)
	}
	writeTeam(t, demo, string(team)+"\n[[agent]]\nname = \"open\"\nengine = \"fake\"\nsandbox = false\n")
	d := startDaemon(t, state, "--project", demo)
	daemonPid := d.cmd.Process.Pid

	// Each session started in turn, its process told apart from those
	// already up.
	seen := map[int]bool{}
	started := func() []int {
		var out []int
		for _, pid := range fakeAgentProcs(t, daemonPid) {
			if !seen[pid] {
				seen[pid] = true
				out = append(out, pid)
			}
		}
		return out
	}
	mustTroupe(t, state, demo, "ask", "open", "hi")
	open := started()
	// The demo's own ask: the lead asks the researcher, both sessions up.
	mustTroupe(t, state, demo, "ask", "lead", "is the sky blue?")
	demoProcs := started()
	if len(open) != 1 || len(demoProcs) != 2 {
		t.Fatalf("fake agent processes: %v for the control agent, %v for the demo's lead and researcher; want 1 and 2", open, demoProcs)
	}
	token := filepath.Join(state, "token")
	for _, pid := range demoProcs {
		if ok, why := inSandbox(t, r.Mechanism, daemonPid, pid, token); !ok {
			t.Errorf("a demo agent's process %d is not in its sandbox: %s", pid, why)
		}
	}
	if ok, why := inSandbox(t, r.Mechanism, daemonPid, open[0], token); ok {
		t.Errorf("the control agent (sandbox = false) was seen sandboxed (%s): the check proves nothing", why)
	}

	var as []api.Agent
	if err := listJSON(mustTroupe(t, state, demo, "agents", "--json"), "agents", &as); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, a := range as {
		got[string(a.Name)] = a.Sandboxed
	}
	if want := map[string]bool{"lead": true, "researcher": true, "open": false}; !maps.Equal(got, want) {
		t.Errorf("troupe agents --json sandboxed = %v, want %v", got, want)
	}
	// The lead's background job ends before the daemon stops.
	cl, err := client.FromStateDir(state)
	if err != nil {
		t.Fatal(err)
	}
	p, err := cl.ResolveProject(t.Context(), demo)
	if err != nil {
		t.Fatal(err)
	}
	waitTaskMessages(t, t.Context(), cl, p.ID, "lead", 1)
}

// fakeAgentProcs are the descendants of pid running `troupe fake-agent`
// (not the bubblewrap process around one), sorted; /proc read once.
func fakeAgentProcs(t testing.TB, pid int) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	kids := map[int][]int{}
	for _, e := range entries {
		var self, ppid int
		if _, err := fmt.Sscan(e.Name(), &self); err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		fmt.Sscan(strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))[1], &ppid)
		kids[ppid] = append(kids[ppid], self)
	}
	var out []int
	var walk func(int)
	walk = func(p int) {
		for _, kid := range kids[p] {
			raw, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", kid))
			args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
			if len(args) == 2 && args[1] == "fake-agent" {
				out = append(out, kid)
			}
			walk(kid)
		}
	}
	walk(pid)
	slices.Sort(out)
	return out
}

// inSandbox says whether process pid, a child of the daemon's, shows the
// marks of mechanism m, and why not.
func inSandbox(t testing.TB, m sandbox.Mechanism, daemonPid, pid int, token string) (bool, string) {
	t.Helper()
	switch m {
	case sandbox.Bubblewrap:
		for _, ns := range []string{"pid", "mnt"} {
			mine, err1 := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", pid, ns))
			its, err2 := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", daemonPid, ns))
			if err1 != nil || err2 != nil {
				t.Fatalf("read %s namespaces: %v %v", ns, err1, err2)
			}
			if mine == its {
				return false, "the daemon's " + ns + " namespace " + its
			}
		}
		// Its view of the files, through its root: the token is hidden.
		if _, err := os.Stat(fmt.Sprintf("/proc/%d/root%s", pid, token)); err == nil {
			return false, "it sees " + token
		}
		return true, "own pid and mount namespaces, no token"
	case sandbox.Landlock:
		if v := statusField(t, pid, "NoNewPrivs:"); v != 1 {
			return false, "no_new_privs not set"
		}
		return true, "no_new_privs set"
	}
	t.Fatalf("mechanism %q", m)
	return false, ""
}
