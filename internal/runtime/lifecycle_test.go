package runtime

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// busyOrIdle in a want table: busy inside a turn, idle outside one.
const busyOrIdle troupe.AgentState = "busy|idle"

// same in a want table: the state does not change.
const same troupe.AgentState = "same"

// allStates are the states of troupe.AgentState.
var allStates = []troupe.AgentState{troupe.StateStopped, troupe.StateStarting, troupe.StateIdle,
	troupe.StateBusy, troupe.StateBlocked, troupe.StateWaiting, troupe.StateFailed, troupe.StateLimited, troupe.StateUnreachable}

// lifeTable is the documented machine, written out pair by pair: for each
// event, the states it is allowed in and the state it leads to. Every
// pair not listed is refused.
func lifeTable() map[lifeKind]map[troupe.AgentState]troupe.AgentState {
	const (
		stopped  = troupe.StateStopped
		starting = troupe.StateStarting
		idle     = troupe.StateIdle
		busy     = troupe.StateBusy
		blocked  = troupe.StateBlocked
		waiting  = troupe.StateWaiting
		failed   = troupe.StateFailed
		limited  = troupe.StateLimited
		unreach  = troupe.StateUnreachable
	)
	to := func(s troupe.AgentState, from ...troupe.AgentState) map[troupe.AgentState]troupe.AgentState {
		m := map[troupe.AgentState]troupe.AgentState{}
		for _, f := range from {
			m[f] = s
		}
		return m
	}
	return map[lifeKind]map[troupe.AgentState]troupe.AgentState{
		evSlotWait:     to(waiting, stopped, waiting, blocked, failed),
		evSlotDropped:  to(stopped, stopped, waiting, blocked, failed),
		evFolderGone:   to(blocked, stopped, waiting, blocked, failed),
		evStarting:     to(starting, stopped, waiting, blocked, failed),
		evStarted:      to(idle, starting),
		evStartFailed:  to(failed, starting, stopped, waiting, blocked, failed),
		evTurnStarted:  to(busy, starting, idle, blocked, failed),
		evTurnEnded:    to(idle, busy, waiting, blocked, idle),
		evTurnFailed:   to(failed, busy, waiting, blocked, idle),
		evTurnCut:      to(failed, busy, waiting, blocked, idle),
		evPermWait:     {stopped: same, starting: same, idle: same, busy: waiting, blocked: same, waiting: waiting, failed: same, limited: same, unreach: same},
		evPermDone:     {stopped: same, starting: same, idle: same, busy: same, blocked: same, waiting: busyOrIdle, failed: same, limited: same, unreach: same},
		evBlockSeen:    to(blocked, idle, busy, waiting, blocked, failed),
		evBlockCleared: to(busyOrIdle, idle, busy, waiting, blocked, failed),
		evSessionDied:  to(failed, idle, busy, waiting, blocked, failed),
		evLimited:      to(limited, busy, waiting, blocked, idle),
		evUnreachable:  to(unreach, starting, busy, waiting, blocked, idle, stopped, failed, unreach),
		evLimitEnded:   to(stopped, limited, unreach),
		evStop:         to(stopped, allStates...),
	}
}

// TestLifecycleTable walks every (state, event) pair, in a turn and out of
// one: an allowed event leads to the documented state, with the event's
// reason where the new state has one; any other is refused and leaves the
// lifecycle as it was.
func TestLifecycleTable(t *testing.T) {
	table := lifeTable()
	if len(table) != int(lifeKinds)-1 {
		t.Fatalf("the table lists %d events, the machine has %d", len(table), lifeKinds-1)
	}
	for k := lifeKind(1); k < lifeKinds; k++ {
		for _, s := range allStates {
			for _, turn := range []bool{false, true} {
				// One permission request waits, so that its end is allowed.
				before := lifecycle{state: s, reason: "before", waits: 1}
				got, err := before.next(lifeEvent{kind: k, reason: "why"}, turn)
				want, ok := table[k][s]
				if !ok {
					if !errors.Is(err, errTransition) || got != before {
						t.Errorf("%s in %s (turn %v) = %+v, %v; want refused, unchanged", k, s, turn, got, err)
					}
					continue
				}
				if err != nil {
					t.Errorf("%s in %s (turn %v): %v; want %s", k, s, turn, err, want)
					continue
				}
				wantReason := "why"
				switch want {
				case same:
					want, wantReason = s, "before"
				case busyOrIdle:
					want, wantReason = troupe.StateIdle, ""
					if turn {
						want = troupe.StateBusy
					}
				case troupe.StateStarting, troupe.StateIdle, troupe.StateBusy:
					wantReason = ""
				case troupe.StateStopped:
					if k == evSlotDropped || k == evLimitEnded {
						wantReason = ""
					}
				}
				if got.state != want || got.reason != wantReason {
					t.Errorf("%s in %s (turn %v) = %s (%q), want %s (%q)", k, s, turn, got.state, got.reason, want, wantReason)
				}
			}
		}
	}
}

// TestLifecycleFacts: the facts the lifecycle keeps beside its state move
// with their events only.
func TestLifecycleFacts(t *testing.T) {
	step := func(l lifecycle, k lifeKind, turn bool) lifecycle {
		t.Helper()
		n, err := l.next(lifeEvent{kind: k, reason: "why"}, turn)
		if err != nil {
			t.Fatalf("%s in %s: %v", k, l.state, err)
		}
		return n
	}
	l := lifecycle{state: troupe.StateBusy}
	l = step(l, evPermWait, true)
	l = step(l, evPermWait, true)
	if l.waits != 2 || l.state != troupe.StateWaiting {
		t.Fatalf("two permission waits: %+v, want waiting with 2", l)
	}
	l = step(l, evPermDone, true)
	if l.waits != 1 || l.state != troupe.StateWaiting {
		t.Fatalf("one of two answered: %+v, want still waiting with 1", l)
	}
	l = step(l, evPermDone, true)
	if l.waits != 0 || l.state != troupe.StateBusy {
		t.Fatalf("both answered: %+v, want busy with 0", l)
	}
	if _, err := l.next(lifeEvent{kind: evPermDone}, true); !errors.Is(err, errTransition) {
		t.Errorf("a permission's end with none waiting: %v, want refused", err)
	}

	l = step(l, evBlockSeen, true)
	if !l.blocked || l.state != troupe.StateBlocked || l.reason != "why" {
		t.Fatalf("block seen: %+v, want blocked", l)
	}
	l = step(l, evBlockCleared, true)
	if l.blocked || l.state != troupe.StateBusy {
		t.Fatalf("block cleared: %+v, want busy, not blocked", l)
	}
	// A block is its session's: it ends when the session does.
	for _, k := range []lifeKind{evStop, evSessionDied, evTurnCut} {
		if n := step(lifecycle{state: troupe.StateBlocked, blocked: true}, k, true); n.blocked {
			t.Errorf("%s while blocked: %+v, want the block ended", k, n)
		}
	}
	if n := step(lifecycle{state: troupe.StateFailed, blocked: true}, evStarting, false); n.blocked {
		t.Errorf("a new start: %+v, want no block", n)
	}

	l = lifecycle{state: troupe.StateStopped}
	l = step(l, evSlotWait, false)
	if !l.slotWait {
		t.Fatalf("slot wait: %+v, want slotWait", l)
	}
	l = step(l, evStop, false) // a reset while it waits: it still leaves the queue later
	if !l.slotWait {
		t.Fatalf("stopped while waiting for a slot: %+v, want slotWait kept", l)
	}
	if n := step(l, evSlotDropped, false); n.slotWait || n.state != troupe.StateStopped {
		t.Fatalf("slot dropped: %+v, want stopped without slotWait", n)
	}
	if n := step(l, evStarting, false); n.slotWait || n.state != troupe.StateStarting {
		t.Fatalf("starting: %+v, want starting without slotWait", n)
	}
	// A permission request of a closed session that ends while the agent
	// waits for a slot (reset, then mail before the request's end was
	// seen) leaves the slot's wait as it is; so does one that begins.
	w := lifecycle{state: troupe.StateWaiting, reason: "waiting for a session slot", slotWait: true, waits: 1}
	if n := step(w, evPermDone, false); n.state != troupe.StateWaiting || n.reason != w.reason || n.waits != 0 {
		t.Errorf("a permission's end while waiting for a slot: %+v, want the slot's wait kept", n)
	}
	if n := step(w, evPermWait, false); n.state != troupe.StateWaiting || n.reason != w.reason || n.waits != 2 {
		t.Errorf("a permission wait while waiting for a slot: %+v, want the slot's wait kept", n)
	}
	if _, err := l.next(lifeEvent{kind: lifeKinds}, false); !errors.Is(err, errTransition) {
		t.Errorf("an unknown event: %v, want refused", err)
	}
}

// TestLifecycleOccupied: what the watchdogs count as activity whatever the
// session writes, and what they do not.
func TestLifecycleOccupied(t *testing.T) {
	for _, c := range []struct {
		what string
		l    lifecycle
		want bool
	}{
		{"starting", lifecycle{state: troupe.StateStarting}, true},
		{"a permission waits", lifecycle{state: troupe.StateWaiting, waits: 1}, true},
		{"a dialog", lifecycle{state: troupe.StateBlocked, blocked: true}, true},
		{"a permission waits after a block cleared", lifecycle{state: troupe.StateBusy, waits: 1}, true},
		{"busy", lifecycle{state: troupe.StateBusy}, false},
		{"idle", lifecycle{state: troupe.StateIdle}, false},
		{"waiting for a slot", lifecycle{state: troupe.StateWaiting, slotWait: true}, false},
		{"its folder gone", lifecycle{state: troupe.StateBlocked, reason: "the project folder is gone"}, false},
		{"failed", lifecycle{state: troupe.StateFailed}, false},
		{"stopped", lifecycle{state: troupe.StateStopped}, false},
	} {
		if got := c.l.occupied(); got != c.want {
			t.Errorf("%s: occupied = %v, want %v", c.what, got, c.want)
		}
	}
}

// TestLifeMovedOnlyByApply keeps the machine the only writer of an agent's
// state: no code of the package assigns to an actor's life, or to one of
// its fields, but apply (newActor sets the first state in its literal).
func TestLifeMovedOnlyByApply(t *testing.T) {
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]*ast.File{}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files[name] = f
	}
	if files["actor.go"] == nil {
		t.Fatal("actor.go not found: the test runs in the package's folder")
	}
	// writesLife reports whether e is x.life or a field of it (x.life.state).
	var writesLife func(e ast.Expr) bool
	writesLife = func(e ast.Expr) bool {
		sel, ok := e.(*ast.SelectorExpr)
		if !ok {
			return false
		}
		return sel.Sel.Name == "life" || writesLife(sel.X)
	}
	for name, f := range files {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil || fn.Name.Name == "apply" {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				var lhs []ast.Expr
				switch s := n.(type) {
				case *ast.AssignStmt:
					lhs = s.Lhs
				case *ast.IncDecStmt:
					lhs = []ast.Expr{s.X}
				}
				for _, e := range lhs {
					if writesLife(e) {
						t.Errorf("%s: %s writes an actor's life at %s; send an event through apply", name, fn.Name.Name, fset.Position(e.Pos()))
					}
				}
				return true
			})
		}
	}
}
