package remote

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/troupe-dev/troupe/internal/bus"
	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/troupe"
	"github.com/troupe-dev/troupe/internal/worktree"
)

// DefaultBeat is how often a runner says it is alive; a runner silent for
// MissedBeats of them is unreachable.
const (
	DefaultBeat = 2 * time.Second
	MissedBeats = 3
)

// DefaultStreamBytes bounds each runner's durable stream: a full stream
// refuses the runner's events, which waits and retries (the engine's
// output then waits too).
const DefaultStreamBytes = 256 << 20

// DaemonOptions configures the daemon's side.
type DaemonOptions struct {
	// Conn is the daemon's connection to the bus, with every right.
	Conn *nats.Conn
	// Engines are this daemon's engines: a runner's agent is checked and
	// bounded (tool-call limit, input limit) by its engine here, and runs
	// on the same engine there.
	Engines map[troupe.Engine]engine.Engine
	// Dir keeps the bundles made for runners (<state>/runners).
	Dir         string
	StreamBytes int64         // 0: DefaultStreamBytes
	Beat        time.Duration // 0: DefaultBeat
	// Replicas is how many copies of a runner's stream to keep, asked at
	// each hello; nil: 1.
	Replicas func() int
	// Allowed, set when the runners share the daemon's NATS account (an
	// existing cluster), says whether the daemon listens to runner name
	// (it was not revoked): nothing of a runner it refuses is handled.
	// Then a request's reply subject must be the runner's own inbox. Nil:
	// the embedded server's accounts keep runners apart, and a request's
	// reply subject must be the server's answer subject ("_R_.").
	Allowed func(name string) bool
	Logger  *slog.Logger
}

// Daemon is the daemon's side of the link: it tracks the runners, starts
// the runners' agents' sessions (Engine), carries their events from the
// runners' streams to them, and answers the runners' requests (tools,
// permissions, MCP, bundles).
type Daemon struct {
	o   DaemonOptions
	log *slog.Logger
	js  jetstream.JetStream

	// mu guards the maps: runners by name, sessions by their id (each
	// session knows its RuntimeKey and its runner, C1).
	mu       sync.Mutex
	runners  map[string]*runnerState
	sessions map[string]*session
	ctx      context.Context // Run's; nil before
	mcpH     http.Handler    // Run's
	taskRows TaskRows        // SetTasks
	wg       sync.WaitGroup  // request handlers and consumers
}

// runnerState is what the daemon knows of one runner.
type runnerState struct {
	name      string
	labels    []string
	maxAgents int
	since     time.Time // connected since; zero when not connected
	lastSeen  time.Time
	agents    int
	consume   jetstream.ConsumeContext
}

// RunnerInfo is a runner as the daemon sees it.
type RunnerInfo struct {
	Name           string
	Labels         []string
	Connected      bool
	ConnectedSince time.Time
	LastSeen       time.Time
	Agents         []troupe.RuntimeKey
	MaxAgents      int
}

// NewDaemon returns the daemon's side; Run serves it.
func NewDaemon(o DaemonOptions) *Daemon {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.StreamBytes <= 0 {
		o.StreamBytes = DefaultStreamBytes
	}
	if o.Beat <= 0 {
		o.Beat = DefaultBeat
	}
	return &Daemon{o: o, log: o.Logger.With("component", "runners"), runners: map[string]*runnerState{},
		sessions: map[string]*session{}}
}

// Run serves the runners until ctx ends, then waits for its handlers. mcp is troupe's MCP endpoint, which the
// runners' agents' CLIs reach through their runner (nil: none).
func (d *Daemon) Run(ctx context.Context, mcp http.Handler) error {
	js, err := jetstream.New(d.o.Conn)
	if err != nil {
		return fmt.Errorf("open jetstream: %w", err)
	}
	d.mu.Lock()
	d.js, d.ctx, d.mcpH = js, ctx, mcp
	d.mu.Unlock()
	subj := func(op string) string { return bus.FromRunner("*") + "." + op }
	handlers := map[string]func(context.Context, string, *nats.Msg) (any, error){
		opHello: d.hello, opTool: d.tool, opApprove: d.approve, opMCP: d.mcp, opBundle: d.bundle,
	}
	var subs []*nats.Subscription
	for op, h := range handlers {
		sub, err := d.o.Conn.Subscribe(subj(op), func(m *nats.Msg) { d.serve(ctx, m, h) })
		if err != nil {
			return fmt.Errorf("subscribe %s: %w", op, err)
		}
		subs = append(subs, sub)
	}
	sub, err := d.o.Conn.Subscribe(subj(opBeat), d.beat)
	if err != nil {
		return fmt.Errorf("subscribe beats: %w", err)
	}
	subs = append(subs, sub)
	tick := time.NewTicker(d.o.Beat)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			for _, s := range subs {
				_ = s.Unsubscribe()
			}
			d.mu.Lock()
			for _, r := range d.runners {
				if r.consume != nil {
					r.consume.Stop()
				}
			}
			d.mu.Unlock()
			// The sessions still open are the runtime's to close, which
			// it does as it stops (the connection outlives Run).
			d.wg.Wait()
			return nil
		case now := <-tick.C:
			d.sweep(now)
		}
	}
}

// runnerOf is the runner a subject comes from: its second token, which
// the bus's permissions make the sender's own name.
func runnerOf(subject string) string {
	parts := strings.Split(subject, ".")
	if len(parts) < 3 {
		return ""
	}
	return parts[2]
}

// serve answers one request in a goroutine of its own (a tool call can
// last hours), owned by Run.
func (d *Daemon) serve(ctx context.Context, m *nats.Msg, h func(context.Context, string, *nats.Msg) (any, error)) {
	name := runnerOf(m.Subject)
	if !d.admits(name, m.Reply) {
		return
	}
	d.seen(name)
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		v, err := h(ctx, name, m)
		var rep reply
		if err != nil {
			rep.Error = err.Error()
		} else if v != nil {
			b, err := json.Marshal(v)
			if err != nil {
				rep.Error = fmt.Sprintf("encode reply: %v", err)
			}
			rep.Data = b
		}
		b, _ := json.Marshal(rep)
		if err := m.Respond(b); err != nil {
			d.log.Warn("reply to runner", "runner", name, "err", err)
		}
	}()
}

func (d *Daemon) hello(ctx context.Context, name string, m *nats.Msg) (any, error) {
	var h hello
	if err := json.Unmarshal(m.Data, &h); err != nil {
		return nil, fmt.Errorf("decode hello: %w", err)
	}
	if h.Version != Version {
		return nil, fmt.Errorf("runner %s speaks protocol %d, this daemon %d: run the same troupe version on both", name, h.Version, Version)
	}
	if h.Name != name {
		return nil, fmt.Errorf("runner says it is %q on %q's credentials", h.Name, name)
	}
	replicas := 1
	if d.o.Replicas != nil {
		replicas = d.o.Replicas()
	}
	stream, err := bus.EnsureStream(ctx, d.js, name, d.o.StreamBytes, replicas)
	if replicas > 1 && bus.TooFewPeers(err) {
		d.log.Warn("the cluster cannot keep the runner's stream on several servers: one copy only (a server lost can lose its events)", "runner", name, "replicas", replicas, "err", err)
		stream, err = bus.EnsureStream(ctx, d.js, name, d.o.StreamBytes, 1)
	}
	if err != nil {
		return nil, err
	}
	now := time.Now()
	d.mu.Lock()
	r := d.runners[name]
	if r == nil {
		r = &runnerState{name: name}
		d.runners[name] = r
	}
	r.labels, r.maxAgents, r.since, r.lastSeen = h.Labels, h.MaxAgents, now, now
	var known []string
	for _, id := range h.Sessions {
		if s := d.sessions[id]; s != nil && s.runner == name {
			known = append(known, id)
		}
	}
	need := r.consume == nil
	d.mu.Unlock()
	if need {
		if err := d.consume(ctx, name, stream); err != nil {
			return nil, err
		}
	}
	d.log.Info("runner connected", "runner", name, "labels", h.Labels, "sessions", len(h.Sessions), "kept", len(known))
	return helloReply{Sessions: known, Beat: d.o.Beat, Tasks: d.runningOn(ctx, name)}, nil
}

// consume reads runner name's stream: every session's events, in order.
// A message is acknowledged once its event is handed to its session (or
// its session is gone); one not acknowledged comes again.
func (d *Daemon) consume(ctx context.Context, name string, stream jetstream.Stream) error {
	c, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: "daemon", AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: 1024, AckWait: time.Minute,
	})
	if err != nil {
		return fmt.Errorf("open runner %s's stream: %w", name, err)
	}
	cc, err := c.Consume(func(m jetstream.Msg) {
		if err := d.deliver(name, m.Data()); err != nil {
			d.log.Warn("a runner's record not handled; given again", "runner", name, "err", err, "in", taskRetry)
			_ = m.NakWithDelay(taskRetry)
			return
		}
		if err := m.Ack(); err != nil {
			d.log.Warn("acknowledge a runner's event", "runner", name, "err", err)
		}
	})
	if err != nil {
		return fmt.Errorf("consume runner %s's stream: %w", name, err)
	}
	d.mu.Lock()
	if r := d.runners[name]; r != nil && r.consume == nil {
		r.consume = cc
		cc = nil
	}
	d.mu.Unlock()
	if cc != nil {
		cc.Stop() // another hello won
	}
	return nil
}

// seen notes that runner name spoke (a request, an event): it is alive,
// whatever its beats.
func (d *Daemon) seen(name string) {
	d.mu.Lock()
	if r := d.runners[name]; r != nil && !r.since.IsZero() {
		r.lastSeen = time.Now()
	}
	d.mu.Unlock()
}

// deliver hands one durable record to its session, or a task's end to
// the task manager (an error: the stream gives it again).
func (d *Daemon) deliver(name string, data []byte) error {
	if !d.allowed(name) {
		return nil // a revoked runner's record: acknowledged, dropped
	}
	d.seen(name)
	var rec durable
	if err := json.Unmarshal(data, &rec); err != nil {
		d.log.Warn("a runner's event does not decode; dropped", "runner", name, "err", err)
		return nil
	}
	if rec.TaskEnd != nil {
		return d.taskEnded(name, rec.TaskEnd)
	}
	d.mu.Lock()
	s := d.sessions[rec.Session]
	d.mu.Unlock()
	if s == nil || s.runner != name {
		return nil // a session of a daemon before this one, or closed
	}
	s.receive(rec)
	return nil
}

func (d *Daemon) beat(m *nats.Msg) {
	name := runnerOf(m.Subject)
	if !d.allowed(name) {
		return
	}
	var b beat
	if json.Unmarshal(m.Data, &b) != nil {
		return
	}
	d.mu.Lock()
	r := d.runners[name]
	if r == nil || r.since.IsZero() {
		d.mu.Unlock()
		// A runner alive that this daemon does not count as connected
		// (it restarted, or the runner's beats stopped a while): it says
		// hello again.
		if err := d.o.Conn.Publish(bus.ToRunner(name)+"."+opRehello, nil); err != nil {
			d.log.Warn("ask a runner to say hello", "runner", name, "err", err)
		}
		return
	}
	r.lastSeen, r.agents = time.Now(), b.Agents
	var bump []*session
	for id, n := range b.Activity {
		if s := d.sessions[id]; s != nil && s.runner == name && s.remoteAct.Swap(n) != n {
			bump = append(bump, s)
		}
	}
	d.mu.Unlock()
	for _, s := range bump {
		s.Bump()
	}
}

// sweep makes the runners silent for MissedBeats beats unreachable: a
// turn in flight on one ends on that (its messages wait), an idle
// session ends with it.
func (d *Daemon) sweep(now time.Time) {
	var lost []*session
	var names []string
	d.mu.Lock()
	for _, r := range d.runners {
		if r.since.IsZero() || now.Sub(r.lastSeen) < time.Duration(MissedBeats)*d.o.Beat {
			continue
		}
		r.since = time.Time{}
		names = append(names, r.name)
		for _, s := range d.sessions {
			if s.runner == r.name {
				lost = append(lost, s)
			}
		}
	}
	d.mu.Unlock()
	for _, n := range names {
		d.log.Warn("runner unreachable", "runner", n)
	}
	for _, s := range lost {
		s.unreachable(d.unreachable(s.runner))
	}
}

// unreachable is why runner name cannot be reached now.
func (d *Daemon) unreachable(name string) *engine.Unreachable {
	d.mu.Lock()
	defer d.mu.Unlock()
	u := &engine.Unreachable{Runner: name}
	if r := d.runners[name]; r != nil {
		u.Since = r.lastSeen
	}
	return u
}

// Runners lists the runners that said hello since this daemon started.
func (d *Daemon) Runners() []RunnerInfo {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]RunnerInfo, 0, len(d.runners))
	for _, r := range d.runners {
		i := RunnerInfo{Name: r.name, Labels: slices.Clone(r.labels), Connected: !r.since.IsZero(),
			ConnectedSince: r.since, LastSeen: r.lastSeen, MaxAgents: r.maxAgents}
		for _, s := range d.sessions {
			if s.runner == r.name {
				i.Agents = append(i.Agents, s.key)
			}
		}
		out = append(out, i)
	}
	slices.SortFunc(out, func(a, b RunnerInfo) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Reachable says whether runner name is connected: nil, or an
// *engine.Unreachable.
func (d *Daemon) Reachable(name string) error {
	d.mu.Lock()
	r := d.runners[name]
	up := r != nil && !r.since.IsZero()
	d.mu.Unlock()
	if up {
		return nil
	}
	return d.unreachable(name)
}

// pick is the runner agent a runs on: its runner, reachable; or, for its
// labels, the reachable runner that has them all and runs the fewest of
// this daemon's sessions (the first by name on a tie).
func (d *Daemon) pick(a troupe.AgentSpec) (string, error) {
	if a.Runner != "" {
		return string(a.Runner), d.Reachable(string(a.Runner))
	}
	if len(a.RunnerLabels) == 0 {
		return "", errors.New("start remote session: the agent has no runner")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	load := map[string]int{}
	for _, s := range d.sessions {
		load[s.runner]++
	}
	best := ""
	for name, r := range d.runners {
		if r.since.IsZero() || !hasAll(r.labels, a.RunnerLabels) {
			continue
		}
		if best == "" || load[name] < load[best] || load[name] == load[best] && name < best {
			best = name
		}
	}
	if best == "" {
		return "", &engine.Unreachable{Runner: "with labels " + strings.Join(a.RunnerLabels, ",")}
	}
	return best, nil
}

func hasAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

// session looks up the session a runner's request is about: it must be
// one of that runner's.
func (d *Daemon) session(name, id string) (*session, error) {
	d.mu.Lock()
	s := d.sessions[id]
	d.mu.Unlock()
	if s == nil || s.runner != name {
		return nil, fmt.Errorf("no session %q on runner %s", id, name)
	}
	return s, nil
}

func (d *Daemon) tool(ctx context.Context, name string, m *nats.Msg) (any, error) {
	var req toolReq
	if err := json.Unmarshal(m.Data, &req); err != nil {
		return nil, fmt.Errorf("decode tool call: %w", err)
	}
	s, err := d.session(name, req.Session)
	if err != nil {
		return nil, err
	}
	if s.spec.Tools == nil {
		return nil, errors.New("this agent has no troupe tools")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.Context(), cancel)
	defer stop()
	return s.spec.Tools.Call(ctx, req.Name, req.Args)
}

func (d *Daemon) approve(ctx context.Context, name string, m *nats.Msg) (any, error) {
	var req approveReq
	if err := json.Unmarshal(m.Data, &req); err != nil {
		return nil, fmt.Errorf("decode permission request: %w", err)
	}
	s, err := d.session(name, req.Session)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.Context(), cancel)
	defer stop()
	return engine.Ask(ctx, s.spec.Approver, req.Permission), nil
}

// mcp runs one HTTP request of a runner's agent on troupe's MCP endpoint.
// The request must carry that session's own token: a runner cannot act
// for an agent of another runner, or of none.
func (d *Daemon) mcp(ctx context.Context, name string, m *nats.Msg) (any, error) {
	var req mcpReq
	if err := json.Unmarshal(m.Data, &req); err != nil {
		return nil, fmt.Errorf("decode mcp request: %w", err)
	}
	s, err := d.session(name, req.Session)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	h := d.mcpH
	d.mu.Unlock()
	if h == nil || s.spec.MCP.Token == "" {
		return nil, errors.New("troupe serves no MCP endpoint to this agent")
	}
	hdr := http.Header(req.Header)
	if hdr.Get("Authorization") != "Bearer "+s.spec.MCP.Token {
		return nil, errors.New("mcp request without its session's token")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.Context(), cancel)
	defer stop()
	r, err := http.NewRequestWithContext(ctx, req.Method, "http://127.0.0.1/mcp", bytes.NewReader(req.Body))
	if err != nil {
		return nil, fmt.Errorf("make mcp request: %w", err)
	}
	r.Header = hdr.Clone()
	r.Host = "127.0.0.1"
	r.RemoteAddr = "127.0.0.1:0"
	w := &recorder{header: http.Header{}, max: MaxPayload - 4<<10}
	h.ServeHTTP(w, r)
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if w.cut {
		return nil, fmt.Errorf("mcp answer over %d bytes: cut", w.max)
	}
	return mcpReply{Status: w.status, Header: w.header, Body: w.body.Bytes()}, nil
}

// recorder keeps an HTTP answer, up to max bytes of body.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
	max    int
	cut    bool
}

func (w *recorder) Header() http.Header { return w.header }
func (w *recorder) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}
func (w *recorder) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	if w.body.Len()+len(b) > w.max {
		w.cut = true
		return 0, errors.New("answer too big for the link")
	}
	return w.body.Write(b)
}
func (w *recorder) Flush() {}

// bundle answers a chunk of the bundle that brings a runner's clone to
// the session's head. The bundle is made at the first chunk (Offset 0)
// and kept in Dir until the session ends.
func (d *Daemon) bundle(ctx context.Context, name string, m *nats.Msg) (any, error) {
	var req bundleReq
	if err := json.Unmarshal(m.Data, &req); err != nil {
		return nil, fmt.Errorf("decode bundle request: %w", err)
	}
	s, err := d.session(name, req.Session)
	if err != nil {
		return nil, err
	}
	path, head, err := s.makeBundle(ctx, d.o.Dir, req)
	if err != nil {
		return nil, err
	}
	return readChunk(path, head, req.Offset)
}

// newID is a session's id: random, so one cannot be guessed.
func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// bundlePath is where the bundle of a session is kept.
func bundlePath(dir, session string) string {
	return filepath.Join(dir, "bundles", session+".bundle")
}

// makeBundle makes the session's bundle once (for the commits the runner
// has), returning its path and head.
func (s *session) makeBundle(ctx context.Context, dir string, req bundleReq) (string, string, error) {
	s.bmu.Lock()
	defer s.bmu.Unlock()
	path := bundlePath(dir, s.id)
	if s.bundleHead != "" && req.Offset > 0 {
		return path, s.bundleHead, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", "", fmt.Errorf("make bundles folder: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return "", "", fmt.Errorf("make bundle: %w", err)
	}
	head, err := worktree.Bundle(ctx, s.spec.Dir, req.Have, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", "", err
	}
	s.bundleHead = head
	return path, head, nil
}
