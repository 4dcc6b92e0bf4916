package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/troupe-dev/troupe/internal/bus"
	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/sandbox"
	"github.com/troupe-dev/troupe/internal/task"
	"github.com/troupe-dev/troupe/internal/tool"
	"github.com/troupe-dev/troupe/internal/troupe"
	"github.com/troupe-dev/troupe/internal/worktree"
)

// safeName is what a project's id and an agent's name may be on a runner,
// where they name folders.
var safeName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

// DefaultMaxAgents bounds the sessions a runner runs at once when its
// options do not.
const DefaultMaxAgents = 16

// RunnerOptions configures a runner.
type RunnerOptions struct {
	// Conn is the runner's connection to the bus (bus.Dial).
	Conn   *nats.Conn
	Name   string
	Labels []string
	// Root holds a clone of each project and its agents' worktrees:
	// <Root>/<project>/repo (bare) and its worktrees (worktree.RunnerWorktree).
	Root      string
	MaxAgents int // 0: DefaultMaxAgents
	// Engines are the runner's own engines (its CLIs, its HOME).
	Engines map[troupe.Engine]engine.Engine
	// Sandbox returns the sandbox of agent k working in work, in its clone
	// clone, on this machine (C16); nil: none.
	Sandbox func(ctx context.Context, k troupe.RuntimeKey, spec troupe.AgentSpec, clone, work string) (sandbox.Policy, error)
	// MaxBundle bounds a bundle the runner takes from the daemon.
	MaxBundle int64 // 0: 1 GiB
	// TaskSupervisor is the argv of its tasks' supervisors
	// (task.Options.Supervisor; tests); default this executable's.
	TaskSupervisor []string
	// HelloTimeout bounds the wait for the answer to a hello (a daemon
	// that drops it, or dies while it answers, does not stall the
	// runner: it says hello again at its next beat). 0: DefaultHelloTimeout.
	HelloTimeout time.Duration
	Logger       *slog.Logger
}

// DefaultHelloTimeout is RunnerOptions.HelloTimeout's default: a hello's
// answer can wait on the daemon making the runner's stream (three
// replicas on a cluster).
const DefaultHelloTimeout = 30 * time.Second

// Runner runs the sessions a daemon assigns to it.
type Runner struct {
	o       RunnerOptions
	log     *slog.Logger
	started time.Time
	mcpURL  string

	// mu guards sessions (by session id) and tokens (MCP token → session
	// id: the local endpoint's requests are forwarded as that session's).
	mu       sync.Mutex
	sessions map[string]*hosted
	tokens   map[string]string
	wg       sync.WaitGroup
	ctx      context.Context
	hellos   chan struct{} // a reconnection: say hello again
	greeted  chan struct{} // a token after each hello the daemon answered
	terms    termViews     // the daemon's viewers of the sessions' terminals (terminal.go)

	// The agents' background tasks (tasks.go), from Run.
	tasks    *task.Manager
	book     *taskBook
	taskKick chan struct{}
}

// hosted is one session this runner runs.
type hosted struct {
	id    string
	key   troupe.RuntimeKey
	token string
	sess  engine.Session
	seq   uint64 // the last record published; only its pump writes it
	done  chan struct{}
	// work is the agent's worktree in clone, its branch made at base:
	// each turn's files go back to the daemon as a snapshot on base.
	work, clone, base string
	pol               sandbox.Policy // the agent's sandbox here: its tasks run in it
	// sent is the tree of the last snapshot sent: a turn that leaves the
	// files as they were sends none. Only the pump uses it.
	sent string
}

// NewRunner returns a runner; Run serves it.
func NewRunner(o RunnerOptions) *Runner {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxAgents <= 0 {
		o.MaxAgents = DefaultMaxAgents
	}
	if o.MaxBundle <= 0 {
		o.MaxBundle = 1 << 30
	}
	return &Runner{o: o, log: o.Logger.With("runner", o.Name), sessions: map[string]*hosted{},
		tokens: map[string]string{}, hellos: make(chan struct{}, 1), greeted: make(chan struct{}, 1),
		taskKick: make(chan struct{}, 1)}
}

// Greeted receives a token after each hello the daemon answered: the
// daemon counts the runner connected from then (one token kept when
// nobody reads).
func (r *Runner) Greeted() <-chan struct{} { return r.greeted }

// Reconnected tells the runner its connection came back: it says hello
// again (bus.Dial's reconnect handler calls it).
func (r *Runner) Reconnected() {
	select {
	case r.hellos <- struct{}{}:
	default:
	}
}

// Run serves the daemon's requests until ctx ends, then closes every
// session and waits for their pumps.
func (r *Runner) Run(ctx context.Context) error {
	r.started = time.Now()
	r.mu.Lock()
	r.ctx = ctx
	r.mu.Unlock()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen for the agents' mcp: %w", err)
	}
	r.mcpURL = "http://" + ln.Addr().String() + "/mcp"
	if err := r.startTasks(ctx); err != nil {
		ln.Close()
		r.wg.Wait()
		return err
	}
	srv := &http.Server{Handler: http.HandlerFunc(r.forwardMCP), ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			r.log.Error("agents' mcp endpoint", "err", err)
		}
	}()
	sub, err := r.o.Conn.Subscribe(bus.ToRunner(r.o.Name)+".>", func(m *nats.Msg) { r.serve(ctx, m) })
	if err != nil {
		_ = srv.Close()
		r.wg.Wait()
		return fmt.Errorf("subscribe: %w", err)
	}
	// Until a hello is answered (the daemon may be starting, or gone),
	// each beat tries again: the daemon ignores the beats of a runner
	// that has not said hello.
	beat := DefaultBeat
	greeted := false
	helloTimeout := r.o.HelloTimeout
	if helloTimeout <= 0 {
		helloTimeout = DefaultHelloTimeout
	}
	// A hello runs beside the loop, one at a time: the beats go on while
	// it waits. A hello can wait its whole timeout (said after a
	// reconnection, before the daemon's own subscription is back, nobody
	// answers it); beats held behind it made the daemon call a connected
	// runner unreachable.
	type greeting struct {
		beat time.Duration
		err  error
	}
	answered := make(chan greeting, 1)
	helloing := false
	greet := func() {
		if helloing {
			return
		}
		helloing = true
		r.wg.Go(func() {
			hctx, cancel := context.WithTimeout(ctx, helloTimeout)
			b, err := r.hello(hctx)
			cancel()
			answered <- greeting{b, err}
		})
	}
	heard := func(g greeting) {
		helloing = false
		if g.err != nil {
			r.log.Warn("hello", "err", g.err)
			return
		}
		greeted = true
		r.kickTasks() // the ends kept while the daemon was away
		if g.beat > 0 && g.beat != beat {
			beat = g.beat
		}
	}
	// The first hello is awaited: it sets the beat.
	greet()
	select {
	case g := <-answered:
		heard(g)
	case <-ctx.Done():
	}
	tick := time.NewTicker(beat)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			_ = sub.Unsubscribe()
			r.closeAll()
			_ = srv.Close()
			r.wg.Wait()
			return nil
		case g := <-answered:
			heard(g)
		case <-r.hellos:
			greeted = false
			greet()
		case <-tick.C:
			if !greeted {
				greet()
			}
			tick.Reset(beat)
			r.beat()
		}
	}
}

// hello tells the daemon who this runner is and what it runs, and closes
// the sessions the daemon no longer knows.
func (r *Runner) hello(ctx context.Context) (time.Duration, error) {
	r.mu.Lock()
	ids := make([]string, 0, len(r.sessions))
	for id := range r.sessions {
		ids = append(ids, id)
	}
	r.mu.Unlock()
	data, err := r.request(ctx, opHello, hello{Version: Version, Name: r.o.Name, Labels: r.o.Labels,
		MaxAgents: r.o.MaxAgents, Sessions: ids, Started: r.started})
	if err != nil {
		return 0, err
	}
	var rep helloReply
	if err := json.Unmarshal(data, &rep); err != nil {
		return 0, fmt.Errorf("decode hello's answer: %w", err)
	}
	if len(rep.Tasks) > 0 {
		r.wg.Go(func() { r.checkTasks(rep.Tasks) })
	}
	for _, id := range ids {
		if !slices.Contains(rep.Sessions, id) {
			r.log.Info("closing a session the daemon no longer knows", "session", id)
			r.closeOne(id)
		}
	}
	r.log.Info("connected to the daemon", "sessions", len(rep.Sessions))
	select {
	case r.greeted <- struct{}{}:
	default:
	}
	return rep.Beat, nil
}

func (r *Runner) beat() {
	r.mu.Lock()
	b := beat{Name: r.o.Name, Agents: len(r.sessions), Activity: map[string]uint64{}}
	for id, h := range r.sessions {
		b.Activity[id] = h.sess.Activity().Count
	}
	r.mu.Unlock()
	data, _ := json.Marshal(b)
	if err := r.o.Conn.Publish(bus.FromRunner(r.o.Name)+"."+opBeat, data); err != nil {
		r.log.Debug("beat", "err", err)
	}
}

// request sends op to the daemon and waits for its answer.
func (r *Runner) request(ctx context.Context, op string, v any) (json.RawMessage, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", op, err)
	}
	m, err := r.o.Conn.RequestWithContext(ctx, bus.FromRunner(r.o.Name)+"."+op, b)
	if err != nil {
		return nil, fmt.Errorf("ask the daemon (%s): %w", op, err)
	}
	var rep reply
	if err := json.Unmarshal(m.Data, &rep); err != nil {
		return nil, fmt.Errorf("decode the daemon's answer: %w", err)
	}
	if rep.Error != "" {
		return nil, errors.New(rep.Error)
	}
	return rep.Data, nil
}

// serve answers one request of the daemon, in a goroutine of its own.
func (r *Runner) serve(ctx context.Context, m *nats.Msg) {
	op := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
	switch op {
	case opRehello:
		r.Reconnected()
		return
	case opCredit:
		r.credit(m.Data)
		return
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		var err error
		switch op {
		case opStart:
			var req startReq
			if err = json.Unmarshal(m.Data, &req); err == nil {
				err = r.start(ctx, req)
			}
		case opSnapshot:
			var req snapshotReq
			var c bundleChunk
			if err = json.Unmarshal(m.Data, &req); err == nil {
				if c, err = r.snapshotChunk(ctx, req); err == nil {
					data, _ := json.Marshal(c)
					r.respond(m, op, reply{Data: data})
					return
				}
			}
		case opTaskStart, opTaskKill, opTaskOutput:
			var v any
			if v, err = r.taskOp(ctx, op, m.Data); err == nil {
				data, _ := json.Marshal(v)
				r.respond(m, op, reply{Data: data})
				return
			}
		case opAttach, opType, opResize, opDetach, opTermSize:
			var v any
			if v, err = r.termOp(ctx, op, m.Data); err == nil {
				data, _ := json.Marshal(v)
				r.respond(m, op, reply{Data: data})
				return
			}
		case opSend, opInterrupt, opClose:
			var req sessionReq
			if err = json.Unmarshal(m.Data, &req); err == nil {
				err = r.control(ctx, op, req)
			}
		default:
			err = fmt.Errorf("unknown operation %q", op)
		}
		var rep reply
		if err != nil {
			rep.Error = err.Error()
		}
		r.respond(m, op, rep)
	}()
}

func (r *Runner) respond(m *nats.Msg, op string, rep reply) {
	b, _ := json.Marshal(rep)
	if err := m.Respond(b); err != nil {
		r.log.Warn("answer the daemon", "op", op, "err", err)
	}
}

// snapshot is the commit of the agent's files at a turn's end, "" when
// it cannot be made (said in the log: the turn is answered all the same,
// its files stay on the runner).
func (r *Runner) snapshot(h *hosted) string {
	ctx, cancel := context.WithTimeout(r.ctx, time.Minute)
	defer cancel()
	c, err := worktree.Snapshot(ctx, h.work, h.base)
	if err != nil {
		r.log.Warn("snapshot the agent's files", "project", h.key.Project, "agent", h.key.Agent, "err", err)
		return ""
	}
	tree, err := worktree.Tree(ctx, h.clone, c)
	if err != nil {
		r.log.Warn("snapshot the agent's files", "project", h.key.Project, "agent", h.key.Agent, "err", err)
		return c
	}
	if tree == h.sent {
		return "" // the files are as the daemon has them
	}
	h.sent = tree
	return c
}

// snapshotChunk is a chunk of the bundle of one of a session's snapshots,
// thin against what the daemon has; made at offset 0, kept until the
// next.
func (r *Runner) snapshotChunk(ctx context.Context, req snapshotReq) (bundleChunk, error) {
	r.mu.Lock()
	h := r.sessions[req.Session]
	r.mu.Unlock()
	if h == nil {
		return bundleChunk{}, fmt.Errorf("no session %q on runner %s", req.Session, r.o.Name)
	}
	path := filepath.Join(filepath.Dir(h.clone), "out-"+h.id+".bundle")
	if req.Offset == 0 {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
		if err != nil {
			return bundleChunk{}, fmt.Errorf("make snapshot bundle: %w", err)
		}
		err = worktree.BundleCommit(ctx, h.clone, req.Commit, req.Have, f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return bundleChunk{}, err
		}
	}
	return readChunk(path, req.Commit, req.Offset)
}

func (r *Runner) control(ctx context.Context, op string, req sessionReq) error {
	r.mu.Lock()
	h := r.sessions[req.Session]
	r.mu.Unlock()
	if h == nil {
		if op == opClose {
			return nil // closed already
		}
		return fmt.Errorf("no session %q on runner %s", req.Session, r.o.Name)
	}
	switch op {
	case opSend:
		if req.Input == nil {
			return errors.New("send without input")
		}
		return h.sess.Send(ctx, *req.Input)
	case opInterrupt:
		return h.sess.Interrupt(ctx)
	default:
		err := h.sess.Close(ctx)
		<-h.done
		return err
	}
}

// start starts one session: the project's clone brought to the head, the
// agent's worktree, its sandbox, its engine; then a pump publishes its
// events.
func (r *Runner) start(ctx context.Context, req startReq) error {
	if !safeName.MatchString(string(req.Key.Project)) || !safeName.MatchString(string(req.Key.Agent)) {
		return fmt.Errorf("start session: %q is no project and agent a runner takes", req.Key)
	}
	eng := r.o.Engines[req.Agent.Engine]
	if eng == nil {
		return fmt.Errorf("engine %q is not built into this runner", req.Agent.Engine)
	}
	if err := eng.Check(req.Agent); err != nil {
		return fmt.Errorf("check agent %s on runner %s: %w", req.Key.Agent, r.o.Name, err)
	}
	r.mu.Lock()
	if _, dup := r.sessions[req.Session]; dup {
		r.mu.Unlock()
		return nil // a repeated start: it runs
	}
	if len(r.sessions) >= r.o.MaxAgents {
		r.mu.Unlock()
		return fmt.Errorf("runner %s runs %d agents, its --max-agents", r.o.Name, r.o.MaxAgents)
	}
	r.mu.Unlock()
	clone := filepath.Join(r.o.Root, string(req.Key.Project), "repo")
	if err := r.sync(ctx, req, clone); err != nil {
		return err
	}
	work, err := worktree.RunnerWorktree(ctx, clone, req.Key.Agent, req.Head)
	if err != nil {
		return fmt.Errorf("make the agent's worktree: %w", err)
	}
	var pol sandbox.Policy
	if r.o.Sandbox != nil {
		if pol, err = r.o.Sandbox(ctx, req.Key, req.Agent, clone, work); err != nil {
			return err
		}
		if pol.On {
			if err := pol.Check(); err != nil {
				return fmt.Errorf("start %s session: %w", req.Agent.Engine, err)
			}
		}
	}
	spec := engine.StartSpec{Key: req.Key, Agent: req.Agent, Dir: work, Instructions: req.Instructions,
		Resume: req.Resume, Sandbox: pol, Logger: r.log.With("project", req.Key.Project, "agent", req.Key.Agent),
		Tools:    &tools{r: r, session: req.Session, specs: req.Tools},
		Approver: approver{r: r, session: req.Session}}
	if req.MCPToken != "" {
		spec.MCP = engine.MCPAccess{URL: r.mcpURL, Token: req.MCPToken}
	}
	sess, err := eng.Start(ctx, spec)
	if err != nil {
		return fmt.Errorf("start %s session: %w", req.Agent.Engine, err)
	}
	h := &hosted{id: req.Session, key: req.Key, token: req.MCPToken, sess: sess, done: make(chan struct{}),
		work: work, clone: clone, base: req.Head, pol: pol}
	r.mu.Lock()
	r.sessions[h.id] = h
	if h.token != "" {
		r.tokens[h.token] = h.id
	}
	r.wg.Add(1)
	r.mu.Unlock()
	go r.pump(h)
	r.log.Info("session started", "project", req.Key.Project, "agent", req.Key.Agent, "session", h.id)
	return nil
}

// sync brings the clone to req.Head, fetching a bundle from the daemon
// when it does not have it.
func (r *Runner) sync(ctx context.Context, req startReq, clone string) error {
	have, err := worktree.Has(ctx, clone, req.Head)
	if err != nil {
		return err
	}
	if have {
		return nil
	}
	haves, _ := worktree.Haves(ctx, clone)
	path, err := fetchChunks(filepath.Dir(clone), r.o.MaxBundle, func(off int64) (bundleChunk, error) {
		return chunk(r.request(ctx, opBundle, bundleReq{Session: req.Session, Have: haves, Offset: off}))
	})
	if err != nil {
		return fmt.Errorf("fetch the project's commits: %w", err)
	}
	defer os.Remove(path)
	head, err := worktree.ApplyBundle(ctx, clone, path)
	if err != nil {
		return err
	}
	if head != req.Head {
		return fmt.Errorf("the project's bundle brought %s, not %s", head, req.Head)
	}
	return nil
}

// pump publishes the session's events to the runner's stream, in order,
// then its end. A publish the stream has not acknowledged is tried again
// (the same id: the stream keeps it once), until the runner stops.
func (r *Runner) pump(h *hosted) {
	defer r.wg.Done()
	defer close(h.done)
	acted := false // the turn in flight called a tool or asked a permission
	for ev := range h.sess.Events() {
		rec := durable{Event: &ev}
		switch ev.Kind {
		case engine.EventToolCall, engine.EventPermission:
			acted = true
		case engine.EventTurnEnd:
			// A turn that only talked changed no file: no snapshot, no
			// git (the session's first turn sends one all the same).
			if acted || h.sent == "" {
				rec.Snapshot = r.snapshot(h)
			}
			acted = false
		}
		r.publish(h, rec)
	}
	rec := durable{Ended: true}
	if err := h.sess.Err(); err != nil {
		rec.Err = err.Error()
	}
	r.publish(h, rec)
	r.mu.Lock()
	delete(r.sessions, h.id)
	delete(r.tokens, h.token)
	r.mu.Unlock()
	os.Remove(filepath.Join(filepath.Dir(h.clone), "out-"+h.id+".bundle"))
	r.log.Info("session ended", "project", h.key.Project, "agent", h.key.Agent, "session", h.id, "err", rec.Err)
}

func (r *Runner) publish(h *hosted, rec durable) {
	h.seq++
	rec.Session, rec.Seq = h.id, h.seq
	data, err := json.Marshal(rec)
	if err != nil {
		r.log.Error("encode an event", "err", err)
		return
	}
	msg := &nats.Msg{Subject: bus.FromRunner(r.o.Name) + "." + opDurable + "." + h.id, Data: data,
		Header: nats.Header{nats.MsgIdHdr: []string{fmt.Sprintf("%s:%d", h.id, h.seq)}}}
	wait := 100 * time.Millisecond
	for {
		err := r.publishOnce(msg)
		if err == nil {
			return
		}
		r.log.Warn("publish an event; trying again", "session", h.id, "seq", h.seq, "err", err, "in", wait)
		select {
		case <-r.ctx.Done():
			return // the runner stops: the daemon's hello will close it
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// publishOnce publishes msg with a request, so that the stream's
// acknowledgement comes back on this runner's own inbox.
func (r *Runner) publishOnce(msg *nats.Msg) error {
	ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
	defer cancel()
	m, err := r.o.Conn.RequestMsgWithContext(ctx, msg)
	if err != nil {
		return err
	}
	var ack struct {
		Stream string `json:"stream"`
		Error  *struct {
			Code        int    `json:"code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &ack); err != nil {
		return fmt.Errorf("decode acknowledgement: %w", err)
	}
	if ack.Error != nil {
		return fmt.Errorf("stream refused: %s", ack.Error.Description)
	}
	if ack.Stream == "" {
		return errors.New("no acknowledgement from the stream")
	}
	return nil
}

func (r *Runner) closeOne(id string) {
	r.mu.Lock()
	h := r.sessions[id]
	r.mu.Unlock()
	if h == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = h.sess.Close(ctx)
}

func (r *Runner) closeAll() {
	r.mu.Lock()
	ids := make([]string, 0, len(r.sessions))
	for id := range r.sessions {
		ids = append(ids, id)
	}
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() { r.closeOne(id) })
	}
	wg.Wait()
}

// tools are a session's troupe tools, called on the daemon.
type tools struct {
	r       *Runner
	session string
	specs   []tool.Spec
}

func (t *tools) Specs() []tool.Spec { return t.specs }

func (t *tools) Call(ctx context.Context, name string, args json.RawMessage) (string, error) {
	data, err := t.r.request(ctx, opTool, toolReq{Session: t.session, Name: name, Args: args})
	if err != nil {
		return "", err
	}
	var out string
	if err := json.Unmarshal(data, &out); err != nil {
		return "", fmt.Errorf("decode tool result: %w", err)
	}
	return out, nil
}

// approver asks the daemon, where the person decides.
type approver struct {
	r       *Runner
	session string
}

func (a approver) Approve(ctx context.Context, p engine.Permission) (engine.Decision, error) {
	data, err := a.r.request(ctx, opApprove, approveReq{Session: a.session, Permission: p})
	if err != nil {
		return engine.Decision{}, err
	}
	var d engine.Decision
	if err := json.Unmarshal(data, &d); err != nil {
		return engine.Decision{}, fmt.Errorf("decode decision: %w", err)
	}
	return d, nil
}
