package daemon

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/troupe-dev/troupe/internal/project"
	"github.com/troupe-dev/troupe/internal/sandbox"
)

// TestExampleTeamsAreSandboxed: every agent of every team under examples/,
// and of the demo `make run` serves (read from the Makefile's run target),
// runs in its sandbox. An example that sets sandbox = false, or an engine
// whose default turns off, fails here. cmd/troupe's
// TestBinaryDemoAgentsRunSandboxed checks the demo's processes themselves.
func TestExampleTeamsAreSandboxed(t *testing.T) {
	files, _ := filepath.Glob("../../examples/*/.troupe/team.toml")
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^run:.*\n\t.*\bserve --project (\S+)`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("the Makefile's run target does not serve a project with --project: which team does make run use?")
	}
	demo := filepath.Join("../..", string(m[1]), ".troupe", "team.toml")
	if _, err := os.Stat(demo); err != nil {
		t.Fatalf("make run's team: %v", err)
	}
	files = append(files, demo)
	if len(files) < 6 {
		t.Fatalf("found %d teams, want the 5 examples and make run's", len(files))
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		team, err := project.ParseTeam(f, src)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if len(team.Agents) == 0 {
			t.Errorf("%s: no agents", f)
		}
		for _, a := range team.Agents {
			if !sandbox.Enabled(a) {
				t.Errorf("%s: agent %q (engine %s, mode %s) runs unsandboxed: examples run sandboxed by default", f, a.Name, a.Engine, a.Mode)
			}
		}
	}
}
