package api

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/troupe-dev/troupe/internal/cgroup"
	"github.com/troupe-dev/troupe/internal/events"
	"github.com/troupe-dev/troupe/internal/inbox"
	"github.com/troupe-dev/troupe/internal/project"
	"github.com/troupe-dev/troupe/internal/sandbox"
	"github.com/troupe-dev/troupe/internal/troupe"
	"github.com/troupe-dev/troupe/internal/worktree"
)

// Runtime is what the API needs of internal/runtime.
type Runtime interface {
	// AgentState tells an agent's state and, when blocked or failed, why.
	AgentState(k troupe.RuntimeKey) (troupe.AgentState, string)
	// Doing tells what an agent is doing, when its engine runs a tool of
	// its own (a command, a build), and since when; "" when not.
	Doing(k troupe.RuntimeKey) (string, time.Time)
	Ask(ctx context.Context, to troupe.RuntimeKey, from troupe.AgentID, question string, wait time.Duration) (troupe.Request, error)
	Await(ctx context.Context, p troupe.ProjectID, id troupe.RequestID, wait time.Duration) (troupe.Request, error)
	// Delegate gives a task and returns the pending request; verify, when
	// set, names the check that judges the work (tries: how many turns).
	Delegate(ctx context.Context, to troupe.RuntimeKey, from troupe.AgentID, task string, verify troupe.CheckName, tries int) (troupe.Request, error)
	Send(ctx context.Context, to troupe.RuntimeKey, from troupe.AgentID, kind troupe.MessageKind, text string) (troupe.Message, error)
	// Conversation returns one page of a project's messages, oldest
	// first (inbox.Store.Conversation).
	Conversation(ctx context.Context, p troupe.ProjectID, q inbox.Page) ([]troupe.Message, error)
	// MessageText returns a message with a part of its text
	// (inbox.Store.Text).
	MessageText(ctx context.Context, p troupe.ProjectID, id int64, offset int) (troupe.Message, error)
	// ResumeID is the engine conversation the agent's next session resumes.
	ResumeID(ctx context.Context, k troupe.RuntimeKey) (string, error)
	// Reset, Restart, Interrupt, Permissions, Decide: see agents_control.go and
	// permissions.go.
	Reset(ctx context.Context, k troupe.RuntimeKey) error
	Restart(ctx context.Context, k troupe.RuntimeKey) error
	Interrupt(ctx context.Context, k troupe.RuntimeKey) error
	Permissions(p troupe.ProjectID) []troupe.Permission
	Decide(ctx context.Context, id troupe.PermissionID, allow bool, reason string) (troupe.Permission, error)
	PermissionInput(id troupe.PermissionID, off, limit int) (string, int, error)
	// SyncJournal waits until the journal holds what was recorded before
	// the call, so a log read shows the turns that have ended.
	SyncJournal(ctx context.Context) error
	// WhileIdle runs fn in the agent's own loop when it has no turn in
	// flight (else troupe.ErrConflict): no turn starts while fn runs.
	WhileIdle(ctx context.Context, k troupe.RuntimeKey, fn func(ctx context.Context) error) error
}

// Options configures a Server. Registry, Hub and Token are required.
type Options struct {
	// Caps is what this machine enforces of the agents' memory and
	// process caps (cgroup.Manager's Report), shown with each agent.
	Caps     cgroup.Report
	Registry *project.Registry
	Hub      *events.Hub
	Runtime  Runtime // nil: agents are listed stopped; asks and sends fail
	Tasks    Tasks   // nil: no background tasks
	Checks   Checks  // nil: no checks
	// Attempts runs best-of-N attempts (attempts.go); nil: none.
	Attempts Attempts
	Journal  Journal // nil: no agent logs
	// Worktrees serves the agents' worktrees (worktrees.go); nil: none.
	Worktrees Worktrees
	// Checkpoints serves the agents' checkpoints (checkpoints.go); nil:
	// none.
	Checkpoints Checkpoints
	// Memory serves the projects' memory notes (memory.go); nil: none.
	Memory Memory
	// Claude serves the machine's Claude Code sessions
	// (claudesessions.go); nil: none.
	Claude ClaudeSessions
	// Runners are the machines that run some of the agents (runners.go);
	// nil: the daemon was started without --runners.
	Runners Runners
	// RemoveProject carries out a project's removal, every package's
	// cleanup in one place (the daemon's); nil: the registry's Remove
	// alone.
	RemoveProject func(ctx context.Context, id troupe.ProjectID) (RemoveProjectResponse, error)
	Token         string // the bearer token of <state>/token
	Logger        *slog.Logger
	Version       string
	StateDir      string
	Web           http.Handler // the web UI, served at / for logged-in browsers
	// MCP is the agents' endpoint, served at /mcp; it checks its own
	// (per-session) tokens. Host and Origin are checked here first.
	MCP http.Handler
	// Heartbeat is the SSE keep-alive comment interval; default 15s.
	Heartbeat time.Duration
	// SessionIdle is how long a browser login session lasts without a
	// request; default DefaultSessionIdle (12h).
	SessionIdle time.Duration
	// SessionFile keeps the browser sessions across daemon restarts (see
	// logins in auth.go); "": in memory only.
	SessionFile string
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Shutdown asks the daemon to stop cleanly (POST /api/shutdown, troupe
	// stop); it must not block. nil: the route answers 501.
	Shutdown func()
	// PublicName is the host name browsers on other machines use to reach
	// a daemon listening beyond loopback (--public-name); Host and Origin
	// checks accept it besides the loopback names. Empty: loopback only.
	PublicName string
}

// Server serves the API. Create it with New, then call SetAddr once the
// listener is bound, before serving.
type Server struct {
	o       Options
	log     *slog.Logger
	started time.Time
	mux     *http.ServeMux

	logins *logins // login links and browser sessions; it has its own lock

	// mu guards the fields below.
	mu    sync.Mutex
	addr  string          // host:port bound
	hosts map[string]bool // Host header values accepted
}

// New builds a server.
func New(o Options) *Server {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = 15 * time.Second
	}
	if o.SessionIdle <= 0 {
		o.SessionIdle = DefaultSessionIdle
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Server{o: o, log: o.Logger, started: o.Now().UTC(), mux: http.NewServeMux(),
		logins: newLogins(o.SessionIdle, o.Now, o.SessionFile, o.Token, o.Logger)}
	s.mux.HandleFunc("GET /api/status", s.status)
	s.mux.HandleFunc("POST /api/shutdown", s.shutdown)
	s.mux.HandleFunc("GET /api/projects", s.listProjects)
	s.mux.HandleFunc("POST /api/projects", s.addProject)
	s.mux.HandleFunc("POST /api/projects/preview", s.previewProject)
	s.mux.HandleFunc("GET /api/projects/resolve", s.resolveProject)
	s.mux.HandleFunc("DELETE /api/projects/{id}", s.removeProject)
	s.mux.HandleFunc("GET /api/projects/{id}/agents", s.listAgents)
	s.routeTeam()
	s.mux.HandleFunc("POST /api/projects/{id}/agents/{agent}/ask", s.ask)
	s.mux.HandleFunc("POST /api/projects/{id}/agents/{agent}/send", s.send)
	s.mux.HandleFunc("POST /api/projects/{id}/agents/{agent}/delegate", s.delegate)
	s.mux.HandleFunc("GET /api/projects/{id}/requests/{req}", s.request)
	s.mux.HandleFunc("GET /api/projects/{id}/messages", s.messages)
	s.mux.HandleFunc("GET /api/projects/{id}/messages/{msg}", s.messageText)
	s.mux.HandleFunc("POST /api/login-links", s.newLoginLink)
	s.mux.HandleFunc("GET /api/events", s.events)
	s.routeTasks()
	s.routeChecks()
	s.routeAttempts()
	s.routeAgentControl()
	s.routeTerminal()
	s.routePermissions()
	s.routeWorktrees()
	s.routeCheckpoints()
	s.routeMemory()
	s.routeClaudeSessions()
	s.routeRunners()
	s.mux.HandleFunc("GET /api/projects/{id}/agents/{agent}/log", s.agentLog)
	s.mux.HandleFunc("GET /login", s.login)
	s.routeStatic()
	if o.MCP != nil {
		s.mux.Handle("/mcp", o.MCP)
	}
	s.mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "no such endpoint: "+r.Method+" "+r.URL.Path)
	})
	s.mux.HandleFunc("/", s.root)
	return s
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	ps := s.o.Registry.List()
	n := 0
	for _, p := range ps {
		if p.Team != nil {
			n += len(p.Team.Agents)
		}
	}
	writeJSON(w, http.StatusOK, Status{Running: true, Version: s.o.Version, PID: os.Getpid(), Addr: s.currentAddr(),
		StateDir: s.o.StateDir, StartedAt: s.started, Projects: len(ps), Agents: n, LastEvent: s.o.Hub.Last()})
}

// shutdown asks the daemon to stop: it answers at once with the pid that
// is stopping, which the caller waits for.
func (s *Server) shutdown(w http.ResponseWriter, r *http.Request) {
	if s.o.Shutdown == nil {
		writeError(w, http.StatusNotImplemented, "unsupported", "this daemon cannot be stopped through its API: stop it with Ctrl-C or kill "+strconv.Itoa(os.Getpid()))
		return
	}
	s.log.Info("shutdown asked through the API")
	writeJSON(w, http.StatusAccepted, ShutdownResponse{PID: os.Getpid()})
	s.o.Shutdown()
}

func toProject(p project.Info) Project {
	out := Project{ID: p.ID, Path: p.Path, Name: p.Name, AddedAt: p.AddedAt, Team: "none", TeamError: p.TeamError}
	if p.Team != nil {
		out.Agents = len(p.Team.Agents)
		out.Team = "ok"
	}
	if p.TeamError != "" {
		out.Team = "error"
	}
	return out
}

// withHeld is toProject with TeamHeld set from the registry.
func (s *Server) withHeld(p project.Info) Project {
	out := toProject(p)
	if pend, ok := s.o.Registry.Pending(p.ID); ok && !pend.Rejected {
		out.TeamHeld = true
	}
	return out
}

func (s *Server) listProjects(w http.ResponseWriter, r *http.Request) {
	out := []Project{}
	for _, p := range s.o.Registry.List() {
		out = append(out, s.withHeld(p))
	}
	writeJSON(w, http.StatusOK, out)
}

// decodeProjectPath reads the body of POST /api/projects and of its
// preview: a folder's path, given and sane; it answers errors itself.
func decodeProjectPath(w http.ResponseWriter, r *http.Request) (AddProjectRequest, bool) {
	var req AddProjectRequest
	if !decode(w, r, &req) {
		return req, false
	}
	if req.Path == "" {
		writeError(w, http.StatusBadRequest, "invalid", "path: missing: give the project's folder")
		return req, false
	}
	return req, checkPath(w, "path", req.Path, true)
}

func (s *Server) addProject(w http.ResponseWriter, r *http.Request) {
	req, ok := decodeProjectPath(w, r)
	if !ok {
		return
	}
	var info project.Info
	var err error
	if req.Digest != "" {
		info, err = s.o.Registry.AddSeen(r.Context(), req.Path, req.Digest)
	} else {
		info, err = s.o.Registry.Add(r.Context(), req.Path)
	}
	if err != nil {
		s.fail(w, err)
		return
	}
	out := s.withHeld(info)
	out.Grants = teamGrants(info.Team) // what the person approved by adding it
	writeJSON(w, http.StatusCreated, out)
}

// previewProject answers what adding a folder would register.
func (s *Server) previewProject(w http.ResponseWriter, r *http.Request) {
	req, ok := decodeProjectPath(w, r)
	if !ok {
		return
	}
	pv, err := s.o.Registry.Preview(req.Path)
	if err != nil {
		s.fail(w, err)
		return
	}
	out := ProjectPreview{Path: pv.Path, Grants: teamGrants(pv.Team), Digest: pv.Digest, TeamError: pv.TeamError}
	if pv.Team != nil {
		out.Checks = pv.Team.Checks
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) resolveProject(w http.ResponseWriter, r *http.Request) {
	ref := r.URL.Query().Get("ref")
	if _, ok := s.o.Registry.Get(troupe.ProjectID(ref)); !ok && !filepath.IsAbs(ref) {
		writeError(w, http.StatusBadRequest, "invalid", "ref: "+strconv.Quote(ref)+" is neither a project id nor an absolute path: give one of those (see `troupe project list`)")
		return
	}
	info, err := s.o.Registry.Resolve(ref)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toProject(info))
}

// removeProject carries out the project's removal through
// Options.RemoveProject (the daemon's, which says what became of its
// agents' worktrees), or without one the registry's Remove alone.
func (s *Server) removeProject(w http.ResponseWriter, r *http.Request) {
	id := troupe.ProjectID(r.PathValue("id"))
	res := RemoveProjectResponse{Worktrees: []worktree.Removal{}}
	var err error
	if s.o.RemoveProject != nil {
		res, err = s.o.RemoveProject(r.Context(), id)
	} else {
		err = s.o.Registry.Remove(r.Context(), id)
	}
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) listAgents(w http.ResponseWriter, r *http.Request) {
	id := troupe.ProjectID(r.PathValue("id"))
	info, ok := s.o.Registry.Get(id)
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", "project "+string(id)+" is not registered: see `troupe project list`")
		return
	}
	out := []Agent{}
	if info.Team != nil {
		none := s.noCheckpoints(r.Context(), info.Path, info.Team.Agents)
		placed := s.runnerOf()
		for _, a := range info.Team.Agents {
			st, reason, sess := troupe.StateStopped, "", ""
			var doing string
			var since time.Time
			if s.o.Runtime != nil {
				k := troupe.RuntimeKey{Project: id, Agent: a.Name}
				st, reason = s.o.Runtime.AgentState(k)
				doing, since = s.o.Runtime.Doing(k)
				var err error
				if sess, err = s.o.Runtime.ResumeID(r.Context(), k); err != nil {
					s.log.Warn("read session id", "project", id, "agent", a.Name, "err", err)
				}
			}
			mode := a.Mode
			if a.Engine == troupe.EngineTerminal {
				mode = troupe.ModeTerminal // the generic engine has no other mode
			}
			out = append(out, Agent{Project: id, Name: a.Name, Engine: a.Engine, Model: a.Model, Mode: mode,
				TurnTimeout: Duration(a.TurnTimeout), IdleTimeout: Duration(a.IdleTimeout), State: st, Reason: reason, SessionID: sess,
				Sandboxed: sandbox.Enabled(a), Doing: doing, DoingSince: since, Caps: s.caps(a), Checkpoints: none,
				Runner: cmp.Or(placed[troupe.RuntimeKey{Project: id, Agent: a.Name}], string(a.Runner)), RunnerLabels: a.RunnerLabels})
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// noCheckpoints says why the agents of a project (folder dir) have no
// checkpoints, "" when they have them: one look at the project's folder
// for them all (an agent with a worktree has one only in a repository).
func (s *Server) noCheckpoints(ctx context.Context, dir string, team []troupe.AgentSpec) string {
	if s.o.Checkpoints == nil || len(team) == 0 {
		return ""
	}
	if err := s.o.Checkpoints.Available(ctx, dir); errors.Is(err, worktree.ErrNoCheckpoints) {
		return "none: " + err.Error()
	}
	return ""
}

// events streams the feed as Server-Sent Events: each event's frame is
// encoded once by the hub and shared by every stream; a stream sends what
// has queued for it in one write and one flush. A client resumes with
// ?since=N or the Last-Event-ID header; when the daemon no longer has the
// events after N it first sends an event of type "reset". ?project=ID
// scopes the stream (scope): the web UI follows the project it shows.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	since, err := parseSince(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid", err.Error())
		return
	}
	keep := func(events.Event) bool { return true }
	if p := troupe.ProjectID(r.URL.Query().Get("project")); p != "" {
		if _, ok := s.o.Registry.Get(p); !ok {
			writeError(w, http.StatusNotFound, "not_found", "project "+string(p)+" is not registered: see `troupe project list`")
			return
		}
		keep = func(ev events.Event) bool { return inScope(ev, p) }
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "internal", "streaming unsupported")
		return
	}
	backlog, sub, resumed := s.o.Hub.Subscribe(since)
	defer sub.Close()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if !resumed {
		fmt.Fprintf(w, "event: reset\ndata: {\"last\":%d}\n\n", s.o.Hub.Last())
	}
	for _, ev := range backlog {
		if keep(ev) {
			w.Write(ev.SSE())
		}
	}
	fl.Flush()
	hb := time.NewTicker(s.o.Heartbeat)
	defer hb.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-hb.C:
			fmt.Fprint(w, ": keep-alive\n\n")
			fl.Flush()
		case ev, ok := <-sub.C():
			if !ok {
				return // fell behind: the client resumes with its last id
			}
			bp := batches.Get().(*[]byte)
			batch := (*bp)[:0]
			if keep(ev) {
				batch = append(batch, ev.SSE()...)
			}
			batch, more := drain(batch, sub.C(), keep)
			if len(batch) > 0 {
				w.Write(batch)
				fl.Flush()
			}
			if cap(batch) <= 2*maxBatch {
				*bp = batch
				batches.Put(bp)
			}
			if !more {
				return // fell behind, after the events it had
			}
		}
	}
}

// maxBatch is about how many bytes of events the SSE writer sends in one
// write and one flush.
const maxBatch = 64 << 10

// batches holds the SSE writers' batch buffers (*[]byte) between writes:
// shared, so idle streams keep none, and reused, so a busy stream does not
// allocate one per write.
var batches = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// inScope reports whether a stream scoped to project p sends ev: the
// events of p, those of no project (daemon.started), and of every project
// those that tell what waits on the person or changes the project list
// (agent.state, agent.permission, team.changed, team.held, team.decided,
// project.removed), so that
// one stream serves a page showing one project and a list across all.
func inScope(ev events.Event, p troupe.ProjectID) bool {
	if ev.Project == p || ev.Project == "" {
		return true
	}
	switch ev.Type {
	case events.TypeAgentState, events.TypeAgentPermission, events.TypeTeamChanged, events.TypeProjectRemoved,
		events.TypeTeamHeld, events.TypeTeamDecided:
		return true
	}
	return false
}

// drain appends to batch the frames of the events waiting in c that keep
// accepts, up to about maxBatch bytes, without blocking. more is false when
// c was closed (the subscriber fell behind).
func drain(batch []byte, c <-chan events.Event, keep func(events.Event) bool) (_ []byte, more bool) {
	for len(batch) < maxBatch {
		select {
		case ev, ok := <-c:
			if !ok {
				return batch, false
			}
			if keep(ev) {
				batch = append(batch, ev.SSE()...)
			}
		default:
			return batch, true
		}
	}
	return batch, true
}

func parseSince(r *http.Request) (uint64, error) {
	v := r.URL.Query().Get("since")
	if v == "" {
		v = r.Header.Get("Last-Event-ID")
	}
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("since: %q is not an event number: give the last id you received, or 0", v)
	}
	return n, nil
}

// fail maps an error to its status code. Messages are ours and carry no
// secrets; they are shown to the user as they are.
func (s *Server) fail(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, troupe.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", err.Error())
	case errors.Is(err, troupe.ErrAlreadyExists):
		writeError(w, http.StatusConflict, "already_exists", err.Error())
	case errors.Is(err, troupe.ErrInvalid):
		writeError(w, http.StatusBadRequest, "invalid", err.Error())
	case errors.Is(err, troupe.ErrConflict):
		writeError(w, http.StatusConflict, "conflict", err.Error())
	case errors.Is(err, context.Canceled):
		writeError(w, http.StatusServiceUnavailable, "internal", "request canceled")
	default:
		s.log.Error("request failed", "err", err)
		writeError(w, http.StatusInternalServerError, "internal", err.Error())
	}
}

// maxBody bounds a request body; a larger one gets 413.
const maxBody = 1 << 20

// decode reads the request's JSON body into v, which must be one JSON
// value and nothing after it (unknown fields are refused too); it answers
// errors itself: 413 over maxBody, else 400.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	return decodeBody(w, r, v, false)
}

// decodeOptional is decode for a body that may be absent.
func decodeOptional(w http.ResponseWriter, r *http.Request, v any) bool {
	return decodeBody(w, r, v, true)
}

// decodeBody is the one decoder of request bodies.
func decodeBody(w http.ResponseWriter, r *http.Request, v any, optional bool) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if errors.Is(err, io.EOF) {
		if optional {
			return true
		}
		err = errors.New("empty: send a JSON object")
	}
	if err == nil {
		if _, terr := dec.Token(); terr == nil {
			err = errors.New("unexpected data after the JSON object: send one JSON object")
		} else if !errors.Is(terr, io.EOF) {
			err = fmt.Errorf("unexpected data after the JSON object: %w", terr)
		}
	}
	if err == nil {
		return true
	}
	if tooBig := (*http.MaxBytesError)(nil); errors.As(err, &tooBig) {
		writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("request body over %d bytes: send less", tooBig.Limit))
		return false
	}
	writeError(w, http.StatusBadRequest, "invalid", "bad request body: "+err.Error())
	return false
}

// checkPath refuses a path field the daemon cannot take: a NUL byte, or a
// relative path when abs is set (the daemon's working directory is not the
// caller's). It answers the error itself.
func checkPath(w http.ResponseWriter, field, p string, abs bool) bool {
	switch {
	case strings.ContainsRune(p, 0):
		writeError(w, http.StatusBadRequest, "invalid", field+": contains a NUL byte: give a real path")
		return false
	case abs && !filepath.IsAbs(p):
		writeError(w, http.StatusBadRequest, "invalid", field+": "+strconv.Quote(p)+" is relative: give an absolute path (the daemon does not know your working directory)")
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, kind, msg string) {
	writeJSON(w, code, Error{Error: troupe.Sentence(msg), Code: kind})
}

// caps are agent a's caps and whether the daemon's machine enforces them.
func (s *Server) caps(a troupe.AgentSpec) *Caps {
	if !sandbox.Enabled(a) {
		return nil
	}
	mem, procs := a.Sandbox.Caps()
	c := &Caps{Memory: "none", Processes: "none", Why: s.o.Caps.Why}
	if mem > 0 {
		c.Memory = cgroup.FormatSize(mem)
	}
	if procs > 0 {
		c.Processes = strconv.FormatInt(procs, 10)
	}
	c.InForce = (mem == 0 || s.o.Caps.Memory) && (procs == 0 || s.o.Caps.Processes)
	if c.InForce {
		c.Why = ""
	}
	return c
}

// noAgent answers 404 for k, an agent its project's team does not have,
// in the words every command uses (troupe.NoAgent).
func (s *Server) noAgent(w http.ResponseWriter, k troupe.RuntimeKey) {
	writeError(w, http.StatusNotFound, "not_found", troupe.NoAgent(k.Agent, s.teamNames(k.Project)).Error())
}

// teamNames are the agents of project p's team in force.
func (s *Server) teamNames(p troupe.ProjectID) []troupe.AgentID {
	info, ok := s.o.Registry.Get(p)
	if !ok || info.Team == nil {
		return nil
	}
	names := make([]troupe.AgentID, 0, len(info.Team.Agents))
	for _, a := range info.Team.Agents {
		names = append(names, a.Name)
	}
	return names
}
