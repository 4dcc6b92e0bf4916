package runtime

import (
	"context"
	"errors"
	"fmt"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// Terminal returns the terminal of k's session, for the person to attach
// to (an agent in terminal mode). A stopped agent's session is started
// first, in its actor's loop, as a message would start it; the agent is
// then idle (or blocked, if its program shows a dialog troupe does not
// know).
func (r *Runtime) Terminal(ctx context.Context, k troupe.RuntimeKey) (engine.Terminal, error) {
	if err := r.checkTarget(k, troupe.Person); err != nil {
		return nil, err
	}
	spec, _, _ := r.o.Teams.Agent(k)
	if spec.Mode != troupe.ModeTerminal && spec.Engine != troupe.EngineTerminal {
		return nil, fmt.Errorf("%s is not in terminal mode, nothing to attach to: set mode = \"terminal\" for it in .troupe/team.toml: %w", k.Agent, troupe.ErrConflict)
	}
	r.wake(k)
	a := r.actor(k)
	if a == nil {
		return nil, fmt.Errorf("attach to %s: the runtime is stopping: %w", k.Agent, troupe.ErrConflict)
	}
	var t engine.Terminal
	err := a.do(ctx, func(ctx context.Context) error {
		s := a.session()
		if s == nil {
			spec, dir, ok := a.rt.o.Teams.Agent(a.key)
			if !ok {
				return troupe.NoAgent(a.key.Agent, nil)
			}
			if a.folderGone(dir) {
				return fmt.Errorf("attach to %s: its project folder %s is gone: %w", a.key.Agent, dir, troupe.ErrConflict)
			}
			var err error
			if s, err = a.start(ctx, spec, dir); errors.Is(err, errNoSlot) {
				a.stopWaiting()
				return fmt.Errorf("attach to %s: %s: try again when another agent's session stops: %w", a.key.Agent, a.rt.slots.slotReason(), troupe.ErrConflict)
			} else if err != nil {
				a.apply(evStartFailed, err.Error())
				return err
			}
			a.apply(evStarted, "")
		}
		ts, ok := s.(engine.TerminalSession)
		if !ok || ts.Terminal() == nil {
			return fmt.Errorf("%s's session has no terminal (it started before its mode changed; reset it): %w", a.key.Agent, troupe.ErrConflict)
		}
		t = ts.Terminal()
		return nil
	})
	if errors.Is(err, errActorGone) {
		return nil, fmt.Errorf("attach to %s: its actor stopped: %w", k.Agent, troupe.ErrConflict)
	}
	return t, err
}
