package runtime

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// DefaultMaxSessions is how many agent sessions (engine processes) a
// Runtime keeps live at once unless Options.MaxSessions says otherwise.
const DefaultMaxSessions = 32

// errNoSlot: every session slot is taken (see sessionSlots).
var errNoSlot = errors.New("no session slot free")

// sessionSlots bounds the live sessions of a Runtime: an actor takes a slot
// before its session starts and gives it back once that session is closed
// (or did not start). An actor that finds none never blocks its loop: it
// says why it waits (state waiting, slotReason), its mail stays queued, and
// it joins a queue. A slot given back goes to the first in the queue
// (reserved for it, and its loop poked), so waiters are served in order.
// While anyone waits, a holder whose session is idle gives its slot up
// (yieldIfIdle). Keyed by RuntimeKey (C1).
type sessionSlots struct {
	max int
	// mu guards the fields below. Lock order: mu, then an actor's mu.
	mu    sync.Mutex
	held  map[troupe.RuntimeKey]*actor // taken, or reserved for a waiter
	queue []*actor                     // waiting, first come first
}

func newSessionSlots(max int) *sessionSlots {
	return &sessionSlots{max: max, held: map[troupe.RuntimeKey]*actor{}}
}

// take takes a slot for a (one reserved for it, or a free one), or puts a
// in the queue, pokes the holders (an idle one then gives its slot up),
// and returns false.
func (s *sessionSlots) take(a *actor) bool {
	s.mu.Lock()
	if s.held[a.key] == a || len(s.held) < s.max {
		s.held[a.key] = a
		s.unqueue(a)
		s.mu.Unlock()
		return true
	}
	if !slices.Contains(s.queue, a) {
		s.queue = append(s.queue, a)
	}
	hs := make([]*actor, 0, len(s.held))
	for _, h := range s.held {
		hs = append(hs, h)
	}
	s.mu.Unlock()
	for _, h := range hs {
		h.poke()
	}
	return false
}

// wanted reports whether an agent waits for a slot.
func (s *sessionSlots) wanted() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue) > 0
}

// give returns a's slot: it goes to the first waiter, if any.
func (s *sessionSlots) give(a *actor) {
	s.mu.Lock()
	if s.held[a.key] != a {
		s.mu.Unlock()
		return
	}
	delete(s.held, a.key)
	var next *actor
	if len(s.queue) > 0 {
		next = s.queue[0]
		s.queue = s.queue[1:]
		s.held[next.key] = next
	}
	s.mu.Unlock()
	if next != nil {
		next.poke()
	}
}

// forget takes a out of the queue, and gives back a slot reserved for it:
// its loop calls it when a no longer needs one (no mail left, or its actor
// ended), never while its session holds the slot.
func (s *sessionSlots) forget(a *actor) {
	s.mu.Lock()
	s.unqueue(a)
	s.mu.Unlock()
	s.give(a)
}

func (s *sessionSlots) unqueue(a *actor) {
	s.queue = slices.DeleteFunc(s.queue, func(w *actor) bool { return w == a })
}

// slotReason is the state reason of an agent waiting for a slot.
func (s *sessionSlots) slotReason() string {
	return fmt.Sprintf("waiting for a session slot (%d live, the daemon's --max-sessions)", s.max)
}

// takeSlot takes a session slot for the session a starts; false when there
// is none (a is then waiting, see sessionSlots).
func (a *actor) takeSlot() bool {
	a.mu.Lock()
	held := a.slot
	a.mu.Unlock()
	if held {
		return true
	}
	if !a.rt.slots.take(a) {
		return false
	}
	a.mu.Lock()
	a.slot = true
	a.mu.Unlock()
	return true
}

// giveSlot returns a's slot if it holds one: its session is closed, or did
// not start.
func (a *actor) giveSlot() {
	a.mu.Lock()
	held := a.slot
	a.slot = false
	a.mu.Unlock()
	if held {
		a.rt.slots.give(a)
	}
}

// stopWaiting ends a's wait for a slot when it no longer needs one (no
// mail left, or the person's attach was refused): stopped, as it was.
func (a *actor) stopWaiting() {
	a.mu.Lock()
	was := a.life.slotWait
	a.mu.Unlock()
	if was {
		a.rt.slots.forget(a)
		a.apply(evSlotDropped, "")
	}
}

// yieldIfIdle runs in the loop at each step: while another agent waits
// for a slot, a session that is idle (no turn in flight, nothing waiting
// on the person or on a troupe tool, nobody attached to its terminal) is
// closed as an idle stop would close it, and its slot goes to the waiter.
// Past the bound, sessions thus take turns: each gives its slot up at the
// end of a turn, its own mail waiting for the next free slot.
func (a *actor) yieldIfIdle() {
	a.mu.Lock()
	idle := a.slot && a.sess != nil && a.turn == nil && a.life.waits == 0 && a.toolCalls == 0 && !attached(a.sess)
	a.mu.Unlock()
	if !idle || !a.rt.slots.wanted() {
		return
	}
	a.closeSession()
	a.log.Info("idle session stopped to free a session slot")
	a.apply(evStop, "stopped to free a session slot for another agent; the next message starts it again")
}
