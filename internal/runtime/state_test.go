package runtime

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/troupe-dev/troupe/internal/inbox"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// startTurnFails is a MemStore whose StartTurn fails while fail is set
// (a full disk).
type startTurnFails struct {
	*inbox.MemStore
	mu   sync.Mutex // guards fail
	fail bool
}

func (s *startTurnFails) StartTurn(ctx context.Context, k troupe.RuntimeKey, ids []int64, turn troupe.TurnID) error {
	s.mu.Lock()
	fail := s.fail
	s.mu.Unlock()
	if fail {
		return errors.New("disk full")
	}
	return s.MemStore.StartTurn(ctx, k, ids, turn)
}

func (s *startTurnFails) set(fail bool) {
	s.mu.Lock()
	s.fail = fail
	s.mu.Unlock()
}

// TestStartTurnFailsAfterStart: a session started for a message whose turn
// the store then fails to record is up with no turn: the agent is idle,
// not starting for ever (starting reads as activity: an ask to it would
// never end for silence), and its mail, still queued, goes at the next
// wake once the store works.
func TestStartTurnFailsAfterStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &startTurnFails{MemStore: inbox.NewMemStore(), fail: true}
		h := newHarnessOn(t, twoAgents(time.Minute), Options{Store: st})
		k := key(p1, "researcher")
		if _, err := h.rt.Send(t.Context(), k, troupe.Person, troupe.KindMessage, "answer first"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if s, why := h.rt.AgentState(k); s != troupe.StateIdle {
			t.Fatalf("state after the turn could not be recorded = %s (%s), want idle", s, why)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if quiet := time.Since(h.rt.Activity(k).At); quiet < time.Hour {
			t.Errorf("activity %v ago, want an hour: the agent does nothing", quiet)
		}
		st.set(false)
		if _, err := h.rt.Send(t.Context(), k, troupe.Person, troupe.KindMessage, "second"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if in := h.eng.Inputs(); len(in) != 1 || len(in[0].Messages) != 2 {
			t.Fatalf("inputs = %+v, want one turn with both messages", in)
		}
		if s, why := h.rt.AgentState(k); s != troupe.StateIdle {
			t.Errorf("state after the turn = %s (%s), want idle", s, why)
		}
	})
}
