package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/troupe"
)

func TestMain(m *testing.M) {
	MaybeRunHelper()
	if dir := os.Getenv(goneEnv); dir != "" {
		os.Exit(restrictAfterRemoval(dir))
	}
	os.Exit(m.Run())
}

// goneEnv names the folder restrictAfterRemoval works in: set, the test
// binary runs it instead of the tests.
const goneEnv = "TROUPE_TEST_LANDLOCK_GONE"

// restrictAfterRemoval computes the Landlock rules of a policy that hides
// dir/hidden (so dir's other entries get rules of their own), removes one
// of those entries, then restricts this process with the rules: 0 when
// that works.
func restrictAfterRemoval(dir string) int {
	p := Policy{On: true, Hidden: []string{filepath.Join(dir, "hidden")}, Writable: []string{dir}}
	rules := LandlockRules(p)
	if err := os.Remove(filepath.Join(dir, "gone")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := landlockConfig.RestrictPaths(rules...); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// TestLandlockRuleOfAGonePath: an entry removed between the rules'
// making and their use does not fail the restriction (a file of /tmp or
// HOME may go while an agent starts).
func TestLandlockRuleOfAGonePath(t *testing.T) {
	needLandlock(t)
	dir := t.TempDir()
	for _, name := range []string{"hidden", "kept", "gone"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), goneEnv+"="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("restricting after an entry went: %v\n%s", err, out)
	}
}

// needBwrap fails under CI=true when bubblewrap is missing, else skips.
func needBwrap(t *testing.T) string {
	t.Helper()
	r := Detect()
	if r.Bwrap != "" {
		return r.Bwrap
	}
	p, err := exec.LookPath("bwrap")
	if err == nil && probeBwrap(p) == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("bubblewrap is needed (apt-get install bubblewrap): %v", err)
	}
	t.Skipf("no usable bubblewrap: %v", err)
	return ""
}

func needLandlock(t *testing.T) {
	t.Helper()
	if _, err := landlockABI(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("landlock is needed: %v", err)
		}
		t.Skipf("no landlock: %v", err)
	}
}

// fixture is a machine in a folder: a state dir, a workspace with tool
// configuration, another project, a HOME with a key.
type fixture struct {
	root, state, ws, other, home, tmp string
}

func newFixture(t testing.TB) fixture {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := fixture{root: root, state: filepath.Join(root, "state"), ws: filepath.Join(root, "ws"),
		other: filepath.Join(root, "other"), home: filepath.Join(root, "home"), tmp: filepath.Join(root, "tmp")}
	files := map[string]string{
		"state/token":                         "TOKEN",
		"ws/.troupe/team.toml":                "TEAM",
		"ws/.git/config":                      "CONFIG",
		"ws/.git/hooks/README":                "HOOKS",
		"ws/.git/HEAD":                        "ref: refs/heads/main",
		"ws/src/main.go":                      "package main",
		"other/secret.txt":                    "OTHER",
		"home/.ssh/id_x":                      "KEY",
		"home/.netrc":                         "NETRC",
		"home/.claude/x.json":                 "{}",
		"home/.claude.json":                   "{}",
		"home/.codex/x.json":                  "{}",
		"home/.config/opencode/opencode.json": "{}",
		"home/notes.txt":                      "NOTES",
		"tmp/.keep":                           "",
	}
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func (f fixture) inputs() Inputs {
	return Inputs{Default: true, Workspace: f.ws, Project: f.ws, StateDir: f.state, Others: []string{f.other}, Home: f.home, Temp: f.tmp}
}

func TestBuild(t *testing.T) {
	f := newFixture(t)
	in := f.inputs()
	no := false
	in.Team = troupe.AgentSandbox{Hidden: []string{"src"}, Writable: []string{"~/.ssh"}, Network: &no}
	p := Build(in)
	if !p.On || p.Network {
		t.Errorf("On=%v Network=%v, want on and no network", p.On, p.Network)
	}
	for _, c := range []struct {
		list []string
		path string
		want bool
	}{
		{p.Writable, f.ws, true},
		{p.Writable, filepath.Join(f.home, ".claude"), true},
		{p.ReadOnly, filepath.Join(f.home, ".claude.json"), true},
		{p.ReadOnly, filepath.Join(f.home, ".claude/settings.json"), true},
		{p.ReadOnly, filepath.Join(f.home, ".codex/config.toml"), true},
		{p.ReadOnly, filepath.Join(f.home, ".config/opencode/opencode.json"), true},
		{p.ReadOnly, filepath.Join(f.home, ".config/opencode/plugin"), true},
		{p.Writable, filepath.Join(f.home, ".claude.json"), false},
		{p.Writable, filepath.Join(f.home, ".config/opencode"), true},
		{p.Whole, filepath.Join(f.home, ".claude"), true},
		{p.Writable, filepath.Join(f.home, ".cache"), true},
		{p.Writable, f.tmp, true},
		{p.ReadOnly, filepath.Join(f.ws, ".troupe"), true},
		{p.ReadOnly, filepath.Join(f.ws, ".git/config"), true},
		{p.ReadOnly, filepath.Join(f.ws, ".git/hooks"), true},
		{p.ReadOnly, filepath.Join(f.ws, ".mcp.json"), true},
		{p.Hidden, f.state, true},
		{p.Hidden, f.other, true},
		{p.Hidden, filepath.Join(f.home, ".netrc"), true},
		{p.Hidden, filepath.Join(f.ws, "src"), true}, // the team's hidden
		// The team's writable overrides the default hidden.
		{p.Hidden, filepath.Join(f.home, ".ssh"), false},
		{p.Writable, filepath.Join(f.home, ".ssh"), true},
	} {
		if got := slices.Contains(c.list, c.path); got != c.want {
			t.Errorf("%s in list: %v, want %v (policy %+v)", c.path, got, c.want, p)
		}
	}
	if Build(Inputs{Default: true, Workspace: f.ws, Team: troupe.AgentSandbox{Enabled: &no}}).On {
		t.Error("sandbox off in the team: policy on")
	}
	yes := true
	if Build(Inputs{Workspace: f.ws}).On || !Build(Inputs{Workspace: f.ws, Team: troupe.AgentSandbox{Enabled: &yes}}).On {
		t.Error("the default or the team's sandbox = true not followed")
	}
}

// TestBuildPersonConfigReadOnly: troupe's configuration folder (the
// agent profiles) is read-only, even for an agent whose workspace holds it
// (a project at HOME) or whose team makes its parent writable.
func TestBuildPersonConfigReadOnly(t *testing.T) {
	f := newFixture(t)
	in := f.inputs()
	in.Workspace = f.home
	in.Team = troupe.AgentSandbox{Writable: []string{"~/.config"}}
	conf := filepath.Join(f.home, ".config", "troupe")
	in.PersonConfig = []string{conf}
	p := Build(in)
	if !slices.Contains(p.ReadOnly, conf) || slices.Contains(p.Writable, conf) {
		t.Fatalf("%s: read-only %v, writable %v; want read-only", conf, p.ReadOnly, p.Writable)
	}
	if r, w := p.Access(filepath.Join(conf, "profiles", "rev.toml")); !r || w {
		t.Errorf("a profile: readable %v, writable %v; want read-only", r, w)
	}
}

func TestBuildWorktree(t *testing.T) {
	f := newFixture(t)
	wt := filepath.Join(f.state, "worktrees", "p1", "dev")
	if err := os.MkdirAll(wt, 0o700); err != nil {
		t.Fatal(err)
	}
	in := f.inputs()
	in.Workspace = wt
	objects := filepath.Join(f.ws, ".git", "objects")
	in.GitWritable = []string{objects}
	p := Build(in)
	if !slices.Contains(p.Writable, wt) || !slices.Contains(p.Hidden, f.state) {
		t.Fatalf("worktree not writable inside the hidden state dir: %+v", p)
	}
	if !slices.Contains(p.ReadOnly, f.ws) || !slices.Contains(p.Writable, objects) || slices.Contains(p.Writable, filepath.Join(f.ws, ".git")) {
		t.Fatalf("project folder of a worktree agent: want it read-only but for what its git writes (GitWritable): %+v", p)
	}
	for path, want := range map[string]bool{
		filepath.Join(objects, "ab", "cdef"):        true,
		filepath.Join(f.ws, ".git", "HEAD"):         false,
		filepath.Join(f.ws, ".git", "config"):       false,
		filepath.Join(f.ws, ".git", "hooks", "pre"): false,
		filepath.Join(f.ws, "main.go"):              false,
	} {
		if r, w := p.Access(path); !r || w != want {
			t.Errorf("%s: readable %v, writable %v; want writable %v", path, r, w, want)
		}
	}
}

func TestBuildResolvesLinks(t *testing.T) {
	f := newFixture(t)
	// HOME's .ssh is a link elsewhere: what it names is hidden.
	real := filepath.Join(f.root, "keys")
	if err := os.Rename(filepath.Join(f.home, ".ssh"), real); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, filepath.Join(f.home, ".ssh")); err != nil {
		t.Fatal(err)
	}
	p := Build(f.inputs())
	if !slices.Contains(p.Hidden, real) {
		t.Fatalf("hidden %v: want the link's target %s", p.Hidden, real)
	}
}

func TestBwrapArgv(t *testing.T) {
	f := newFixture(t)
	wt := filepath.Join(f.state, "worktrees", "dev")
	if err := os.MkdirAll(wt, 0o700); err != nil {
		t.Fatal(err)
	}
	p := Policy{On: true, Network: true, Temp: f.tmp,
		Writable: []string{wt, f.ws, filepath.Join(f.root, "missing")},
		ReadOnly: []string{filepath.Join(f.ws, ".troupe"), filepath.Join(f.ws, ".mcp.json"), filepath.Join(f.ws, ".claude")},
		Hidden:   []string{f.state, filepath.Join(f.home, ".netrc")},
	}
	got := strings.Join(BwrapArgv("/usr/bin/bwrap", p, []string{"sh", "-c", "x"}), " ")
	for _, want := range []string{
		"/usr/bin/bwrap --ro-bind / / --dev /dev --proc /proc --unshare-pid",
		"--die-with-parent",
		"--setenv TMPDIR " + f.tmp,
		// The state dir is hidden first, the worktree in it bound after.
		"--tmpfs " + f.state + " --bind " + f.ws + " " + f.ws,
		"--ro-bind /dev/null " + filepath.Join(f.home, ".netrc"),
		"--bind " + wt + " " + wt,
		"--ro-bind " + filepath.Join(f.ws, ".troupe") + " " + filepath.Join(f.ws, ".troupe"),
		// A missing .claude gets an empty read-only placeholder.
		"--tmpfs " + filepath.Join(f.ws, ".claude"),
		"--remount-ro " + f.state + " --remount-ro " + filepath.Join(f.ws, ".claude") + " -- sh -c x",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("argv lacks %q:\n%s", want, got)
		}
	}
	for _, bad := range []string{"--unshare-net", "--new-session", "missing", ".mcp.json"} {
		if strings.Contains(got, bad) {
			t.Errorf("argv has %q:\n%s", bad, got)
		}
	}
	// A bind comes after the paths it lies in; one whose source is
	// missing is skipped.
	src, dst := filepath.Join(f.state, "sandbox", "claude-sessions"), filepath.Join(f.home, ".claude", "sessions")
	if err := os.MkdirAll(src, 0o700); err != nil {
		t.Fatal(err)
	}
	p.Writable = append(p.Writable, filepath.Join(f.home, ".claude"))
	p.Binds = []Bind{{Source: src, Target: dst}, {Source: filepath.Join(f.root, "missing"), Target: filepath.Join(f.home, "x")}}
	got = strings.Join(BwrapArgv("/usr/bin/bwrap", p, []string{"true"}), " ")
	if want := "--bind " + filepath.Join(f.home, ".claude") + " " + filepath.Join(f.home, ".claude") + " "; !strings.Contains(got, want) ||
		!strings.Contains(got, "--bind "+src+" "+dst+" --remount-ro") || strings.Contains(got, filepath.Join(f.home, "x")) {
		t.Errorf("binds: %s", got)
	}
	p.Network = false
	if got := BwrapArgv("bwrap", p, []string{"true"}); !slices.Contains(got, "--unshare-net") {
		t.Errorf("network off: no --unshare-net in %v", got)
	}
	if got := BwrapArgv("bwrap", p.ForEngine(), []string{"true"}); slices.Contains(got, "--unshare-net") {
		t.Errorf("an engine's policy cuts its network: %v", got)
	}
}

func TestWrapOff(t *testing.T) {
	argv := []string{"sh", "-c", "true"}
	got, err := Wrap(Policy{}, argv)
	if err != nil || !slices.Equal(got, argv) {
		t.Fatalf("Wrap(off) = %v, %v; want the argv itself", got, err)
	}
}

func TestComplement(t *testing.T) {
	f := newFixture(t)
	got := Complement(f.root, []string{f.state, filepath.Join(f.home, ".ssh")})
	for _, want := range []string{f.ws, f.other, f.tmp, filepath.Join(f.home, ".claude"), filepath.Join(f.home, "notes.txt")} {
		if !slices.Contains(got, want) {
			t.Errorf("complement lacks %s: %v", want, got)
		}
	}
	for _, bad := range []string{f.root, f.home, f.state, filepath.Join(f.home, ".ssh")} {
		if slices.Contains(got, bad) {
			t.Errorf("complement holds %s: %v", bad, got)
		}
	}
}

// escape runs script in a sandbox of f's policy under mech and returns
// its output and whether it succeeded.
func escape(t *testing.T, f fixture, mech Mechanism, script string) (string, bool) {
	t.Helper()
	p := Build(f.inputs())
	p.Mechanism = mech
	p.Helper = []string{os.Args[0], "-test.run=^$"}
	argv, err := Wrap(p, []string{"/bin/sh", "-c", script})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = f.ws
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + f.home}
	out, err := cmd.CombinedOutput()
	return string(out), err == nil
}

func testEscapes(t *testing.T, mech Mechanism) {
	f := newFixture(t)
	pid := os.Getpid()
	for _, c := range []struct {
		name, script string
		ok           bool
	}{
		{"write the workspace", "echo hi > src/new.txt && cat src/new.txt && echo more >> src/main.go", true},
		{"make a folder in the workspace", "mkdir -p src/a/b && echo x > src/a/b/c", true},
		{"write the private temp", "echo x > $TMPDIR/t && cat " + f.tmp + "/t", true},
		{"write an engine's state", "echo x > " + f.home + "/.claude/x.json", true},
		{"read the workspace", "cat src/main.go", true},
		{"read HOME", "cat " + f.home + "/notes.txt", true},
		{"read the token", "cat " + f.state + "/token", false},
		{"list the state dir", "ls " + f.state + " | grep token", false},
		{"write the addr file", "echo evil > " + f.state + "/addr && test -s " + f.state + "/addr && ls " + f.state + " | grep token", false},
		{"write the team", "echo evil > .troupe/team.toml", false},
		{"replace the team", "rm -f .troupe/team.toml && echo evil > .troupe/team.toml", false},
		{"move the team folder", "mv .troupe t2", false},
		{"plant a hook", "echo evil > .git/hooks/pre-commit", false},
		{"write git config", "echo '[core] hooksPath=x' >> .git/config", false},
		{"make .claude settings", "mkdir -p .claude && echo '{}' > .claude/settings.json", false},
		// The person's own (unsandboxed) CLIs run commands from these:
		// MCP servers, hooks, plugins. ~/.claude.json is held by both
		// mechanisms; the others, inside folders Landlock grants whole
		// (Policy.Whole), by bubblewrap alone.
		{"write Claude's global config", "echo '{\"mcpServers\":{}}' > " + f.home + "/.claude.json", false},
		{"replace Claude's global config", "echo '{}' > " + f.home + "/.claude.json.tmp && mv " + f.home + "/.claude.json.tmp " + f.home + "/.claude.json", false},
		{"write OpenCode's config", "echo '{}' > " + f.home + "/.config/opencode/opencode.json", mech == Landlock},
		{"plant an OpenCode plugin", "mkdir -p " + f.home + "/.config/opencode/plugin && echo x > " + f.home + "/.config/opencode/plugin/x.js", mech == Landlock},
		{"write OpenCode's own files", "echo x > " + f.home + "/.config/opencode/.gitignore", true},
		{"write Claude's user settings", "echo '{\"hooks\":{}}' > " + f.home + "/.claude/settings.json", mech == Landlock},
		{"replace Claude's user settings", "rm -f " + f.home + "/.claude/settings.json; echo '{}' > " + f.home + "/.claude/settings.json", mech == Landlock},
		{"write Codex's config", "echo 'notify = [\"x\"]' >> " + f.home + "/.codex/config.toml", mech == Landlock},
		{"write Codex's state", "echo x > " + f.home + "/.codex/new.sqlite-wal && rm " + f.home + "/.codex/new.sqlite-wal", true},
		{"make an entry at the top of Claude's state", "mkdir " + f.home + "/.claude/todos2 && echo x > " + f.home + "/.claude/history2.jsonl", true},
		{"read another project", "cat " + f.other + "/secret.txt", false},
		{"read ssh", "cat " + f.home + "/.ssh/id_x", false},
		{"read netrc", "cat " + f.home + "/.netrc | grep NETRC", false},
		{"read the parent's environ", fmt.Sprintf("cat /proc/%d/environ | grep -a PATH", pid), false},
		{"signal the parent", fmt.Sprintf("kill -0 %d", pid), false},
		{"read the token through a link", "ln -sf " + f.state + "/token src/tok && cat src/tok", false},
		{"read ssh through a link", "ln -sf " + f.home + "/.ssh src/ssh && cat src/ssh/id_x", false},
		{"write the team through a link", "ln -sf " + f.ws + "/.troupe/team.toml src/team && echo evil > src/team", false},
	} {
		if mech == Landlock && c.name == "read the parent's environ" {
			// Landlock's ptrace scoping did not close another process's
			// environ here (kernel 6.18: read through /proc as root); the
			// daemon is not dumpable, which closes it to other users only.
			// Stated in Detect's report.
			continue
		}
		out, ok := escape(t, f, mech, c.script)
		if ok != c.ok {
			t.Errorf("%s: succeeded %v, want %v: %s", c.name, ok, c.ok, out)
		}
	}
	// Nothing of the refused writes reached the files.
	for name, want := range map[string]string{"ws/.troupe/team.toml": "TEAM", "ws/.git/config": "CONFIG", "state/token": "TOKEN"} {
		b, err := os.ReadFile(filepath.Join(f.root, name))
		if err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", name, b, err, want)
		}
	}
	gone := []string{"ws/.git/hooks/pre-commit", "state/addr", "ws/.claude/settings.json"}
	if mech != Landlock {
		// Missing, they were made before the sandbox started (Seeds) so
		// as to be mounted read-only: nothing planted.
		if _, err := os.Stat(filepath.Join(f.home, ".config/opencode/plugin/x.js")); err == nil {
			t.Error("an OpenCode plugin was planted")
		}
		for name, want := range map[string]string{"home/.claude/settings.json": "{}\n", "home/.codex/config.toml": ""} {
			if b, err := os.ReadFile(filepath.Join(f.root, name)); err != nil || string(b) != want {
				t.Errorf("%s = %q, %v; want %q", name, b, err, want)
			}
		}
	}
	if b, err := os.ReadFile(filepath.Join(f.home, ".claude.json")); err != nil || string(b) != "{}" {
		t.Errorf("~/.claude.json = %q, %v; want it unchanged", b, err)
	}
	for _, name := range gone {
		if _, err := os.Stat(filepath.Join(f.root, name)); err == nil {
			t.Errorf("%s was created", name)
		}
	}
}

func TestEscapesBubblewrap(t *testing.T) {
	needBwrap(t)
	testEscapes(t, Bubblewrap)
	f := newFixture(t)
	// Its own pid namespace: the parent is not there at all.
	out, ok := escape(t, f, Bubblewrap, fmt.Sprintf("test -e /proc/%d/status && grep -q '^PPid' /proc/%d/status && echo seen", os.Getpid(), os.Getpid()))
	if ok {
		t.Errorf("the parent's pid is visible in the sandbox: %s", out)
	}
}

// TestBindBubblewrap: what the sandbox writes at a bind's target lands in
// its source, not in the folder the target names outside.
func TestBindBubblewrap(t *testing.T) {
	needBwrap(t)
	f := newFixture(t)
	src, dst := filepath.Join(f.state, "sandbox", "claude-sessions"), filepath.Join(f.home, ".claude", "sessions")
	for _, d := range []string{src, dst} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	p := Build(f.inputs())
	p.Binds = []Bind{{Source: src, Target: dst}}
	argv, err := Wrap(p, []string{"/bin/sh", "-c", "echo 1 > " + dst + "/1.json"})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("write at the bind's target: %v: %s", err, out)
	}
	if _, err := os.Stat(filepath.Join(src, "1.json")); err != nil {
		t.Errorf("not in the bind's source: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dst, "1.json")); err == nil {
		t.Errorf("written in the target's own folder")
	}
}

func TestEscapesLandlock(t *testing.T) {
	needLandlock(t)
	testEscapes(t, Landlock)
}

func TestNetworkOff(t *testing.T) {
	needBwrap(t)
	f := newFixture(t)
	p := Build(f.inputs())
	p.Network = false
	argv, err := Wrap(p, []string{"/bin/sh", "-c", "cat /proc/net/dev | grep -c :"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(argv[0], argv[1:]...).Output()
	if err != nil || strings.TrimSpace(string(out)) != "1" {
		t.Fatalf("network off: interfaces %q, %v; want loopback alone", out, err)
	}
}

func TestEnabled(t *testing.T) {
	yes, no := true, false
	for _, c := range []struct {
		spec troupe.AgentSpec
		want bool
	}{
		{troupe.AgentSpec{Engine: troupe.EngineFake}, true},
		{troupe.AgentSpec{Engine: troupe.EngineClaude}, true},
		{troupe.AgentSpec{Engine: troupe.EngineClaude, Mode: troupe.ModeTerminal}, true},
		{troupe.AgentSpec{Engine: troupe.EngineClaude, Mode: troupe.ModeTerminal, Sandbox: troupe.AgentSandbox{Enabled: &no}}, false},
		{troupe.AgentSpec{Engine: troupe.EngineTerminal, Mode: troupe.ModeTerminal}, true},
		{troupe.AgentSpec{Engine: troupe.EngineACP}, true},
		{troupe.AgentSpec{Engine: troupe.EngineACP, Sandbox: troupe.AgentSandbox{Enabled: &yes}}, true},
		{troupe.AgentSpec{Engine: "unknown"}, false},
		{troupe.AgentSpec{Engine: troupe.EngineOpenAI, Sandbox: troupe.AgentSandbox{Enabled: &no}}, false},
	} {
		if got := Enabled(c.spec); got != c.want {
			t.Errorf("Enabled(%s %s %+v) = %v, want %v", c.spec.Engine, c.spec.Mode, c.spec.Sandbox, got, c.want)
		}
	}
}
