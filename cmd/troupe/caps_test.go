package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/cgroup"
	"github.com/troupe-dev/troupe/internal/client"
	"github.com/troupe-dev/troupe/internal/fakemodel"
	"github.com/troupe-dev/troupe/internal/sandbox"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// The agents' resource caps (issue 20): a sandboxed agent's command that
// allocates beyond its memory cap is killed by the OOM killer and said so,
// a fork loop stops at its process cap, and two projects' agents of one
// name get two cgroups (C1).

const capsTeam = `
[[agent]]
name = "f"
engine = "fake"
allowed_tools = ["run_in_background", "Bash"]
[agent.sandbox]
memory = "128MiB"
processes = 64

[[agent]]
name = "o"
engine = "openai"
model = "fake-coder"
permission_mode = "bypassPermissions"
turn_timeout = "2m"
[agent.openai]
base_url = %q
api_key_env = "TROUPE_TEST_OPENAI_KEY"
[agent.sandbox]
memory = "128MiB"
`

func TestAgentCaps(t *testing.T) {
	if r := cgroup.Probe(); !r.Memory || !r.Processes {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI's machine gives memory and process caps: %s", r.Text())
		}
		t.Skipf("no caps here: %s", r.Text())
	}
	if sandbox.Detect().Mechanism == sandbox.None {
		t.Skip("no sandbox mechanism here")
	}
	model := fakemodel.New(fakemodel.Options{})
	if err := model.Start(""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { model.Close() })
	state, home := t.TempDir(), t.TempDir()
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	team := fmt.Sprintf(capsTeam, model.URL()+"/v1")
	writeTeam(t, a, team)
	writeTeam(t, b, team)
	env := append(os.Environ(), "HOME="+home, "TROUPE_TEST_OPENAI_KEY="+openaiKey)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	d := startDaemonEnv(t, state, env, "--project", a, "--project", b)
	t.Cleanup(func() {
		d.stop(syscall.SIGTERM)
		waitNoProcessIn(t, a)
		waitNoProcessIn(t, b)
	})
	cl, err := client.FromStateDir(state)
	if err != nil {
		t.Fatal(err)
	}
	ra, err := cl.ResolveProject(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := cl.ResolveProject(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	pa, pb := ra.ID, rb.ID
	ask := func(p troupe.ProjectID, agent troupe.AgentID, text string) string {
		t.Helper()
		req, err := cl.Ask(ctx, p, agent, text, 0)
		if err != nil {
			t.Fatalf("ask %s: %v", agent, err)
		}
		if req.State != troupe.ReqAnswered {
			t.Fatalf("ask %s %q = %s: %s", agent, text, req.State, req.Error)
		}
		return req.Answer
	}
	lastTask := func(p troupe.ProjectID, agent troupe.AgentID, n int) (reason, output string) {
		t.Helper()
		waitTaskMessages(t, ctx, cl, p, agent, n)
		ts, err := cl.Tasks(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range ts {
			if x.Owner == agent {
				reason = x.Reason
				output, _ = cl.TaskOutput(ctx, p, x.ID, 1<<20)
			}
		}
		return reason, output
	}
	// A buffer of 300 MB, filled at once: beyond the 128 MiB cap.
	const hog = "dd if=/dev/zero of=/dev/null bs=300M count=1"

	// The agents say their caps.
	as, err := cl.Agents(ctx, pa)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range as {
		if x.Caps == nil || !x.Caps.InForce || x.Caps.Memory != "128MiB" {
			t.Errorf("agent %s: caps %+v, want 128MiB in force", x.Name, x.Caps)
		}
	}

	// Two projects, one agent name: two cgroups, each its project's.
	cgOf := func(p troupe.ProjectID) string {
		out := ask(p, "f", "!sh cat /proc/self/cgroup")
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, ":memory:") || strings.HasPrefix(l, "0::") && strings.Contains(l, "agent-") {
				if !strings.Contains(l, "project-"+string(p)+"/agent-f") {
					t.Errorf("agent f of %s runs in %q", p, l)
				}
				return l
			}
		}
		t.Fatalf("no cgroup of f in %q", out)
		return ""
	}
	ca, cb := cgOf(pa), cgOf(pb)
	if ca == cb {
		t.Errorf("two projects' agents f share the cgroup %s", ca)
	}
	// f's pids.max, as the cgroup file says it.
	var pidsMax string
	for _, l := range strings.Split(ask(pa, "f", "!sh cat /proc/self/cgroup"), "\n") {
		if parts := strings.SplitN(l, ":", 3); len(parts) == 3 && (parts[1] == "pids" || parts[0] == "0" && strings.Contains(parts[2], "agent-f")) {
			for _, root := range []string{"/sys/fs/cgroup/pids", "/sys/fs/cgroup"} {
				if _, err := os.Stat(filepath.Join(root, parts[2], "pids.max")); err == nil {
					pidsMax = filepath.Join(root, parts[2], "pids.max")
				}
			}
		}
	}
	capIs := func() string {
		b, _ := os.ReadFile(pidsMax)
		return strings.TrimSpace(string(b))
	}
	if got := capIs(); got != "64" {
		t.Errorf("f's pids.max (%s) is %q, want 64", pidsMax, got)
	}

	// Memory: the fake agent's own command (its log says why it died),
	// its background task, and the openai agent's run_command.
	ask(pa, "f", "!sh "+hog)
	lg, err := cl.AgentLog(ctx, pa, "f", "", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(lg); !strings.Contains(string(b), "out of memory: the OOM killer killed 1 of the agent's processes") {
		t.Errorf("f's log does not say its command died at its memory cap: %s", b)
	}
	ask(pa, "f", "!bg "+hog)
	if reason, out := lastTask(pa, "f", 1); !strings.Contains(reason, "out of memory") || !strings.Contains(reason, "sandbox.memory") {
		t.Errorf("task over its memory cap: reason %q, output %q; want out of memory, naming sandbox.memory", reason, out)
	}
	cmd, _ := json.Marshal(hog)
	if got := ask(pa, "o", `[[tool:run_command {"command":`+string(cmd)+`}]]`); !strings.Contains(got, "out of memory") {
		t.Errorf("run_command over its memory cap: %q, want out of memory", got)
	}
	// Under the cap all goes well.
	if got := ask(pa, "o", `[[tool:run_command {"command":"dd if=/dev/zero of=/dev/null bs=1M count=1 2>&1"}]]`); !strings.Contains(got, "1048576 bytes") {
		t.Errorf("run_command under its cap: %q", got)
	}

	// Processes: a loop that forks sleepers stops at the cap (64,
	// threads of the agent's own process included).
	ask(pb, "f", `!bg i=0; while [ $i -lt 1000 ]; do sleep 3 & i=$((i+1)); echo $i; done`)
	_, out := lastTask(pb, "f", 1)
	lines := strings.Fields(out)
	n := 0
	for _, l := range lines {
		if v, err := strconv.Atoi(l); err == nil {
			n = v
		}
	}
	if n == 0 || n >= 64 {
		t.Errorf("the fork loop started %d sleepers under a cap of 64 (output %q)", n, out)
	}

	// Shown: troupe agents and doctor.
	if out := mustTroupe(t, state, a, "agents"); !strings.Contains(out, "on, memory 128MiB, processes 64") {
		t.Errorf("troupe agents does not show f's caps:\n%s", out)
	}
	if out := mustTroupe(t, state, a, "doctor"); !strings.Contains(out, "caps on (cgroup") {
		t.Errorf("troupe doctor does not say the caps are on:\n%s", out)
	}

	// Raising a cap waits for the person (C17); lowering applies at once.
	procsOf := func() string {
		as, err := cl.Agents(ctx, pa)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range as {
			if x.Name == "f" && x.Caps != nil {
				return x.Caps.Processes
			}
		}
		return ""
	}
	// until polls: what it waits for includes the kernel's cgroup files,
	// which no event announces (a wait bounded at 30 s, not a pace).
	until := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !ok(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no %s within 30 s", what)
			}
		}
	}
	writeTeam(t, a, strings.Replace(team, "processes = 64", "processes = 10000", 1))
	var digest string
	until("held change of sandbox.processes", func() bool {
		ps, err := cl.TeamChanges(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			for _, ag := range p.Agents {
				for _, g := range ag.Grants {
					if p.Project == pa && ag.Agent == "f" && g.Field == "sandbox.processes" && g.Old == "64" && g.New == "10000" {
						digest = p.Digest
						return true
					}
				}
			}
		}
		return false
	})
	if got := procsOf(); got != "64" {
		t.Errorf("a raised cap held for approval is in force already: processes %s", got)
	}
	if err := cl.DecideTeam(ctx, pa, digest, true); err != nil {
		t.Fatal(err)
	}
	until("approved cap in force", func() bool { return procsOf() == "10000" && capIs() == "10000" })
	writeTeam(t, a, strings.Replace(team, "processes = 64", "processes = 32", 1))
	until("lowered cap in force without approval", func() bool { return procsOf() == "32" && capIs() == "32" })

	// An agent removed from its team: its cgroup goes (once its session's
	// processes are gone), the other project's f keeps its own.
	dirOf := func(line string) string {
		parts := strings.SplitN(line, ":", 3)
		if parts[1] == "memory" {
			return filepath.Join("/sys/fs/cgroup/memory", parts[2])
		}
		return filepath.Join("/sys/fs/cgroup", parts[2])
	}
	if _, err := os.Stat(dirOf(cb)); err != nil {
		t.Fatalf("f's cgroup in b: %v", err)
	}
	writeTeam(t, b, team[strings.Index(team, "[[agent]]\nname = \"o\""):])
	until("the cgroup of f, removed from b's team, gone", func() bool {
		_, err := os.Stat(dirOf(cb))
		return os.IsNotExist(err)
	})
	if _, err := os.Stat(dirOf(ca)); err != nil {
		t.Errorf("f's cgroup in a went with b's f: %v", err)
	}
}

// TestAgentCapsOff: where the machine gives no caps (TROUPE_CAPS=off
// stands for it here), agents run without them, and troupe agents and
// doctor say which caps are not in force and why.
func TestAgentCapsOff(t *testing.T) {
	if sandbox.Detect().Mechanism == sandbox.None {
		t.Skip("no sandbox mechanism here")
	}
	state, home, proj := t.TempDir(), t.TempDir(), filepath.Join(t.TempDir(), "a")
	writeTeam(t, proj, "[[agent]]\nname = \"f\"\nengine = \"fake\"\nallowed_tools = [\"Bash\"]\n[agent.sandbox]\nmemory = \"1GiB\"\n")
	t.Setenv(cgroup.OffEnv, "off") // doctor runs in the CLI's process
	env := append(os.Environ(), "HOME="+home)
	ctx, _, cl, p := serveProject(t, state, proj, env, time.Minute)
	req, err := cl.Ask(ctx, p.ID, "f", "!sh cat /proc/self/cgroup", 0)
	if err != nil || req.State != troupe.ReqAnswered || strings.Contains(req.Answer, "agent-f") {
		t.Fatalf("agent without caps: %v %s %q %q, want it answered, in no cgroup of its own", err, req.State, req.Answer, req.Error)
	}
	as, err := cl.Agents(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(as) != 1 || as[0].Caps == nil || as[0].Caps.InForce || !strings.Contains(as[0].Caps.Why, cgroup.OffEnv) || as[0].Caps.Memory != "1GiB" {
		t.Errorf("agents: caps %+v, want 1GiB not in force, with why", as[0].Caps)
	}
	if out := mustTroupe(t, state, proj, "agents"); !strings.Contains(out, "on, caps off") {
		t.Errorf("troupe agents does not say the caps are off:\n%s", out)
	}
	if out := mustTroupe(t, state, proj, "doctor"); !strings.Contains(out, "caps not in force: memory, processes") || !strings.Contains(out, cgroup.OffEnv+"=off") {
		t.Errorf("troupe doctor does not say which caps are off:\n%s", out)
	}
}

// TestAgentCapsLandlock: under the Landlock mechanism the helper joins
// the agent's cgroup itself: the agent's own process, its commands and
// its tasks' jobs run in it.
func TestAgentCapsLandlock(t *testing.T) {
	if r := cgroup.Probe(); !r.Memory || !r.Processes {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI's machine gives memory and process caps: %s", r.Text())
		}
		t.Skipf("no caps here: %s", r.Text())
	}
	if sandbox.Detect().LandlockABI == 0 {
		t.Skip("no Landlock here")
	}
	state, home, proj := t.TempDir(), t.TempDir(), filepath.Join(t.TempDir(), "a")
	writeTeam(t, proj, "[[agent]]\nname = \"f\"\nengine = \"fake\"\nallowed_tools = [\"Bash\", \"run_in_background\"]\n[agent.sandbox]\nprocesses = 100\n")
	env := append(os.Environ(), "HOME="+home, sandbox.MechanismEnv+"=landlock")
	ctx, _, cl, p := serveProject(t, state, proj, env, time.Minute)
	want := "project-" + string(p.ID) + "/agent-f"
	inside := func(who, out string) {
		t.Helper()
		for _, c := range []string{":memory:", ":pids:"} {
			i := strings.Index(out, c)
			if i < 0 || !strings.Contains(strings.SplitN(out[i:], "\n", 2)[0], want) {
				t.Errorf("%s runs outside f's %s cgroup: %q", who, c, out)
			}
		}
	}
	req, err := cl.Ask(ctx, p.ID, "f", "!sh cat /proc/self/cgroup", 0)
	if err != nil || req.State != troupe.ReqAnswered {
		t.Fatalf("ask: %v %s %s", err, req.State, req.Error)
	}
	inside("the agent's command", req.Answer)
	if _, err := cl.Ask(ctx, p.ID, "f", "!bg cat /proc/self/cgroup", 0); err != nil {
		t.Fatal(err)
	}
	waitTaskMessages(t, ctx, cl, p.ID, "f", 1)
	ts, err := cl.Tasks(ctx, p.ID)
	if err != nil || len(ts) != 1 {
		t.Fatalf("tasks %v %v", ts, err)
	}
	out, err := cl.TaskOutput(ctx, p.ID, ts[0].ID, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	inside("the agent's task", out)
}
