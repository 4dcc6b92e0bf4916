package remote

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/troupe-dev/troupe/internal/bus"
	"github.com/troupe-dev/troupe/internal/task"
)

// serverReply is the prefix of the reply subjects the NATS server puts on
// a request that crossed from a runner's account into the daemon's: the
// answer goes back through the service to the runner's own account.
const serverReply = "_R_."

// allowed says whether the daemon listens to runner name (see
// DaemonOptions.Allowed).
func (d *Daemon) allowed(name string) bool {
	return name != "" && (d.o.Allowed == nil || d.o.Allowed(name))
}

// admits says whether to handle a request of runner name whose answer
// goes to reply; it logs why not. On a shared account the answer must go
// to the runner's own inbox: another subject (another runner's inbox,
// a subject the daemon listens to) would have the daemon speak there for
// the runner. On the embedded server, the server's answer subject keeps it
// in the runner's account.
func (d *Daemon) admits(name, reply string) bool {
	if !d.allowed(name) {
		d.log.Debug("dropped a request of a runner not allowed (revoked)", "runner", name)
		return false
	}
	want := serverReply
	if d.o.Allowed != nil {
		want = bus.Inbox(name) + "."
	}
	if reply != "" && !strings.HasPrefix(reply, want) {
		d.log.Warn("dropped a runner's request: its reply subject is not the runner's own", "runner", name, "reply", reply, "want", want+"…")
		return false
	}
	return true
}

// Drop forgets runner name at once (it was revoked): its stream's
// consumer stops, its stream is deleted (the events in it are dropped),
// its sessions end as unreachable (a turn in flight fails with that
// reason; its messages wait for the agent to start elsewhere or the
// runner to be added again). With DaemonOptions.Allowed refusing it,
// nothing it sends is handled from then on.
func (d *Daemon) Drop(ctx context.Context, name string) error {
	var lost []*session
	d.mu.Lock()
	var cc jetstream.ConsumeContext
	if r := d.runners[name]; r != nil {
		cc, r.consume = r.consume, nil
		if !r.since.IsZero() {
			r.lastSeen = time.Now()
		}
		r.since = time.Time{}
	}
	for _, s := range d.sessions {
		if s.runner == name {
			lost = append(lost, s)
		}
	}
	js := d.js
	d.mu.Unlock()
	if cc != nil {
		cc.Stop()
	}
	u := d.unreachable(name)
	for _, s := range lost {
		s.unreachable(u)
		s.end(u)
	}
	var errs []error
	if js != nil {
		if err := js.DeleteStream(ctx, bus.StreamName(name)); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			errs = append(errs, fmt.Errorf("drop runner %s: delete its stream: %w", name, err))
		}
	}
	// Its tasks can never report now: each ends lost, its owner told once.
	tasks := d.runningOn(ctx, name)
	for _, t := range tasks {
		e := task.Ended{Task: t, Result: task.Result{State: task.Lost, ExitCode: -1, EndedAt: time.Now().UTC(),
			Reason: fmt.Sprintf("runner %s was revoked: the task may still run there, but its end cannot reach troupe", name)}}
		if err := d.taskEnded(name, &e); err != nil {
			errs = append(errs, fmt.Errorf("drop runner %s: end its task %s: %w", name, t.ID, err))
		}
	}
	d.log.Info("runner dropped", "runner", name, "sessions", len(lost), "tasks", len(tasks))
	return errors.Join(errs...)
}
