package runtime

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/troupe-dev/troupe/internal/events"
	"github.com/troupe-dev/troupe/internal/inbox"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// waiter is closed when its request ends.
type waiter struct {
	project troupe.ProjectID
	done    chan struct{}
}

func (r *Runtime) waiterFor(p troupe.ProjectID, id troupe.RequestID) chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	w, ok := r.waiters[id]
	if !ok {
		w = waiter{project: p, done: make(chan struct{})}
		r.waiters[id] = w
	}
	return w.done
}

// releaseWaiter wakes whoever waits for request id, which ended, and takes
// its edge out of the wait-for graph.
func (r *Runtime) releaseWaiter(id troupe.RequestID) {
	r.mu.Lock()
	w, ok := r.waiters[id]
	if ok {
		close(w.done)
		delete(r.waiters, id)
	}
	r.mu.Unlock()
	if ok {
		r.waits.ended(w.project, id)
	}
}

// Ask asks to a question from the agent from (or troupe.Person) and waits
// for the answer (contract C4). The wait ends when the target answers, when
// the watchdog gives up (a full inactivity window of silence, or the
// ceiling), or — when wait > 0 — after wait: the request is then detached
// and returned pending; its outcome will come to the asker's inbox and wake
// it. If ctx ends first the request is detached too and ctx's error returned.
//
// While it waits, from → to is an edge of the project's wait-for graph: an
// ask that would close a cycle of waits is refused at once with a
// *CycleError, and recorded nowhere (C13).
func (r *Runtime) Ask(ctx context.Context, to troupe.RuntimeKey, from troupe.AgentID, question string, wait time.Duration) (troupe.Request, error) {
	return r.ask(ctx, to, from, question, wait, nil)
}

// ask is Ask; asked, when set, is told the request's id before the wait.
func (r *Runtime) ask(ctx context.Context, to troupe.RuntimeKey, from troupe.AgentID, question string, wait time.Duration, asked func(troupe.RequestID)) (troupe.Request, error) {
	req, done, err := r.request(ctx, to, from, troupe.KindAsk, question, verifySpec{})
	if err != nil {
		return troupe.Request{}, err
	}
	defer r.waits.unwait(req.Project, req.ID)
	if asked != nil {
		asked(req.ID)
	}
	return r.await(ctx, req, done, wait)
}

// Delegate gives to a task from the agent from (or troupe.Person) and
// returns at once; the result comes back to from's inbox as a message of
// kind result. With verify set (a check of the project) it is a verified
// delegation (verify.go): the result carries troupe's own check of the
// worker's work, and a failed check goes back to the worker while tries
// are left (0: troupe.DefaultVerifyTries).
func (r *Runtime) Delegate(ctx context.Context, to troupe.RuntimeKey, from troupe.AgentID, task string, verify troupe.CheckName, tries int) (troupe.Request, error) {
	v, err := r.checkVerify(to, verifySpec{Check: verify, Tries: tries})
	if err != nil {
		return troupe.Request{}, fmt.Errorf("delegate to %s: %w", to.Agent, err)
	}
	req, _, err := r.request(ctx, to, from, troupe.KindDelegate, task, v)
	return req, err
}

// request records a request and its message, starts its watchdog and wakes
// the target. done is closed when the request ends. An ask is first added
// to the wait-for graph (the caller ends that wait), which refuses it if it
// would close a cycle.
func (r *Runtime) request(ctx context.Context, to troupe.RuntimeKey, from troupe.AgentID, kind troupe.MessageKind, text string, v verifySpec) (req troupe.Request, done <-chan struct{}, err error) {
	if err := r.checkTarget(to, from); err != nil {
		return troupe.Request{}, nil, err
	}
	field := "question"
	if kind == troupe.KindDelegate {
		field = "task"
	}
	if strings.TrimSpace(text) == "" {
		return troupe.Request{}, nil, fmt.Errorf("%s %s: %w", kind, to.Agent, &troupe.FieldError{Field: field, Msg: "empty: write what you need"})
	}
	if err := checkSize(field, text); err != nil {
		return troupe.Request{}, nil, fmt.Errorf("%s %s: %w", kind, to.Agent, err)
	}
	req = troupe.Request{ID: troupe.RequestID(newID("r")), Project: to.Project, From: from, To: to.Agent,
		Kind: kind, Question: text, State: troupe.ReqPending, Detached: kind == troupe.KindDelegate,
		CreatedAt: time.Now().UTC(), Verify: v.Check, Tries: v.Tries}
	if kind == troupe.KindAsk {
		if err := r.waits.wait(req.Project, req.ID, from, to.Agent); err != nil {
			return troupe.Request{}, nil, err
		}
	}
	done = r.waiterFor(req.Project, req.ID)
	m, err := r.o.Store.Ask(ctx, req, troupe.Message{Project: to.Project, To: to.Agent, From: from,
		Kind: kind, Text: text, Request: req.ID})
	if err != nil {
		r.releaseWaiter(req.ID) // and its edge
		return troupe.Request{}, nil, fmt.Errorf("%s %s: %w", kind, to.Agent, err)
	}
	r.publish(to, events.MessageQueued{Message: m})
	r.watch(req, done)
	r.wake(to)
	return req, done, nil
}

// await waits for done (the request's end), at most wait when > 0. An
// ask whose target is limited (its engine's usage limit), or becomes so
// while it waits, returns at once, detached, with LimitedUntil.
func (r *Runtime) await(ctx context.Context, req troupe.Request, done <-chan struct{}, wait time.Duration) (troupe.Request, error) {
	var timeout <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	to := troupe.RuntimeKey{Project: req.Project, Agent: req.To}
	for {
		until, limited := r.limitedTarget(to)
		if !until.IsZero() {
			got, err := r.o.Store.Detach(ctx, req.ID)
			if err == nil && got.State == troupe.ReqPending {
				got.LimitedUntil = until
				if st, why := r.AgentState(to); st == troupe.StateUnreachable {
					got.Unreachable = why
				}
			}
			return got, err
		}
		select {
		case <-done:
			return r.o.Store.Request(context.WithoutCancel(ctx), req.Project, req.ID)
		case <-limited:
			// The target became limited: read until when, above.
		case <-timeout:
			return r.o.Store.Detach(ctx, req.ID)
		case <-ctx.Done():
			if _, err := r.o.Store.Detach(context.WithoutCancel(ctx), req.ID); err != nil {
				r.log.Error("detach request", "request", req.ID, "err", err)
			}
			return troupe.Request{}, ctx.Err()
		}
	}
}

// Await waits again for a request the caller made earlier (see Ask). The
// person's wait on its own ask is an edge of the wait-for graph, as in Ask;
// an agent's detached ask stays out of it (its asker does not wait).
func (r *Runtime) Await(ctx context.Context, p troupe.ProjectID, id troupe.RequestID, wait time.Duration) (troupe.Request, error) {
	first, err := r.o.Store.Request(ctx, p, id)
	if err != nil {
		return troupe.Request{}, err
	}
	if first.From == troupe.Person && first.State == troupe.ReqPending {
		// Nothing waits on the person, so this never closes a cycle.
		if err := r.waits.wait(p, id, first.From, first.To); err != nil {
			return troupe.Request{}, err
		}
		defer r.waits.unwait(p, id)
	}
	// Register first, then read: a request that ends in between is seen
	// ended by the read, and one that ends after closes this waiter.
	done := r.waiterFor(p, id)
	req, err := r.o.Store.Request(ctx, p, id)
	if err != nil || req.State != troupe.ReqPending {
		r.releaseWaiter(id)
		return req, err
	}
	return r.await(ctx, req, done, wait)
}

// watch starts the request's watchdog; done is the request's waiter.
func (r *Runtime) watch(req troupe.Request, done <-chan struct{}) {
	r.spawn(func(ctx context.Context) { r.watchdog(ctx, req, done) })
}

// watchdog ends req with no_reply after a full inactivity window of the
// target (its turn_timeout), re-armed whenever the target's activity
// advances, or at the absolute ceiling counted from the request's creation.
// After a daemon restart the window starts again from the restart.
func (r *Runtime) watchdog(ctx context.Context, req troupe.Request, done <-chan struct{}) {
	to := troupe.RuntimeKey{Project: req.Project, Agent: req.To}
	window := troupe.DefaultTurnTimeout
	if spec, _, ok := r.o.Teams.Agent(to); ok && spec.TurnTimeout > 0 {
		window = spec.TurnTimeout
	}
	armed := time.Now()
	idle := time.NewTimer(window)
	defer idle.Stop()
	ceiling := time.NewTimer(time.Until(req.CreatedAt.Add(r.o.Ceiling)))
	defer ceiling.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-done:
			return
		case <-ceiling.C:
			msg := fmt.Sprintf("no reply from %s: the ask reached its ceiling of %v; last activity %s",
				req.To, r.o.Ceiling, r.lastActivity(to, armed))
			if st, why := r.AgentState(to); st == troupe.StateWaiting {
				msg += fmt.Sprintf("; it still waits on the person (%s): see `troupe permissions`", why)
			}
			r.finish(ctx, req.ID, troupe.ReqNoReply, "", msg)
			return
		case <-idle.C:
			if r.held(to) {
				// troupe checks the target's work (verify.go): its
				// silence is troupe's, bounded by the check's timeout.
				armed = time.Now()
				idle.Reset(window)
				continue
			}
			last := armed
			if a := r.Activity(to); a.At.After(last) {
				last = a.At
			}
			if quiet := time.Since(last); quiet < window {
				idle.Reset(window - quiet)
				continue
			}
			msg := fmt.Sprintf("no reply from %s: no activity for its whole inactivity window of %v (its turn_timeout); last activity %s",
				req.To, window, r.lastActivity(to, armed))
			if st, why := r.AgentState(to); st == troupe.StateWaiting {
				// Waiting for a session slot is no work: every session may
				// be held by agents that wait on it.
				msg += "; it is " + why
			}
			r.finish(ctx, req.ID, troupe.ReqNoReply, "", msg)
			return
		}
	}
}

func (r *Runtime) lastActivity(k troupe.RuntimeKey, floor time.Time) string {
	if a := r.Activity(k); !a.At.IsZero() {
		return a.At.UTC().Format(time.RFC3339)
	}
	return "none since " + floor.UTC().Format(time.RFC3339)
}

// finish ends a request and wakes whoever waits for it.
func (r *Runtime) finish(ctx context.Context, id troupe.RequestID, state troupe.RequestState, answer, errText string) {
	req, queued, done, err := r.o.Store.FinishRequest(context.WithoutCancel(ctx), id, state, answer, errText)
	if err != nil {
		r.log.Error("finish request", "request", id, "err", err)
		return
	}
	if done {
		r.finished(inbox.Finished{Request: req, Queued: queued})
	}
}

// finished wakes whoever waits for a request the store just ended, and the
// asker whose inbox got its outcome.
func (r *Runtime) finished(f inbox.Finished) {
	r.releaseWaiter(f.Request.ID)
	r.publish(troupe.RuntimeKey{Project: f.Request.Project, Agent: f.Request.From}, events.RequestDone{Request: f.Request})
	if q := f.Queued; q != nil {
		r.publish(q.Key(), events.MessageQueued{Message: *q})
		r.wake(q.Key())
	}
}
