package daemon

import (
	"context"
	"errors"
	"fmt"

	"github.com/troupe-dev/troupe/internal/runtime"
	"github.com/troupe-dev/troupe/internal/troupe"
	"github.com/troupe-dev/troupe/internal/worktree"
)

// checkpoints is the runtime's Checkpoints (C18): internal/worktree's,
// pruned by retention.
type checkpoints struct {
	trees     *worktree.Manager
	retention worktree.Retention
}

func (c checkpoints) Base(ctx context.Context, k troupe.RuntimeKey, work string) (string, error) {
	base, err := c.trees.Base(ctx, k, work)
	if errors.Is(err, worktree.ErrNoCheckpoints) {
		return "", runtime.ErrNoCheckpoints
	}
	return base, err
}

func (c checkpoints) TurnEnded(ctx context.Context, k troupe.RuntimeKey, work string, turn troupe.TurnID, base string) (string, error) {
	cp, err := c.trees.Checkpoint(ctx, k, work, "turn", turn, base, c.retention)
	if errors.Is(err, worktree.ErrNoCheckpoints) {
		return "", runtime.ErrNoCheckpoints
	}
	if err != nil {
		return "", err
	}
	return checkpointLine(cp), nil
}

// checkpointLine is cp in a line: what a turn's record says of it.
func checkpointLine(cp worktree.Checkpoint) string {
	files := "files"
	if cp.Files == 1 {
		files = "file"
	}
	s := fmt.Sprintf("checkpoint %d: %d %s changed, +%d −%d", cp.Seq, cp.Files, files, cp.Added, cp.Deleted)
	if cp.Skipped > 0 {
		s += fmt.Sprintf("; %d files over %d MB left out", cp.Skipped, worktree.MaxCheckpointFile>>20)
	}
	return s
}

// The API's Checkpoints (api.Checkpoints): the person's list, diff and
// rewind, and the checkpoints made before what may drop work.

func (c checkpoints) List(ctx context.Context, k troupe.RuntimeKey, work string) ([]worktree.Checkpoint, error) {
	return c.trees.Checkpoints(ctx, k, work)
}

func (c checkpoints) Diff(ctx context.Context, k troupe.RuntimeKey, work string, seq int64, stat bool) (worktree.DiffResult, error) {
	return c.trees.CheckpointDiff(ctx, k, work, seq, stat)
}

func (c checkpoints) Rewind(ctx context.Context, k troupe.RuntimeKey, work string, seq int64) (worktree.Checkpoint, error) {
	return c.trees.Rewind(ctx, k, work, seq, c.retention)
}

func (c checkpoints) Save(ctx context.Context, k troupe.RuntimeKey, work, reason string) (worktree.Checkpoint, error) {
	return c.trees.Checkpoint(ctx, k, work, reason, "", "", c.retention)
}

func (c checkpoints) Available(ctx context.Context, dir string) error {
	return worktree.InRepository(ctx, dir)
}
