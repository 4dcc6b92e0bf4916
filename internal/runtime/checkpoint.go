package runtime

import (
	"context"
	"errors"

	"github.com/troupe-dev/troupe/internal/journal"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// Checkpoints snapshots agents' workspaces around their turns (C18): the
// daemon's is internal/worktree's, kept under refs of troupe's own.
type Checkpoints interface {
	// Base snapshots agent k's workspace work as a turn starts and names
	// the snapshot. ErrNoCheckpoints: the workspace has none (not a git
	// repository), which is no failure.
	Base(ctx context.Context, k troupe.RuntimeKey, work string) (string, error)
	// TurnEnded makes the checkpoint of the turn's end, compared with
	// base ("": with the agent's newest checkpoint), and says what it
	// holds in a line for the turn's record.
	TurnEnded(ctx context.Context, k troupe.RuntimeKey, work string, turn troupe.TurnID, base string) (string, error)
}

// ErrNoCheckpoints is what Checkpoints return for a workspace that has
// none (not a git repository).
var ErrNoCheckpoints = errors.New("no checkpoints")

// checkpointBase snapshots the workspace as turn t starts (Checkpoints).
// A snapshot that cannot be made never holds the turn: the turn's record
// says why.
func (a *actor) checkpointBase(ctx context.Context, t *turn) {
	cp := a.rt.o.Checkpoints
	a.mu.Lock()
	if a.appr != nil {
		t.work = a.appr.dir
	}
	a.mu.Unlock()
	if cp == nil || t.work == "" {
		return
	}
	base, err := cp.Base(ctx, a.key, t.work)
	switch {
	case errors.Is(err, ErrNoCheckpoints):
		t.work = ""
	case err != nil:
		a.log.Warn("workspace not snapshot at the turn's start", "turn", t.id, "err", err)
		t.noBase = "no snapshot at the turn's start (" + err.Error() + "): its checkpoint is compared with the one before"
	default:
		t.base = base
	}
}

// checkpointEnd makes the checkpoint of turn t's end and records it on
// the turn (the journal), or why none could be made. The turn's outcome
// never depends on it.
func (a *actor) checkpointEnd(ctx context.Context, t *turn) {
	cp := a.rt.o.Checkpoints
	if cp == nil || t.work == "" {
		return
	}
	note, err := cp.TurnEnded(ctx, a.key, t.work, t.id, t.base)
	switch {
	case errors.Is(err, ErrNoCheckpoints):
		return
	case err != nil:
		a.log.Warn("no checkpoint at the turn's end", "turn", t.id, "err", err)
		note = "no checkpoint of the workspace: " + err.Error()
	case t.noBase != "":
		note += "; " + t.noBase
	}
	a.jl.note(t.id, journal.KindCheckpoint, note)
}
