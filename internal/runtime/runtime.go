// Package runtime is the heart of troupe: one actor per RuntimeKey owns an
// agent's state (stopped → starting → idle ⇄ busy, plus blocked and failed),
// its engine session and its turns; inboxes are durable (inbox.Store) and
// delivered at turn boundaries only (C5); asks wait under an inactivity
// window re-armed by the target's activity (C4); delegations and replies
// come back through the asker's inbox and wake it.
//
// The engine's conversation id of each agent is kept in Sessions (durable
// in the daemon), so a restart resumes it. Permission requests that an
// agent's allowed_tools do not settle wait on the person (permission.go);
// the person also resets and interrupts agents (control.go).
//
// Concurrency: Runtime.mu guards the actor table and the request waiters;
// the pending permissions have their own lock (permTable.mu), and so has
// the wait-for graph of asks (waitGraph.mu, waits.go), which refuses an ask
// that would close a cycle (C13).
// Each actor is one goroutine (its loop) plus the goroutines of the tool
// calls its turn makes; its mutex guards only what other goroutines read
// (state, activity). Every ask has one watchdog goroutine owned by the
// Runtime. Run owns them all: when its context ends, it stops every actor
// (closing sessions) and waits for every goroutine.
//
// No map here is keyed by an agent id alone: actors are keyed by RuntimeKey
// (C1), waiters by RequestID. runtime imports inbox, engine, project,
// events, troupe; internal/daemon wires it; internal/api and internal/mcp call it.
// A delegation may name a check: its worker's answer then goes back only
// with troupe's verdict (verify.go).
package runtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/events"
	"github.com/troupe-dev/troupe/internal/inbox"
	"github.com/troupe-dev/troupe/internal/journal"
	"github.com/troupe-dev/troupe/internal/sandbox"
	"github.com/troupe-dev/troupe/internal/tool"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// DefaultCeiling is the absolute limit of an ask (C4).
const DefaultCeiling = 4 * time.Hour

// Teams tells the runtime about projects and their agents.
type Teams interface {
	// Agent returns the definition of the agent and its project's folder.
	Agent(k troupe.RuntimeKey) (spec troupe.AgentSpec, dir string, ok bool)
	// Agents lists the agents of project p, in team order.
	Agents(p troupe.ProjectID) []troupe.AgentSpec
}

// Grants issues the bearer tokens agent sessions use on the MCP endpoint.
type Grants interface {
	Mint(k troupe.RuntimeKey, limit time.Duration) string
	Revoke(token string)
}

// Options configures a Runtime. Store, Teams and Engines are required.
type Options struct {
	Store   inbox.Store
	Teams   Teams
	Engines map[troupe.Engine]engine.Engine
	Hub     *events.Hub // nil: a private hub nobody reads
	// Sessions keeps each agent's engine conversation id, so its next
	// session (also after a restart) resumes it; nil: a MemSessions.
	Sessions Sessions
	// Tools are the tools of other domains (background tasks, memory
	// notes) offered beside the runtime's own; New composes the catalogue.
	Tools []tool.Tool
	// Grants mints each session's MCP token and revokes it when the session
	// ends (C2); MCPURL is the endpoint given to agents. Both unset: the
	// agents' tools go through engine.Tools only.
	Grants Grants
	// Workspace returns the folder agent k works in (its engine starts
	// there, its background tasks default there): dir, its project's
	// folder, or a worktree made for it. nil: always dir.
	Workspace func(ctx context.Context, k troupe.RuntimeKey, spec troupe.AgentSpec, dir string) (string, error)
	MCPURL    string
	// Sandbox returns the sandbox of agent k working in work (its
	// project's folder dir or its worktree): every process started for it
	// (its engine's, its background tasks) runs in it (C16). nil: no
	// sandbox. The daemon builds it (internal/sandbox.Build), since it
	// knows the other projects and worktrees.
	Sandbox func(ctx context.Context, k troupe.RuntimeKey, spec troupe.AgentSpec, dir, work string) (sandbox.Policy, error)
	// Briefing, if set, returns text every session of project p starts
	// with after its prompt (a bounded index of its memory notes).
	Briefing func(ctx context.Context, p troupe.Project) string
	// Journal, if set, keeps what each agent did, turn by turn; nil: not kept.
	Journal Journal
	Logger  *slog.Logger
	Ceiling time.Duration // absolute ask limit; default DefaultCeiling
	// StopTimeout bounds a session's Close when an agent stops; default 5s.
	StopTimeout time.Duration
	// TurnMessages and TurnBytes bound one turn: at most so many messages
	// and bytes of rendered text (engine.Render), lowered to the engine's
	// own limit where it declares one (engine.InputLimiter); zero:
	// DefaultTurnMessages, DefaultTurnBytes. The rest of the inbox waits
	// for the next turns, in order.
	TurnMessages int
	TurnBytes    int
	// MessageDir keeps the whole text of a message too big for a turn
	// (<MessageDir>/<project>/<id>.txt, 0600), which the turn gets cut
	// with the file's path; "": the turn gets it cut, the rest not kept.
	MessageDir string
	// ClaimSession, if set, is asked before a session resumes the
	// conversation id (one writer per conversation, C9): an error refuses
	// the start (the agent fails with it); release is called when the
	// session ends. nil: no claim.
	ClaimSession func(ctx context.Context, k troupe.RuntimeKey, eng troupe.Engine, id string) (release func(), err error)
	// Stat looks at a project's folder before a session starts there; nil:
	// os.Stat. Tests set it to make folders vanish.
	Stat func(name string) (fs.FileInfo, error)
	// Checkpoints, if set, snapshots each agent's workspace at the start
	// and the end of its turns (C18); nil: none.
	Checkpoints Checkpoints
	// MaxSessions bounds the agent sessions live at once (each an engine
	// process); the others wait for a slot (slots.go). 0:
	// DefaultMaxSessions.
	MaxSessions int
	// Verifier runs the checks of verified delegations (verify.go); nil:
	// a delegation that names a check is refused.
	Verifier Verifier
	// Remote starts the sessions of the agents that run on a runner
	// (AgentSpec.Runner): their processes, sandbox and files are the
	// runner's; nil: such an agent cannot start, saying why.
	Remote engine.Engine
}

// Runtime runs the agents of every project.
type Runtime struct {
	o     Options
	log   *slog.Logger
	hub   *events.Hub
	tools *tool.Catalog   // immutable after New
	jw    *journal.Writer // nil without Options.Journal; its Run is owned by Run

	// mu guards the fields below.
	mu      sync.Mutex
	ctx     context.Context // Run's context; nil before Run
	actors  map[troupe.RuntimeKey]*actor
	waiters map[troupe.RequestID]waiter
	holds   map[troupe.RuntimeKey]int // checks of each agent's work running (verify.go): it starts no turn
	wg      sync.WaitGroup            // actors and watchdogs
	stopped bool

	perms permTable     // permission requests waiting on the person; its own lock
	waits waitGraph     // who waits on whom, per project (C13); its own lock
	slots *sessionSlots // its own lock
}

// New returns a runtime; call Run to start it.
func New(o Options) *Runtime {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Hub == nil {
		o.Hub = events.New(events.Options{})
	}
	if o.Ceiling <= 0 {
		o.Ceiling = DefaultCeiling
	}
	if o.StopTimeout <= 0 {
		o.StopTimeout = 5 * time.Second
	}
	if o.Sessions == nil {
		o.Sessions = NewMemSessions()
	}
	if o.Stat == nil {
		o.Stat = os.Stat
	}
	if o.TurnMessages <= 0 {
		o.TurnMessages = DefaultTurnMessages
	}
	if o.TurnBytes <= 0 {
		o.TurnBytes = DefaultTurnBytes
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = DefaultMaxSessions
	}
	r := &Runtime{o: o, log: o.Logger, hub: o.Hub, actors: map[troupe.RuntimeKey]*actor{},
		waiters: map[troupe.RequestID]waiter{}, holds: map[troupe.RuntimeKey]int{}, perms: newPermTable(), waits: newWaitGraph(), slots: newSessionSlots(o.MaxSessions)}
	r.tools = tool.NewCatalog(r.ownTools(), o.Tools)
	if o.Journal != nil {
		r.jw = journal.NewWriter(journal.WriterOptions{Store: o.Journal, Logger: o.Logger})
	}
	return r
}

// Run recovers what a previous daemon left (messages in a turn go back to
// the inbox marked redelivered; pending asks get their watchdogs again),
// wakes every agent with mail, and runs until ctx ends. It then stops every
// actor and watchdog, records what the journal writer still holds, and
// returns nil.
func (r *Runtime) Run(ctx context.Context) error {
	defer r.runJournal(ctx)()
	r.mu.Lock()
	r.ctx = ctx
	r.mu.Unlock()
	keys, err := r.o.Store.Recover(ctx)
	if err != nil {
		return fmt.Errorf("recover inboxes: %w", err)
	}
	reqs, err := r.o.Store.PendingRequests(ctx)
	if err != nil {
		return fmt.Errorf("recover requests: %w", err)
	}
	// Their askers no longer wait (their tool calls died with the old
	// daemon; the outcome goes to their inbox), so these asks are no edges
	// of the wait-for graph.
	for _, req := range reqs {
		r.watch(req, r.waiterFor(req.Project, req.ID))
	}
	r.recoverChecks(reqs)
	for _, k := range keys {
		r.wake(k)
	}
	<-ctx.Done()
	r.mu.Lock()
	r.stopped = true
	r.mu.Unlock()
	r.wg.Wait()
	return nil
}

// spawn runs fn as a goroutine owned by the runtime, unless it stopped.
func (r *Runtime) spawn(fn func(ctx context.Context)) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped || r.ctx == nil {
		return false
	}
	ctx := r.ctx
	r.wg.Go(func() { fn(ctx) })
	return true
}

// wake makes k's actor look at its inbox, starting the actor if needed.
func (r *Runtime) wake(k troupe.RuntimeKey) {
	r.mu.Lock()
	a, ok := r.actors[k]
	if !ok && !r.stopped && r.ctx != nil {
		a = r.newLoop(k)
	}
	r.mu.Unlock()
	if a != nil {
		a.poke()
	}
}

// newLoop makes k's actor and starts its loop, owned by the runtime. Run
// with r.mu held, the runtime running.
func (r *Runtime) newLoop(k troupe.RuntimeKey) *actor {
	a := newActor(r, k)
	r.actors[k] = a
	ctx := r.ctx
	r.wg.Go(func() {
		a.run(ctx)
		r.mu.Lock()
		if r.actors[k] == a {
			delete(r.actors, k)
		}
		r.mu.Unlock()
		// Mail that arrived while the actor was stopping pokes nobody:
		// a new actor takes it if the agent still exists (C5: never
		// stuck as queued).
		if ctx.Err() == nil {
			if _, _, ok := r.o.Teams.Agent(k); ok {
				if p, err := r.o.Store.Pending(ctx, k, 1); err == nil && len(p) > 0 {
					r.wake(k)
				}
			}
		}
	})
	return a
}

func (r *Runtime) actor(k troupe.RuntimeKey) *actor {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.actors[k]
}

// AgentState reports k's state and, for blocked or failed, the reason.
func (r *Runtime) AgentState(k troupe.RuntimeKey) (troupe.AgentState, string) {
	if a := r.actor(k); a != nil {
		return a.status()
	}
	return troupe.StateStopped, ""
}

// Activity returns k's activity (C3): it advances with every output of its
// session and when a turn starts, and reads as "now" while the agent waits
// inside a troupe tool call (asking a teammate who works is not silence).
func (r *Runtime) Activity(k troupe.RuntimeKey) engine.Activity {
	if a := r.actor(k); a != nil {
		return a.activity()
	}
	return engine.Activity{}
}

// Doing is what k is doing: the oldest of its engine's tool calls in
// flight (a command, a build), zero when none.
func (r *Runtime) Doing(k troupe.RuntimeKey) (title string, since time.Time) {
	if a := r.actor(k); a != nil {
		return a.doing()
	}
	return "", time.Time{}
}

// TeamChanged applies a team reload: removed agents stop and their
// undelivered mail expires; changed agents get a new session at their next
// turn boundary; unchanged agents are not touched.
func (r *Runtime) TeamChanged(c troupe.TeamChange) {
	for _, name := range c.Removed {
		k := troupe.RuntimeKey{Project: c.Project, Agent: name}
		if a := r.actor(k); a != nil {
			a.stop("removed from the team")
		}
		r.dropPermissions(func(p *pendingPerm) bool { return p.perm.Key() == k }, "the agent was removed from its team")
		if err := r.o.Sessions.ClearSessionID(context.Background(), k); err != nil {
			r.log.Error("clear session id", "project", k.Project, "agent", k.Agent, "err", err)
		}
		if n, err := r.o.Store.Expire(context.Background(), k, "agent removed from the team"); err != nil {
			r.log.Error("expire inbox", "project", k.Project, "agent", k.Agent, "err", err)
		} else if n > 0 {
			r.publish(k, events.InboxExpired{Messages: n})
		}
	}
	for _, name := range c.Changed {
		if a := r.actor(troupe.RuntimeKey{Project: c.Project, Agent: name}); a != nil {
			a.restartAtBoundary()
		}
	}
}

// ProjectRemoved stops the project's agents and ends its mail and asks.
func (r *Runtime) ProjectRemoved(p troupe.ProjectID) {
	r.mu.Lock()
	var as []*actor
	for k, a := range r.actors {
		if k.Project == p {
			as = append(as, a)
		}
	}
	r.mu.Unlock()
	for _, a := range as {
		a.stop("project removed")
	}
	r.dropPermissions(func(pp *pendingPerm) bool { return pp.perm.Project == p }, "the project was removed")
	if err := r.o.Sessions.ClearProjectSessions(context.Background(), p); err != nil {
		r.log.Error("clear session ids", "project", p, "err", err)
	}
	if err := r.o.Store.ExpireProject(context.Background(), p, "project removed"); err != nil {
		r.log.Error("expire project", "project", p, "err", err)
	}
	r.forgetSpill(p)
	// Asks of the project are failed in the store; wake their waiters.
	r.waits.forget(p)
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, w := range r.waiters {
		if w.project == p {
			close(w.done)
			delete(r.waiters, id)
		}
	}
}

// Send puts a message into to's inbox and wakes it.
func (r *Runtime) Send(ctx context.Context, to troupe.RuntimeKey, from troupe.AgentID, kind troupe.MessageKind, text string) (troupe.Message, error) {
	if err := r.checkTarget(to, from); err != nil {
		return troupe.Message{}, err
	}
	if strings.TrimSpace(text) == "" {
		return troupe.Message{}, fmt.Errorf("send to %s: %w", to.Agent, &troupe.FieldError{Field: "text", Msg: "empty: write the message"})
	}
	if err := checkSize("text", text); err != nil {
		return troupe.Message{}, fmt.Errorf("send to %s: %w", to.Agent, err)
	}
	m, err := r.o.Store.Append(ctx, troupe.Message{Project: to.Project, To: to.Agent, From: from, Kind: kind, Text: text})
	if err != nil {
		return troupe.Message{}, fmt.Errorf("send to %s: %w", to.Agent, err)
	}
	r.publish(to, events.MessageQueued{Message: m})
	r.wake(to)
	return m, nil
}

// checkTarget refuses unknown agents (naming the known ones) and messages to self.
func (r *Runtime) checkTarget(to troupe.RuntimeKey, from troupe.AgentID) error {
	if _, _, ok := r.o.Teams.Agent(to); !ok {
		var names []troupe.AgentID
		for _, a := range r.o.Teams.Agents(to.Project) {
			names = append(names, a.Name)
		}
		return troupe.NoAgent(to.Agent, names)
	}
	if to.Agent == from {
		return fmt.Errorf("%s cannot message itself: %w", from, troupe.ErrInvalid)
	}
	return nil
}

func (r *Runtime) publish(k troupe.RuntimeKey, p events.Payload) {
	r.hub.Publish(k, p)
}

// Conversation returns a page of a project's messages (see
// inbox.Store.Conversation).
func (r *Runtime) Conversation(ctx context.Context, p troupe.ProjectID, q inbox.Page) ([]troupe.Message, error) {
	return r.o.Store.Conversation(ctx, p, q)
}

// MessageText returns a message of project p with the part of its text
// that starts at byte offset (see inbox.Store.Text).
func (r *Runtime) MessageText(ctx context.Context, p troupe.ProjectID, id int64, offset int) (troupe.Message, error) {
	return r.o.Store.Text(ctx, p, id, offset)
}

func newID(prefix string) string {
	b := make([]byte, 8)
	rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// Queued tells the runtime that another component (the task manager) put m
// into its recipient's inbox: the recipient wakes. A message recorded as
// already delivered (for the person) is only published.
func (r *Runtime) Queued(m troupe.Message) {
	r.publish(m.Key(), events.MessageQueued{Message: m})
	if m.State == troupe.MsgQueued {
		r.wake(m.Key())
	}
}
