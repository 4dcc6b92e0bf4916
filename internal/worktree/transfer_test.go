package worktree

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// projectRepo is a project's repository: two commits, a .gitignore.
func projectRepo(t testing.TB) string {
	t.Helper()
	repo := t.TempDir()
	writeFile(t, repo, ".gitignore", "build/\n")
	writeFile(t, repo, "README", "hi\n")
	writeFile(t, repo, "src/a.go", "package a\n")
	writeFile(t, repo, "del.txt", "to delete\n")
	run(t, repo, "init", "-q", "-b", "main")
	run(t, repo, "add", "-A")
	run(t, repo, "commit", "-q", "-m", "one")
	writeFile(t, repo, "README", "hi again\n")
	run(t, repo, "commit", "-q", "-am", "two")
	return repo
}

func writeFile(t testing.TB, dir, name, body string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// bundleTo writes what write writes into a file of its own.
func bundleTo(t testing.TB, write func(w io.Writer) error) string {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "b-*.bundle")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := write(f); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

// applied is a runner's clone of repo, its project's HEAD applied: the
// clone and that commit.
func applied(t *testing.T, repo string) (clone, head string) {
	t.Helper()
	ctx := context.Background()
	b := bundleTo(t, func(w io.Writer) (err error) { head, err = Bundle(ctx, repo, nil, w); return err })
	clone = filepath.Join(t.TempDir(), "p1")
	got, err := ApplyBundle(ctx, clone, b)
	if err != nil || got != head {
		t.Fatalf("ApplyBundle = %s, %v; want %s", got, err, head)
	}
	return clone, head
}

// bundleCounts reads a bundle's prerequisites and the objects its pack
// holds.
func bundleCounts(t *testing.T, path string) (prereqs int, objects uint32) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h, err := readBundleHeader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	p := b[h.size:]
	if len(p) < 12 || string(p[:4]) != "PACK" {
		t.Fatalf("bundle %s: no pack after its header", path)
	}
	return len(h.prereqs), binary.BigEndian.Uint32(p[8:12])
}

// tree lists the files under dir but .git and build/: content of a file,
// "-> target" of a link, mode bits.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case (rel == ".git" || rel == "build") && d.IsDir():
			return filepath.SkipDir
		case rel == ".git", d.IsDir():
			return nil // a worktree's .git file
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, _ := os.Readlink(p)
			out[rel] = "-> " + target
			return nil
		}
		b, err := os.ReadFile(p)
		out[rel] = fi.Mode().String() + " " + string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestBundleFullThenThin: a first bundle holds the project's whole
// history; once the runner has it, the next holds only the new commit's
// objects, thin against the runner's; commits the runner names that the
// project lacks, and names that are not commit ids, are ignored; a bundle
// of a commit the runner has still applies.
func TestBundleFullThenThin(t *testing.T) {
	repo := projectRepo(t)
	clone := filepath.Join(t.TempDir(), "p1")
	ctx := context.Background()

	var head1 string
	full := bundleTo(t, func(w io.Writer) (err error) { head1, err = Bundle(ctx, repo, nil, w); return err })
	if want := run(t, repo, "rev-parse", "HEAD"); head1 != want {
		t.Fatalf("Bundle's head = %s; want HEAD %s", head1, want)
	}
	all := strings.Count(run(t, repo, "rev-list", "--objects", "HEAD"), "\n") + 1
	if pre, n := bundleCounts(t, full); pre != 0 || int(n) != all {
		t.Fatalf("full bundle: %d prerequisites, %d objects; want 0 and the history's %d", pre, n, all)
	}
	if got, err := ApplyBundle(ctx, clone, full); err != nil || got != head1 {
		t.Fatalf("ApplyBundle(full) = %s, %v; want %s", got, err, head1)
	}
	if got := run(t, clone, "rev-parse", BaseRef); got != head1 {
		t.Fatalf("clone's %s = %s; want %s", BaseRef, got, head1)
	}
	if refs := run(t, clone, "for-each-ref", "--format=%(refname)"); refs != BaseRef {
		t.Fatalf("clone's refs = %q; want only %s", refs, BaseRef)
	}

	writeFile(t, repo, "README", "third\n")
	run(t, repo, "commit", "-q", "-am", "three")
	have, err := Haves(ctx, clone)
	if err != nil || len(have) != 1 || have[0] != head1 {
		t.Fatalf("Haves = %v, %v; want [%s]", have, err, head1)
	}
	var head2 string
	thin := bundleTo(t, func(w io.Writer) (err error) {
		head2, err = Bundle(ctx, repo, append(have, "--output=/tmp/x", strings.Repeat("0", 40), "HEAD~2"), w)
		return err
	})
	// The new commit, its tree and README's new blob: nothing else.
	if pre, n := bundleCounts(t, thin); pre != 1 || n != 3 {
		t.Fatalf("thin bundle: %d prerequisites, %d objects; want 1 and 3 (commit, tree, blob)", pre, n)
	}
	if _, err := ApplyBundle(ctx, filepath.Join(t.TempDir(), "fresh"), thin); !errors.Is(err, ErrMissingPrerequisites) {
		t.Fatalf("a thin bundle to a new clone: %v; want ErrMissingPrerequisites", err)
	}
	if got, err := ApplyBundle(ctx, clone, thin); err != nil || got != head2 {
		t.Fatalf("ApplyBundle(thin) = %s, %v; want %s", got, err, head2)
	}
	if got := run(t, clone, "rev-parse", BaseRef); got != head2 {
		t.Fatalf("clone's %s = %s; want %s", BaseRef, got, head2)
	}

	// The runner has the head already (the project went back to it):
	// a bundle still applies, and holds that commit alone.
	run(t, repo, "reset", "-q", "--hard", head1)
	again := bundleTo(t, func(w io.Writer) error { _, err := Bundle(ctx, repo, []string{head2}, w); return err })
	if _, n := bundleCounts(t, again); n > 3 {
		t.Fatalf("bundle of a commit the runner has: %d objects; want at most 3", n)
	}
	if got, err := ApplyBundle(ctx, clone, again); err != nil || got != head1 {
		t.Fatalf("ApplyBundle(back) = %s, %v; want %s", got, err, head1)
	}
}

// TestApplyBundleTwiceChangesNothing: a bundle applied again to its clone
// (named by a relative path) returns its head and leaves the clone's refs
// as they were.
func TestApplyBundleTwiceChangesNothing(t *testing.T) {
	repo := projectRepo(t)
	t.Chdir(t.TempDir())
	clone := "p1" // relative to the runner's working folder
	ctx := context.Background()
	b := bundleTo(t, func(w io.Writer) error { _, err := Bundle(ctx, repo, nil, w); return err })
	first, err := ApplyBundle(ctx, clone, b)
	if err != nil {
		t.Fatal(err)
	}
	refs := run(t, clone, "for-each-ref")
	second, err := ApplyBundle(ctx, clone, b)
	if err != nil || second != first {
		t.Fatalf("second ApplyBundle = %s, %v; want %s", second, err, first)
	}
	if got := run(t, clone, "for-each-ref"); got != refs {
		t.Fatalf("refs after applying again:\n%s\nwant\n%s", got, refs)
	}
}

// TestBundleOfNoCommit: a repository with no commit, and a folder with no
// repository, are errors saying so.
func TestBundleOfNoCommit(t *testing.T) {
	ctx := context.Background()
	empty := t.TempDir()
	run(t, empty, "init", "-q")
	if _, err := Bundle(ctx, empty, nil, io.Discard); err == nil || !strings.Contains(err.Error(), "no commit yet") {
		t.Fatalf("Bundle of a repository with no commit: %v", err)
	}
	plain := t.TempDir()
	t.Setenv("GIT_CEILING_DIRECTORIES", filepath.Dir(plain))
	if _, err := Bundle(ctx, plain, nil, io.Discard); err == nil || !strings.Contains(err.Error(), "not a git repository") {
		t.Fatalf("Bundle of a folder with no repository: %v", err)
	}
}

// TestRoundTripProjectRunnerDaemon: the project's commit reaches the
// runner's clone, an agent's worktree there is edited (a file changed,
// one added untracked, one deleted, a link, a commit of the agent's, an
// ignored file), Snapshot commits it without moving the agent's index or
// HEAD, and ApplySnapshot makes the daemon's worktree of that agent hold
// the same files, its HEAD and branch unmoved, so the daemon's
// checkpoint and diff see the turn; applied again, nothing changes; no
// hook of either repository runs.
func TestRoundTripProjectRunnerDaemon(t *testing.T) {
	repo := projectRepo(t)
	clone, head := applied(t, repo)
	ctx := context.Background()
	// Hooks in both repositories, which no git of troupe's may run.
	ran := filepath.Join(t.TempDir(), "hook-ran")
	for _, hooks := range []string{filepath.Join(clone, "hooks"), filepath.Join(repo, ".git", "hooks")} {
		for _, h := range []string{"post-checkout", "reference-transaction", "post-index-change"} {
			writeFile(t, hooks, h, "#!/bin/sh\necho "+h+" >> "+ran+"\n")
			if err := os.Chmod(filepath.Join(hooks, h), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The test's own git runs none either.
	gitq := func(t *testing.T, dir string, args ...string) string {
		t.Helper()
		return run(t, dir, append([]string{"-c", "core.hooksPath=/dev/null"}, args...)...)
	}
	defer func() {
		if _, err := os.Stat(ran); err == nil {
			t.Errorf("a repository's hook ran: %s", read(t, ran))
		}
	}()
	work, err := RunnerWorktree(ctx, clone, "dev", head)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := RunnerWorktree(ctx, clone, "dev", ""); err != nil || again != work {
		t.Fatalf("second RunnerWorktree = %s, %v; want %s reused", again, err, work)
	}
	if got := gitq(t, work, "symbolic-ref", "HEAD"); got != "refs/heads/troupe/dev" {
		t.Fatalf("runner worktree on %s; want refs/heads/troupe/dev", got)
	}

	// The agent's turn on the runner.
	writeFile(t, work, "committed.txt", "the agent's commit\n")
	gitq(t, work, "add", "committed.txt")
	gitq(t, work, "commit", "-q", "-m", "agent")
	writeFile(t, work, "src/a.go", "package a // changed\n")
	writeFile(t, work, "new/n.txt", "untracked\n")
	if err := os.Remove(filepath.Join(work, "del.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("src/a.go", filepath.Join(work, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(work, "README"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, work, "build/out.bin", "ignored\n")
	agentHead, agentStatus := gitq(t, work, "rev-parse", "HEAD"), gitq(t, work, "status", "--porcelain")
	agentIndex := read(t, filepath.Join(clone, "worktrees", "dev", "index"))

	if have, err := Haves(ctx, clone); err != nil || !slices.Contains(have, agentHead) || !slices.Contains(have, head) {
		t.Fatalf("Haves = %v, %v; want the agent's branch %s and the base %s", have, err, agentHead, head)
	}
	snap, err := Snapshot(ctx, work, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := gitq(t, work, "rev-parse", "HEAD"); got != agentHead {
		t.Fatalf("Snapshot moved the agent's HEAD: %s; was %s", got, agentHead)
	}
	if got := gitq(t, work, "status", "--porcelain"); got != agentStatus {
		t.Fatalf("Snapshot changed the agent's status:\n%s\nwas\n%s", got, agentStatus)
	}
	if got := read(t, filepath.Join(clone, "worktrees", "dev", "index")); got != agentIndex {
		t.Fatal("Snapshot wrote the agent's index")
	}
	if got := gitq(t, work, "rev-parse", snap+"^"); got != agentHead {
		t.Fatalf("snapshot's parent = %s; want the worktree's HEAD %s", got, agentHead)
	}
	if got := gitq(t, work, "ls-tree", snap, "link"); !strings.HasPrefix(got, "120000 ") {
		t.Fatalf("the snapshot holds the link as %q; want mode 120000", got)
	}
	sb := bundleTo(t, func(w io.Writer) error { return BundleCommit(ctx, clone, snap, []string{head}, w) })
	// The agent's commit, the snapshot and their new objects only.
	if pre, n := bundleCounts(t, sb); pre != 1 || n > 10 {
		t.Fatalf("snapshot bundle: %d prerequisites, %d objects; want 1 and a few", pre, n)
	}

	// The daemon's side: the agent's local worktree.
	m := New(t.TempDir())
	k := troupe.RuntimeKey{Project: "p1", Agent: "dev"}
	spec := troupe.AgentSpec{Name: "dev", Workspace: Worktree}
	dwork, err := m.Dir(ctx, k, spec, repo)
	if err != nil {
		t.Fatal(err)
	}
	base, err := m.Base(ctx, k, dwork)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dwork, "build/local.bin", "ignored here\n")
	dHead, dIndex := gitq(t, dwork, "rev-parse", "HEAD"), read(t, filepath.Join(repo, ".git", "worktrees", "dev", "index"))
	if err := ApplySnapshot(ctx, dwork, sb, snap); err != nil {
		t.Fatal(err)
	}
	want, got := tree(t, work), tree(t, dwork)
	if len(got) != len(want) {
		t.Fatalf("daemon's worktree holds %v;\nwant %v", got, want)
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s = %q; want %q", name, got[name], w)
		}
	}
	if got["link"] != "-> src/a.go" {
		t.Errorf("link = %q; want a link to src/a.go", got["link"])
	}
	if _, err := os.Lstat(filepath.Join(dwork, "build", "out.bin")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("an ignored file of the runner came over: %v", err)
	}
	if read(t, filepath.Join(dwork, "build", "local.bin")) != "ignored here\n" {
		t.Error("an ignored file of the daemon's worktree was touched")
	}
	if got := gitq(t, dwork, "rev-parse", "HEAD"); got != dHead {
		t.Fatalf("ApplySnapshot moved HEAD to %s; was %s", got, dHead)
	}
	if got := gitq(t, dwork, "symbolic-ref", "HEAD"); got != "refs/heads/troupe/dev" {
		t.Fatalf("ApplySnapshot moved the worktree to %s", got)
	}
	if read(t, filepath.Join(repo, ".git", "worktrees", "dev", "index")) != dIndex {
		t.Fatal("ApplySnapshot wrote the worktree's own index")
	}
	if got := gitq(t, repo, "rev-parse", SnapshotRefs+"dev"); got != snap {
		t.Fatalf("daemon's %sdev = %s; want %s", SnapshotRefs, got, snap)
	}
	cp, err := m.Checkpoint(ctx, k, dwork, "turn", "t1", base, DefaultRetention)
	if err != nil {
		t.Fatal(err)
	}
	// committed.txt, src/a.go, new/n.txt, del.txt, link, README's mode.
	if cp.Files != 6 {
		t.Fatalf("checkpoint of the remote turn = %+v; want 6 files", cp)
	}
	d, err := m.Diff(ctx, k, spec, repo, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"+package a // changed", "+untracked", "deleted file mode", "+the agent's commit", "new file mode 120000"} {
		if !strings.Contains(d.Diff, w) {
			t.Errorf("troupe diff lacks %q:\n%s", w, d.Diff)
		}
	}

	if err := ApplySnapshot(ctx, dwork, sb, snap); err != nil {
		t.Fatalf("ApplySnapshot again: %v", err)
	}
	if again := tree(t, dwork); len(again) != len(got) {
		t.Fatalf("ApplySnapshot again changed the files: %v", again)
	}

	// The next turn: thin against the snapshot the daemon has.
	if err := os.Remove(filepath.Join(work, "new", "n.txt")); err != nil {
		t.Fatal(err)
	}
	snap2, err := Snapshot(ctx, work, "")
	if err != nil {
		t.Fatal(err)
	}
	sb2 := bundleTo(t, func(w io.Writer) error { return BundleCommit(ctx, clone, snap2, []string{snap, head}, w) })
	if err := ApplySnapshot(ctx, dwork, sb2, snap2); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(dwork, "new")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a file deleted in the next turn stays on the daemon: %v", err)
	}
}

// TestApplyRefusesOtherRefs: a bundle whose refs are not the one expected
// (an extra ref, another name, a snapshot of another commit) is refused
// before anything is written.
func TestApplyRefusesOtherRefs(t *testing.T) {
	repo := projectRepo(t)
	ctx := context.Background()
	head := run(t, repo, "rev-parse", "HEAD")
	run(t, repo, "update-ref", BaseRef, head)
	dir := t.TempDir()
	extra := filepath.Join(dir, "extra.bundle")
	run(t, repo, "bundle", "create", "-q", extra, BaseRef, "refs/heads/main")
	other := filepath.Join(dir, "other.bundle")
	run(t, repo, "bundle", "create", "-q", other, "refs/heads/main")
	notBundle := filepath.Join(dir, "x.bundle")
	writeFile(t, dir, "x.bundle", "PACK...")

	for _, b := range []string{extra, other, notBundle} {
		clone := filepath.Join(t.TempDir(), "p1")
		if _, err := ApplyBundle(ctx, clone, b); !errors.Is(err, troupe.ErrInvalid) {
			t.Fatalf("ApplyBundle(%s) = %v; want refused", filepath.Base(b), err)
		}
		if _, err := os.Stat(clone); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("ApplyBundle(%s) refused but made the clone", filepath.Base(b))
		}
	}

	m := New(t.TempDir())
	dwork, err := m.Dir(ctx, troupe.RuntimeKey{Project: "p1", Agent: "dev"}, troupe.AgentSpec{Name: "dev", Workspace: Worktree}, repo)
	if err != nil {
		t.Fatal(err)
	}
	project := bundleTo(t, func(w io.Writer) error { _, err := Bundle(ctx, repo, nil, w); return err })
	if err := ApplySnapshot(ctx, dwork, project, head); !errors.Is(err, troupe.ErrInvalid) {
		t.Fatalf("ApplySnapshot of a project's bundle = %v; want refused", err)
	}
	snap := bundleTo(t, func(w io.Writer) error { return BundleCommit(ctx, repo, head, nil, w) })
	if err := ApplySnapshot(ctx, dwork, snap, run(t, repo, "rev-parse", "HEAD~1")); !errors.Is(err, troupe.ErrInvalid) {
		t.Fatalf("ApplySnapshot of another commit's bundle = %v; want refused", err)
	}
	if _, err := ApplyBundle(ctx, filepath.Join(t.TempDir(), "p1"), snap); !errors.Is(err, troupe.ErrInvalid) {
		t.Fatalf("ApplyBundle of a snapshot's bundle = %v; want refused", err)
	}
	// Into the person's own checkout: never.
	if err := ApplySnapshot(ctx, repo, snap, head); !errors.Is(err, troupe.ErrConflict) {
		t.Fatalf("ApplySnapshot into the project's checkout = %v; want refused", err)
	}
	if _, err := git(ctx, repo, nil, "rev-parse", "--verify", "--quiet", SnapshotRefs+"dev"); err == nil {
		t.Fatal("a refused snapshot was kept")
	}
}

// TestOversizeBundleRefused: past MaxBundle a bundle is neither written
// nor applied.
func TestOversizeBundleRefused(t *testing.T) {
	repo := projectRepo(t)
	ctx := context.Background()
	noise := make([]byte, 8<<10)
	rand.Read(noise)
	writeFile(t, repo, "noise.bin", string(noise))
	run(t, repo, "add", "noise.bin")
	run(t, repo, "commit", "-q", "-m", "noise")
	b := bundleTo(t, func(w io.Writer) error { _, err := Bundle(ctx, repo, nil, w); return err })

	defer func(n int64) { MaxBundle = n }(MaxBundle)
	MaxBundle = 4 << 10
	if _, err := Bundle(ctx, repo, nil, io.Discard); !errors.Is(err, troupe.ErrInvalid) || !strings.Contains(err.Error(), "MaxBundle") {
		t.Fatalf("Bundle over MaxBundle = %v; want refused", err)
	}
	clone := filepath.Join(t.TempDir(), "p1")
	if _, err := ApplyBundle(ctx, clone, b); !errors.Is(err, troupe.ErrInvalid) || !strings.Contains(err.Error(), "MaxBundle") {
		t.Fatalf("ApplyBundle over MaxBundle = %v; want refused", err)
	}
	if _, err := os.Stat(clone); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("an oversize bundle made the clone")
	}
}

// TestApplySnapshotRefusesHostileTrees: a snapshot made by hand on a
// runner with a path git would not write (".." or ".git" in it), a
// submodule or a file over MaxCheckpointFile is refused, the daemon's
// worktree untouched and the snapshot not kept.
func TestApplySnapshotRefusesHostileTrees(t *testing.T) {
	repo := projectRepo(t)
	ctx := context.Background()
	head := run(t, repo, "rev-parse", "HEAD")
	m := New(t.TempDir())
	dwork, err := m.Dir(ctx, troupe.RuntimeKey{Project: "p1", Agent: "dev"}, troupe.AgentSpec{Name: "dev", Workspace: Worktree}, repo)
	if err != nil {
		t.Fatal(err)
	}
	before := tree(t, dwork)
	runner := t.TempDir()
	run(t, runner, "init", "-q")
	blob := run(t, runner, "hash-object", "-w", "--stdin")
	mktree := func(entries string) string {
		t.Helper()
		got, err := runGitIn(ctx, runner, nil, entries, "mktree", "--missing")
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(got)
	}
	inner := mktree("100644 blob " + blob + "\tx\n")
	big, err := runGitIn(ctx, runner, nil, "0123456789", "hash-object", "-w", "--stdin")
	if err != nil {
		t.Fatal(err)
	}
	defer func(n int64) { MaxCheckpointFile = n }(MaxCheckpointFile)
	MaxCheckpointFile = 9
	for name, entries := range map[string]string{
		"dotdot":    "040000 tree " + inner + "\t..\n",
		"dotgit":    "040000 tree " + inner + "\t.Git\n",
		"submodule": "160000 commit " + head + "\tsub\n",
		"too big":   "100644 blob " + strings.TrimSpace(big) + "\tbig.txt\n",
	} {
		top := mktree(entries)
		c := run(t, runner, "commit-tree", top, "-m", name)
		b := bundleTo(t, func(w io.Writer) error { return BundleCommit(ctx, runner, c, nil, w) })
		if err := ApplySnapshot(ctx, dwork, b, c); !errors.Is(err, troupe.ErrInvalid) {
			t.Errorf("%s: ApplySnapshot = %v; want refused", name, err)
		}
		if got := tree(t, dwork); len(got) != len(before) {
			t.Errorf("%s: the refused snapshot changed the worktree: %v", name, got)
		}
		if _, err := git(ctx, repo, nil, "rev-parse", "--verify", "--quiet", SnapshotRefs+"dev"); err == nil {
			t.Errorf("%s: the refused snapshot was kept", name)
		}
	}
}

// TestRunnerWorktreeChecks: an agent's name is checked as worktree names
// are, a clone must be there, and Snapshot refuses a worktree whose .git
// names another repository.
func TestRunnerWorktreeChecks(t *testing.T) {
	repo := projectRepo(t)
	ctx := context.Background()
	clone := filepath.Join(t.TempDir(), "p1")
	if _, err := RunnerWorktree(ctx, clone, "dev", ""); !errors.Is(err, troupe.ErrNotFound) {
		t.Fatalf("RunnerWorktree before a clone = %v; want not found", err)
	}
	clone, _ = applied(t, repo)
	for _, name := range []troupe.AgentID{"../x", "Dev", "", "a/b"} {
		if _, err := RunnerWorktree(ctx, clone, name, ""); !errors.Is(err, troupe.ErrInvalid) {
			t.Errorf("RunnerWorktree(%q) = %v; want refused", name, err)
		}
	}
	if _, err := RunnerWorktree(ctx, clone, "dev", "HEAD~1"); !errors.Is(err, troupe.ErrInvalid) {
		t.Errorf("RunnerWorktree at a base that is not a commit id = %v; want refused", err)
	}
	work, err := RunnerWorktree(ctx, clone, "dev", "")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, work, ".git", "gitdir: "+filepath.Join(repo, ".git")+"\n")
	if _, err := Snapshot(ctx, work, ""); !errors.Is(err, troupe.ErrConflict) {
		t.Fatalf("Snapshot of a worktree whose .git names the project = %v; want refused", err)
	}
	if _, err := Snapshot(ctx, repo, ""); !errors.Is(err, troupe.ErrInvalid) {
		t.Fatalf("Snapshot of a folder that is no runner worktree = %v; want refused", err)
	}
}

// TestWorktreesMadeAtOnce: 30 agents' worktrees of one clone made at
// the same time all succeed (a prune racing another's add broke it).
func TestWorktreesMadeAtOnce(t *testing.T) {
	repo := projectRepo(t)
	clone, _ := applied(t, repo)
	ctx := context.Background()
	errs := make(chan error, 30)
	for i := range 30 {
		go func() {
			_, err := RunnerWorktree(ctx, clone, troupe.AgentID(fmt.Sprintf("a%02d", i)), "")
			errs <- err
		}()
	}
	for range 30 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
