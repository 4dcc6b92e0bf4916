package worktree

import (
	"context"
	"fmt"
	"strings"
)

// InRepository says whether folder dir is in a git repository, so its
// agents have checkpoints: ErrNoCheckpoints when not. One git process,
// no agent's lock held (troupe agents asks it of each project).
func InRepository(ctx context.Context, dir string) error {
	if _, err := git(ctx, dir, nil, "rev-parse", "--git-dir"); err != nil {
		if strings.Contains(err.Error(), "not a git repository") {
			return ErrNoCheckpoints
		}
		return fmt.Errorf("find the repository of %s: %w", dir, err)
	}
	return nil
}
