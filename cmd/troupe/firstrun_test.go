package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/client"
	"github.com/troupe-dev/troupe/internal/events"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// freshUser is a person who never ran troupe: an empty HOME, the XDG
// folders in it, and a PATH holding no engine CLI (git and bubblewrap
// only, linked from the machine's).
type freshUser struct {
	t     *testing.T
	home  string
	state string // the default state dir: $XDG_STATE_HOME/troupe
	env   []string
}

func newFreshUser(t *testing.T) *freshUser {
	t.Helper()
	home := t.TempDir()
	bin := filepath.Join(home, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"git", "bwrap"} {
		if p, err := exec.LookPath(tool); err == nil {
			if err := os.Symlink(p, filepath.Join(bin, tool)); err != nil {
				t.Fatal(err)
			}
		} else if tool == "git" {
			t.Fatal("git is not on PATH: the first run makes a git folder")
		}
	}
	u := &freshUser{t: t, home: home, state: filepath.Join(home, ".local", "state", "troupe")}
	u.env = []string{"HOME=" + home, "PATH=" + bin, "USER=" + os.Getenv("USER"),
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"), "XDG_STATE_HOME=" + filepath.Join(home, ".local", "state"),
		"XDG_DATA_HOME=" + filepath.Join(home, ".local", "share"), "XDG_CACHE_HOME=" + filepath.Join(home, ".cache")}
	return u
}

// run runs troupe args in dir with the user's environment alone (no
// --state-dir: the default one) and returns stdout, stderr and the exit
// code.
func (u *freshUser) run(dir string, args ...string) (string, string, int) {
	u.t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir, cmd.Env = dir, u.env
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		code = ee.ExitCode()
	} else if err != nil {
		u.t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func (u *freshUser) must(dir string, args ...string) string {
	u.t.Helper()
	out, errs, code := u.run(dir, args...)
	if code != 0 {
		u.t.Fatalf("troupe %v: exit %d: %s%s", args, code, errs, out)
	}
	return out
}

// profileDir is the user's profiles folder.
func (u *freshUser) profileDir() string {
	return filepath.Join(u.home, ".config", "troupe", "profiles")
}

// TestFirstRunInitToAnsweredAsk: a person with a fresh HOME and no engine
// CLI runs troupe init in a new git folder: a team on the fake engine,
// and it says so and what to run next; the daemon started as it says; init
// again registers the folder, a third time changes nothing (the file
// byte for byte); the ask is answered.
func TestFirstRunInitToAnsweredAsk(t *testing.T) {
	u := newFreshUser(t)
	proj := filepath.Join(u.home, "code", "hello")
	if err := os.MkdirAll(proj, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("git", "-C", proj, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v: %s", err, out)
	}

	out := u.must(proj, "init")
	for _, want := range []string{"wrote " + filepath.Join(proj, ".troupe", "team.toml"), "lead (fake)", "fake engine",
		"no troupe daemon is running", "next: troupe serve --project " + proj} {
		if !strings.Contains(out, want) {
			t.Errorf("init said:\n%s\nwant %q", out, want)
		}
	}
	team, err := os.ReadFile(filepath.Join(proj, ".troupe", "team.toml"))
	if err != nil {
		t.Fatal(err)
	}
	// Every key it sets is explained: each is preceded by a comment.
	lines := strings.Split(string(team), "\n")
	for i, l := range lines {
		if k, _, ok := strings.Cut(l, " = "); ok && !strings.HasPrefix(l, "#") && k != "respond" {
			if i == 0 || !strings.HasPrefix(lines[i-1], "#") {
				t.Errorf("team.toml line %d %q has no comment above it", i+1, l)
			}
		}
	}
	for _, want := range []string{`# workspace = "worktree"`, `# profile = "reviewer"`, "# [checks]", u.profileDir()} {
		if !bytes.Contains(team, []byte(want)) {
			t.Errorf("team.toml lacks the example %q:\n%s", want, team)
		}
	}

	d := startDaemonEnv(t, u.state, u.env)
	out = u.must(proj, "init")
	if !strings.Contains(out, "already exists: left as it is") || !strings.Contains(out, "registered "+proj+" as project") ||
		!strings.Contains(out, `next: troupe ask lead "what is in this folder?"`) {
		t.Errorf("init with the daemon up said:\n%s", out)
	}
	var res struct {
		Written, Registered, Changed bool
		Project                      troupe.ProjectID
		Daemon                       string
	}
	if err := json.Unmarshal([]byte(u.must(proj, "init", "--json")), &res); err != nil {
		t.Fatal(err)
	}
	if res.Written || res.Registered || res.Changed || res.Project == "" || res.Daemon != "running" {
		t.Errorf("init a third time: %+v; want nothing changed, the project named", res)
	}
	if out := u.must(proj, "init"); !strings.Contains(out, "nothing changed") || !strings.Contains(out, "already registered as project "+string(res.Project)) {
		t.Errorf("init a fourth time said:\n%s", out)
	}
	if again, _ := os.ReadFile(filepath.Join(proj, ".troupe", "team.toml")); !bytes.Equal(again, team) {
		t.Error("init run again changed the team file")
	}

	if out := u.must(proj, "ask", "lead", "hello troupe"); !strings.Contains(out, "you said hello troupe") {
		t.Errorf("ask lead said %q", out)
	}

	// troupe stop: the daemon exits 0 by itself; a second stop says none runs.
	if out := u.must(proj, "stop"); !strings.Contains(out, "stopped") {
		t.Errorf("stop said %q", out)
	}
	select {
	case <-d.done:
		if d.err != nil {
			t.Errorf("the daemon exited with %v after troupe stop; want 0", d.err)
		}
	default:
		t.Error("troupe stop returned while the daemon still runs")
	}
	if out, errs, code := u.run(proj, "stop"); code != 0 || !strings.Contains(out, "no troupe daemon is running") {
		t.Errorf("stop with none running: exit %d, %q %q", code, out, errs)
	}
}

// TestInitErrorsNameTheFix: a missing folder, an engine init does not
// write: each an error naming the fix, and nothing written.
func TestInitErrorsNameTheFix(t *testing.T) {
	u := newFreshUser(t)
	missing := filepath.Join(u.home, "nope")
	if _, errs, code := u.run(u.home, "init", missing); code == 0 || !strings.Contains(errs, "mkdir -p "+missing) {
		t.Errorf("init of a missing folder: exit %d, %q", code, errs)
	}
	if _, errs, code := u.run(u.home, "init", "--engine", "gpt"); code == 0 || !strings.Contains(errs, "claude, codex, opencode, fake") {
		t.Errorf("init --engine gpt: exit %d, %q", code, errs)
	}
	if _, err := os.Stat(filepath.Join(u.home, ".troupe")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed init wrote .troupe: %v", err)
	}
	odd := t.TempDir()
	os.WriteFile(filepath.Join(odd, ".troupe"), []byte("x"), 0o644)
	if _, errs, code := u.run(odd, "init"); code == 0 || !strings.Contains(errs, ".troupe is not a folder: move it away") {
		t.Errorf("init where .troupe is a file: exit %d, %q", code, errs)
	}
	// --engine chooses, whatever is found.
	proj := t.TempDir()
	u.must(proj, "init", "--engine", "codex", "--engine", "fake")
	team, _ := os.ReadFile(filepath.Join(proj, ".troupe", "team.toml"))
	if !bytes.Contains(team, []byte("name = \"lead\"\n# engine")) || !bytes.Contains(team, []byte(`engine = "codex"`)) || !bytes.Contains(team, []byte(`name = "fake"`)) {
		t.Errorf("init --engine codex --engine fake wrote:\n%s", team)
	}
}

const profileRev = `# the person's reviewer
engine = "fake"
prompt = "You review."
permission_mode = "default"
allowed_tools = ["run_in_background"]

[fake]
respond = "!say from the profile: {text}"
`

// TestProfilesAcrossTheTeam: agents from a profile of the person's
// folder, one overriding its script; troupe profiles lists who uses it; a
// missing profile is a team error naming the field; a change of the
// profile that widens permission_mode is held until troupe team approve.
func TestProfilesAcrossTheTeam(t *testing.T) {
	u := newFreshUser(t)
	if err := os.MkdirAll(u.profileDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	rev := filepath.Join(u.profileDir(), "rev.toml")
	if err := os.WriteFile(rev, []byte(profileRev), 0o644); err != nil {
		t.Fatal(err)
	}
	// Without a daemon: the profiles, their users unknown.
	if out := u.must(u.home, "profiles"); !strings.Contains(out, "rev   fake") || !strings.Contains(out, "no troupe daemon is running") {
		t.Errorf("profiles without a daemon:\n%s", out)
	}
	proj := t.TempDir()
	writeTeam(t, proj, `
[[agent]]
name = "a"
profile = "rev"

[[agent]]
name = "b"
profile = "rev"
[agent.fake]
respond = "!say from b: {text}"
`)
	startDaemonEnv(t, u.state, u.env)
	u.must(proj, "project", "add")
	if out := u.must(proj, "ask", "a", "one"); !strings.Contains(out, "from the profile: one") {
		t.Errorf("ask a: %q", out)
	}
	if out := u.must(proj, "ask", "b", "two"); !strings.Contains(out, "from b: two") {
		t.Errorf("ask b (its own script over the profile's): %q", out)
	}
	var list struct {
		Dir      string
		Profiles []struct {
			Name   string
			Engine string
			UsedBy []struct {
				Agent troupe.AgentID
				Path  string
			} `json:"used_by"`
		}
		Daemon string
	}
	if err := json.Unmarshal([]byte(u.must(proj, "profiles", "--json")), &list); err != nil {
		t.Fatal(err)
	}
	if list.Dir != u.profileDir() || len(list.Profiles) != 1 || list.Profiles[0].Name != "rev" || len(list.Profiles[0].UsedBy) != 2 ||
		list.Profiles[0].UsedBy[0].Agent != "a" || list.Profiles[0].UsedBy[1].Agent != "b" || list.Profiles[0].UsedBy[0].Path == "" {
		t.Errorf("profiles --json = %+v", list)
	}

	cl, err := client.FromStateDir(u.state)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	p, err := cl.ResolveProject(ctx, proj)
	if err != nil {
		t.Fatal(err)
	}
	st, err := cl.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Saved as editors do (whole, then renamed): a plain write can be
	// seen truncated by the watcher, a team error before the change.
	if err := os.WriteFile(rev+".tmp", []byte(strings.Replace(profileRev, `"default"`, `"bypassPermissions"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(rev+".tmp", rev); err != nil {
		t.Fatal(err)
	}
	if c := waitReload(t, ctx, cl, p.ID, st.LastEvent); !slices.Equal(c.Held, []troupe.AgentID{"a", "b"}) {
		t.Fatalf("after the profile's change: %+v; want a and b held", c)
	}
	diff := u.must(proj, "team", "diff")
	if !strings.Contains(diff, "permission_mode") || !strings.Contains(diff, "bypassPermissions") {
		t.Errorf("team diff:\n%s", diff)
	}
	team, err := cl.Team(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range team.Approved {
		for _, g := range a.Grants {
			if g.Field == "permission_mode" && strings.Contains(g.New, "bypass") {
				t.Errorf("agent %s: bypassPermissions in force before approval", a.Agent)
			}
		}
	}
	u.must(proj, "team", "approve")
	team, err = cl.Team(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if team.Pending != nil {
		t.Errorf("still pending after approve: %+v", team.Pending)
	}
	in := false
	for _, g := range team.Approved[0].Grants {
		in = in || g.Field == "permission_mode" && strings.Contains(g.New, "bypassPermissions")
	}
	if !in {
		t.Errorf("after approve, a's grants = %+v; want bypassPermissions", team.Approved[0].Grants)
	}

	// A profile that is missing: a team error naming the agent, the
	// profile and its path; the last good team stays.
	st, _ = cl.Status(ctx)
	writeTeam(t, proj, "[[agent]]\nname = \"a\"\nprofile = \"rev\"\n\n[[agent]]\nname = \"c\"\nprofile = \"gone\"\n")
	waitTeamError(t, ctx, cl, p.ID, st.LastEvent)
	ps, err := cl.Projects(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := `agent "c": profile "gone": ` + filepath.Join(u.profileDir(), "gone.toml") + " does not exist"; len(ps) != 1 || !strings.Contains(ps[0].TeamError, want) {
		t.Errorf("team error = %q; want it to hold %q", ps[0].TeamError, want)
	}
}

// waitTeamError follows the events until project p's team fails to load.
func waitTeamError(t *testing.T, ctx context.Context, cl *client.Client, p troupe.ProjectID, since uint64) {
	t.Helper()
	_, err := cl.Events(ctx, since, nil, func(ev events.Event) error {
		if ev.Type != events.TypeTeamChanged || ev.Project != p {
			return nil
		}
		var c troupe.TeamChange
		json.Unmarshal(ev.Data, &c)
		if c.Error != "" {
			return errStop
		}
		return nil
	})
	if !errors.Is(err, errStop) {
		t.Fatalf("waiting for the team error: %v", err)
	}
}

// TestServiceInstallWithoutSystemd: with no systemd (no systemctl on
// PATH), troupe service install writes the user unit (ExecStart the
// binary's absolute path with serve, Restart=on-failure, this PATH) and
// says what to do instead; status reads it; uninstall removes it. The unit
// is checked with systemd-analyze verify where that tool is.
func TestServiceInstallWithoutSystemd(t *testing.T) {
	u := newFreshUser(t)
	out := u.must(u.home, "service", "install")
	unit := filepath.Join(u.home, ".config", "systemd", "user", "troupe.service")
	exe, err := filepath.EvalSymlinks(binary)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"wrote " + unit, "no systemctl on PATH", "nohup " + exe + " serve", "@reboot " + exe + " serve"} {
		if !strings.Contains(out, want) {
			t.Errorf("service install said:\n%s\nwant %q", out, want)
		}
	}
	src, err := os.ReadFile(unit)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(u.home, "bin")
	for _, want := range []string{"\nExecStart=" + exe + " serve\n", "\nRestart=on-failure\n", "\nEnvironment=PATH=" + bin + "\n",
		"\nEnvironment=XDG_STATE_HOME=" + filepath.Join(u.home, ".local", "state") + "\n", "\nWantedBy=default.target\n"} {
		if !strings.Contains(string(src), want) {
			t.Errorf("unit lacks %q:\n%s", want, src)
		}
	}
	var st struct {
		Installed, Systemd bool
		ExecStart          string `json:"exec_start"`
	}
	if err := json.Unmarshal([]byte(u.must(u.home, "service", "status", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	if !st.Installed || st.Systemd || st.ExecStart != exe+" serve" {
		t.Errorf("service status --json = %+v", st)
	}
	if out := u.must(u.home, "service", "install"); strings.Contains(out, "wrote") || !strings.Contains(out, "is installed") {
		t.Errorf("service install again (nothing to change) said:\n%s", out)
	}

	if analyze, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Log("systemd-analyze is not on this machine: the unit is not verified by systemd (the checks above still ran)")
	} else {
		run := filepath.Join(t.TempDir(), "run")
		os.Mkdir(run, 0o700)
		cmd := exec.Command(analyze, "verify", "--user", unit)
		cmd.Env = append(os.Environ(), "HOME="+u.home, "XDG_RUNTIME_DIR="+run, "XDG_CONFIG_HOME="+filepath.Join(u.home, ".config"))
		out, err := cmd.CombinedOutput()
		if err != nil || strings.Contains(string(out), "troupe.service") {
			t.Errorf("systemd-analyze verify --user %s: %v\n%s", unit, err, out)
		}
	}

	if out := u.must(u.home, "service", "uninstall"); !strings.Contains(out, "removed "+unit) {
		t.Errorf("service uninstall said %q", out)
	}
	if _, err := os.Stat(unit); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("unit still there after uninstall: %v", err)
	}
	if out := u.must(u.home, "service", "uninstall"); !strings.Contains(out, "not installed") {
		t.Errorf("service uninstall again said %q", out)
	}
}

// TestAgentCannotWriteProfiles: the person's profiles are read-only to
// an agent, even one whose project is the home folder that holds them
// (its workspace writable): a profile it rewrites would change every team
// that uses it. The profiles folder is made for the sandbox when missing,
// or the agent could make it.
func TestAgentCannotWriteProfiles(t *testing.T) {
	u := newFreshUser(t)
	writeTeam(t, u.home, "[[agent]]\nname = \"w\"\nengine = \"fake\"\nallowed_tools = [\"Bash\"]\n")
	startDaemonEnv(t, u.state, u.env)
	u.must(u.home, "project", "add")
	evil := filepath.Join(u.profileDir(), "rev.toml")
	// A folder of the workspace the agent may write (under Landlock, the
	// top of a folder that holds hidden ones, the state dir here, is not).
	mine := filepath.Join(u.home, "code", "mine.txt")
	os.MkdirAll(filepath.Dir(mine), 0o755)
	out := u.must(u.home, "ask", "w", "!sh echo 'permission_mode = \"bypassPermissions\"' > "+evil+"; echo wrote; echo home > "+mine)
	if _, err := os.Stat(evil); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the agent wrote a profile (%v); it said:\n%s", err, out)
	}
	if got, err := os.ReadFile(mine); err != nil || string(got) != "home\n" {
		t.Errorf("the agent could not write its own workspace (the test proves nothing): %q, %v; it said:\n%s", got, err, out)
	}
}

// TestEveryExampleGivesItsRunCommand: each example folder's README gives
// the command that runs it (troupe serve --project examples/NAME, or its
// make target), and, for a team on an agent CLI, the PATH of the tested
// CLI that make tools installs (the Makefile's *_BIN folder).
func TestEveryExampleGivesItsRunCommand(t *testing.T) {
	teams, _ := filepath.Glob("../../examples/*/.troupe/team.toml")
	if len(teams) < 5 {
		t.Fatalf("found %d example teams", len(teams))
	}
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	for _, l := range strings.Split(string(mk), "\n") {
		if k, v, ok := strings.Cut(l, ":="); ok && !strings.ContainsAny(k, "\t#") {
			vars[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	binDir := func(name string) string {
		s := vars[name]
		for range 5 {
			for k, v := range vars {
				s = strings.ReplaceAll(s, "$("+k+")", v)
			}
		}
		return strings.TrimPrefix(filepath.Dir(s), "$(TOOLS)/")
	}
	for _, team := range teams {
		dir := filepath.Dir(filepath.Dir(team))
		name := filepath.Base(dir)
		readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
		if err != nil {
			t.Errorf("examples/%s has no README.md: %v", name, err)
			continue
		}
		if !strings.Contains(string(readme), "troupe serve --project examples/"+name) && !strings.Contains(string(readme), "make "+name) {
			t.Errorf("examples/%s/README.md gives no run command (troupe serve --project examples/%s, or make %s)", name, name, name)
		}
		src, _ := os.ReadFile(team)
		for _, e := range []string{"claude", "codex", "opencode"} {
			if strings.Contains(string(src), `engine = "`+e+`"`) && !strings.Contains(string(readme), binDir(strings.ToUpper(e)+"_BIN")) {
				t.Errorf("examples/%s/README.md: its team runs %s, but its command does not put %s (make tools) on PATH", name, e, binDir(strings.ToUpper(e)+"_BIN"))
			}
		}
	}
}
