package worktree

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// Head is the commit checked out in the work tree dir.
func Head(ctx context.Context, dir string) (string, error) {
	out, err := git(ctx, dir, nil, "rev-parse", "--verify", "HEAD^{commit}")
	if err != nil {
		return "", fmt.Errorf("read head of %s: %w", dir, err)
	}
	return strings.TrimSpace(out), nil
}

// Has says whether the repository at dir (bare or not) holds commit
// (false when dir does not exist yet).
func Has(ctx context.Context, dir, commit string) (bool, error) {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	_, code, _, err := gitCode(ctx, dir, nil, "cat-file", "-e", commit+"^{commit}")
	if err != nil {
		return false, fmt.Errorf("look for %s in %s: %w", commit, dir, err)
	}
	return code == 0, nil
}

// Tips are the commits the branches of the repository of the work tree
// dir point at: what a bundle for it can leave out (at most MaxHaves).
func Tips(ctx context.Context, dir string) ([]string, error) {
	out, err := git(ctx, dir, nil, "for-each-ref", "--count=256", "--format=%(objectname)", "refs/heads/")
	if err != nil {
		return nil, fmt.Errorf("list refs of %s: %w", dir, err)
	}
	return strings.Fields(out), nil
}

// Tree is the tree of commit in the repository of dir.
func Tree(ctx context.Context, dir, commit string) (string, error) {
	out, err := git(ctx, dir, nil, "rev-parse", "--verify", commit+"^{tree}")
	if err != nil {
		return "", fmt.Errorf("read tree of %s: %w", commit, err)
	}
	return strings.TrimSpace(out), nil
}
