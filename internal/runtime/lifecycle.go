package runtime

import (
	"errors"
	"fmt"
	"slices"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// lifecycle is an agent's state machine: the state the person sees
// (troupe.AgentState) with its reason, and the facts the state follows
// from. Only next changes it, one lifeEvent at a time; an event the table
// does not allow in the current state is refused (errTransition) and the
// state stays as it was. The actor holds one, guarded by its mu: its loop
// sends the events of its session and turns; the permission flow
// (evPermWait, evPermDone) sends its own from the goroutine that waits.
//
// The usual path, and the table (next's switch, walked pair by pair by
// lifecycle_test.go):
//
//	stopped ─▶ (waiting for a slot) ─▶ starting ─▶ busy ⇄ idle ─▶ stopped
//	                                      │        │ ▲
//	                                      ▼        ▼ │
//	                                   failed   waiting (on the person's
//	                                   limited  permission) or blocked (a dialog)
//	                                   (usage)
//
//	event            allowed in                                 leads to
//	slot wait        stopped waiting blocked failed             waiting, the slot's reason
//	slot dropped     stopped waiting blocked failed             stopped
//	folder gone      stopped waiting blocked failed             blocked, the folder's reason
//	starting         stopped waiting blocked failed             starting
//	started          starting                                   idle
//	start failed     starting stopped waiting blocked failed    failed
//	turn started     starting idle blocked failed               busy
//	turn ended       busy waiting blocked idle                  idle
//	turn failed      busy waiting blocked idle                  failed
//	turn cut         busy waiting blocked idle                  failed
//	permission wait  any                                        waiting from busy or a permission's
//	                                                            waiting, else unchanged
//	permission done  any, with one waiting                      busy in a turn (else idle) from a
//	                                                            permission's waiting once none is
//	                                                            left, else unchanged
//	block seen       idle busy waiting blocked failed           blocked, the dialog
//	block cleared    idle busy waiting blocked failed           busy in a turn, else idle
//	session died     idle busy waiting blocked failed           failed
//	limited          busy waiting blocked idle                  limited, until the reset (its session closed)
//	unreachable      starting, busy waiting blocked idle,       unreachable, its runner's reason (its
//	                 stopped failed unreachable                 session closed; its mail waits)
//	limit ended      limited unreachable                        stopped (its mail starts a session)
//	stop             any                                        stopped
//
// A turn ends from idle too when the end of its permission requests was
// seen first. failed keeps the session after an engine's failed turn, so
// its next turn starts from failed.
type lifecycle struct {
	state  troupe.AgentState
	reason string
	// waits counts the agent's permission requests waiting on the person.
	waits int
	// blocked: its session's terminal shows a dialog troupe does not
	// know (engine.EventBlocked); it counts as activity. A block ends
	// with its session (stop, session died, turn cut, a new start).
	blocked bool
	// slotWait: it waits for a session slot (slots.go); set by
	// evSlotWait, ended by evStarting or evSlotDropped.
	slotWait bool
}

// lifeKind is what happened to an agent.
type lifeKind uint8

// The events of an agent's lifecycle.
const (
	evSlotWait     lifeKind = iota + 1 // no session slot is free: it waits for one (reason: why)
	evSlotDropped                      // it no longer waits for a slot (no mail left, an attach refused)
	evFolderGone                       // its project folder is gone: its mail waits (reason: which)
	evStarting                         // its session starts (a slot taken)
	evStarted                          // its session is up with no turn to run (a person's attach)
	evStartFailed                      // its session could not start (reason: why)
	evTurnStarted                      // a turn was given to its session
	evTurnEnded                        // its turn ended: answered, interrupted, or not given to the engine
	evTurnFailed                       // the engine failed its turn (reason: the engine's words)
	evTurnCut                          // troupe cut its silent turn and closed the session (reason: why)
	evPermWait                         // a permission request of it waits on the person (reason: what for)
	evPermDone                         // one no longer does
	evBlockSeen                        // its terminal shows a dialog troupe does not know (reason: the dialog)
	evBlockCleared                     // the dialog is gone
	evSessionDied                      // its session ended on its own (reason: how)
	evLimited                          // its engine ended its turn on a usage limit (reason: until when, the engine's words)
	evUnreachable                      // the runner it runs on cannot be reached (reason: which, since when)
	evLimitEnded                       // the limit reset, or the time to try its runner again came: its mail may run again
	evStop                             // troupe or the person closed its session, or the actor ended (reason: why)
	lifeKinds                          // the number of kinds plus one; not an event
)

var lifeKindNames = [...]string{
	evSlotWait: "slot wait", evSlotDropped: "slot dropped", evFolderGone: "folder gone",
	evStarting: "starting", evStarted: "started", evStartFailed: "start failed",
	evTurnStarted: "turn started", evTurnEnded: "turn ended", evTurnFailed: "turn failed", evTurnCut: "turn cut",
	evPermWait: "permission wait", evPermDone: "permission done",
	evBlockSeen: "block seen", evBlockCleared: "block cleared",
	evSessionDied: "session died", evLimited: "limited", evUnreachable: "unreachable", evLimitEnded: "limit ended", evStop: "stop",
}

func (k lifeKind) String() string {
	if k > 0 && k < lifeKinds {
		return lifeKindNames[k]
	}
	return fmt.Sprintf("lifeKind(%d)", k)
}

// lifeEvent is one event with its reason (what the person is told).
type lifeEvent struct {
	kind   lifeKind
	reason string
}

// errTransition: an event the lifecycle's table does not allow in the
// current state; a bug of the caller.
var errTransition = errors.New("transition not in the agent's state table")

// The groups of states the table allows an event from.
var (
	// noSession: the states an agent has no session in (failed may keep
	// one after an engine's failed turn).
	noSession = []troupe.AgentState{troupe.StateStopped, troupe.StateWaiting, troupe.StateBlocked, troupe.StateFailed}
	// withSession: the states an agent's session reports events in.
	withSession = []troupe.AgentState{troupe.StateIdle, troupe.StateBusy, troupe.StateWaiting, troupe.StateBlocked, troupe.StateFailed}
	// inTurn: the states a turn ends from; idle too, when the end of its
	// permission requests was seen first.
	inTurn = []troupe.AgentState{troupe.StateBusy, troupe.StateWaiting, troupe.StateBlocked, troupe.StateIdle}
)

// next is the transition table: the lifecycle after e, given whether a
// turn is in flight. An event not allowed in l's state returns l unchanged
// and an error wrapping errTransition.
func (l lifecycle) next(e lifeEvent, turn bool) (lifecycle, error) {
	n := l
	// busyOrIdle is where an agent goes back to when what it waited on
	// ends: busy inside a turn, else idle.
	busyOrIdle := troupe.StateIdle
	if turn {
		busyOrIdle = troupe.StateBusy
	}
	var from []troupe.AgentState // nil: every state
	switch e.kind {
	case evSlotWait:
		from = noSession
		n.state, n.reason, n.slotWait = troupe.StateWaiting, e.reason, true
	case evSlotDropped:
		from = noSession
		n.state, n.reason, n.slotWait = troupe.StateStopped, "", false
	case evFolderGone:
		from = noSession
		n.state, n.reason = troupe.StateBlocked, e.reason
	case evStarting:
		from = noSession
		n.state, n.reason, n.slotWait, n.blocked = troupe.StateStarting, "", false, false
	case evStarted:
		from = []troupe.AgentState{troupe.StateStarting}
		n.state, n.reason = troupe.StateIdle, ""
	case evStartFailed:
		from = append([]troupe.AgentState{troupe.StateStarting}, noSession...)
		n.state, n.reason = troupe.StateFailed, e.reason
	case evTurnStarted:
		from = []troupe.AgentState{troupe.StateStarting, troupe.StateIdle, troupe.StateBlocked, troupe.StateFailed}
		n.state, n.reason = troupe.StateBusy, ""
	case evTurnEnded:
		from = inTurn
		n.state, n.reason = troupe.StateIdle, ""
	case evTurnFailed:
		from = inTurn
		n.state, n.reason = troupe.StateFailed, e.reason
	case evTurnCut:
		from = inTurn
		n.state, n.reason, n.blocked = troupe.StateFailed, e.reason, false
	case evPermWait:
		// Counted in every state; the agent shows it only inside a turn
		// (a wait for a session slot is another waiting, kept).
		n.waits++
		if l.state == troupe.StateBusy || l.permWaiting() {
			n.state, n.reason = troupe.StateWaiting, e.reason
		}
	case evPermDone:
		if l.waits == 0 {
			return l, fmt.Errorf("end permission wait of an agent with none waiting: %w", errTransition)
		}
		n.waits--
		if n.waits == 0 && l.permWaiting() {
			n.state, n.reason = busyOrIdle, ""
		}
	case evBlockSeen:
		from = withSession
		n.state, n.reason, n.blocked = troupe.StateBlocked, e.reason, true
	case evBlockCleared:
		from = withSession
		n.state, n.reason, n.blocked = busyOrIdle, "", false
	case evSessionDied:
		from = withSession
		n.state, n.reason, n.blocked = troupe.StateFailed, e.reason, false
	case evLimited:
		from = inTurn
		n.state, n.reason, n.blocked = troupe.StateLimited, e.reason, false
	case evUnreachable:
		from = []troupe.AgentState{troupe.StateStarting, troupe.StateBusy, troupe.StateWaiting, troupe.StateBlocked,
			troupe.StateIdle, troupe.StateStopped, troupe.StateFailed, troupe.StateUnreachable}
		n.state, n.reason, n.blocked = troupe.StateUnreachable, e.reason, false
	case evLimitEnded:
		from = []troupe.AgentState{troupe.StateLimited, troupe.StateUnreachable}
		n.state, n.reason = troupe.StateStopped, ""
	case evStop:
		// slotWait stays: the actor still leaves the slots' queue
		// (evSlotDropped) when its mail is gone.
		n.state, n.reason, n.blocked = troupe.StateStopped, e.reason, false
	default:
		return l, fmt.Errorf("move agent state: unknown event %s: %w", e.kind, errTransition)
	}
	if from != nil && !slices.Contains(from, l.state) {
		return l, fmt.Errorf("move agent state: %s in state %s: %w", e.kind, l.state, errTransition)
	}
	return n, nil
}

// permWaiting reports whether l is waiting on the person's permission
// decisions, not for a session slot.
func (l lifecycle) permWaiting() bool {
	return l.state == troupe.StateWaiting && !l.slotWait
}

// occupied reports whether the agent is not silent whatever its session
// writes: its session is starting (a CLI's start takes seconds), it waits
// on the person's permission decision, its terminal shows a dialog, or
// it waits for its engine's usage limit to reset or for its runner to
// come back (its mail runs then).
// The watchdogs count it as activity (actor.activity). A wait for a
// session slot or a gone folder is no such thing: the agent does nothing.
func (l lifecycle) occupied() bool {
	return l.state == troupe.StateStarting || l.waits > 0 || l.blocked || l.state == troupe.StateLimited ||
		l.state == troupe.StateUnreachable
}
