package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/client"
	"github.com/troupe-dev/troupe/internal/sandbox"
	"github.com/troupe-dev/troupe/internal/task"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// The escape suite of the sandbox (issue 20, C16): agents whose every
// permission is granted (a fake agent, which runs shell commands as a CLI
// does, and an openai agent in bypassPermissions on the fake model), and a
// background task of each, and a terminal-mode program (bash on troupe's
// terminal, the generic terminal engine), try to reach what the sandbox keeps out: the
// daemon's token, the team file, git's hooks and config, another
// registered project, HOME's ssh key, the daemon's environment, each also
// through a symbolic link placed in the workspace. Every one is refused.
// An agent with sandbox = false, given the same reads, succeeds: the
// attacks are real.

const sandboxTeam = `
[[agent]]
name = "f"
engine = "fake"
allowed_tools = ["run_in_background", "Bash"]

[[agent]]
name = "o"
engine = "openai"
model = "fake-coder"
permission_mode = "bypassPermissions"
turn_timeout = "2m"

[agent.openai]
base_url = %q
api_key_env = "TROUPE_TEST_OPENAI_KEY"

# A terminal-mode program: bash on troupe's terminal, as a person would
# use it (sandboxed by default, as every engine is).
[[agent]]
name = "sh"
engine = "terminal"
command = "/bin/bash"
args = ["--norc", "--noprofile", "-i"]
env = { PS1 = "sh-ready> " }

[agent.terminal]
idle = "sh-ready>"

[[agent]]
name = "open"
engine = "fake"
allowed_tools = ["Bash"]
sandbox = false
`

// sandboxRig is a daemon with two projects: app (the agents') and other.
type sandboxRig struct {
	t                        *testing.T
	ctx                      context.Context
	state, proj, other, home string
	token                    string
	d                        *daemon
	cl                       *client.Client
	p                        troupe.ProjectID
}

func newSandboxRig(t *testing.T, mechanism sandbox.Mechanism) *sandboxRig {
	t.Helper()
	if r := sandbox.Detect(); mechanism != sandbox.None && (r.Mechanism == sandbox.None || mechanism == sandbox.Bubblewrap && r.Bwrap == "") {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the sandbox needs bubblewrap (apt-get install bubblewrap): %s", r.Why)
		}
		t.Skipf("no %s here: %s", mechanism, r.Why)
	}
	model := startModel(t)
	r := &sandboxRig{t: t, state: t.TempDir(), proj: filepath.Join(t.TempDir(), "app"),
		other: filepath.Join(t.TempDir(), "other"), home: t.TempDir()}
	writeTeam(t, r.proj, fmt.Sprintf(sandboxTeam, model.URL()+"/v1"))
	writeTeam(t, r.other, "[[agent]]\nname = \"x\"\nengine = \"fake\"\n")
	for name, body := range map[string]string{
		filepath.Join(r.other, "secret.txt"):             "OTHER-PROJECT-SECRET",
		filepath.Join(r.home, ".ssh", "id_x"):            "SSH-PRIVATE-KEY",
		filepath.Join(r.proj, ".git", "config"):          "[core]\n",
		filepath.Join(r.proj, ".git", "hooks", "README"): "hooks",
	} {
		os.MkdirAll(filepath.Dir(name), 0o755)
		if err := os.WriteFile(name, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	env := append(os.Environ(), "HOME="+r.home, "TROUPE_TEST_OPENAI_KEY="+openaiKey, sandbox.MechanismEnv+"="+string(mechanism))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	r.ctx = ctx
	r.d = startDaemonEnv(t, r.state, env, "--project", r.proj, "--project", r.other)
	t.Cleanup(func() {
		r.d.stop(syscall.SIGTERM)
		waitNoProcessIn(t, r.proj)
	})
	cl, err := client.FromStateDir(r.state)
	if err != nil {
		t.Fatal(err)
	}
	p, err := cl.ResolveProject(ctx, r.proj)
	if err != nil {
		t.Fatal(err)
	}
	r.cl, r.p = cl, p.ID
	tok, err := os.ReadFile(filepath.Join(r.state, "token"))
	if err != nil {
		t.Fatal(err)
	}
	r.token = strings.TrimSpace(string(tok))
	// The links an agent could have planted in its workspace.
	for link, to := range map[string]string{
		"l-token":   filepath.Join(r.state, "token"),
		"l-team":    filepath.Join(r.proj, ".troupe", "team.toml"),
		"l-hooks":   filepath.Join(r.proj, ".git", "hooks"),
		"l-config":  filepath.Join(r.proj, ".git", "config"),
		"l-other":   filepath.Join(r.other, "secret.txt"),
		"l-ssh":     filepath.Join(r.home, ".ssh", "id_x"),
		"l-environ": fmt.Sprintf("/proc/%d/environ", r.d.cmd.Process.Pid),
	} {
		if err := os.Symlink(to, filepath.Join(r.proj, link)); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// attack is one escape: a shell command that succeeds only if it got out.
type attack struct{ name, cmd string }

func (r *sandboxRig) attacks(mechanism sandbox.Mechanism) []attack {
	environ := fmt.Sprintf("/proc/%d/environ", r.d.cmd.Process.Pid)
	as := []attack{
		{"read the token", "grep -q . " + filepath.Join(r.state, "token")},
		{"write the addr file", "echo 127.0.0.1:1 > " + filepath.Join(r.state, "addr") + " && grep -q 127.0.0.1:1 " + filepath.Join(r.state, "addr")},
		{"write the team", "echo '# pwned' >> .troupe/team.toml"},
		{"plant a hook", "echo 'echo pwned' > .git/hooks/pre-commit"},
		{"write git config", "printf '[core]\\nhooksPath=/x\\n' >> .git/config"},
		{"read another project", "grep -q SECRET " + filepath.Join(r.other, "secret.txt")},
		{"read ssh", "grep -q KEY $HOME/.ssh/id_x"},
		{"read another project through a link", "grep -q SECRET l-other"},
		{"read the token through a link", "grep -q . l-token"},
		{"write the team through a link", "echo '# pwned' >> l-team"},
		{"plant a hook through a link", "echo 'echo pwned' > l-hooks/post-merge"},
		{"write git config through a link", "echo '# pwned' >> l-config"},
		{"read ssh through a link", "grep -q KEY l-ssh"},
	}
	// Landlock does not close another process's /proc entries to root
	// (sandbox.Detect's report says so); bubblewrap's pid namespace does.
	if mechanism == sandbox.Bubblewrap || os.Getuid() != 0 {
		as = append(as, attack{"read the daemon's environment", "grep -qa TROUPE_TEST_OPENAI_KEY " + environ},
			attack{"read the daemon's environment through a link", "grep -qa TROUPE_TEST_OPENAI_KEY l-environ"},
			attack{"signal the daemon", fmt.Sprintf("kill -0 %d", r.d.cmd.Process.Pid)})
	}
	return as
}

// script runs every attack and prints ESCAPED:NAME for each that worked,
// then "attacks done".
func script(as []attack) string {
	var b strings.Builder
	for i, a := range as {
		fmt.Fprintf(&b, "if (%s) >/dev/null 2>&1; then echo ESCAPED:%d; fi; ", a.cmd, i)
	}
	b.WriteString("echo attacks done")
	return b.String()
}

// check fails for every attack that got out, from its output and from the
// files on disk.
func (r *sandboxRig) check(who, out string, as []attack) {
	r.t.Helper()
	if !strings.Contains(out, "attacks done") {
		r.t.Fatalf("%s: the attacks did not run: %q", who, out)
	}
	for i, a := range as {
		if strings.Contains(out, fmt.Sprintf("ESCAPED:%d\n", i)) || strings.HasSuffix(out, fmt.Sprintf("ESCAPED:%d", i)) {
			r.t.Errorf("%s: %s: got out of the sandbox", who, a.name)
		}
	}
	for _, leak := range []string{r.token, "OTHER-PROJECT-SECRET", "SSH-PRIVATE-KEY", openaiKey} {
		if strings.Contains(out, leak) {
			r.t.Errorf("%s: output shows a secret %q", who, leak)
		}
	}
	team, _ := os.ReadFile(filepath.Join(r.proj, ".troupe", "team.toml"))
	config, _ := os.ReadFile(filepath.Join(r.proj, ".git", "config"))
	if strings.Contains(string(team), "pwned") || strings.Contains(string(config), "pwned") || strings.Contains(string(config), "hooksPath") {
		r.t.Errorf("%s: the team file or git config changed:\n%s\n%s", who, team, config)
	}
	for _, f := range []string{filepath.Join(r.proj, ".git", "hooks", "pre-commit"), filepath.Join(r.proj, ".git", "hooks", "post-merge")} {
		if _, err := os.Stat(f); err == nil {
			r.t.Errorf("%s: a hook was planted: %s", who, f)
		}
	}
	if b, err := os.ReadFile(filepath.Join(r.state, "addr")); err != nil || strings.Contains(string(b), "127.0.0.1:1") {
		r.t.Errorf("%s: the addr file is %q, %v", who, b, err)
	}
}

// taskOutput waits for agent's n-th task completion and returns the
// output of its latest task.
func (r *sandboxRig) taskOutput(agent troupe.AgentID, n int) string {
	r.t.Helper()
	waitTaskMessages(r.t, r.ctx, r.cl, r.p, agent, n)
	ts, err := r.cl.Tasks(r.ctx, r.p)
	if err != nil {
		r.t.Fatal(err)
	}
	var last *task.ID
	for i := range ts {
		if ts[i].Owner == agent {
			last = &ts[i].ID
		}
	}
	if last == nil {
		r.t.Fatalf("%s has no task", agent)
	}
	out, err := r.cl.TaskOutput(r.ctx, r.p, *last, 1<<20)
	if err != nil {
		r.t.Fatal(err)
	}
	return out
}

func testSandboxEscapes(t *testing.T, mechanism sandbox.Mechanism) {
	r := newSandboxRig(t, mechanism)
	as := r.attacks(mechanism)
	sh := script(as)

	// The fake agent's own process runs them (a CLI's shell tool).
	req := r.ask("f", "!sh "+sh)
	r.check("fake agent", req, as)
	// Its background task.
	r.ask("f", "!bg "+sh)
	r.check("fake agent's task", r.taskOutput("f", 1), as)

	// The openai agent's run_command, and its background task.
	b, _ := json.Marshal(sh)
	cmd := string(b)
	r.check("openai run_command", r.ask("o", `[[tool:run_command {"command":`+cmd+`}]]`), as)
	r.ask("o", `[[tool:run_in_background {"command":`+cmd+`}]]`)
	r.check("openai task", r.taskOutput("o", 1), as)

	// A terminal-mode program: bash typing the attacks on its terminal
	// (from a file, so that the command line echoed on the screen holds
	// none of the markers).
	if err := os.WriteFile(filepath.Join(r.proj, "attacks.sh"), []byte(sh+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r.check("terminal bash", r.ask("sh", "sh attacks.sh"), as)

	// Its file tools, which troupe runs in its own process, honour the
	// sandbox too.
	for _, a := range []struct{ args, want string }{
		{`[[tool:write_file {"path":".troupe/team.toml","content":"# pwned"}]]`, "read-only in your sandbox"},
		{`[[tool:write_file {"path":"l-team","content":"# pwned"}]]`, ""},
		{`[[tool:read_file {"path":"l-token"}]]`, ""},
	} {
		got := r.ask("o", a.args)
		if !strings.Contains(got, a.want) || strings.Contains(got, r.token) || strings.Contains(got, "wrote ") {
			t.Errorf("openai %s: %q, want refused (%q)", a.args, got, a.want)
		}
	}
	r.check("openai file tools", "attacks done", nil)

	// Without the sandbox the same reads get out: the attacks are real.
	reads := []attack{as[0], as[5], as[6]}
	out := r.ask("open", "!sh "+script(reads))
	for i := range reads {
		if !strings.Contains(out, fmt.Sprintf("ESCAPED:%d", i)) {
			t.Errorf("unsandboxed agent: %s was refused: the attack proves nothing (%q)", reads[i].name, out)
		}
	}
}

func (r *sandboxRig) ask(agent troupe.AgentID, text string) string {
	r.t.Helper()
	req, err := r.cl.Ask(r.ctx, r.p, agent, text, 0)
	if err != nil {
		r.t.Fatalf("ask %s: %v", agent, err)
	}
	if req.State != troupe.ReqAnswered {
		r.t.Fatalf("ask %s %q = %s: %s", agent, text, req.State, req.Error)
	}
	return req.Answer
}

func TestAttackSandboxBubblewrap(t *testing.T) {
	testSandboxEscapes(t, sandbox.Bubblewrap)
}

// TestAttackSandboxShownOff: an agent whose sandbox is off shows it in
// troupe agents and doctor, which names the mechanism in force.
func TestAttackSandboxShownOff(t *testing.T) {
	r := newSandboxRig(t, sandbox.Bubblewrap)
	out := mustTroupe(t, r.state, r.proj, "agents")
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		switch off := strings.Contains(l, "OFF (unsandboxed)"); {
		case f[0] == "open" && !off, (f[0] == "f" || f[0] == "o" || f[0] == "sh") && off:
			t.Errorf("troupe agents: %q", l)
		}
	}
	doc := mustTroupe(t, r.state, r.proj, "doctor")
	if !strings.Contains(doc, "bubblewrap: files") || !strings.Contains(doc, "UNSANDBOXED: open") {
		t.Errorf("doctor does not name the mechanism and the unsandboxed agent:\n%s", doc)
	}
}

func TestAttackSandboxLandlock(t *testing.T) { testSandboxEscapes(t, sandbox.Landlock) }

// TestAttackSandboxNoMechanism: where no mechanism works, a sandboxed
// agent does not start and its error says why and how to fix it; an agent
// whose team turned its sandbox off still runs.
func TestAttackSandboxNoMechanism(t *testing.T) {
	r := newSandboxRig(t, sandbox.None)
	req, err := r.cl.Ask(r.ctx, r.p, "f", "hello", 0)
	if err != nil {
		t.Fatal(err)
	}
	if req.State == troupe.ReqAnswered || !strings.Contains(req.Error, "sandbox: cannot be enforced") ||
		!strings.Contains(req.Error, "sandbox = false") {
		t.Fatalf("sandboxed agent without a mechanism: %s %q, want it not started, saying why and the fix", req.State, req.Error)
	}
	if got := r.ask("open", "!say still here"); got != "still here" {
		t.Errorf("unsandboxed agent: %q", got)
	}
}

// TestAttackSandboxWorktreeGit: a worktree agent's git commits on its own
// branch, and reaches nothing else of the person's repository: not their
// branches, HEAD, index, tags or config, not their files. With either
// mechanism.
func TestAttackSandboxWorktreeGit(t *testing.T) {
	for _, m := range []sandbox.Mechanism{sandbox.Bubblewrap, sandbox.Landlock} {
		t.Run(string(m), func(t *testing.T) { testWorktreeGit(t, m) })
	}
}

func testWorktreeGit(t *testing.T, mechanism sandbox.Mechanism) {
	if r := sandbox.Detect(); r.Mechanism == sandbox.None || mechanism == sandbox.Bubblewrap && r.Bwrap == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the sandbox needs bubblewrap (apt-get install bubblewrap): %s", r.Why)
		}
		t.Skipf("no %s here: %s", mechanism, r.Why)
	}
	state := t.TempDir()
	proj := gitProject(t, "[[agent]]\nname = \"w\"\nengine = \"fake\"\nworkspace = \"worktree\"\nallowed_tools = [\"Bash\"]\n")
	main := gitIn(t, proj, "rev-parse", "main")
	index, _ := os.ReadFile(filepath.Join(proj, ".git", "index"))
	env := append(os.Environ(), "HOME="+t.TempDir(), sandbox.MechanismEnv+"="+string(mechanism))
	ctx, _, cl, p := serveProject(t, state, proj, env, 2*time.Minute)
	g := "git -c user.name=w -c user.email=w@example.com "
	dotgit := filepath.Join(proj, ".git")
	as := []attack{
		{"move the person's branch", g + "-C " + proj + " update-ref refs/heads/main HEAD"},
		{"make a branch", g + "branch mine"},
		{"make a tag", g + "tag v9"},
		{"write the person's HEAD", "echo ref: refs/heads/x > " + filepath.Join(dotgit, "HEAD")},
		{"write the person's index", "echo x >> " + filepath.Join(dotgit, "index")},
		{"write git config", g + "-C " + proj + " config core.hooksPath /x"},
		{"write info/exclude", "echo x >> " + filepath.Join(dotgit, "info", "exclude")},
		{"write the person's file", "echo x >> " + filepath.Join(proj, "README")},
		{"make a checkpoint ref", g + "update-ref refs/troupe/checkpoints/" + string(p.ID) + "/w/0000000009 HEAD"},
	}
	// Its own work commits on its branch (README exists: Landlock lets no
	// new file be made at the worktree's top level).
	commit := "echo more >> README && " + g + "commit -qam work && echo COMMITTED; ls | grep -q README && echo LISTED; "
	req, err := cl.Ask(ctx, p.ID, "w", "!sh "+commit+script(as), 0)
	if err != nil || req.State != troupe.ReqAnswered {
		t.Fatalf("ask w: %+v %v", req, err)
	}
	out := req.Answer
	if !strings.Contains(out, "COMMITTED") || !strings.Contains(out, "LISTED") {
		t.Fatalf("the worktree agent could not commit on its branch, or list its worktree: %q", out)
	}
	if !strings.Contains(out, "attacks done") {
		t.Fatalf("the attacks did not run: %q", out)
	}
	for i, a := range as {
		if strings.Contains(out, fmt.Sprintf("ESCAPED:%d\n", i)) || strings.HasSuffix(out, fmt.Sprintf("ESCAPED:%d", i)) {
			t.Errorf("%s: got out of the sandbox", a.name)
		}
	}
	if got := gitIn(t, proj, "rev-parse", "main"); got != main {
		t.Errorf("main moved: %s, was %s", got, main)
	}
	if got := gitIn(t, proj, "log", "-1", "--format=%s", "troupe/w"); got != "work" {
		t.Errorf("troupe/w's last commit is %q, want the agent's", got)
	}
	// troupe's own checkpoint of the turn (C18) aside, which the agent
	// could not write (the attack above).
	var refs []string
	for r := range strings.Lines(gitIn(t, proj, "for-each-ref", "--format=%(refname)")) {
		if r = strings.TrimSpace(r); !strings.HasPrefix(r, "refs/troupe/") {
			refs = append(refs, r)
		}
	}
	if strings.Join(refs, "\n") != "refs/heads/main\nrefs/heads/troupe/w" {
		t.Errorf("refs: %q", refs)
	}
	if cps := gitIn(t, proj, "for-each-ref", "--format=%(refname)", "refs/troupe/"); cps != "refs/troupe/checkpoints/"+string(p.ID)+"/w/0000000001" {
		t.Errorf("checkpoint refs: %q; want troupe's one of the turn", cps)
	}
	if b, _ := os.ReadFile(filepath.Join(proj, ".git", "index")); !bytes.Equal(b, index) {
		t.Error("the person's index changed")
	}
	if s := gitIn(t, proj, "status", "--porcelain"); s != "" {
		t.Errorf("the person's tree changed: %q", s)
	}
}
