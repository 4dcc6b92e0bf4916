package worktree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// personRepo is a repository as a person leaves it while agents work: a
// commit, a staged change, an unstaged one, a stash entry, an ignored file.
func personRepo(t testing.TB) string {
	t.Helper()
	repo := t.TempDir()
	write := func(name, body string) { writeFile(t, repo, name, body) }
	git := func(args ...string) { run(t, repo, args...) }
	write("README", "hi\n")
	write("src/a.go", "package a\n")
	write(".gitignore", "build/\n")
	git("init", "-q", "-b", "main")
	git("add", "-A")
	git("commit", "-q", "-m", "start")
	write("README", "stashed\n")
	git("stash", "-q")
	write("staged.txt", "staged\n")
	git("add", "staged.txt")
	write("src/a.go", "package a // edited\n")
	write("build/out.bin", "ignored\n")
	return repo
}

// personState is what the person's git shows: status, index, stash, HEAD.
func personState(t *testing.T, repo string) string {
	t.Helper()
	return strings.Join([]string{
		run(t, repo, "status", "--porcelain", "--untracked-files=all"),
		run(t, repo, "diff", "--cached", "--name-status"),
		run(t, repo, "stash", "list", "--format=%H"),
		run(t, repo, "rev-parse", "HEAD"),
	}, "\n--\n")
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

// turn runs one turn of agent k in work: a Base, change, a checkpoint.
func turn(t *testing.T, m *Manager, k troupe.RuntimeKey, work string, change func()) Checkpoint {
	t.Helper()
	ctx := context.Background()
	base, err := m.Base(ctx, k, work)
	if err != nil {
		t.Fatal(err)
	}
	change()
	cp, err := m.Checkpoint(ctx, k, work, "turn", troupe.TurnID(fmt.Sprintf("t%d", time.Now().UnixNano())), base, DefaultRetention)
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

// TestCheckpointsOfAShellsChanges: a turn's checkpoint holds what
// changed on disk (a file a shell wrote, one it removed, a new folder),
// its diff shows exactly that turn, a rewind restores the files exactly
// and can itself be undone, and the person's status, index, stash and
// HEAD never change but for the rewound files.
func TestCheckpointsOfAShellsChanges(t *testing.T) {
	repo := personRepo(t)
	m := New(t.TempDir())
	k := troupe.RuntimeKey{Project: "p1", Agent: "dev"}
	ctx := context.Background()
	before := personState(t, repo)

	cp1 := turn(t, m, k, repo, func() {
		os.WriteFile(filepath.Join(repo, "f.txt"), []byte("v1\n"), 0o644)
	})
	if cp1.Seq != 1 || cp1.Files != 1 || cp1.Added != 1 || cp1.Reason != "turn" || cp1.Turn == "" {
		t.Fatalf("first checkpoint = %+v; want seq 1, 1 file +1", cp1)
	}
	if got := personState(t, repo); got != strings.Replace(before, "?? build", "?? f.txt\n?? build", 1) && !strings.Contains(got, "?? f.txt") {
		t.Fatalf("person's state after a checkpoint:\n%s\nwant as before plus f.txt:\n%s", got, before)
	}
	// The person edits between turns: not the next turn's change.
	os.WriteFile(filepath.Join(repo, "person.txt"), []byte("mine\n"), 0o644)
	cp2 := turn(t, m, k, repo, func() {
		os.WriteFile(filepath.Join(repo, "f.txt"), []byte("v2\n"), 0o644)
		os.MkdirAll(filepath.Join(repo, "gen", "deep"), 0o755)
		os.WriteFile(filepath.Join(repo, "gen", "deep", "new.txt"), []byte("n\n"), 0o644)
		os.Remove(filepath.Join(repo, "src", "a.go"))
	})
	if cp2.Seq != 2 || cp2.Files != 3 {
		t.Fatalf("second checkpoint = %+v; want seq 2, 3 files (f.txt, gen/deep/new.txt, src/a.go)", cp2)
	}
	d, err := m.CheckpointDiff(ctx, k, repo, 2, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"-v1", "+v2", "gen/deep/new.txt", "deleted file mode", "src/a.go"} {
		if !strings.Contains(d.Diff, want) {
			t.Errorf("diff of turn 2 lacks %q:\n%s", want, d.Diff)
		}
	}
	if strings.Contains(d.Diff, "person.txt") || strings.Contains(d.Diff, "build/") {
		t.Errorf("diff of turn 2 shows the person's edit between turns or an ignored file:\n%s", d.Diff)
	}
	list, err := m.Checkpoints(ctx, k, repo)
	if err != nil || len(list) != 2 || list[1].Files != 3 || list[0].Turn != cp1.Turn {
		t.Fatalf("Checkpoints = %+v, %v", list, err)
	}

	undo, err := m.Rewind(ctx, k, repo, 1, DefaultRetention)
	if err != nil {
		t.Fatal(err)
	}
	if undo.Seq != 3 || undo.Reason != "rewind to 1" {
		t.Fatalf("checkpoint before the rewind = %+v", undo)
	}
	if read(t, filepath.Join(repo, "f.txt")) != "v1\n" || read(t, filepath.Join(repo, "src", "a.go")) != "package a // edited\n" {
		t.Fatalf("rewind to 1: f.txt %q, src/a.go %q", read(t, filepath.Join(repo, "f.txt")), read(t, filepath.Join(repo, "src", "a.go")))
	}
	if _, err := os.Stat(filepath.Join(repo, "gen", "deep", "new.txt")); err == nil {
		t.Fatal("rewind to 1 left a file turn 2 made")
	}
	if read(t, filepath.Join(repo, "build", "out.bin")) != "ignored\n" {
		t.Fatal("rewind touched an ignored file")
	}
	// Undone: back to the present before the rewind.
	if _, err := m.Rewind(ctx, k, repo, undo.Seq, DefaultRetention); err != nil {
		t.Fatal(err)
	}
	if read(t, filepath.Join(repo, "f.txt")) != "v2\n" || read(t, filepath.Join(repo, "gen", "deep", "new.txt")) != "n\n" {
		t.Fatal("rewinding to the checkpoint a rewind made did not undo it")
	}
	if _, err := os.Stat(filepath.Join(repo, "src", "a.go")); err == nil {
		t.Fatal("undoing the rewind brought back a file turn 2 removed")
	}
	// The person's index, stash and HEAD never moved.
	got := personState(t, repo)
	for _, part := range []string{run(t, repo, "stash", "list", "--format=%H"), "A\tstaged.txt"} {
		if !strings.Contains(got, part) || !strings.Contains(before, part) {
			t.Errorf("person's state lost %q:\n%s", part, got)
		}
	}
	if run(t, repo, "diff", "--cached", "--name-status") != "A\tstaged.txt" {
		t.Errorf("the person's index changed: %q", run(t, repo, "diff", "--cached", "--name-status"))
	}
	if _, err := m.Rewind(ctx, k, repo, 99, DefaultRetention); !errors.Is(err, troupe.ErrNotFound) {
		t.Errorf("rewind to a checkpoint that does not exist: %v", err)
	}
}

// TestCheckpointsSurviveGC: a checkpoint's objects outlive git gc
// --prune=now (its ref keeps them), a restart (a new Manager, its index
// gone), and a lock a dead snapshot left on troupe's index.
func TestCheckpointsSurviveGC(t *testing.T) {
	repo := personRepo(t)
	root := t.TempDir()
	m := New(root)
	k := troupe.RuntimeKey{Project: "p1", Agent: "dev"}
	ctx := context.Background()
	turn(t, m, k, repo, func() { os.WriteFile(filepath.Join(repo, "f.txt"), []byte("kept\n"), 0o644) })
	run(t, repo, "gc", "-q", "--prune=now")
	// The daemon died in a snapshot: troupe's index locked, a commit
	// without a ref. A new daemon goes on.
	os.WriteFile(m.indexPath(k)+".lock", nil, 0o600)
	m = New(root)
	cp := turn(t, m, k, repo, func() { os.WriteFile(filepath.Join(repo, "f.txt"), []byte("next\n"), 0o644) })
	if cp.Seq != 2 {
		t.Fatalf("checkpoint after a restart = %+v; want seq 2", cp)
	}
	os.Remove(m.indexPath(k))
	if _, err := m.Rewind(ctx, k, repo, 1, DefaultRetention); err != nil {
		t.Fatal(err)
	}
	if read(t, filepath.Join(repo, "f.txt")) != "kept\n" {
		t.Fatalf("rewind after gc: f.txt = %q", read(t, filepath.Join(repo, "f.txt")))
	}
	if out := run(t, repo, "fsck", "--no-dangling"); strings.Contains(out, "broken") || strings.Contains(out, "missing") {
		t.Fatalf("git fsck: %s", out)
	}
}

// TestTwoAgentsInOneFolder: each agent of a project folder has its own
// checkpoints and its own index.
func TestTwoAgentsInOneFolder(t *testing.T) {
	repo := personRepo(t)
	m := New(t.TempDir())
	a, b := troupe.RuntimeKey{Project: "p1", Agent: "a"}, troupe.RuntimeKey{Project: "p1", Agent: "b"}
	turn(t, m, a, repo, func() { os.WriteFile(filepath.Join(repo, "a.txt"), []byte("a\n"), 0o644) })
	turn(t, m, a, repo, func() { os.WriteFile(filepath.Join(repo, "a.txt"), []byte("a2\n"), 0o644) })
	cb := turn(t, m, b, repo, func() { os.WriteFile(filepath.Join(repo, "b.txt"), []byte("b\n"), 0o644) })
	if cb.Seq != 1 || cb.Files != 1 {
		t.Fatalf("b's first checkpoint = %+v; want seq 1, b.txt alone", cb)
	}
	la, _ := m.Checkpoints(context.Background(), a, repo)
	lb, _ := m.Checkpoints(context.Background(), b, repo)
	if len(la) != 2 || len(lb) != 1 {
		t.Fatalf("a has %d checkpoints, b %d; want 2 and 1", len(la), len(lb))
	}
	// Another project's agent of the same name shares nothing (C1).
	other := troupe.RuntimeKey{Project: "p2", Agent: "a"}
	if lo, _ := m.Checkpoints(context.Background(), other, repo); len(lo) != 0 {
		t.Fatalf("p2's agent a sees %d checkpoints of p1's", len(lo))
	}
}

// TestCheckpointRetention keeps the newest Keep and every one younger
// than KeepFor, never the newest.
func TestCheckpointRetention(t *testing.T) {
	repo := personRepo(t)
	m := New(t.TempDir())
	k := troupe.RuntimeKey{Project: "p1", Agent: "dev"}
	ctx := context.Background()
	for i := range 5 {
		if _, err := m.Checkpoint(ctx, k, repo, "turn", "", "", Retention{Keep: 2}); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(repo, "f.txt"), []byte(fmt.Sprint(i)), 0o644)
	}
	list, _ := m.Checkpoints(ctx, k, repo)
	var seqs []int64
	for _, cp := range list {
		seqs = append(seqs, cp.Seq)
	}
	if !slices.Equal(seqs, []int64{4, 5}) {
		t.Fatalf("kept %v; want the newest two, [4 5]", seqs)
	}
	// Young ones are kept whatever Keep says.
	if _, err := m.Checkpoint(ctx, k, repo, "turn", "", "", Retention{Keep: 1, KeepFor: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if list, _ := m.Checkpoints(ctx, k, repo); len(list) != 3 {
		t.Fatalf("%d kept; want all 3 (younger than KeepFor)", len(list))
	}
}

// TestCheckpointHostileWorkspace: a file over the size bound is left out
// and named, a binary file and a symlink to a secret are kept as what
// they are (the link, not its target), a .git folder the agent made is a
// repository's link, and thousands of files cost one snapshot.
func TestCheckpointHostileWorkspace(t *testing.T) {
	repo := personRepo(t)
	m := New(t.TempDir())
	k := troupe.RuntimeKey{Project: "p1", Agent: "dev"}
	ctx := context.Background()
	old := MaxCheckpointFile
	MaxCheckpointFile = 1 << 20
	t.Cleanup(func() { MaxCheckpointFile = old })
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("SECRET\n"), 0o600)
	cp := turn(t, m, k, repo, func() {
		big := make([]byte, 2<<20)
		os.WriteFile(filepath.Join(repo, "big.bin"), big, 0o644)
		os.WriteFile(filepath.Join(repo, "bin.dat"), []byte{0, 1, 2, 0xff, 0}, 0o644)
		os.Symlink(secret, filepath.Join(repo, "link"))
		nested := filepath.Join(repo, "nested")
		os.MkdirAll(nested, 0o755)
		run(t, nested, "init", "-q")
		os.WriteFile(filepath.Join(nested, "x"), []byte("x"), 0o644)
		os.MkdirAll(filepath.Join(repo, "many"), 0o755)
		for i := range 3000 {
			os.WriteFile(filepath.Join(repo, "many", fmt.Sprint(i)), []byte(fmt.Sprint(i)), 0o644)
		}
	})
	if cp.Skipped != 2 || !slices.Equal(cp.SkippedNames, []string{"big.bin", "nested/"}) {
		t.Fatalf("skipped = %d %v; want big.bin and the repository nested/", cp.Skipped, cp.SkippedNames)
	}
	if cp.Files < 3002 {
		t.Fatalf("files = %d; want the 3000, bin.dat and the link at least", cp.Files)
	}
	tree := run(t, repo, "ls-tree", cp.Commit, "link", "bin.dat", "big.bin")
	if !strings.Contains(tree, "120000 blob") || !strings.Contains(tree, "bin.dat") || strings.Contains(tree, "big.bin") {
		t.Fatalf("ls-tree = %q; want the link as a link, bin.dat in, big.bin out", tree)
	}
	if blob := run(t, repo, "cat-file", "-p", cp.Commit+":link"); blob != secret {
		t.Fatalf("the link's blob = %q; want its target's name, not its content", blob)
	}
	list, _ := m.Checkpoints(ctx, k, repo)
	if len(list) != 1 || list[0].Skipped != 2 || list[0].SkippedNames[0] != "big.bin" {
		t.Fatalf("read back: %+v", list)
	}
	// A rewind does not follow the link out of the workspace.
	os.Remove(filepath.Join(repo, "link"))
	os.WriteFile(filepath.Join(repo, "link"), []byte("a file now\n"), 0o644)
	if _, err := m.Rewind(ctx, k, repo, 1, DefaultRetention); err != nil {
		t.Fatal(err)
	}
	if target, err := os.Readlink(filepath.Join(repo, "link")); err != nil || target != secret || read(t, secret) != "SECRET\n" {
		t.Fatalf("rewound link = %q, %v; secret %q", target, err, read(t, secret))
	}
}

// TestNoCheckpointsOutsideGit: a folder that is not a repository has
// none, and says how to have them.
func TestNoCheckpointsOutsideGit(t *testing.T) {
	dir := t.TempDir()
	m := New(t.TempDir())
	k := troupe.RuntimeKey{Project: "p1", Agent: "dev"}
	if _, err := m.Base(context.Background(), k, dir); !errors.Is(err, ErrNoCheckpoints) {
		t.Fatalf("Base outside git: %v", err)
	}
	if _, err := m.Checkpoints(context.Background(), k, dir); !errors.Is(err, ErrNoCheckpoints) || !strings.Contains(err.Error(), "git init") {
		t.Fatalf("Checkpoints outside git: %v", err)
	}
}

// TestCheckpointWhileAFileIsWritten: checkpoints made while the agent's
// program rewrites a file (truncated and written again, as fast as it
// can) are made all the same, and the first one after it stops holds
// the file's last content.
func TestCheckpointWhileAFileIsWritten(t *testing.T) {
	repo := personRepo(t)
	m := New(t.TempDir())
	k := troupe.RuntimeKey{Project: "p1", Agent: "dev"}
	ctx := context.Background()
	name := filepath.Join(repo, "hot.bin")
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		body := make([]byte, 1<<20)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			body[0] = byte(i)
			os.WriteFile(name, body, 0o644)
		}
	}()
	for range 5 {
		if _, err := m.Checkpoint(ctx, k, repo, "turn", "", "", DefaultRetention); err != nil {
			close(stop)
			<-done
			t.Fatalf("a checkpoint while a file is written: %v", err)
		}
	}
	close(stop)
	<-done
	want, _ := os.ReadFile(name)
	cp, err := m.Checkpoint(ctx, k, repo, "turn", "", "", DefaultRetention)
	if err != nil {
		t.Fatal(err)
	}
	if got := run(t, repo, "cat-file", "-s", cp.Commit+":hot.bin"); got != fmt.Sprint(len(want)) {
		t.Fatalf("hot.bin in the last checkpoint: %s bytes; want %d", got, len(want))
	}
	if got := run(t, repo, "rev-parse", cp.Commit+":hot.bin"); got != strings.TrimSpace(hashObject(t, repo, name)) {
		t.Fatal("hot.bin in the last checkpoint is not its last content")
	}
}

func hashObject(t *testing.T, repo, name string) string {
	t.Helper()
	return run(t, repo, "hash-object", name)
}

// TestRewindTouchesOnlyWhatTheCheckpointsHold: a rewind changes only the
// paths that differ between the present and the checkpoint: a file over
// the size bound (left out of both) and, for an agent working in a
// folder inside a bigger repository, the files outside its folder keep
// what they hold now, though no checkpoint holds it.
func TestRewindTouchesOnlyWhatTheCheckpointsHold(t *testing.T) {
	repo := personRepo(t)
	work := filepath.Join(repo, "src")
	m := New(t.TempDir())
	k := troupe.RuntimeKey{Project: "p1", Agent: "dev"}
	ctx := context.Background()
	old := MaxCheckpointFile
	MaxCheckpointFile = 1 << 20
	t.Cleanup(func() { MaxCheckpointFile = old })
	big := filepath.Join(work, "big.bin")
	os.WriteFile(big, make([]byte, 2<<20), 0o644)
	turn(t, m, k, work, func() { os.WriteFile(filepath.Join(work, "f.txt"), []byte("v1\n"), 0o644) })
	turn(t, m, k, work, func() { os.WriteFile(filepath.Join(work, "f.txt"), []byte("v2\n"), 0o644) })
	// Meanwhile the person edits outside the agent's folder, and the big
	// file changes: neither is in a checkpoint.
	os.WriteFile(filepath.Join(repo, "README"), []byte("person's edit\n"), 0o644)
	os.WriteFile(big, make([]byte, 3<<20), 0o644)
	if _, err := m.Rewind(ctx, k, work, 1, DefaultRetention); err != nil {
		t.Fatal(err)
	}
	if read(t, filepath.Join(work, "f.txt")) != "v1\n" {
		t.Fatalf("f.txt = %q; want v1", read(t, filepath.Join(work, "f.txt")))
	}
	if read(t, filepath.Join(repo, "README")) != "person's edit\n" {
		t.Fatalf("the rewind wrote a file outside the agent's folder: README = %q", read(t, filepath.Join(repo, "README")))
	}
	if fi, err := os.Stat(big); err != nil || fi.Size() != 3<<20 {
		t.Fatalf("the rewind wrote the file left out: %v %v", fi, err)
	}
}

// TestCheckpointSeesASameSizeChangeAtOnce: a file committed and then
// rewritten with the same size in the same second is seen changed by the
// first checkpoint (its index, copied from the repository's, keeps git's
// racy-entry check).
func TestCheckpointSeesASameSizeChangeAtOnce(t *testing.T) {
	for range 5 {
		repo := t.TempDir()
		os.WriteFile(filepath.Join(repo, "f.txt"), []byte("v1\n"), 0o644)
		run(t, repo, "init", "-q")
		run(t, repo, "add", ".")
		run(t, repo, "commit", "-qm", "one")
		os.WriteFile(filepath.Join(repo, "f.txt"), []byte("v2\n"), 0o644)
		m := New(t.TempDir())
		cp, err := m.Checkpoint(context.Background(), troupe.RuntimeKey{Project: "p", Agent: "a"}, repo, "turn", "", "", DefaultRetention)
		if err != nil {
			t.Fatal(err)
		}
		if got := run(t, repo, "show", cp.Commit+":f.txt"); got != "v2" {
			t.Fatalf("f.txt in the first checkpoint = %q; want v2", got)
		}
	}
}
