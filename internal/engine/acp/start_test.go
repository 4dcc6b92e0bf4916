package acp

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// flaky writes a wrapper of the agent's program that counts its runs in a
// file and dies as script says (sh, $n is the run's number), else execs
// real with its arguments.
func flaky(t *testing.T, real, script string) (cmd, count string) {
	t.Helper()
	dir := t.TempDir()
	count = filepath.Join(dir, "runs")
	cmd = filepath.Join(dir, "agent")
	body := "#!/bin/sh\nn=$(( $(cat " + count + " 2>/dev/null || echo 0) + 1 ))\necho $n > " + count + "\n" + script + "\nexec " + real + " \"$@\"\n"
	if err := os.WriteFile(cmd, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return cmd, count
}

func runs(t *testing.T, count string) string {
	t.Helper()
	b, err := os.ReadFile(count)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func startWith(t *testing.T, eng *Engine, command, dir string) (engine.Session, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	return eng.Start(ctx, engine.StartSpec{
		Key:   troupe.RuntimeKey{Project: "p1", Agent: "agent"},
		Agent: troupe.AgentSpec{Name: "agent", Engine: troupe.EngineOpenCode, Command: command},
		Dir:   dir,
	})
}

// TestStartRetriesALockedDatabase: an OpenCode that dies at start with
// "database is locked" (another OpenCode migrating the same HOME's
// database) is started again, and the session then works.
func TestStartRetriesALockedDatabase(t *testing.T) {
	t.Parallel()
	r := newRig(t, nil)
	cmd, count := flaky(t, r.bin, `[ $n -lt 3 ] && { echo "Error: database is locked" >&2; exit 1; }`)
	s, err := startWith(t, r.eng, cmd, r.dir)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { drive.Close(t, s) })
	drive.SessionID(t, s)
	if n := runs(t, count); n != "3" {
		t.Errorf("the agent ran %s times, want 3 (two locked, one good)", n)
	}
	_, end := drive.RunTurn(t, s, "t1", "[[text:after the lock]]")
	if end.Error != "" || end.Text != "after the lock" {
		t.Errorf("turn after the retries: %+v", end)
	}
}

// TestStartGivesUp: a database that stays locked fails the start after
// startAttempts runs, with OpenCode's words; any other death is not
// retried at all.
func TestStartGivesUp(t *testing.T) {
	t.Parallel()
	eng := NewOpenCode(Options{Environ: func() []string { return []string{"PATH=/usr/bin:/bin"} }})
	for _, c := range []struct {
		name, script, runs, err string
	}{
		{"locked", `echo "database is locked" >&2; exit 1`, "3", "database is locked"},
		{"other", `echo "bad config" >&2; exit 1`, "1", "bad config"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd, count := flaky(t, "/bin/false", c.script)
			s, err := startWith(t, eng, cmd, t.TempDir())
			if err == nil {
				drive.Close(t, s)
				t.Fatal("start of a dying agent succeeded")
			}
			if !strings.Contains(err.Error(), c.err) {
				t.Errorf("start: %v; want it to say %q", err, c.err)
			}
			if n := runs(t, count); n != c.runs {
				t.Errorf("the agent ran %s times, want %s", n, c.runs)
			}
		})
	}
}
