package project_test

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/project"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// writeProfile writes profile name into dir.
func writeProfile(t *testing.T, dir, name, src string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Written whole, then renamed into place, as editors save: a plain
	// write is seen half-done by the watcher now and then (the file
	// truncated, not yet written), which would test the debounce's luck.
	path := project.ProfileFile(dir, name)
	if err := os.WriteFile(path+".tmp", []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
	return path
}

const reviewerProfile = `engine = "fake"
model = "slow"
permission_mode = "default"
allowed_tools = ["Read"]
prompt = "You review code."
env = { A = "from-profile", B = "from-profile" }

[fake]
respond = "echo"

[codex]
unused = "another engine's options"
`

// TestProfileMergedAgentOverrides: an agent gets its profile's keys, its
// own win (env variable by variable, prompt_file replacing prompt), and
// another engine's table in the profile is not its.
func TestProfileMergedAgentOverrides(t *testing.T) {
	dir := t.TempDir()
	writeProfile(t, dir, "reviewer", reviewerProfile)
	var used []string
	team, err := project.ParseTeamWith("team.toml", []byte(`[[agent]]
name = "rev"
profile = "reviewer"
model = "fast"
prompt_file = "prompts/rev.md"
env = { B = "own" }
`), project.TeamOptions{Profiles: dir, Used: func(name string, src []byte) {
		used = append(used, name)
		if !strings.Contains(string(src), "You review code.") {
			t.Errorf("Used(%s) src = %q", name, src)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	a := team.Agents[0]
	if a.Engine != "fake" || a.Model != "fast" || a.PermissionMode != "default" || !slices.Equal(a.AllowedTools, []string{"Read"}) {
		t.Errorf("agent = %+v; want the profile's engine, mode and tools with its own model", a)
	}
	if a.Prompt != "" || a.PromptFile != "prompts/rev.md" {
		t.Errorf("prompt %q, prompt_file %q: want the agent's prompt_file alone", a.Prompt, a.PromptFile)
	}
	if want := map[string]string{"A": "from-profile", "B": "own"}; !maps.Equal(a.Env, want) {
		t.Errorf("env = %v; want %v", a.Env, want)
	}
	if len(a.Options) != 1 || a.Options["respond"] != "echo" {
		t.Errorf("options = %v; want the profile's [fake] table alone", a.Options)
	}
	if !slices.Equal(used, []string{"reviewer"}) {
		t.Errorf("used = %v", used)
	}
	// The resolved team round-trips without the profile: the approved
	// team is what the profile said when it was approved.
	enc, err := project.EncodeTeam(team)
	if err != nil || strings.Contains(string(enc), "profile =") {
		t.Fatalf("EncodeTeam = %s, %v", enc, err)
	}
}

// TestProfileErrorsNameTheField: a missing profile, a bad key in one, a
// profile that names its agent: each a team error naming the agent, the
// profile and the path.
func TestProfileErrorsNameTheField(t *testing.T) {
	dir := t.TempDir()
	writeProfile(t, dir, "typo", "engine = \"fake\"\nmodle = \"x\"\n")
	writeProfile(t, dir, "named", "name = \"other\"\nengine = \"fake\"\n")
	writeProfile(t, dir, "broken", "engine = \n")
	cases := []struct{ profile, want string }{
		{"nope", `team.toml:3: agent "x": profile "nope": ` + filepath.Join(dir, "nope.toml") + ` does not exist: create it`},
		{"typo", filepath.Join(dir, "typo.toml") + `:2: agent "x": profile "typo": modle: unknown key`},
		{"named", `team.toml:3: agent "x": profile "named": ` + filepath.Join(dir, "named.toml") + `:1: name: a profile does not name its agent`},
		{"broken", `team.toml:3: agent "x": profile "broken": ` + filepath.Join(dir, "broken.toml") + `:1: syntax error`},
		{"../x", `team.toml:3: agent "x": profile: bad profile name "../x"`},
	}
	for _, c := range cases {
		_, err := project.ParseTeamWith("team.toml", []byte("[[agent]]\nname = \"x\"\nprofile = \""+c.profile+"\"\n"), project.TeamOptions{Profiles: dir})
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("profile %s: %v\nwant prefix %s", c.profile, err, c.want)
		}
		if err != nil && !errors.Is(err, troupe.ErrInvalid) {
			t.Errorf("profile %s: %v does not match ErrInvalid", c.profile, err)
		}
	}
}

// TestProfileChangeWideningIsHeld: a change of a profile reloads the team
// that uses it (the registry's watcher follows the profiles folder); one
// that widens permission_mode is held until the person approves it, as an
// edit of team.toml would be; one that narrows applies at once.
func TestProfileChangeWideningIsHeld(t *testing.T) {
	profiles := filepath.Join(t.TempDir(), "troupe", "profiles")
	writeProfile(t, profiles, "rev", "engine = \"fake\"\npermission_mode = \"default\"\nallowed_tools = [\"Read\", \"Edit\"]\n")
	proj := t.TempDir()
	os.MkdirAll(filepath.Join(proj, ".troupe"), 0o755)
	if err := os.WriteFile(filepath.Join(proj, project.TeamFile), []byte("[[agent]]\nname = \"a\"\nprofile = \"rev\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := project.Open(t.Context(), project.Options{Store: project.NewMemStore(), Profiles: profiles, Debounce: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	changes := make(chan troupe.TeamChange, 16)
	r.Listen(func(c troupe.TeamChange) { changes <- c }, nil)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	info, err := r.Add(t.Context(), proj)
	if err != nil || info.TeamError != "" {
		t.Fatalf("Add = %+v, %v", info, err)
	}
	<-changes // the team as added
	key := troupe.RuntimeKey{Project: info.ID, Agent: "a"}
	if a, _, _ := r.Agent(key); a.PermissionMode != "default" {
		t.Fatalf("agent = %+v; want the profile's mode", a)
	}
	next := func() troupe.TeamChange {
		t.Helper()
		select {
		case c := <-changes:
			return c
		case <-time.After(10 * time.Second):
			t.Fatal("no team change within 10s of the profile's change")
		}
		return troupe.TeamChange{}
	}

	writeProfile(t, profiles, "rev", "engine = \"fake\"\npermission_mode = \"bypassPermissions\"\nallowed_tools = [\"Read\", \"Edit\"]\n")
	if c := next(); !slices.Equal(c.Held, []troupe.AgentID{"a"}) {
		t.Fatalf("change = %+v; want agent a held", c)
	}
	if a, _, _ := r.Agent(key); a.PermissionMode != "default" {
		t.Fatalf("in force before approval: permission_mode %q; want \"default\"", a.PermissionMode)
	}
	p, ok := r.Pending(info.ID)
	if !ok || len(p.Agents) != 1 || p.Agents[0].Changes[0].Field != "permission_mode" {
		t.Fatalf("Pending = %+v, %v; want a's permission_mode", p, ok)
	}
	// The profile changes again after the person read the diff: what
	// they read no longer approves anything (the digest covers the
	// profiles the team uses, not only its file).
	writeProfile(t, profiles, "rev", "engine = \"fake\"\npermission_mode = \"bypassPermissions\"\nallowed_tools = [\"Read\", \"Edit\", \"Bash\"]\n")
	if c := next(); !slices.Equal(c.Held, []troupe.AgentID{"a"}) {
		t.Fatalf("change = %+v; want agent a held again", c)
	}
	if err := r.Approve(t.Context(), info.ID, p.Digest); !errors.Is(err, troupe.ErrConflict) {
		t.Fatalf("Approve of the digest read before the profile changed: %v; want ErrConflict", err)
	}
	p, _ = r.Pending(info.ID)
	if err := r.Approve(t.Context(), info.ID, p.Digest); err != nil {
		t.Fatal(err)
	}
	if a, _, _ := r.Agent(key); a.PermissionMode != "bypassPermissions" {
		t.Fatalf("after approval: permission_mode %q", a.PermissionMode)
	}
	next() // the approval's change

	// Narrowing applies at once.
	writeProfile(t, profiles, "rev", "engine = \"fake\"\npermission_mode = \"bypassPermissions\"\nallowed_tools = [\"Read\"]\n")
	if c := next(); len(c.Held) > 0 || !slices.Equal(c.Changed, []troupe.AgentID{"a"}) {
		t.Fatalf("change = %+v; want a changed, nothing held", c)
	}
	if a, _, _ := r.Agent(key); !slices.Equal(a.AllowedTools, []string{"Read"}) {
		t.Fatalf("allowed_tools = %v after a narrowing", a.AllowedTools)
	}
}

// TestProfilesListsAndTeamProfiles: the folder's profiles by name, a bad
// one with its error; the agents of a team file that name one.
func TestProfilesListsAndTeamProfiles(t *testing.T) {
	dir := t.TempDir()
	writeProfile(t, dir, "b", "engine = \"claude\"\nmodel = \"sonnet\"\n")
	writeProfile(t, dir, "a", "name = \"x\"\n")
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o644)
	ps, cut, err := project.Profiles(dir)
	if err != nil || cut || len(ps) != 2 || ps[0].Name != "a" || ps[0].Error == "" || ps[1].Engine != "claude" || ps[1].Model != "sonnet" {
		t.Fatalf("Profiles = %+v, %v", ps, err)
	}
	if ps, _, err := project.Profiles(filepath.Join(dir, "missing")); err != nil || ps != nil {
		t.Fatalf("Profiles of a missing folder = %+v, %v", ps, err)
	}
	got := project.TeamProfiles([]byte("[[agent]]\nname = \"x\"\nprofile = \"b\"\n[[agent]]\nname = \"y\"\nengine = \"fake\"\n"))
	if want := []project.AgentProfile{{Agent: "x", Profile: "b"}}; !slices.Equal(got, want) {
		t.Fatalf("TeamProfiles = %+v; want %+v", got, want)
	}
}

// TestProfileDir: XDG_CONFIG_HOME, else HOME/.config.
func TestProfileDir(t *testing.T) {
	env := map[string]string{"HOME": "/h"}
	if d, _ := project.ProfileDir(func(k string) string { return env[k] }); d != "/h/.config/troupe/profiles" {
		t.Errorf("ProfileDir = %s", d)
	}
	env["XDG_CONFIG_HOME"] = "/x"
	if d, _ := project.ProfileDir(func(k string) string { return env[k] }); d != "/x/troupe/profiles" {
		t.Errorf("ProfileDir = %s", d)
	}
}

// TestProfileEngineCheckNamesTheProfile: an engine option its engine
// refuses, written in the profile, is reported in the profile's file at
// its line, naming agent and profile.
func TestProfileEngineCheckNamesTheProfile(t *testing.T) {
	dir := t.TempDir()
	path := writeProfile(t, dir, "rev", "engine = \"fake\"\n\n[fake]\nrespond = \"!nope\"\n")
	_, err := project.ParseTeamWith("team.toml", []byte("[[agent]]\nname = \"x\"\nprofile = \"rev\"\n"), project.TeamOptions{Profiles: dir,
		Check: func(a troupe.AgentSpec) error {
			return &troupe.FieldError{Field: "fake.respond", Msg: "unknown directive"}
		}})
	if want := path + `:4: agent "x": profile "rev": fake.respond: unknown directive`; err == nil || err.Error() != want {
		t.Fatalf("error = %v\nwant %s", err, want)
	}
}
