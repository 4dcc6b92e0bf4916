package project

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// TestParseTeamRunner: runner names the runner an agent runs on and
// runner_labels the labels its runner must have; either makes the agent
// work in a worktree.
func TestParseTeamRunner(t *testing.T) {
	for _, c := range []struct {
		src    string
		runner troupe.RunnerName
		labels []string
	}{
		{`runner = "gpu-box"`, "gpu-box", nil},
		{`runner = "` + strings.Repeat("a", 32) + `"`, troupe.RunnerName(strings.Repeat("a", 32)), nil},
		{`runner_labels = ["gpu", "linux-x86"]`, "", []string{"gpu", "linux-x86"}},
		{"workspace = \"worktree\"\nrunner = \"b1\"", "b1", nil},
	} {
		team, err := ParseTeam("team.toml", []byte(leadHead+c.src+"\n"))
		if err != nil {
			t.Errorf("%s: %v", c.src, err)
			continue
		}
		a := team.Agents[0]
		if a.Runner != c.runner || !slices.Equal(a.RunnerLabels, c.labels) || a.Workspace != "worktree" || !a.Remote() {
			t.Errorf("%s: agent %+v; want runner %q, labels %v, workspace worktree", c.src, a, c.runner, c.labels)
		}
	}
	team, err := ParseTeam("team.toml", []byte(leadHead))
	if err != nil || team.Agents[0].Remote() || team.Agents[0].Workspace != "" {
		t.Fatalf("an agent without a runner: %+v, %v; want it local, its workspace unset", team, err)
	}
}

// TestParseTeamRunnerBad: each bad runner or runner_labels is a team error
// at its field, saying what to write; workspace = "project" with a runner
// is one at workspace, on workspace's line, whichever comes first.
func TestParseTeamRunnerBad(t *testing.T) {
	for _, c := range []struct {
		src   string
		field string
		line  int
		msg   string
	}{
		{`runner = "GPU"`, "runner", 4, `bad runner name "GPU": use 1 to 32 lower-case letters`},
		{`runner = "gpu_box"`, "runner", 4, "bad runner name"},
		{`runner = "-gpu"`, "runner", 4, "bad runner name"},
		{`runner = "` + strings.Repeat("a", 33) + `"`, "runner", 4, "bad runner name"},
		{`runner = ""`, "runner", 4, "bad runner name"},
		{`runner = 1`, "runner", 4, `must be a string, not an integer: write it like runner = "gpu-box"`},
		{"runner = \"a\"\nrunner_labels = [\"gpu\"]", "runner_labels", 5, "cannot be used with runner"},
		{"runner_labels = [\"gpu\"]\nrunner = \"a\"", "runner", 5, "cannot be used with runner_labels"},
		{`runner_labels = []`, "runner_labels", 4, "empty: name the labels a runner must have"},
		{`runner_labels = "gpu"`, "runner_labels", 4, "must be an array of strings"},
		{`runner_labels = ["gpu", "gpu"]`, "runner_labels", 4, `label "gpu" is named twice`},
		{`runner_labels = ["Gpu"]`, "runner_labels", 4, `bad label "Gpu"`},
		{`runner_labels = ["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"]`, "runner_labels", 4, "at most 16"},
		{"workspace = \"project\"\nrunner = \"a\"", "workspace", 4, `"project" cannot be used with runner: an agent on a runner works in a worktree`},
		{"runner = \"a\"\n\nworkspace = \"project\"", "workspace", 6, `"project" cannot be used with runner`},
		{"runner_labels = [\"gpu\"]\nworkspace = \"project\"", "workspace", 5, `"project" cannot be used with runner_labels`},
	} {
		_, err := ParseTeam("team.toml", []byte(leadHead+c.src+"\n"))
		var fe *troupe.FieldError
		if !errors.As(err, &fe) || fe.Field != `agent "lead": `+c.field || fe.Line != c.line || !strings.Contains(fe.Msg, c.msg) {
			t.Errorf("%s:\n error %v\n want one at line %d, field %s, saying %q", c.src, err, c.line, c.field, c.msg)
		}
	}
}

// TestRunnerNeedsAGitProject: an agent on a runner in a project that is
// not a git repository is a team error naming its runner field; the team
// stays unloaded. In a repository with a commit it loads.
func TestRunnerNeedsAGitProject(t *testing.T) {
	for _, c := range []struct{ key, field string }{{`runner = "gpu-box"`, "runner"}, {`runner_labels = ["gpu"]`, "runner_labels"}} {
		dir := t.TempDir()
		os.MkdirAll(filepath.Join(dir, ".troupe"), 0o755)
		if err := os.WriteFile(filepath.Join(dir, TeamFile), []byte(leadHead+c.key+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := Open(context.Background(), Options{Store: NewMemStore()})
		if err != nil {
			t.Fatal(err)
		}
		info, err := r.Add(context.Background(), dir)
		if err != nil {
			t.Fatal(err)
		}
		want := `agent "lead": ` + c.field + ": cannot run on a runner: the project folder is not a git repository; run `git init` and commit in it, or remove " + c.field
		if !strings.Contains(info.TeamError, want) || info.Team != nil {
			t.Errorf("%s: team error %q; want it to contain %q", c.key, info.TeamError, want)
		}
	}
	a := troupe.AgentSpec{Name: "lead", Runner: "gpu-box", Workspace: "worktree"}
	dir := t.TempDir()
	gitIn(t, dir, "init", "-q")
	var fe *troupe.FieldError
	if err := checkWorkspace(dir, a); !errors.As(err, &fe) || fe.Field != "runner" || !strings.Contains(fe.Msg, "cannot run on a runner: the project's repository has no commit") {
		t.Fatalf("a repository without a commit: %v; want an error at runner", err)
	}
	gitIn(t, dir, "commit", "-q", "--allow-empty", "-m", "x")
	if err := checkWorkspace(dir, a); err != nil {
		t.Fatalf("a repository with a commit: %v", err)
	}
}

func gitIn(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@a", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@a")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v %s", args, err, out)
	}
}

// TestC17RunnerWidens: putting an agent on a runner, moving it to another
// or back to this machine, and dropping or swapping a required label are
// held for the person; a label more narrows the runners it may run on and
// applies at once. A new agent's grants name its runner.
func TestC17RunnerWidens(t *testing.T) {
	base := leadHead + "runner_labels = [\"gpu\"]\n"
	approved, err := ParseTeam("approved", []byte(base))
	if err != nil {
		t.Fatal(err)
	}
	local, _ := ParseTeam("local", []byte(leadHead))
	for _, c := range []struct {
		name     string
		approved *Team
		file     string
		field    string // "": applies at once
	}{
		{"runner added", local, leadHead + "runner = \"gpu-box\"\n", "runner"},
		{"labels added", local, base, "runner_labels"},
		{"labels to a runner", approved, leadHead + "runner = \"gpu-box\"\n", "runner"},
		{"label swapped", approved, leadHead + "runner_labels = [\"cpu\"]\n", "runner_labels"},
		{"labels dropped: local", approved, leadHead + "workspace = \"worktree\"\n", "runner_labels"},
		{"label added", approved, leadHead + "runner_labels = [\"gpu\", \"big\"]\n", ""},
		{"labels reordered", approved, leadHead + "runner_labels = [\"big\", \"gpu\"]\n", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			file, err := ParseTeam("file", []byte(c.file))
			if err != nil {
				t.Fatal(err)
			}
			inForce, held := mergeTeam(c.approved, file)
			got, _ := inForce.Agent("lead")
			if c.field == "" {
				if len(held) != 0 || !sameSpec(got, file.Agents[0]) {
					t.Fatalf("held %+v, in force %+v; want the change applied at once", held, got)
				}
				return
			}
			if len(held) != 1 || !slices.ContainsFunc(held[0].Changes, func(g GrantChange) bool { return g.Field == c.field }) {
				t.Fatalf("held %+v; want lead held for %s", held, c.field)
			}
			if old, _ := c.approved.Agent("lead"); !sameSpec(got, old) {
				t.Fatalf("in force %+v; want the approved %+v", got, old)
			}
		})
	}
	team, _ := ParseTeam("t", []byte(leadHead+"runner = \"gpu-box\"\n"))
	if gs := Grants(team.Agents[0]); !slices.Contains(gs, GrantChange{Field: "runner", New: `"gpu-box"`}) {
		t.Errorf("grants of a new agent on a runner: %+v; want runner", gs)
	}
	team, _ = ParseTeam("t", []byte(base))
	if gs := Grants(team.Agents[0]); !slices.Contains(gs, GrantChange{Field: "runner_labels", New: `["gpu"]`}) {
		t.Errorf("grants of a new agent on labels: %+v; want runner_labels", gs)
	}
}

// TestEncodeTeamKeepsRunner: the approved team kept in the store keeps
// each agent's runner and labels.
func TestEncodeTeamKeepsRunner(t *testing.T) {
	src := leadHead + "runner = \"gpu-box\"\n[[agent]]\nname = \"b\"\nengine = \"fake\"\nrunner_labels = [\"gpu\", \"big\"]\n"
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
		t.Fatalf("%v\n%s", err, enc)
	}
	for i := range team.Agents {
		if !sameSpec(team.Agents[i], back.Agents[i]) {
			t.Errorf("agent %d back as %+v, want %+v", i, back.Agents[i], team.Agents[i])
		}
	}
}

// TestC17AgentPutOnRunnerIsHeld: an agent that writes runner = "..." into
// the team file keeps running where it was approved (here) until the
// person approves the file; the held change names runner.
func TestC17AgentPutOnRunnerIsHeld(t *testing.T) {
	dir := t.TempDir()
	gitIn(t, dir, "init", "-q")
	gitIn(t, dir, "commit", "-q", "--allow-empty", "-m", "x")
	file := filepath.Join(dir, TeamFile)
	os.MkdirAll(filepath.Dir(file), 0o755)
	if err := os.WriteFile(file, []byte(leadHead), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r, err := Open(ctx, Options{Store: NewMemStore()})
	if err != nil {
		t.Fatal(err)
	}
	info, err := r.Add(ctx, dir)
	if err != nil || info.TeamError != "" {
		t.Fatalf("add = %+v, %v", info, err)
	}
	os.WriteFile(file, []byte(leadHead+"runner = \"evil-box\"\n"), 0o644)
	r.reload(ctx, info.ID, false, false)
	a, _, _ := r.Agent(troupe.RuntimeKey{Project: info.ID, Agent: "lead"})
	if a.Remote() || a.Workspace != "" {
		t.Fatalf("lead in force = %+v; want its approved definition, on this machine", a)
	}
	p, ok := r.Pending(info.ID)
	if !ok || len(p.Agents) != 1 || !slices.Contains(p.Agents[0].Changes, GrantChange{Field: "runner", New: `"evil-box"`}) {
		t.Fatalf("pending = %+v, %v; want lead held for runner", p, ok)
	}
	if err := r.Approve(ctx, info.ID, p.Digest); err != nil {
		t.Fatal(err)
	}
	if a, _, _ := r.Agent(troupe.RuntimeKey{Project: info.ID, Agent: "lead"}); a.Runner != "evil-box" || a.Workspace != "worktree" {
		t.Fatalf("lead after approval = %+v; want on evil-box, in a worktree", a)
	}
}
