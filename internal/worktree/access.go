package worktree

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// GitWritable lists what the git of the worktree at path, of the project
// in dir, writes in the project's repository when the agent commits on
// its branch: the object store, the worktree's own folder there (its
// HEAD, index and reflog) and the folders of troupe's branches' refs and
// reflogs (made when missing: a branch packed by git gc has none). The
// rest of the repository (the person's HEAD, index and branches, config,
// hooks, other worktrees) is none of it.
//
// The worktree's folder is found from the repository's side (the gitdir
// file git keeps for each worktree), never from the .git file inside the
// worktree, which the agent can rewrite.
func GitWritable(ctx context.Context, dir, path string) ([]string, error) {
	out, err := git(ctx, dir, nil, "rev-parse", "--path-format=absolute", "--git-common-dir")
	if err != nil {
		return nil, fmt.Errorf("find the repository of %s: %w", dir, err)
	}
	common := strings.TrimSpace(out)
	admin, err := adminDir(common, path)
	if err != nil {
		return nil, err
	}
	refs := filepath.Dir(filepath.Join(common, "refs", "heads", Branch("x")))
	logs := filepath.Dir(filepath.Join(common, "logs", "refs", "heads", Branch("x")))
	for _, d := range []string{refs, logs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("make branch folder: %w", err)
		}
	}
	return []string{filepath.Join(common, "objects"), admin, refs, logs}, nil
}

// adminDir is the folder of common/worktrees whose gitdir file names
// path's .git.
func adminDir(common, path string) (string, error) {
	want := filepath.Join(canonical(path), ".git")
	entries, err := os.ReadDir(filepath.Join(common, "worktrees"))
	if err != nil {
		return "", fmt.Errorf("read worktrees of %s: %w", common, err)
	}
	for _, e := range entries {
		admin := filepath.Join(common, "worktrees", e.Name())
		b, err := os.ReadFile(filepath.Join(admin, "gitdir"))
		if err != nil {
			continue
		}
		got := strings.TrimSpace(string(b))
		if filepath.Join(canonical(filepath.Dir(got)), filepath.Base(got)) == want {
			return admin, nil
		}
	}
	return "", fmt.Errorf("find the worktree %s in %s: git does not list it (git worktree prune, then restart the agent)", path, common)
}

// canonical is p with its symbolic links resolved, or p when that fails.
func canonical(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return filepath.Clean(p)
}
