package project

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// TestPreviewThenAddSeen: the person sees a folder's team before adding
// it; adding it with what was seen approves that team; a file changed in
// between is added held, its grants waiting for the person.
func TestPreviewThenAddSeen(t *testing.T) {
	ctx := context.Background()
	r, err := Open(ctx, Options{Store: NewMemStore()})
	if err != nil {
		t.Fatal(err)
	}
	team := func(dir, mode string) {
		t.Helper()
		os.MkdirAll(filepath.Join(dir, ".troupe"), 0o755)
		if err := os.WriteFile(filepath.Join(dir, TeamFile), []byte("[[agent]]\nname = \"dev\"\nengine = \"fake\"\npermission_mode = \""+mode+"\"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	same := t.TempDir()
	team(same, "default")
	pv, err := r.Preview(same)
	if err != nil || pv.Team == nil || len(pv.Team.Agents) != 1 || pv.Digest == "" || pv.TeamError != "" {
		t.Fatalf("Preview = %+v, %v", pv, err)
	}
	info, err := r.AddSeen(ctx, same, pv.Digest)
	if err != nil || info.Team == nil || len(info.Team.Agents) != 1 {
		t.Fatalf("AddSeen of the file seen: %+v, %v", info, err)
	}
	if _, held := r.Pending(info.ID); held {
		t.Errorf("AddSeen of the file seen: a change is held")
	}
	if _, err := r.Preview(same); !errors.Is(err, troupe.ErrAlreadyExists) {
		t.Errorf("Preview of a registered folder: %v; want already exists", err)
	}

	changed := t.TempDir()
	team(changed, "default")
	pv, err = r.Preview(changed)
	if err != nil {
		t.Fatal(err)
	}
	team(changed, "bypassPermissions") // widened after the person looked
	info, err = r.AddSeen(ctx, changed, pv.Digest)
	if err != nil {
		t.Fatal(err)
	}
	if pend, held := r.Pending(info.ID); !held || len(pend.Agents) != 1 {
		t.Fatalf("AddSeen of a file changed since: pending %+v, %v; want the agent held", pend, held)
	}
	if info.Team != nil && len(info.Team.Agents) != 0 {
		t.Errorf("AddSeen of a file changed since: agents in force %+v; want none before approval", info.Team.Agents)
	}

	bad := t.TempDir()
	os.MkdirAll(filepath.Join(bad, ".troupe"), 0o755)
	os.WriteFile(filepath.Join(bad, TeamFile), []byte("[[agent]]\nname = \"dev\"\nengin = \"fake\"\n"), 0o644)
	if pv, err := r.Preview(bad); err != nil || pv.Team != nil || !strings.Contains(pv.TeamError, "engin") {
		t.Errorf("Preview of a bad team file: %+v, %v; want its error", pv, err)
	}
	if _, err := r.Preview(filepath.Join(bad, "nope")); err == nil {
		t.Errorf("Preview of a missing folder: no error")
	}
}

// TestWriteTeamFile: the person's edit of a team file is written only over
// the file it was made from, only when it parses, and what it widens is
// held for approval, not approved by the write.
func TestWriteTeamFile(t *testing.T) {
	ctx := context.Background()
	r, err := Open(ctx, Options{Store: NewMemStore()})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	info, err := r.Add(ctx, dir) // no team file yet
	if err != nil {
		t.Fatal(err)
	}
	src, base, err := r.TeamFile(info.ID)
	if err != nil || src != nil || base != "" {
		t.Fatalf("TeamFile of a project without one: %q %q %v", src, base, err)
	}
	if _, err := r.WriteTeamFile(ctx, info.ID, []byte("[[agent]]\nname = \"dev\"\nengin = \"fake\"\n"), base); err == nil || !strings.Contains(err.Error(), "engin") {
		t.Fatalf("a team that does not parse: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, TeamFile)); !os.IsNotExist(err) {
		t.Fatalf("a team that does not parse was written: %v", err)
	}
	one := []byte("[[agent]]\nname = \"dev\"\nengine = \"fake\"\n")
	info, err = r.WriteTeamFile(ctx, info.ID, one, base)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, TeamFile)); string(b) != string(one) {
		t.Errorf("the file holds %q", b)
	}
	pend, held := r.Pending(info.ID)
	if !held || len(pend.Agents) != 1 {
		t.Fatalf("a new agent written by the person: held %v %+v; want it held for approval", held, pend)
	}
	// Written over a file that changed since it was read: refused.
	if _, err := r.WriteTeamFile(ctx, info.ID, one, base); !errors.Is(err, troupe.ErrConflict) {
		t.Errorf("a write over a changed file: %v; want a conflict", err)
	}
	_, now, _ := r.TeamFile(info.ID)
	if _, err := r.WriteTeamFile(ctx, info.ID, make([]byte, 2<<20), now); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("a team file over the limit: %v", err)
	}
	// .troupe leading outside the project: refused, nothing written there.
	outside := t.TempDir()
	os.Rename(filepath.Join(dir, ".troupe"), filepath.Join(outside, "moved"))
	if err := os.Symlink(outside, filepath.Join(dir, ".troupe")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.WriteTeamFile(ctx, info.ID, one, ""); err == nil {
		t.Errorf("a write through a .troupe symlink leading outside: no error")
	}
	if _, err := os.Stat(filepath.Join(outside, "team.toml")); !os.IsNotExist(err) {
		t.Errorf("a team file was written outside the project: %v", err)
	}
}
