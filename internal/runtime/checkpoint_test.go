package runtime

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/troupe-dev/troupe/internal/journal"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// recCheckpoints records the calls the runtime makes of its Checkpoints.
type recCheckpoints struct {
	mu    sync.Mutex
	calls []string
	fail  error // TurnEnded's error
}

func (c *recCheckpoints) Base(_ context.Context, k troupe.RuntimeKey, work string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, "base "+string(k.Agent)+" "+work)
	return "B" + string(k.Agent), nil
}

func (c *recCheckpoints) TurnEnded(_ context.Context, k troupe.RuntimeKey, work string, turn troupe.TurnID, base string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, "end "+string(k.Agent)+" "+work+" "+base)
	if c.fail != nil {
		return "", c.fail
	}
	return "checkpoint 1: 1 files changed", nil
}

func (c *recCheckpoints) took() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.calls...)
}

// TestTurnsAreCheckpointed (C18): each turn is snapshot at its start and
// checkpointed at its end, in its workspace, compared with its own start;
// the checkpoint is said on the turn; one that cannot be made is said
// there too, and the turn is answered all the same; a workspace without
// checkpoints says nothing.
func TestTurnsAreCheckpointed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cps := &recCheckpoints{}
		h := newHarnessOn(t, twoAgents(10*time.Minute), Options{Checkpoints: cps})
		r := key(p1, "researcher")
		turnEvents := func() []journal.Event {
			t.Helper()
			time.Sleep(time.Second) // the journal writer's linger
			synctest.Wait()
			ts, err := h.journal.Turns(t.Context(), r, 0, 0)
			if err != nil || len(ts) == 0 {
				t.Fatalf("Turns = %+v, %v", ts, err)
			}
			return ts[0].Events
		}
		if req, err := h.rt.Ask(t.Context(), r, "lead", "hello", 0); err != nil || req.State != troupe.ReqAnswered {
			t.Fatalf("ask = %+v, %v", req, err)
		}
		calls := cps.took()
		if len(calls) != 2 || !strings.HasPrefix(calls[0], "base researcher /") || !strings.HasSuffix(calls[1], " Bresearcher") {
			t.Fatalf("calls = %q; want a base in the workspace, then the end compared with it", calls)
		}
		evs := turnEvents()
		if last := evs[len(evs)-1]; last.Kind != journal.KindCheckpoint || last.Text != "checkpoint 1: 1 files changed" {
			t.Fatalf("turn's last event = %+v; want the checkpoint", last)
		}

		cps.mu.Lock()
		cps.fail = errors.New("write the snapshot's tree: no space left on device")
		cps.mu.Unlock()
		if req, err := h.rt.Ask(t.Context(), r, "lead", "again", 0); err != nil || req.State != troupe.ReqAnswered {
			t.Fatalf("a turn whose checkpoint failed: %+v, %v; want it answered", req, err)
		}
		evs = turnEvents()
		if last := evs[len(evs)-1]; last.Kind != journal.KindCheckpoint || !strings.Contains(last.Text, "no checkpoint of the workspace: write the snapshot's tree: no space left") {
			t.Fatalf("turn's last event = %+v; want why there is no checkpoint", last)
		}

		cps.mu.Lock()
		cps.fail = ErrNoCheckpoints
		cps.mu.Unlock()
		if req, err := h.rt.Ask(t.Context(), r, "lead", "third", 0); err != nil || req.State != troupe.ReqAnswered {
			t.Fatalf("ask = %+v, %v", req, err)
		}
		for _, ev := range turnEvents() {
			if ev.Kind == journal.KindCheckpoint {
				t.Fatalf("a workspace without checkpoints: the turn says %q", ev.Text)
			}
		}
	})
}
