package worktree

// Checkpoints: a snapshot of an agent's workspace (its worktree or its
// project's folder) at the start and at the end of each of its turns,
// tracked and untracked files alike, .gitignore respected, kept as git
// commits under refs of troupe's own:
//
//	refs/troupe/checkpoints/<project>/<agent>/<seq>
//
// Each is made with git plumbing and an index of troupe's own
// (<root>/.checkpoints/<project>/<agent>/index, outside the sandbox's
// reach), so the working tree, the person's index, HEAD and stash never
// change; that index keeps git's stat cache from one snapshot to the
// next, so only changed files are read. A checkpoint's commit has as
// parent the snapshot it is compared with (the start of its turn, or the
// checkpoint before it): its diff is exactly what the turn changed, on
// disk, whatever wrote it. Commits are not chained beyond that, so a ref
// pruned frees its objects at the repository's next gc; a ref kept keeps
// its objects through any gc.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// CheckpointRefs is the prefix of every checkpoint ref.
const CheckpointRefs = "refs/troupe/checkpoints/"

// MaxCheckpointFile is the largest file a checkpoint keeps (a variable for
// tests): a bigger one is left out (its previous content, if any, stays in
// the snapshot), and the checkpoint names it in Skipped, as it names a git
// repository made inside the workspace ("name/"), whose files are left out.
var MaxCheckpointFile int64 = 64 << 20

// maxSkippedNamed bounds the names a checkpoint lists in Skipped (the
// count is always whole).
const maxSkippedNamed = 20

// ErrNoCheckpoints: the workspace is not in a git repository, so it has
// no checkpoints.
var ErrNoCheckpoints = errors.New("not a git repository: no checkpoints (run git init in the project's folder to have them)")

// Checkpoint is one snapshot of an agent's workspace.
type Checkpoint struct {
	// Seq numbers an agent's checkpoints from 1, oldest first: troupe
	// rewind AGENT SEQ.
	Seq    int64     `json:"seq"`
	Commit string    `json:"commit"`
	At     time.Time `json:"at"`
	// Reason: "turn" (the end of Turn), or what was about to happen
	// ("rewind", "reset", "worktree reset", "worktree remove", "project
	// remove").
	Reason string        `json:"reason"`
	Turn   troupe.TurnID `json:"turn,omitempty"`
	// Files, Added, Deleted: what changed since the snapshot it is
	// compared with (lines; a binary file counts as a file only).
	Files   int `json:"files"`
	Added   int `json:"added"`
	Deleted int `json:"deleted"`
	// Skipped counts the files left out (over MaxCheckpointFile), and
	// names the first of them.
	Skipped      int      `json:"skipped,omitempty"`
	SkippedNames []string `json:"skipped_names,omitempty"`
}

// Retention says which checkpoints Prune keeps: the newest Keep of each
// agent and every one younger than KeepFor; never the newest.
type Retention struct {
	Keep    int
	KeepFor time.Duration
}

// DefaultRetention keeps the newest 200 checkpoints of an agent and every
// one of the last 7 days.
var DefaultRetention = Retention{Keep: 200, KeepFor: 7 * 24 * time.Hour}

// refPrefix is where agent k's checkpoint refs are.
func refPrefix(k troupe.RuntimeKey) string {
	return CheckpointRefs + string(k.Project) + "/" + string(k.Agent) + "/"
}

// indexPath is troupe's own index of agent k's snapshots.
func (m *Manager) indexPath(k troupe.RuntimeKey) string {
	return filepath.Join(m.root, ".checkpoints", string(k.Project), string(k.Agent), "index")
}

// identity is who troupe's snapshot commits are by (git needs one; the
// person's own is not used).
var identity = []string{
	"GIT_AUTHOR_NAME=troupe", "GIT_AUTHOR_EMAIL=troupe@localhost",
	"GIT_COMMITTER_NAME=troupe", "GIT_COMMITTER_EMAIL=troupe@localhost",
}

// snapshot writes the tree of workspace work as it is now, through
// troupe's own index of agent k, and returns it with the files left out.
// Run with m.lock(k) held: any lock on that index is a dead git's.
func (m *Manager) snapshot(ctx context.Context, k troupe.RuntimeKey, work string) (tree string, skipped []string, err error) {
	guard, err := repoGuard(ctx, work)
	if err != nil {
		return "", nil, err
	}
	return snapshotTree(ctx, work, m.indexPath(k), 0, guard)
}

// snapshotTree writes the tree of workspace work as it is now (tracked
// and untracked files, .gitignore respected, files over
// MaxCheckpointFile and git repositories inside it left out and
// returned) through the index file index, made when missing from the
// repository's own; the folder of index holds its scratch files. A lock
// on index older than staleLock is a dead git's and is removed (0: any
// lock, for a caller that alone uses index). guard is work's repoGuard.
func snapshotTree(ctx context.Context, work, index string, staleLock time.Duration, guard []string) (tree string, skipped []string, err error) {
	if err := os.MkdirAll(filepath.Dir(index), 0o700); err != nil {
		return "", nil, fmt.Errorf("make the snapshot index's folder: %w", err)
	}
	// A lock left by a git that died with the daemon or the runner.
	if fi, err := os.Lstat(index + ".lock"); err == nil && (staleLock == 0 || time.Since(fi.ModTime()) > staleLock) {
		if err := os.Remove(index + ".lock"); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", nil, fmt.Errorf("remove a stale snapshot index lock: %w", err)
		}
	}
	env := []string{"GIT_INDEX_FILE=" + index}
	if _, err := os.Stat(index); errors.Is(err, fs.ErrNotExist) {
		// First snapshot: start from the repository's own index, whose
		// stat cache spares reading every file again.
		own, err := git(ctx, work, nil, "rev-parse", "--path-format=absolute", "--git-path", "index")
		if err != nil {
			return "", nil, notRepo(err)
		}
		if err := copyIndex(strings.TrimSpace(own), index); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", nil, fmt.Errorf("seed the snapshot index: %w", err)
		}
	}
	// Files past 32 KB are streamed, not mapped: a file the agent
	// truncates while git maps it would kill git with SIGBUS; streamed, a
	// short read is an error (add's --ignore-errors leaves the file out).
	cfg := append(slices.Clone(guard), "-c", "core.bigFileThreshold=32k")
	// Files too big to keep: left out by name. Every file is looked at
	// (lstat), none read: a file being rewritten cannot fail the listing.
	out, err := gitWith(ctx, work, env, cfg, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	if err != nil {
		return "", nil, notRepo(err)
	}
	for _, name := range strings.Split(out, "\x00") {
		if name == "" {
			continue
		}
		if strings.HasSuffix(name, "/") {
			// A git repository the agent made inside the workspace: its
			// files are its own repository's, which a checkpoint cannot
			// hold (git would keep a link to a commit it does not have).
			skipped = append(skipped, name)
			continue
		}
		if fi, err := os.Lstat(filepath.Join(work, name)); err == nil && fi.Mode().IsRegular() && fi.Size() > MaxCheckpointFile {
			skipped = append(skipped, name)
		}
	}
	args := []string{"add", "--all", "--ignore-errors"}
	if len(skipped) > 0 {
		specs := filepath.Join(filepath.Dir(index), "pathspecs")
		var b strings.Builder
		b.WriteString(".\x00")
		for _, s := range skipped {
			b.WriteString(":(exclude,literal)" + strings.TrimSuffix(s, "/") + "\x00")
		}
		if err := os.WriteFile(specs, []byte(b.String()), 0o600); err != nil {
			return "", nil, fmt.Errorf("write the checkpoint's pathspecs: %w", err)
		}
		args = append(args, "--pathspec-from-file="+specs, "--pathspec-file-nul")
	} else {
		args = append(args, "--", ".")
	}
	if _, code, stderr, err := gitCodeWith(ctx, work, env, cfg, args...); err != nil {
		return "", nil, fmt.Errorf("snapshot the workspace: %w", err)
	} else if code != 0 && !strings.Contains(stderr, "adding embedded git repository") {
		// --ignore-errors: a file that could not be read (gone meanwhile,
		// unreadable) is left out and git exits 1; the rest is in.
		if !strings.Contains(stderr, "unable to") && !strings.Contains(stderr, "failed to") {
			return "", nil, fmt.Errorf("snapshot the workspace: git add exit %d: %s", code, strings.TrimSpace(stderr))
		}
	}
	tree, code, stderr, err := gitCode(ctx, work, env, "write-tree")
	if err == nil && code != 0 {
		err = fmt.Errorf("git write-tree: exit %d: %s", code, strings.TrimSpace(stderr))
	}
	if err != nil {
		return "", nil, fmt.Errorf("write the snapshot's tree: %w", err)
	}
	return strings.TrimSpace(tree), skipped, nil
}

// notRepo is err of a git run in a workspace: ErrNoCheckpoints when it is
// not in a git repository.
func notRepo(err error) error {
	if strings.Contains(err.Error(), "not a git repository") {
		return ErrNoCheckpoints
	}
	return fmt.Errorf("read the workspace's repository: %w", err)
}

// copyIndex copies the index src to dst (0600) with its modification
// time: git trusts an entry's cached stat only when the file is older than
// its index, and a copy made now would make a file written in the
// original index's last second look unchanged (git's "racy" check).
func copyIndex(src, dst string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		return err
	}
	return os.Chtimes(dst, fi.ModTime(), fi.ModTime())
}

// Base is the snapshot an agent's turn starts from: a commit of its
// workspace as it is now, with no ref (a checkpoint made at the turn's
// end has it as parent). The workspace not being in a git repository is
// ErrNoCheckpoints.
func (m *Manager) Base(ctx context.Context, k troupe.RuntimeKey, work string) (string, error) {
	defer m.lock(k)()
	tree, _, err := m.snapshot(ctx, k, work)
	if err != nil {
		return "", err
	}
	c, err := git(ctx, work, identity, "commit-tree", tree, "-m", "troupe: start of turn")
	if err != nil {
		return "", fmt.Errorf("commit the turn's start: %w", err)
	}
	return strings.TrimSpace(c), nil
}

// Checkpoint makes a checkpoint of agent k's workspace work now: for the
// end of turn (reason "turn") compared with base (Base at its start), or,
// base "", compared with the agent's newest checkpoint. It then prunes
// the agent's checkpoints by r.
func (m *Manager) Checkpoint(ctx context.Context, k troupe.RuntimeKey, work, reason string, turn troupe.TurnID, base string, r Retention) (Checkpoint, error) {
	defer m.lock(k)()
	return m.checkpoint(ctx, k, work, reason, turn, base, r)
}

func (m *Manager) checkpoint(ctx context.Context, k troupe.RuntimeKey, work, reason string, turn troupe.TurnID, base string, r Retention) (Checkpoint, error) {
	tree, skipped, err := m.snapshot(ctx, k, work)
	if err != nil {
		return Checkpoint{}, err
	}
	list, err := m.list(ctx, k, work)
	if err != nil {
		return Checkpoint{}, err
	}
	if base == "" && len(list) > 0 {
		base = list[len(list)-1].Commit
	}
	cp := Checkpoint{Seq: 1, At: time.Now().UTC().Truncate(time.Second), Reason: reason, Turn: turn, Skipped: len(skipped)}
	if len(list) > 0 {
		cp.Seq = list[len(list)-1].Seq + 1
	}
	cp.SkippedNames = skipped[:min(len(skipped), maxSkippedNamed)]
	from := emptyTree
	if base != "" {
		from = base + "^{tree}"
	}
	cp.Files, cp.Added, cp.Deleted, err = numstat(ctx, work, from, tree)
	if err != nil {
		return Checkpoint{}, err
	}
	msg := checkpointMessage(k, cp)
	args := []string{"commit-tree", tree, "-m", msg}
	if base != "" {
		args = []string{"commit-tree", tree, "-p", base, "-m", msg}
	}
	c, err := git(ctx, work, append(slices.Clone(identity), "GIT_COMMITTER_DATE="+cp.At.Format(time.RFC3339), "GIT_AUTHOR_DATE="+cp.At.Format(time.RFC3339)), args...)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("commit the checkpoint: %w", err)
	}
	cp.Commit = strings.TrimSpace(c)
	// Created only if absent (the zero old value): a ref is never moved.
	if _, err := git(ctx, work, nil, "update-ref", "-m", "troupe checkpoint", refName(k, cp.Seq), cp.Commit, strings.Repeat("0", len(cp.Commit))); err != nil {
		return Checkpoint{}, fmt.Errorf("keep the checkpoint: %w", err)
	}
	if err := m.prune(ctx, k, work, append(list, cp), r); err != nil {
		return cp, err
	}
	return cp, nil
}

// emptyTree is git's empty tree (sha1 repositories).
const emptyTree = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"

// refName is the ref of agent k's checkpoint seq (zero-padded: the refs
// sort as their numbers).
func refName(k troupe.RuntimeKey, seq int64) string {
	return fmt.Sprintf("%s%010d", refPrefix(k), seq)
}

// numstat counts the files, added and deleted lines from tree a to b.
func numstat(ctx context.Context, work, a, b string) (files, added, deleted int, err error) {
	out, err := git(ctx, work, nil, "diff-tree", "-r", "--numstat", "--no-renames", "--no-textconv", "--no-ext-diff", a, b)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("count the checkpoint's changes: %w", err)
	}
	for line := range strings.Lines(out) {
		f := strings.SplitN(strings.TrimSpace(line), "\t", 3)
		if len(f) < 3 {
			continue
		}
		files++
		x, _ := strconv.Atoi(f[0]) // "-" for a binary file
		y, _ := strconv.Atoi(f[1])
		added, deleted = added+x, deleted+y
	}
	return files, added, deleted, nil
}

// checkpointMessage is the commit message of cp: its fields as trailers,
// which list reads back.
func checkpointMessage(k troupe.RuntimeKey, cp Checkpoint) string {
	var b strings.Builder
	fmt.Fprintf(&b, "troupe checkpoint %d of %s (%s)\n\n", cp.Seq, k.Agent, cp.Reason)
	fmt.Fprintf(&b, "Troupe-Project: %s\nTroupe-Agent: %s\nTroupe-Reason: %s\n", k.Project, k.Agent, cp.Reason)
	if cp.Turn != "" {
		fmt.Fprintf(&b, "Troupe-Turn: %s\n", cp.Turn)
	}
	fmt.Fprintf(&b, "Troupe-Stat: %d %d %d\n", cp.Files, cp.Added, cp.Deleted)
	writeSkipped(&b, cp.Skipped, cp.SkippedNames)
	return b.String()
}

// writeSkipped writes the trailers of a snapshot's files left out: their
// count and names (list reads them back).
func writeSkipped(b *strings.Builder, n int, names []string) {
	if n == 0 {
		return
	}
	fmt.Fprintf(b, "Troupe-Skipped: %d\n", n)
	for _, s := range names {
		fmt.Fprintf(b, "Troupe-Skipped-Name: %s\n", strconv.Quote(s))
	}
}

// Checkpoints lists agent k's checkpoints, oldest first. A workspace not
// in a git repository is ErrNoCheckpoints.
func (m *Manager) Checkpoints(ctx context.Context, k troupe.RuntimeKey, work string) ([]Checkpoint, error) {
	defer m.lock(k)()
	if _, err := git(ctx, work, nil, "rev-parse", "--git-dir"); err != nil {
		return nil, notRepo(err)
	}
	return m.list(ctx, k, work)
}

// list reads agent k's checkpoints back from their refs and commits.
func (m *Manager) list(ctx context.Context, k troupe.RuntimeKey, work string) ([]Checkpoint, error) {
	const sep = "\x1f"
	out, err := git(ctx, work, nil, "for-each-ref", "--sort=refname",
		"--format=%(refname)"+sep+"%(objectname)"+sep+"%(committerdate:unix)"+sep+"%(contents:body)\x1e", refPrefix(k))
	if err != nil {
		return nil, fmt.Errorf("list the checkpoints: %w", err)
	}
	var list []Checkpoint
	for rec := range strings.SplitSeq(out, "\x1e") {
		rec = strings.TrimLeft(rec, "\n")
		f := strings.SplitN(rec, sep, 4)
		if len(f) < 4 {
			continue
		}
		seq, err := strconv.ParseInt(strings.TrimPrefix(f[0], refPrefix(k)), 10, 64)
		if err != nil {
			continue // not one of troupe's names
		}
		unix, _ := strconv.ParseInt(f[2], 10, 64)
		cp := Checkpoint{Seq: seq, Commit: f[1], At: time.Unix(unix, 0).UTC()}
		sc := bufio.NewScanner(strings.NewReader(f[3]))
		for sc.Scan() {
			key, val, ok := strings.Cut(sc.Text(), ": ")
			if !ok {
				continue
			}
			switch key {
			case "Troupe-Reason":
				cp.Reason = val
			case "Troupe-Turn":
				cp.Turn = troupe.TurnID(val)
			case "Troupe-Stat":
				fmt.Sscanf(val, "%d %d %d", &cp.Files, &cp.Added, &cp.Deleted)
			case "Troupe-Skipped":
				cp.Skipped, _ = strconv.Atoi(val)
			case "Troupe-Skipped-Name":
				if s, err := strconv.Unquote(val); err == nil {
					cp.SkippedNames = append(cp.SkippedNames, s)
				}
			}
		}
		list = append(list, cp)
	}
	slices.SortFunc(list, func(a, b Checkpoint) int { return int(a.Seq - b.Seq) })
	return list, nil
}

// prune deletes the refs of the checkpoints in list (oldest first) that r
// does not keep: beyond the newest r.Keep and older than r.KeepFor; never
// the newest.
func (m *Manager) prune(ctx context.Context, k troupe.RuntimeKey, work string, list []Checkpoint, r Retention) error {
	if r.Keep <= 0 || len(list) <= r.Keep {
		return nil
	}
	var b strings.Builder
	now := time.Now()
	for _, cp := range list[:len(list)-r.Keep] {
		if r.KeepFor > 0 && now.Sub(cp.At) < r.KeepFor {
			continue
		}
		fmt.Fprintf(&b, "delete %s %s\n", refName(k, cp.Seq), cp.Commit)
	}
	if b.Len() == 0 {
		return nil
	}
	if _, err := runGitIn(ctx, work, nil, b.String(), "update-ref", "--stdin"); err != nil {
		return fmt.Errorf("prune the checkpoints: %w", err)
	}
	return nil
}

// CheckpointDiff is what checkpoint seq of agent k changed (its diff from
// the snapshot it is compared with): the patch, or git's --stat summary.
func (m *Manager) CheckpointDiff(ctx context.Context, k troupe.RuntimeKey, work string, seq int64, stat bool) (DiffResult, error) {
	defer m.lock(k)()
	cp, err := m.find(ctx, k, work, seq)
	if err != nil {
		return DiffResult{}, err
	}
	parent := emptyTree
	if p, err := git(ctx, work, nil, "rev-parse", "--verify", "--quiet", cp.Commit+"^1"); err == nil {
		parent = strings.TrimSpace(p)
	}
	args := []string{"diff", "--no-color", "--no-textconv", "--no-ext-diff", "--no-renames"}
	if stat {
		args = append(args, "--stat")
	}
	args = append(args, parent, cp.Commit)
	guard, err := repoGuard(ctx, work)
	if err != nil {
		return DiffResult{}, err
	}
	out, err := gitWith(ctx, work, nil, guard, args...)
	if err != nil {
		return DiffResult{}, fmt.Errorf("diff checkpoint %d: %w", seq, err)
	}
	tree, _ := git(ctx, work, nil, "rev-parse", cp.Commit+"^{tree}")
	return DiffResult{Diff: out, Cut: strings.Contains(out, "\n[cut: "), Tree: strings.TrimSpace(tree)}, nil
}

// find is agent k's checkpoint seq.
func (m *Manager) find(ctx context.Context, k troupe.RuntimeKey, work string, seq int64) (Checkpoint, error) {
	list, err := m.list(ctx, k, work)
	if err != nil {
		return Checkpoint{}, err
	}
	for _, cp := range list {
		if cp.Seq == seq {
			return cp, nil
		}
	}
	return Checkpoint{}, fmt.Errorf("find checkpoint %d of %s: %w (troupe checkpoints %s lists them)", seq, k.Agent, troupe.ErrNotFound, k.Agent)
}

// Rewind puts agent k's workspace back as it was at checkpoint seq, after
// a checkpoint of the present (returned: rewinding to it undoes the
// rewind). Only the files the snapshots hold change: ignored files and
// files left out (too big) are not touched; HEAD, the branch and the
// repository's own index are not moved. The caller makes sure the agent
// is not in a turn.
func (m *Manager) Rewind(ctx context.Context, k troupe.RuntimeKey, work string, seq int64, r Retention) (Checkpoint, error) {
	defer m.lock(k)()
	target, err := m.find(ctx, k, work, seq)
	if err != nil {
		return Checkpoint{}, err
	}
	before, err := m.checkpoint(ctx, k, work, fmt.Sprintf("rewind to %d", seq), "", "", r)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint before the rewind: %w", err)
	}
	// troupe's index now holds the present (before's tree): a two-tree
	// merge from it to the target changes only the paths that differ
	// between the two, removing those the target lacks. Paths neither
	// snapshot holds anew (outside the workspace's folder, left out as
	// too big) are the same in both and are not touched; one that
	// differs and is not as the index says makes git refuse the whole
	// rewind rather than overwrite it.
	env := []string{"GIT_INDEX_FILE=" + m.indexPath(k)}
	guard, err := repoGuard(ctx, work)
	if err != nil {
		return before, err
	}
	if _, err := gitWith(ctx, work, env, guard, "read-tree", "-m", "-u", before.Commit+"^{tree}", target.Commit+"^{tree}"); err != nil {
		return before, fmt.Errorf("rewind to checkpoint %d (checkpoint %d holds the files as they were): %w", seq, before.Seq, err)
	}
	return before, nil
}
