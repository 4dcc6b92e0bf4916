package worktree

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// Start brings agent k's worktree to commit base, the start of an attempt
// (internal/attempt): it makes the worktree when missing, then refuses one
// holding work — uncommitted changes, or commits on the agent's branch
// that base does not contain — naming the fix (merge it, or reset the
// worktree), and otherwise moves the branch to base. base must be a
// commit id (the project's HEAD, resolved once for every member).
func (m *Manager) Start(ctx context.Context, k troupe.RuntimeKey, spec troupe.AgentSpec, dir, base string) error {
	if spec.Workspace != Worktree {
		return fmt.Errorf("%s works in the project folder, not a worktree: set workspace = \"worktree\" in its [[agent]] table: %w", k.Agent, troupe.ErrInvalid)
	}
	defer m.lock(k)()
	path, err := m.ensure(ctx, k, spec, dir)
	if err != nil {
		return err
	}
	if _, err := m.existing(k, spec); err != nil {
		return err
	}
	if err := onBranch(ctx, k, path); err != nil {
		return err
	}
	guard, err := repoGuard(ctx, path)
	if err != nil {
		return err
	}
	st, err := gitWith(ctx, path, nil, guard, "status", "--porcelain")
	if err != nil {
		return fmt.Errorf("read worktree status of %s: %w", k.Agent, err)
	}
	if st != "" {
		return fmt.Errorf("the worktree of %s has uncommitted changes (%s): merge them (troupe merge %s) or drop them (troupe worktree reset %s --yes) first: %w",
			k.Agent, firstPaths(st), k.Agent, k.Agent, troupe.ErrConflict)
	}
	out, err := gitWith(ctx, path, nil, guard, "rev-list", "--count", base+"..HEAD")
	if err != nil {
		return fmt.Errorf("count commits of %s: %w", Branch(k.Agent), err)
	}
	if n, _ := strconv.Atoi(strings.TrimSpace(out)); n > 0 {
		return fmt.Errorf("%s holds %d commit(s) not merged into the project's HEAD: merge them (troupe merge %s) or drop them (troupe worktree reset %s --yes) first: %w",
			Branch(k.Agent), n, k.Agent, k.Agent, troupe.ErrConflict)
	}
	if _, err := gitWith(ctx, path, nil, guard, "reset", "--quiet", "--hard", base); err != nil {
		return fmt.Errorf("move %s to %s: %w", Branch(k.Agent), base, err)
	}
	return nil
}

// Stat is the size of an agent's change: files changed, lines added and
// deleted (a binary file counts as a file, without lines).
type Stat struct {
	Files   int `json:"files"`
	Added   int `json:"added"`
	Deleted int `json:"deleted"`
	// Cut: more files changed than the names git's output may hold
	// (MaxGitOutput); the counts are of those read.
	Cut bool `json:"cut,omitempty"`
}

// Lines is the lines changed, added and deleted.
func (s Stat) Lines() int { return s.Added + s.Deleted }

// StatFrom counts agent k's changes against commit base, committed or
// not, new files included (through a scratch index, as Diff).
func (m *Manager) StatFrom(ctx context.Context, k troupe.RuntimeKey, spec troupe.AgentSpec, base string) (Stat, error) {
	defer m.lock(k)()
	path, err := m.existing(k, spec)
	if err != nil {
		return Stat{}, err
	}
	guard, err := repoGuard(ctx, path)
	if err != nil {
		return Stat{}, err
	}
	env, _, done, err := scratchTree(ctx, k, path, guard)
	if err != nil {
		return Stat{}, err
	}
	defer done()
	out := &capBuffer{max: MaxGitOutput}
	cfg := append(slices.Clone(guard), diffConfig...)
	code, stderr, err := runGit(ctx, path, env, cfg, out, "diff", "--cached", "--numstat", "-z", "--no-renames",
		"--no-ext-diff", "--no-textconv", "--ignore-submodules=none", base, "--")
	if err != nil {
		return Stat{}, err
	}
	if code != 0 {
		return Stat{}, fmt.Errorf("count changes of %s: %s", k.Agent, strings.TrimSpace(stderr))
	}
	s := Stat{Cut: out.cut > 0}
	for rec := range strings.SplitSeq(strings.TrimSuffix(out.buf.String(), "\x00"), "\x00") {
		f := strings.SplitN(rec, "\t", 3)
		if len(f) != 3 {
			continue // empty output, or a record cut short
		}
		s.Files++
		a, _ := strconv.Atoi(f[0]) // "-" for a binary file: 0
		d, _ := strconv.Atoi(f[1])
		s.Added += a
		s.Deleted += d
	}
	return s, nil
}

// scratchTree writes the worktree at path, uncommitted and new files
// included, as a tree through a scratch index (the agent's own index is
// not touched). env names that index for later gits; done removes it.
func scratchTree(ctx context.Context, k troupe.RuntimeKey, path string, guard []string) (env []string, tree string, done func(), err error) {
	idx, err := os.CreateTemp(filepath.Dir(path), "."+string(k.Agent)+".index-*")
	if err != nil {
		return nil, "", nil, fmt.Errorf("create scratch index: %w", err)
	}
	idx.Close()
	os.Remove(idx.Name()) // git writes it anew
	done = func() { os.Remove(idx.Name()) }
	env = []string{"GIT_INDEX_FILE=" + idx.Name()}
	for _, args := range [][]string{{"read-tree", "HEAD"}, {"add", "--all"}} {
		if _, err := gitWith(ctx, path, env, guard, args...); err != nil {
			done()
			return nil, "", nil, fmt.Errorf("read worktree: %w", err)
		}
	}
	tree, err = gitWith(ctx, path, env, guard, "write-tree")
	if err != nil {
		done()
		return nil, "", nil, fmt.Errorf("read worktree: %w", err)
	}
	return env, strings.TrimSpace(tree), done, nil
}
