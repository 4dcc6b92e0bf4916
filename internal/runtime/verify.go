package runtime

// Verified delegations: a delegation that names one of the project's
// checks is answered only with troupe's own verdict on the worker's work.
// Its states, all durable in the store (troupe.Request):
//
//	pending ──worker's turn ends without error──▶ checking (answer kept, Tried+1)
//	checking ──check passed──▶ answered (the answer, with the verdict)
//	checking ──check failed, Tried < Tries──▶ pending (a retry message queued
//	                                          for the worker, with the verdict)
//	checking ──check failed, Tried == Tries──▶ failed (the last answer kept,
//	                                          with the failing verdict)
//	checking ──the check cannot run at all──▶ failed (why)
//	pending ──worker's turn fails, is cut──▶ failed, no_reply (as any delegation)
//
// checking is stored (EndTurn, in the turn's own transaction) before the
// check runs, and Judge takes the request out of it in the transaction
// that ends it or queues the retry: a daemon killed while the check runs
// finds the request checking when it restarts (Run) and runs the check
// again; Judge acts once per try, so the delegator gets one result.
// While a check of its work runs, the worker starts no turn (hold): its
// workspace stays as the check found it.

import (
	"context"
	"fmt"
	"strings"

	"github.com/troupe-dev/troupe/internal/events"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// Verifier runs the checks of verified delegations (internal/check, wired
// by the daemon). Its methods are safe for concurrent use.
type Verifier interface {
	// Checks lists the checks in force of project p (its approved team).
	Checks(p troupe.ProjectID) []troupe.Check
	// Verify runs check name on agent k's workspace, records the run on
	// turn ("" for the agent's latest), and returns its verdict (Try
	// aside). An error is a run that could not be attempted at all: an
	// unknown check, an agent on a runner, ctx ended.
	Verify(ctx context.Context, k troupe.RuntimeKey, name troupe.CheckName, turn troupe.TurnID) (troupe.Verdict, error)
}

// verifySpec is what a delegation asks troupe to check: check Check of
// the project on the worker's workspace when each of its turns on the
// task ends, for at most Tries turns (0: troupe.DefaultVerifyTries). The
// zero verifySpec is an unverified delegation.
type verifySpec struct {
	Check troupe.CheckName
	Tries int
}

// checkVerify returns v, a delegation to to, with its tries set, or an
// error naming the field and the fix: an unknown check (listing the
// project's), tries out of range, a worker on a runner, or a daemon that
// runs no checks.
func (r *Runtime) checkVerify(to troupe.RuntimeKey, v verifySpec) (verifySpec, error) {
	p := to.Project
	if v.Check == "" {
		if v.Tries != 0 {
			return v, &troupe.FieldError{Field: "tries", Msg: "given without verify: name the check that judges each try"}
		}
		return v, nil
	}
	if v.Tries == 0 {
		v.Tries = troupe.DefaultVerifyTries
	}
	if v.Tries < 1 || v.Tries > troupe.MaxVerifyTries {
		return v, &troupe.FieldError{Field: "tries", Msg: fmt.Sprintf("%d: give 1 to %d (1: check once, no retry; default %d)",
			v.Tries, troupe.MaxVerifyTries, troupe.DefaultVerifyTries)}
	}
	if r.o.Verifier == nil {
		return v, &troupe.FieldError{Field: "verify", Msg: "this daemon runs no checks: delegate without verify"}
	}
	if spec, _, ok := r.o.Teams.Agent(to); ok && spec.Remote() {
		return v, &troupe.FieldError{Field: "verify", Msg: fmt.Sprintf("%s runs on a runner, and checks run on the daemon's machine only: delegate to it without verify", to.Agent)}
	}
	var names []string
	for _, c := range r.o.Verifier.Checks(p) {
		if c.Name == v.Check {
			return v, nil
		}
		names = append(names, string(c.Name))
	}
	known := "the project declares none: add one under [checks] in .troupe/team.toml (the person approves it)"
	if len(names) > 0 {
		known = "the project's checks are " + strings.Join(names, ", ")
	}
	return v, &troupe.FieldError{Field: "verify", Msg: fmt.Sprintf("no check named %q: %s", v.Check, known)}
}

// holdTurns keeps k from starting a turn until the matching unholdTurns:
// a check of its work runs on its workspace.
func (r *Runtime) holdTurns(k troupe.RuntimeKey) {
	r.mu.Lock()
	r.holds[k]++
	r.mu.Unlock()
}

// unholdTurns ends one holdTurns and wakes k once nothing holds it.
func (r *Runtime) unholdTurns(k troupe.RuntimeKey) {
	r.mu.Lock()
	r.holds[k]--
	free := r.holds[k] <= 0
	if free {
		delete(r.holds, k)
	}
	r.mu.Unlock()
	if free {
		r.wake(k)
	}
}

// held reports whether a check of k's work runs.
func (r *Runtime) held(k troupe.RuntimeKey) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.holds[k] > 0
}

// startVerify checks the answer of req, which the store just set
// Checking, in a goroutine owned by the runtime; turn is the worker's
// turn that answered ("" after a restart: its latest).
func (r *Runtime) startVerify(req troupe.Request, turn troupe.TurnID) {
	k := troupe.RuntimeKey{Project: req.Project, Agent: req.To}
	r.holdTurns(k)
	if !r.spawn(func(ctx context.Context) {
		defer r.unholdTurns(k)
		r.verify(ctx, req, turn)
	}) {
		r.unholdTurns(k) // the runtime stops: the next daemon checks it
	}
}

// verify runs req's check on its worker's workspace and judges the
// answer (the state machine above). When ctx ends first (the daemon
// stops) nothing is judged: the request stays checking for the next
// daemon.
func (r *Runtime) verify(ctx context.Context, req troupe.Request, turn troupe.TurnID) {
	k := troupe.RuntimeKey{Project: req.Project, Agent: req.To}
	log := r.log.With("project", req.Project, "agent", req.To, "request", req.ID, "check", req.Verify)
	var v troupe.Verdict
	err := fmt.Errorf("this daemon runs no checks")
	if r.o.Verifier != nil {
		v, err = r.o.Verifier.Verify(ctx, k, req.Verify, turn)
	}
	if ctx.Err() != nil {
		log.Info("check of a delegation left for the next daemon", "try", req.Tried)
		return
	}
	if err != nil {
		v = troupe.Verdict{State: troupe.CheckError, ExitCode: -1, Turn: turn, Reason: err.Error()}
	}
	v.Check, v.Try = req.Verify, req.Tried
	var errText string
	var retry *troupe.Message
	switch {
	case err != nil:
		errText = fmt.Sprintf("troupe could not check %s's work with check %s: %v", req.To, req.Verify, err)
	case v.Passed():
	case req.Tried < req.Tries:
		retry = &troupe.Message{Project: req.Project, To: req.To, From: troupe.CheckSender, Kind: troupe.KindDelegate,
			Request: req.ID, Text: retryText(req, v)}
	default:
		errText = fmt.Sprintf("%s's work did not pass check %s (%s) on any of its %d tries", req.To, req.Verify,
			strings.ReplaceAll(string(v.State), "_", " "), req.Tries)
	}
	j, err := r.o.Store.Judge(context.WithoutCancel(ctx), req.ID, req.Tried, v, errText, retry)
	if err != nil {
		log.Error("judge a verified delegation", "err", err)
		return
	}
	log.Info("delegation checked", "try", req.Tried, "tries", req.Tries, "state", v.State,
		"retry", j.Retry != nil, "ended", j.Finished != nil)
	if j.Retry != nil {
		r.publish(k, events.MessageQueued{Message: *j.Retry}) // the wake comes with unholdTurns
	}
	if j.Finished != nil {
		r.finished(*j.Finished)
	}
}

// retryText is what the worker is told when check v of its answer to req
// failed and it has tries left.
func retryText(req troupe.Request, v troupe.Verdict) string {
	from := string(req.From)
	if req.From == troupe.Person {
		from = "the person"
	}
	return fmt.Sprintf("%s\nYour work on this task did not pass the project's check %s, which troupe ran in your workspace when your turn ended. "+
		"Fix the work. When this turn ends troupe runs the check again (%d of %d tries left); %s gets your answer only with troupe's verdict.\n\n%s",
		v.Header(req.Tries), req.Verify, req.Tries-req.Tried, req.Tries, from, v.Details())
}

// recoverChecks runs again the checks a previous daemon left running:
// the requests it stored checking (Run, after a restart).
func (r *Runtime) recoverChecks(reqs []troupe.Request) {
	for _, req := range reqs {
		if req.Checking {
			r.log.Info("check of a delegation run again after a restart", "project", req.Project, "agent", req.To,
				"request", req.ID, "check", req.Verify, "try", req.Tried)
			r.startVerify(req, "")
		}
	}
}
