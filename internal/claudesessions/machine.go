package claudesessions

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// ProjectRef is a project troupe knows, by its folder.
type ProjectRef struct {
	ID   troupe.ProjectID
	Path string
}

// AgentRef says which team agent of troupe ran a session.
type AgentRef = troupe.RuntimeKey

// AgentSessions lists the Claude session ids troupe's own agents have
// had (the SQLite store keeps them); nil: none known.
type AgentSessions interface {
	ClaudeAgentSessions(ctx context.Context) (map[string]AgentRef, error)
}

// MachineOptions configures a Machine. Dir is required.
type MachineOptions struct {
	Dir    string // Claude Code's config folder (ConfigDir)
	Store  Store  // the index's store; nil: in memory
	Agents AgentSessions
	// Projects lists the projects troupe knows at the time of a query.
	Projects func() []ProjectRef
	Logger   *slog.Logger
	// Index tunes the index (Dir, Store and Logger are taken from here).
	Index Options
	// Proc and ReadStat: see Registry (tests).
	Proc     string
	ReadStat func(pid int) ([]byte, error)
}

// Machine is the Claude sessions of this machine: the index, the registry
// and the claims together, with the resume policy (C9). Its methods are
// safe for concurrent use.
type Machine struct {
	o      MachineOptions
	Index  *Index
	Reg    *Registry
	claims *Claims
}

// NewMachine builds a Machine.
func NewMachine(o MachineOptions) *Machine {
	io := o.Index
	io.Dir, io.Store, io.Logger = o.Dir, o.Store, o.Logger
	reg := &Registry{Dir: filepath.Join(o.Dir, "sessions"), Proc: o.Proc, ReadStat: o.ReadStat}
	return &Machine{o: o, Index: NewIndex(io), Reg: reg, claims: newClaims(reg)}
}

// Session is one session as a listing shows it.
type Session struct {
	File
	Project  *ProjectRef // the registered project whose folder holds Cwd; nil: none
	Agent    *AgentRef   // the troupe agent that ran it; nil: not one of troupe's
	Live     bool
	Liveness Liveness
	HeldBy   string // a troupe holder of the id (a resume in a terminal, an agent); "" when none
}

// Query filters a listing.
type Query struct {
	Live    bool   // live sessions only
	Project string // sessions whose cwd is this folder or inside it
	Search  string // case-insensitive, in title, first prompt, cwd and id
	Limit   int    // 0: all
}

// Listing is the answer of List.
type Listing struct {
	Sessions []Session
	Total    int // sessions before Limit
	Sync     SyncReport
	// Unknown: registry files that could not be read while their process
	// may run (see Snapshot.Unknown).
	Unknown []string
}

// List syncs the index, reads the registry and answers q, newest first.
// Only the sessions it returns are looked at beyond their summary.
func (m *Machine) List(ctx context.Context, q Query) (Listing, error) {
	rep, err := m.Index.Sync(ctx)
	if err != nil {
		return Listing{}, err
	}
	snap := m.Reg.Read()
	search := strings.ToLower(q.Search)
	var sel []*File
	for _, f := range m.Index.snapshot() {
		if q.Project != "" && !within(f.Cwd, q.Project) {
			continue
		}
		if search != "" && !matches(f, search) {
			continue
		}
		if _, live := snap.Sessions[f.ID]; q.Live && !live {
			continue
		}
		sel = append(sel, f)
	}
	slices.SortFunc(sel, func(a, b *File) int {
		if c := b.Last.Compare(a.Last); c != 0 {
			return c
		}
		return strings.Compare(a.Path, b.Path)
	})
	l := Listing{Total: len(sel), Sync: rep, Unknown: snap.Unknown}
	if q.Limit > 0 && len(sel) > q.Limit {
		sel = sel[:q.Limit]
	}
	agents := m.agents(ctx)
	projects := m.projects()
	l.Sessions = make([]Session, 0, len(sel))
	for _, f := range sel {
		l.Sessions = append(l.Sessions, m.session(*f, snap, agents, projects))
	}
	return l, nil
}

func matches(f *File, s string) bool {
	for _, v := range []string{f.Title, f.Prompt, f.Cwd, f.ID} {
		if strings.Contains(strings.ToLower(v), s) {
			return true
		}
	}
	return false
}

// within reports whether path is dir or inside it.
func within(path, dir string) bool {
	if path == "" {
		return false
	}
	dir = filepath.Clean(dir)
	path = filepath.Clean(path)
	return path == dir || strings.HasPrefix(path, strings.TrimSuffix(dir, "/")+"/")
}

func (m *Machine) agents(ctx context.Context) map[string]AgentRef {
	if m.o.Agents == nil {
		return nil
	}
	a, err := m.o.Agents.ClaudeAgentSessions(ctx)
	if err != nil {
		m.o.Logger.Warn("read troupe's claude agent sessions", "err", err)
	}
	return a
}

func (m *Machine) projects() []ProjectRef {
	if m.o.Projects == nil {
		return nil
	}
	return m.o.Projects()
}

func (m *Machine) session(f File, snap Snapshot, agents map[string]AgentRef, projects []ProjectRef) Session {
	s := Session{File: f}
	if lv, ok := snap.Sessions[f.ID]; ok {
		s.Live, s.Liveness = true, lv
	}
	if a, ok := agents[f.ID]; ok {
		s.Agent = &a
	}
	best := -1
	for i, p := range projects {
		if within(f.Cwd, p.Path) && (best < 0 || len(p.Path) > len(projects[best].Path)) {
			best = i
		}
	}
	if best >= 0 {
		p := projects[best]
		s.Project = &p
	}
	if h, ok := m.claims.holder(f.ID); ok {
		s.HeldBy = h.Name
	}
	return s
}

// idPattern is a session id as the CLI mints them (a UUID).
var idPattern = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// CheckID refuses what is not a session id.
func CheckID(id string) error {
	if !idPattern.MatchString(id) {
		return fmt.Errorf("session id %q: %w: give the id as `troupe sessions` lists it (a UUID)", id, troupe.ErrInvalid)
	}
	return nil
}

// Get returns one session, synced and checked against the registry now.
// A session the index does not have is troupe.ErrNotFound.
func (m *Machine) Get(ctx context.Context, id string) (Session, error) {
	if err := CheckID(id); err != nil {
		return Session{}, err
	}
	if _, err := m.Index.Sync(ctx); err != nil {
		return Session{}, err
	}
	var found []File
	for _, f := range m.Index.snapshot() {
		if f.ID == id {
			found = append(found, *f)
		}
	}
	if len(found) == 0 {
		return Session{}, fmt.Errorf("no Claude Code session %s under %s: %w: see `troupe sessions`", id, m.Index.Root(), troupe.ErrNotFound)
	}
	// The same id in two folders (a copied file): the oldest is the original.
	slices.SortFunc(found, func(a, b File) int { return a.First.Compare(b.First) })
	f := found[0]
	if !f.Complete {
		if err := m.Index.complete(ctx, f.Path); err != nil {
			return Session{}, err
		}
		for _, g := range m.Index.snapshot() {
			if g.Path == f.Path {
				f = *g
			}
		}
	}
	return m.session(f, m.Reg.Read(), m.agents(ctx), m.projects()), nil
}

// LiveError is the refusal to resume a live session (C9).
type LiveError struct {
	ID       string
	Liveness Liveness
	HeldBy   string   // a troupe holder, when that is the reason
	Unknown  []string // unreadable registry files, when that is the reason
}

func (e *LiveError) Error() string {
	var why string
	switch {
	case e.HeldBy != "":
		why = fmt.Sprintf("session %s is held by %s", e.ID, e.HeldBy)
	case len(e.Unknown) > 0:
		why = fmt.Sprintf("session %s cannot be proved dead: the registry file %s could not be read while its process may run", e.ID, e.Unknown[0])
	default:
		why = fmt.Sprintf("session %s is live", e.ID)
		var det []string
		if len(e.Liveness.PIDs) > 0 {
			det = append(det, fmt.Sprintf("pid %d", e.Liveness.PIDs[0]))
		}
		if e.Liveness.Status != "" {
			st := e.Liveness.Status
			if e.Liveness.WaitingFor != "" {
				st += ": " + e.Liveness.WaitingFor
			}
			det = append(det, st)
		}
		if e.Liveness.Doubt != "" {
			det = append(det, "in doubt, so taken as live: "+e.Liveness.Doubt)
		}
		if len(det) > 0 {
			why += " (" + strings.Join(det, ", ") + ")"
		}
	}
	return why + ": troupe never resumes a live session (two writers would interleave one transcript); instead run `troupe fork " + e.ID +
		"` (a copy with a new id to carry on) or `troupe observe " + e.ID + "` (follow it as it grows)"
}

// Unwrap makes a LiveError troupe.ErrConflict.
func (e *LiveError) Unwrap() error { return troupe.ErrConflict }

// checkDead refuses a live session, one the registry cannot clear.
func (m *Machine) checkDead(id string) error {
	snap := m.Reg.Read()
	if lv, ok := snap.Sessions[id]; ok {
		return &LiveError{ID: id, Liveness: lv}
	}
	if len(snap.Unknown) > 0 {
		return &LiveError{ID: id, Unknown: snap.Unknown}
	}
	return nil
}

// Claim is a held session id; Release ends it.
type Claim struct {
	Session Session
	Token   string
}

// ClaimResume applies C9 before a resume: the session must exist, be dead
// (checked now, at the registry) and held by nobody in troupe; then h
// holds it until Release, or until h's process ends. A live one is a
// *LiveError.
func (m *Machine) ClaimResume(ctx context.Context, id string, h Holder) (Claim, error) {
	s, err := m.Get(ctx, id)
	if err != nil {
		return Claim{}, err
	}
	tok, err := m.claims.take(id, h, func() error { return m.checkDead(id) })
	if err != nil {
		if errors.Is(err, troupe.ErrConflict) && !isLive(err) {
			other, _ := m.claims.holder(id)
			return Claim{}, &LiveError{ID: id, HeldBy: other.Name}
		}
		return Claim{}, err
	}
	return Claim{Session: s, Token: tok}, nil
}

func isLive(err error) bool {
	var le *LiveError
	return errors.As(err, &le)
}

// Release ends a claim; false when token does not hold id.
func (m *Machine) Release(id, token string) bool { return m.claims.release(id, token) }

// ClaimForAgent is ClaimResume for a team agent's session that resumes
// id: it returns the func that releases the claim when the session ends.
// An unknown id is claimed too (the engine then starts afresh).
func (m *Machine) ClaimForAgent(ctx context.Context, k troupe.RuntimeKey, id string) (func(), error) {
	tok, err := m.claims.take(id, Holder{Name: fmt.Sprintf("agent %s of project %s", k.Agent, k.Project)}, func() error { return m.checkDead(id) })
	if err != nil {
		if errors.Is(err, troupe.ErrConflict) && !isLive(err) {
			other, _ := m.claims.holder(id)
			return nil, &LiveError{ID: id, HeldBy: other.Name}
		}
		return nil, err
	}
	return func() { m.claims.release(id, tok) }, nil
}

// CheckHandOff is the check before a dead session is handed to a team
// agent: it exists, it is dead and nobody in troupe holds it.
func (m *Machine) CheckHandOff(ctx context.Context, id string) (Session, error) {
	s, err := m.Get(ctx, id)
	if err != nil {
		return Session{}, err
	}
	if s.HeldBy != "" {
		return Session{}, &LiveError{ID: id, HeldBy: s.HeldBy}
	}
	if err := m.checkDead(id); err != nil {
		return Session{}, err
	}
	return s, nil
}

// Live reports whether id is live now (or in doubt), for a caller that
// must not write to it.
func (m *Machine) Live(id string) (Liveness, bool) {
	snap := m.Reg.Read()
	lv, ok := snap.Sessions[id]
	return lv, ok
}

// FolderExists reports whether a session's cwd is a folder now.
func FolderExists(cwd string) bool {
	if cwd == "" {
		return false
	}
	fi, err := os.Stat(cwd)
	return err == nil && fi.IsDir()
}
