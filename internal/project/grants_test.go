package project

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// approvedLead is the team the tests' person approves: one openai agent
// with every kind of grant set.
const approvedLead = `[[agent]]
name = "lead"
engine = "openai"
model = "m1"
prompt = "You lead."
allowed_tools = ["read_file", "write_file"]
permission_mode = "acceptEdits"
command = "/bin/true"
args = ["-v"]
env = { A = "1" }
[agent.openai]
base_url = "http://127.0.0.1:9/v1"
api_key_env = "KEY"
`

// TestC17WideningTable: each change of one field of an approved agent is
// held when it widens a grant (the agent keeps its approved definition)
// and applies at once when it narrows or is neutral.
func TestC17WideningTable(t *testing.T) {
	edit := func(old, new string) string {
		if !strings.Contains(approvedLead, old) {
			t.Fatalf("test bug: %q not in the team", old)
		}
		return strings.Replace(approvedLead, old, new, 1)
	}
	cases := []struct {
		name  string
		file  string
		held  bool
		field string // the held field
	}{
		{"engine", strings.Replace(edit(`engine = "openai"`, `engine = "fake"`), "[agent.openai]", "[agent.fake]", 1), true, "engine"},
		{"command", edit(`command = "/bin/true"`, `command = "/bin/sh"`), true, "command"},
		{"args", edit(`args = ["-v"]`, `args = ["-v", "-c"]`), true, "args"},
		{"args fewer", edit(`args = ["-v"]`, `args = []`), true, "args"},
		{"env added", edit(`env = { A = "1" }`, `env = { A = "1", B = "2" }`), true, "env.B"},
		{"env removed", edit(`env = { A = "1" }`, `env = {}`), true, "env.A"},
		{"base_url", edit(`base_url = "http://127.0.0.1:9/v1"`, `base_url = "http://127.0.0.1:10/v1"`), true, "openai.base_url"},
		{"api_key_env", edit(`api_key_env = "KEY"`, `api_key_env = "OTHER"`), true, "openai.api_key_env"},
		{"engine option", edit(`api_key_env = "KEY"`, "api_key_env = \"KEY\"\nmax_steps = 7"), true, "openai.max_steps"},
		{"tool gained", edit(`["read_file", "write_file"]`, `["read_file", "write_file", "run_command"]`), true, "allowed_tools"},
		{"tool swapped", edit(`["read_file", "write_file"]`, `["read_file", "run_command"]`), true, "allowed_tools"},
		{"mode wider", edit(`"acceptEdits"`, `"bypassPermissions"`), true, "permission_mode"},
		{"mode unknown", edit(`"acceptEdits"`, `"yolo"`), true, "permission_mode"},
		{"mode dropped to the engine default", edit(`permission_mode = "acceptEdits"`+"\n", ""), false, ""},
		{"workspace", edit(`model = "m1"`, "model = \"m1\"\nworkspace = \"worktree\""), true, "workspace"},
		{"terminal mode", edit(`model = "m1"`, "model = \"m1\"\nmode = \"terminal\""), true, "mode"},
		{"tool lost", edit(`["read_file", "write_file"]`, `["read_file"]`), false, ""},
		{"tools reordered", edit(`["read_file", "write_file"]`, `["write_file", "read_file"]`), false, ""},
		{"mode stricter", edit(`"acceptEdits"`, `"default"`), false, ""},
		{"prompt", edit(`prompt = "You lead."`, `prompt = "You lead, and nothing else."`), false, ""},
		{"model", edit(`model = "m1"`, `model = "m2"`), false, ""},
		{"turn_timeout", edit(`model = "m1"`, "model = \"m1\"\nturn_timeout = \"1h\""), false, ""},
		{"sandbox off", edit(`model = "m1"`, "model = \"m1\"\nsandbox = false"), true, "sandbox.enabled"},
		{"sandbox on", edit(`model = "m1"`, "model = \"m1\"\nsandbox = true"), false, ""},
		{"sandbox writable", edit(`model = "m1"`, "model = \"m1\"\nsandbox = { writable = [\"~/.ssh\"] }"), true, "sandbox.writable"},
		{"sandbox readable", edit(`model = "m1"`, "model = \"m1\"\nsandbox = { readable = [\"~/.aws\"] }"), true, "sandbox.readable"},
		{"sandbox hides more", edit(`model = "m1"`, "model = \"m1\"\nsandbox = { hidden = [\"secrets\"], network = false }"), false, ""},
		{"memory capped", edit(`model = "m1"`, "model = \"m1\"\nsandbox = { memory = \"4GiB\" }"), false, ""},
		{"processes lowered", edit(`model = "m1"`, "model = \"m1\"\nsandbox = { processes = 512 }"), false, ""},
		{"processes raised", edit(`model = "m1"`, "model = \"m1\"\nsandbox = { processes = 10000 }"), true, "sandbox.processes"},
		{"processes uncapped", edit(`model = "m1"`, "model = \"m1\"\nsandbox = { processes = \"none\" }"), true, "sandbox.processes"},
	}
	approved, err := ParseTeam("approved", []byte(approvedLead))
	if err != nil {
		t.Fatal(err)
	}
	old := approved.Agents[0]
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			file, err := ParseTeam("file", []byte(c.file))
			if err != nil {
				t.Fatal(err)
			}
			inForce, held := mergeTeam(approved, file)
			got, ok := inForce.Agent("lead")
			if !ok {
				t.Fatal("the approved agent left the team")
			}
			if !c.held {
				if len(held) != 0 {
					t.Fatalf("held %+v; want the change applied at once", held)
				}
				if !sameSpec(got, file.Agents[0]) {
					t.Fatalf("in force %+v; want the file's %+v", got, file.Agents[0])
				}
				return
			}
			if len(held) != 1 || held[0].Agent != "lead" || held[0].New {
				t.Fatalf("held = %+v; want lead held", held)
			}
			if !slices.ContainsFunc(held[0].Changes, func(g GrantChange) bool { return g.Field == c.field }) {
				t.Fatalf("held changes %+v; want one of field %s", held[0].Changes, c.field)
			}
			if !sameSpec(got, old) {
				t.Fatalf("in force %+v; want the approved definition %+v", got, old)
			}
		})
	}
}

// TestC17NewAgentHeldRemovedApplies: an agent the approved team does not
// have is held whole (it does not exist), with its grants listed; an agent
// removed from the file is gone at once.
func TestC17NewAgentHeldRemovedApplies(t *testing.T) {
	approved, _ := ParseTeam("approved", []byte(approvedLead))
	file, err := ParseTeam("file", []byte(strings.ReplaceAll(approvedLead, `"lead"`, `"mole"`)))
	if err != nil {
		t.Fatal(err)
	}
	inForce, held := mergeTeam(approved, file)
	if len(inForce.Agents) != 0 {
		t.Fatalf("in force %+v; want no agent (lead removed, mole held)", inForce.Agents)
	}
	if len(held) != 1 || held[0].Agent != "mole" || !held[0].New {
		t.Fatalf("held %+v; want mole, new", held)
	}
	var fields []string
	for _, g := range held[0].Changes {
		fields = append(fields, g.Field+"="+g.New)
	}
	got := strings.Join(fields, " ")
	for _, want := range []string{`engine=openai`, `command="/bin/true"`, `openai.base_url="http://127.0.0.1:9/v1"`, `openai.api_key_env="KEY"`, `allowed_tools=["read_file", "write_file"]`, `permission_mode=acceptEdits`} {
		if !strings.Contains(got, want) {
			t.Errorf("grants of the new agent %q lack %s", got, want)
		}
	}
}

// registryWith registers a project whose team file holds src (the person's
// approval) and returns the registry, the project and the file's path.
func registryWith(t *testing.T, store Store, src string) (*Registry, troupe.ProjectID, string) {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, TeamFile)
	os.MkdirAll(filepath.Dir(file), 0o755)
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Open(context.Background(), Options{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	info, err := r.Add(context.Background(), dir)
	if err != nil || info.TeamError != "" {
		t.Fatalf("Add = %+v, %v", info, err)
	}
	return r, info.ID, file
}

// TestC17HeldAgentKeepsApprovedDefinition: an agent that writes
// run_command into its own allowed_tools (and a new prompt) keeps its
// approved definition, prompt included, until the person approves the very
// file they saw; a file changed since is refused; a narrowing of another
// agent applies meanwhile.
func TestC17HeldAgentKeepsApprovedDefinition(t *testing.T) {
	two := approvedLead + "[[agent]]\nname = \"b\"\nengine = \"fake\"\nallowed_tools = [\"Read\", \"Bash\"]\n"
	var changes []troupe.TeamChange
	store := NewMemStore()
	r, id, file := registryWith(t, store, two)
	r.Listen(func(c troupe.TeamChange) { changes = append(changes, c) }, nil)
	ctx := context.Background()
	key := troupe.RuntimeKey{Project: id, Agent: "lead"}

	widened := strings.Replace(two, `["read_file", "write_file"]`, `["read_file", "write_file", "run_command"]`, 1)
	widened = strings.Replace(widened, `You lead.`, `You obey me.`, 1)
	widened = strings.Replace(widened, `["Read", "Bash"]`, `["Read"]`, 1)
	os.WriteFile(file, []byte(widened), 0o644)
	r.reload(ctx, id, false, false)

	a, _, _ := r.Agent(key)
	if slices.Contains(a.AllowedTools, "run_command") || a.Prompt != "You lead." {
		t.Fatalf("lead in force = %+v; want its approved definition", a)
	}
	if b, _, _ := r.Agent(troupe.RuntimeKey{Project: id, Agent: "b"}); !slices.Equal(b.AllowedTools, []string{"Read"}) {
		t.Fatalf("b in force = %v; want the narrowing applied at once", b.AllowedTools)
	}
	if last := changes[len(changes)-1]; !slices.Equal(last.Held, []troupe.AgentID{"lead"}) || !slices.Equal(last.Changed, []troupe.AgentID{"b"}) {
		t.Fatalf("change = %+v; want lead held, b changed", last)
	}
	p, ok := r.Pending(id)
	if !ok || len(p.Agents) != 1 || p.Agents[0].Agent != "lead" {
		t.Fatalf("Pending = %+v, %v", p, ok)
	}

	// The agent writes again after the person read the diff: that
	// digest no longer approves anything.
	os.WriteFile(file, []byte(strings.Replace(widened, `"acceptEdits"`, `"bypassPermissions"`, 1)), 0o644)
	r.reload(ctx, id, false, false)
	if err := r.Approve(ctx, id, p.Digest); !errors.Is(err, troupe.ErrConflict) {
		t.Fatalf("Approve of a stale digest: %v; want ErrConflict", err)
	}
	if a, _, _ := r.Agent(key); a.PermissionMode != "acceptEdits" {
		t.Fatalf("a stale approval changed the mode to %q", a.PermissionMode)
	}
	p, _ = r.Pending(id)
	if err := r.Approve(ctx, id, p.Digest); err != nil {
		t.Fatal(err)
	}
	a, _, _ = r.Agent(key)
	if !slices.Contains(a.AllowedTools, "run_command") || a.Prompt != "You obey me." || a.PermissionMode != "bypassPermissions" {
		t.Fatalf("after approval lead = %+v", a)
	}
	if _, ok := r.Pending(id); ok {
		t.Fatal("still pending after approval")
	}
	if last := changes[len(changes)-1]; !slices.Equal(last.Changed, []troupe.AgentID{"lead"}) {
		t.Fatalf("change at approval = %+v; want lead changed", last)
	}
}

// TestC17RestartKeepsApprovedTeam: a held change does not become active
// when the registry is opened again (a daemon restart) and reloads the
// file; a rejection is kept too, and asks again only once the file changes.
func TestC17RestartKeepsApprovedTeam(t *testing.T) {
	store := NewMemStore()
	_, id, file := registryWith(t, store, approvedLead)
	mole := approvedLead + strings.ReplaceAll(approvedLead, `"lead"`, `"mole"`)
	mole = strings.Replace(mole, `base_url = "http://127.0.0.1:9/v1"`, `base_url = "http://127.0.0.1:6666/v1"`, 1)
	os.WriteFile(file, []byte(mole), 0o644)

	for round := range 2 {
		r, err := Open(context.Background(), Options{Store: store})
		if err != nil {
			t.Fatal(err)
		}
		r.reload(context.Background(), id, false, false)
		if a, _, _ := r.Agent(troupe.RuntimeKey{Project: id, Agent: "lead"}); a.Options["base_url"] != "http://127.0.0.1:9/v1" {
			t.Fatalf("round %d: lead's base_url = %v; want the approved one", round, a.Options["base_url"])
		}
		if _, _, ok := r.Agent(troupe.RuntimeKey{Project: id, Agent: "mole"}); ok {
			t.Fatalf("round %d: the held new agent is in force", round)
		}
		p, ok := r.Pending(id)
		if !ok {
			t.Fatalf("round %d: nothing pending", round)
		}
		if round == 0 {
			if err := r.Reject(context.Background(), id, p.Digest); err != nil {
				t.Fatal(err)
			}
		} else if !p.Rejected {
			t.Fatalf("after a restart the rejection is lost: %+v", p)
		}
	}
}

// TestEncodeTeamRoundTrip: the approved team, kept as EncodeTeam's text,
// reads back to the same agents.
func TestEncodeTeamRoundTrip(t *testing.T) {
	src := approvedLead + `[[agent]]
name = "b"
engine = "fake"
idle_timeout = "0"
turn_timeout = "90s"
prompt = "line one\nline \"two\" \\ three"
args = []
allowed_tools = []
env = {}
sandbox = { enabled = true, network = false, writable = ["~/.cache/x"], hidden = ["secrets"], memory = "1536MiB", processes = 300 }
[agent.fake]
respond = "ok"
nested = { x = 1, y = [1.5, 2.0] }
when = 2026-12-01T10:00:00Z
`
	team, err := ParseTeam("in", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	enc, err := EncodeTeam(team)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseTeam("back", enc)
	if err != nil {
		t.Fatalf("parse encoded team: %v\n%s", err, enc)
	}
	if len(back.Agents) != len(team.Agents) {
		t.Fatalf("%d agents back, want %d", len(back.Agents), len(team.Agents))
	}
	for i := range team.Agents {
		if !sameSpec(team.Agents[i], back.Agents[i]) {
			t.Errorf("agent %d:\n got %#v\nwant %#v", i, back.Agents[i], team.Agents[i])
		}
	}
}

// TestC17NarrowingBecomesTheApprovedTeam: what applies at once is the
// approved team from then on: narrowing allowed_tools, then writing the
// old list back, is held.
func TestC17NarrowingBecomesTheApprovedTeam(t *testing.T) {
	store := NewMemStore()
	r, id, file := registryWith(t, store, approvedLead)
	key := troupe.RuntimeKey{Project: id, Agent: "lead"}
	os.WriteFile(file, []byte(strings.Replace(approvedLead, `["read_file", "write_file"]`, `["read_file"]`, 1)), 0o644)
	r.reload(context.Background(), id, false, false)
	if a, _, _ := r.Agent(key); !slices.Equal(a.AllowedTools, []string{"read_file"}) {
		t.Fatalf("after narrowing: %v", a.AllowedTools)
	}
	os.WriteFile(file, []byte(approvedLead), 0o644)
	r.reload(context.Background(), id, false, false)
	if a, _, _ := r.Agent(key); !slices.Equal(a.AllowedTools, []string{"read_file"}) {
		t.Fatalf("widening back applied: %v", a.AllowedTools)
	}
	if _, ok := r.Pending(id); !ok {
		t.Fatal("widening back is not held")
	}
}

// TestC17UpgradeTakesTheLastTeamAsApproved: a project registered before
// approvals were kept has its last loaded team (Store.LastTeam) as the
// approved one; a widening of it is held.
func TestC17UpgradeTakesTheLastTeamAsApproved(t *testing.T) {
	store := NewMemStore()
	dir := t.TempDir()
	file := filepath.Join(dir, TeamFile)
	os.MkdirAll(filepath.Dir(file), 0o755)
	store.AddProject(context.Background(), troupe.Project{ID: "pold", Path: dir, Name: "old"})
	store.SaveTeam(context.Background(), "pold", []byte(approvedLead))
	os.WriteFile(file, []byte(strings.Replace(approvedLead, `"acceptEdits"`, `"bypassPermissions"`, 1)), 0o644)
	r, err := Open(context.Background(), Options{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	if a, _, ok := r.Agent(troupe.RuntimeKey{Project: "pold", Agent: "lead"}); !ok || a.PermissionMode != "acceptEdits" {
		t.Fatalf("lead in force = %+v, %v; want the last team's", a, ok)
	}
	if p, ok := r.Pending("pold"); !ok || p.Agents[0].Changes[0].Field != "permission_mode" {
		t.Fatalf("Pending = %+v, %v", p, ok)
	}
	if a, ok, _ := store.Approval(context.Background(), "pold"); !ok || !strings.Contains(string(a.Team), `"acceptEdits"`) {
		t.Fatalf("the approval is not saved: %q %v", a.Team, ok)
	}
}

// TestSameSpecFollowsPointers: two parses of one agent with a sandbox
// table are the same definition (the *bool fields are different pointers
// to equal values): a reload must not see a change and restart it.
func TestSameSpecFollowsPointers(t *testing.T) {
	src := "[[agent]]\nname = \"a\"\nengine = \"fake\"\nsandbox = { enabled = true, network = false }\n"
	x, err := ParseTeam("x", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	y, _ := ParseTeam("y", []byte(src))
	if !sameSpec(x.Agents[0], y.Agents[0]) {
		t.Error("one agent parsed twice is not the same definition")
	}
	off := false
	y.Agents[0].Sandbox.Network = &off
	y.Agents[0].Sandbox.Enabled = &off
	if sameSpec(x.Agents[0], y.Agents[0]) {
		t.Error("a sandbox turned off is the same definition")
	}
}

// TestCapsRaisedAreHeld: from an approved memory cap, raising it or
// removing it waits for the person; lowering it applies at once.
func TestCapsRaisedAreHeld(t *testing.T) {
	const lead = "[[agent]]\nname = \"lead\"\nengine = \"fake\"\n"
	approved, err := ParseTeam("approved", []byte(lead+"sandbox = { memory = \"4GiB\", processes = 512 }\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, sandbox string
		held          []string
	}{
		{"lowered", `{ memory = "2GiB", processes = 256 }`, nil},
		{"memory raised", `{ memory = "8GiB", processes = 512 }`, []string{"sandbox.memory"}},
		{"memory removed", `{ memory = "none", processes = 512 }`, []string{"sandbox.memory"}},
		{"both back to the defaults", `{ }`, []string{"sandbox.memory", "sandbox.processes"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			file, err := ParseTeam("file", []byte(lead+"sandbox = "+c.sandbox+"\n"))
			if err != nil {
				t.Fatal(err)
			}
			_, held := mergeTeam(approved, file)
			var got []string
			for _, h := range held {
				for _, g := range h.Changes {
					got = append(got, g.Field)
				}
			}
			if !slices.Equal(got, c.held) {
				t.Fatalf("held %v, want %v", got, c.held)
			}
		})
	}
}

// TestGrantsOfNewAgentShowCaps: a new agent's grants name a cap it
// removes or raises beyond the default, not one it sets lower.
func TestGrantsOfNewAgentShowCaps(t *testing.T) {
	for _, c := range []struct {
		sandbox string
		want    []string
	}{
		{`{ memory = "4GiB", processes = 512 }`, nil},
		{`{ memory = "none", processes = 10000 }`, []string{"sandbox.memory", "sandbox.processes"}},
		{`{ processes = "none" }`, []string{"sandbox.processes"}},
	} {
		team, err := ParseTeam("t", []byte("[[agent]]\nname = \"a\"\nengine = \"fake\"\nsandbox = "+c.sandbox+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, g := range Grants(team.Agents[0]) {
			if strings.HasPrefix(g.Field, "sandbox.") {
				got = append(got, g.Field)
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: grants %v, want %v", c.sandbox, got, c.want)
		}
	}
}
