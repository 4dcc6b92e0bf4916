package project

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/troupe"
)

func TestPromptFileMustExist(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, ".troupe"), 0o755)
	os.WriteFile(filepath.Join(dir, ".troupe", "team.toml"), []byte("[[agent]]\nname = \"lead\"\nengine = \"fake\"\nprompt_file = \"prompts/lead.md\"\n"), 0o644)
	r, err := Open(context.Background(), Options{Store: NewMemStore()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.Run(ctx) }() // owns the file watcher
	t.Cleanup(func() { cancel(); <-done })
	info, err := r.Add(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	want := `team.toml:4: agent "lead": prompt_file: `
	if !strings.Contains(info.TeamError, want) || !strings.Contains(info.TeamError, "prompts/lead.md does not exist") {
		t.Fatalf("team error = %q, want it to contain %q", info.TeamError, want)
	}
	os.MkdirAll(filepath.Join(dir, "prompts"), 0o755)
	os.WriteFile(filepath.Join(dir, "prompts", "lead.md"), []byte("You lead."), 0o644)
	r.reload(context.Background(), info.ID, false, false)
	// The team added was not loaded, so nothing of it was approved: the
	// good file waits for the person (C17).
	pend, ok := r.Pending(info.ID)
	if !ok {
		t.Fatal("after creating the prompt file: no change held")
	}
	if err := r.Approve(context.Background(), info.ID, pend.Digest); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.Get(info.ID); got.TeamError != "" || got.Team == nil || len(got.Team.Agents) != 1 {
		t.Fatalf("after creating the prompt file: %+v", got)
	}
}

// TestFailingCheckKeepsLastGoodTeam: an agent its engine's Check refuses is
// a team error like a parse error: file, line and field are named, the last
// good team stays in force, and the change carries the error.
func TestFailingCheckKeepsLastGoodTeam(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, ".troupe", "team.toml")
	os.MkdirAll(filepath.Dir(file), 0o755)
	good := leadHead + "[agent.fake]\nrespond = \"ok\"\n"
	os.WriteFile(file, []byte(good), 0o644)
	var changes []troupe.TeamChange
	r, err := Open(context.Background(), Options{Store: NewMemStore(), Check: checkFake})
	if err != nil {
		t.Fatal(err)
	}
	r.Listen(func(c troupe.TeamChange) { changes = append(changes, c) }, nil)
	info, err := r.Add(context.Background(), dir)
	if err != nil || info.TeamError != "" || len(info.Team.Agents) != 1 {
		t.Fatalf("Add = %+v, %v; want the good team", info, err)
	}

	os.WriteFile(file, []byte(leadHead+"[agent.fake]\nrespnd = \"ok\"\n"), 0o644)
	r.reload(context.Background(), info.ID, false, false)
	got, _ := r.Get(info.ID)
	want := file + `:5: agent "lead": fake.respnd: unknown option`
	if !strings.HasPrefix(got.TeamError, want) {
		t.Fatalf("team error = %q, want it to start with %q", got.TeamError, want)
	}
	if a, ok := got.Team.Agent("lead"); !ok || a.Options["respond"] != "ok" {
		t.Fatalf("last good team lost: %+v", got.Team)
	}
	if last := changes[len(changes)-1]; last.Error != got.TeamError || len(last.Added)+len(last.Changed)+len(last.Removed) > 0 {
		t.Fatalf("last change = %+v, want the error alone", last)
	}

	// The check also applies when the registry is opened again.
	r2, err := Open(context.Background(), Options{Store: r.store, Check: checkFake})
	if err != nil {
		t.Fatal(err)
	}
	got, _ = r2.Get(info.ID)
	if !strings.HasPrefix(got.TeamError, want) || got.Team == nil || len(got.Team.Agents) != 1 {
		t.Fatalf("after Open: %+v, want the error and the last good team", got)
	}
}

// TestOpenNotifiesNobody: Open loads the teams of registered projects without
// calling OnTeamChange (the caller reads them with List); Run, when it starts,
// sees an edit made since Open and reports it (a new agent: held, C17).
func TestOpenNotifiesNobody(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, ".troupe", "team.toml")
	os.MkdirAll(filepath.Dir(file), 0o755)
	os.WriteFile(file, []byte(leadHead), 0o644)
	store := NewMemStore()
	first, err := Open(context.Background(), Options{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Add(context.Background(), dir); err != nil {
		t.Fatal(err)
	}

	changes := make(chan troupe.TeamChange, 10)
	r, err := Open(context.Background(), Options{Store: store, Debounce: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	r.Listen(func(c troupe.TeamChange) { changes <- c }, nil)
	ps := r.List()
	if len(ps) != 1 || ps[0].Team == nil || len(ps[0].Team.Agents) != 1 {
		t.Fatalf("List after Open = %+v, want the project and its team", ps)
	}

	os.WriteFile(file, []byte(leadHead+"[[agent]]\nname = \"b\"\nengine = \"fake\"\n"), 0o644)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case c := <-changes:
		if !slices.Equal(c.Held, []troupe.AgentID{"b"}) || len(c.Added)+len(c.Removed)+len(c.Changed) != 0 {
			t.Fatalf("change at Run = %+v, want b held", c)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not report the edit made since Open")
	}
	// A second Run is refused: one watcher.
	if err := r.Run(ctx); err == nil {
		t.Fatal("a second Run ran")
	}
}
