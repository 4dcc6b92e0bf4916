package daemon

import (
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/project"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// TestEngineNotBuiltIsATeamError: a team naming an engine this build does
// not have does not load; the error names the file, line, field and the
// engines this build has.
func TestEngineNotBuiltIsATeamError(t *testing.T) {
	engines, err := newEngines(Config{FakeAgent: []string{"/bin/false"}}, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	// Every engine troupe knows is built now: a build without one (here
	// openai, taken out) refuses a team that names it.
	without := maps.Clone(engines)
	delete(without, troupe.EngineOpenAI)
	src0 := "[[agent]]\nname = \"lead\"\nengine = \"fake\"\n\n[[agent]]\nname = \"b\"\nengine = \"openai\"\nmodel = \"m\"\n"
	_, err = project.ParseTeamChecked(".troupe/team.toml", []byte(src0), checkAgent(without))
	want := `.troupe/team.toml:7: agent "b": engine: "openai" is not built into this troupe (this build has: claude, codex, opencode, acp, terminal, fake): use one of these`
	if err == nil || err.Error() != want {
		t.Errorf("engine openai: err = %v\nwant %s", err, want)
	}
	check := checkAgent(engines)
	// An openai agent needs its server's URL: the engine's Check says so.
	if _, err := project.ParseTeamChecked(".troupe/team.toml", []byte(src0), check); err == nil || !strings.Contains(err.Error(), "openai.base_url: missing") {
		t.Errorf("openai without base_url: %v", err)
	}
	// An acp agent must name its program: the engine's Check says so.
	src := "[[agent]]\nname = \"lead\"\nengine = \"acp\"\n"
	if _, err := project.ParseTeamChecked(".troupe/team.toml", []byte(src), check); err == nil || !strings.Contains(err.Error(), "command: an acp agent needs") {
		t.Errorf("acp without command: %v", err)
	}
	for _, eng := range []string{"fake", "claude", "codex", "opencode"} {
		src := "[[agent]]\nname = \"lead\"\nengine = \"" + eng + "\"\n"
		if _, err := project.ParseTeamChecked(".troupe/team.toml", []byte(src), check); err != nil {
			t.Errorf("engine %s: %v", eng, err)
		}
	}
}

// TestCodexOptionIsATeamError: a bad [agent.codex] key fails the team load
// with the key's path.
func TestCodexOptionIsATeamError(t *testing.T) {
	engines, err := newEngines(Config{FakeAgent: []string{"/bin/false"}}, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	src := "[[agent]]\nname = \"lead\"\nengine = \"codex\"\n[agent.codex]\nconfig = \"model=o3\"\n"
	_, err = project.ParseTeamChecked(".troupe/team.toml", []byte(src), checkAgent(engines))
	if err == nil || !strings.Contains(err.Error(), "codex.config") {
		t.Fatalf("err = %v, want one naming codex.config", err)
	}
}

// TestExampleTeamsLoad: every team under examples/ loads with the engines
// of this build, their options checked by each engine.
func TestExampleTeamsLoad(t *testing.T) {
	engines, err := newEngines(Config{FakeAgent: []string{"/bin/false"}}, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("../../examples/*/.troupe/team.toml")
	if len(files) < 4 {
		t.Fatalf("found %d example teams, want demo, claude-demo, mixed-demo and worktree-demo", len(files))
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := project.ParseTeamChecked(f, src, checkAgent(engines)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// TestTerminalInputIsATeamError: an [agent.terminal] input template with
// a placeholder troupe does not fill fails the team load at its line,
// naming the field and the placeholders there are.
func TestTerminalInputIsATeamError(t *testing.T) {
	engines, err := newEngines(Config{FakeAgent: []string{"/bin/false"}}, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	src := "[[agent]]\nname = \"sh\"\nengine = \"terminal\"\ncommand = \"bash\"\n[agent.terminal]\nidle = \"$ \"\ninput = \"# {sender}\\n{text}\"\n"
	_, err = project.ParseTeamChecked(".troupe/team.toml", []byte(src), checkAgent(engines))
	want := `.troupe/team.toml:7: agent "sh": terminal.input: unknown placeholder {sender}: use {text}, {from}, {kind}, {request} or {tag} ({{ and }} for literal braces)`
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant %s", err, want)
	}
	good := strings.Replace(src, "{sender}", "{from}", 1)
	if _, err := project.ParseTeamChecked(".troupe/team.toml", []byte(good), checkAgent(engines)); err != nil {
		t.Errorf("a good template: %v", err)
	}
}
