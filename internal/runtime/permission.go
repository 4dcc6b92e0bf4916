package runtime

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/events"
	"github.com/troupe-dev/troupe/internal/permission"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// MaxPendingPermissions bounds the permission requests that wait on the
// person in one project; beyond it a request is denied at once, with the
// reason.
const MaxPendingPermissions = 256

// maxDecided is how many decided permission ids the runtime remembers, to
// answer "already decided" rather than "unknown" to a late decision.
const maxDecided = 1024

// permTable holds the permission requests that wait on the person. It is
// keyed by troupe's PermissionID; each entry carries its RuntimeKey (C1),
// so a project's removal or an agent's session end finds and drops its own.
type permTable struct {
	mu sync.Mutex
	// mu guards the fields below and approver.closed.
	pending    map[troupe.PermissionID]*pendingPerm
	perProject map[troupe.ProjectID]int
	decided    map[troupe.PermissionID]troupe.PermissionState
	order      []troupe.PermissionID // decided ids, oldest first
}

type pendingPerm struct {
	perm  troupe.Permission // State and Reason are final once done is closed
	whole string            // the whole input (perm.Input is clipped)
	appr  *approver         // the session that asks
	done  chan struct{}
}

func newPermTable() permTable {
	return permTable{pending: map[troupe.PermissionID]*pendingPerm{}, perProject: map[troupe.ProjectID]int{},
		decided: map[troupe.PermissionID]troupe.PermissionState{}}
}

// MaxPermissionInput is the largest input a permission request may carry:
// the person reads the whole input before deciding (C15), so a larger one
// is denied at once, saying why.
const MaxPermissionInput = 16 << 20

// approver is the engine.Approver of one session of an actor, and the gate
// of troupe's own tools called in that session (toolHost.Call). It decides
// at once what permission.Decide settles from the agent's permission_mode
// and allowed_tools, and puts every other request before the person: it is
// listed (Permissions, the whole input kept: PermissionInput), the agent is
// waiting, an agent.permission event says pending, and Approve blocks until
// the person decides (Decide), the request's ctx ends, or the session ends
// (the runtime drops its requests, denied with the reason).
type approver struct {
	a      *actor
	dir    string // the session's working folder, set before its engine starts
	closed bool   // guarded by Runtime.perms.mu: the session ended

	mu     sync.Mutex          // guards echoes
	echoes map[string]struct{} // engine request ids whose decision is published
}

var _ engine.Approver = (*approver)(nil)

// Approve implements engine.Approver.
func (ap *approver) Approve(ctx context.Context, p engine.Permission) (engine.Decision, error) {
	a, r := ap.a, ap.a.rt
	p.Title = resolvedTitle(p.Title, p.Input, ap.dir)
	whole := string(p.Input)
	in, cut := events.Clip(whole)
	perm := troupe.Permission{ID: troupe.PermissionID(newID("perm")), Project: a.key.Project, Agent: a.key.Agent,
		Turn: p.Turn, Tool: p.Tool, Title: p.Title, Input: in, Cut: cut, Size: len(whole), State: troupe.PermPending, CreatedAt: time.Now().UTC()}
	defer ap.published(p.ID)
	if d, ok := ap.settled(p); ok {
		perm.State, perm.Reason = troupe.PermDenied, d.Reason
		if d.Allow {
			perm.State = troupe.PermAllowed
		}
		r.publishPermission(perm)
		return d, nil
	}
	pp, err := r.addPermission(ap, perm, whole)
	if err != nil {
		perm.State, perm.Reason = troupe.PermDenied, err.Error()
		r.publishPermission(perm)
		return engine.Decision{Reason: perm.Reason}, nil
	}
	defer a.waitOnPerson("asks to use " + p.Tool)()
	select {
	case <-pp.done:
	case <-ctx.Done():
		r.resolve(perm.ID, troupe.PermDenied, "the request ended before the person decided")
		<-pp.done // resolved by now, by this call or by a decision that came first
	}
	final := r.perms.final(pp)
	return engine.Decision{Allow: final.State == troupe.PermAllowed, Reason: final.Reason}, nil
}

// settled decides p from the agent's definition as it is now, when it can
// (permission.Decide: the one decision, C15). An engine asking about one of
// troupe's own tools (Claude Code's mcp__troupe__<tool>) is let through:
// troupe decides that call itself when it arrives (toolHost.Call), so the
// person is asked once, by the same rule as every other engine.
func (ap *approver) settled(p engine.Permission) (engine.Decision, bool) {
	spec, _, ok := ap.a.rt.o.Teams.Agent(ap.a.key)
	if !ok {
		return engine.Decision{Reason: fmt.Sprintf("%s is no longer in its project's team", ap.a.key.Agent)}, true
	}
	if p.Class == permission.Unknown && strings.HasPrefix(p.Tool, permission.TroupePrefix) {
		return engine.Decision{Allow: true}, true
	}
	if len(p.Input) > MaxPermissionInput {
		return engine.Decision{Reason: fmt.Sprintf("its input is %d bytes, more than the %d troupe shows the person: troupe denied it; do it in smaller steps", len(p.Input), MaxPermissionInput)}, true
	}
	switch v, why := permission.Decide(spec.PermissionMode, spec.AllowedTools, p.Tool, p.Class); v {
	case permission.Allow:
		return engine.Decision{Allow: true}, true
	case permission.Deny:
		return engine.Decision{Reason: why}, true
	}
	return engine.Decision{}, false
}

// resolvedTitle adds to the title of an engine's request the file it
// changes when the path it names (file_path, notebook_path or path, as
// Claude Code's and OpenCode's edit tools give it) goes through a symbolic
// link: the person approves the file, not the link (C15).
func resolvedTitle(title string, input json.RawMessage, dir string) string {
	var in struct {
		FilePath     string `json:"file_path"`
		NotebookPath string `json:"notebook_path"`
		Path         string `json:"path"`
	}
	if dir == "" || json.Unmarshal(input, &in) != nil {
		return title
	}
	p := cmp.Or(in.FilePath, in.NotebookPath, in.Path)
	if p == "" {
		return title
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	p = filepath.Clean(p)
	realDir := resolveExisting(dir)
	want := p // what p is when no link is on its way
	if rel, err := filepath.Rel(dir, p); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
		want = filepath.Join(realDir, rel)
	}
	real := resolveExisting(p)
	if real == want {
		return title
	}
	shown := real
	if rel, err := filepath.Rel(realDir, real); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
		shown = rel
	}
	if title == "" {
		title = "wants to change " + p
	}
	return title + " (through a symbolic link: the file changed is " + shown + ")"
}

// resolveExisting is p with the symbolic links of its longest existing
// prefix followed; the rest, not there yet, appended as it is.
func resolveExisting(p string) string {
	var rest []string
	for cur := p; ; {
		if real, err := filepath.EvalSymlinks(cur); err == nil {
			slices.Reverse(rest)
			return filepath.Join(append([]string{real}, rest...)...)
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return p
		}
		rest = append(rest, filepath.Base(cur))
		cur = parent
	}
}

// published records that the decision of the engine's request id is on the
// feed, so the engine's own EventPermission for it is not published twice.
func (ap *approver) published(engineID string) {
	if engineID == "" {
		return
	}
	ap.mu.Lock()
	defer ap.mu.Unlock()
	if ap.echoes == nil || len(ap.echoes) >= maxDecided { // an engine that never echoes
		ap.echoes = map[string]struct{}{}
	}
	ap.echoes[engineID] = struct{}{}
}

// echo reports (once) whether the engine's request id was published.
func (ap *approver) echo(engineID string) bool {
	ap.mu.Lock()
	defer ap.mu.Unlock()
	_, ok := ap.echoes[engineID]
	delete(ap.echoes, engineID)
	return ok
}

// add registers perm as pending and publishes it, unless ap's session
// ended or the project has too many waiting. It publishes under the lock,
// so the pending event comes before the decision's.
func (r *Runtime) addPermission(ap *approver, perm troupe.Permission, whole string) (*pendingPerm, error) {
	t := &r.perms
	t.mu.Lock()
	defer t.mu.Unlock()
	if ap.closed {
		return nil, fmt.Errorf("the agent's session ended")
	}
	if t.perProject[perm.Project] >= MaxPendingPermissions {
		return nil, fmt.Errorf("%d permission requests already wait on the person in this project: troupe denied this one; the person can decide them with `troupe permissions`, `troupe allow` and `troupe deny`", MaxPendingPermissions)
	}
	pp := &pendingPerm{perm: perm, whole: whole, appr: ap, done: make(chan struct{})}
	t.pending[perm.ID] = pp
	t.perProject[perm.Project]++
	r.publishPermission(perm)
	return pp, nil
}

// final is pp's permission once decided.
func (t *permTable) final(pp *pendingPerm) troupe.Permission {
	t.mu.Lock()
	defer t.mu.Unlock()
	return pp.perm
}

// resolve decides a pending permission, wakes its Approve call and
// publishes the decision. An unknown id is troupe.ErrNotFound, one already
// decided troupe.ErrConflict.
func (r *Runtime) resolve(id troupe.PermissionID, state troupe.PermissionState, reason string) (troupe.Permission, error) {
	t := &r.perms
	t.mu.Lock()
	pp, ok := t.pending[id]
	if !ok {
		was, decided := t.decided[id]
		t.mu.Unlock()
		if decided {
			return troupe.Permission{}, fmt.Errorf("permission %s was already %s: %w", id, was, troupe.ErrConflict)
		}
		return troupe.Permission{}, fmt.Errorf("no permission request %s waits on you: see `troupe permissions`: %w", id, troupe.ErrNotFound)
	}
	delete(t.pending, id)
	if t.perProject[pp.perm.Project]--; t.perProject[pp.perm.Project] <= 0 {
		delete(t.perProject, pp.perm.Project)
	}
	t.decided[id] = state
	t.order = append(t.order, id)
	if len(t.order) > maxDecided {
		delete(t.decided, t.order[0])
		t.order = t.order[1:]
	}
	pp.perm.State, pp.perm.Reason = state, reason
	perm := pp.perm
	close(pp.done)
	t.mu.Unlock()
	r.publishPermission(perm)
	return perm, nil
}

// dropPermissions denies, with reason, every pending permission that match
// selects, and wakes their Approve calls.
func (r *Runtime) dropPermissions(match func(*pendingPerm) bool, reason string) {
	r.perms.mu.Lock()
	var ids []troupe.PermissionID
	for id, pp := range r.perms.pending {
		if match(pp) {
			ids = append(ids, id)
		}
	}
	r.perms.mu.Unlock()
	for _, id := range ids {
		r.resolve(id, troupe.PermDenied, reason) // an error: decided in between
	}
}

// closeApprover ends ap's session for the permission flow: its pending
// requests are denied with reason, and later ones at once.
func (r *Runtime) closeApprover(ap *approver, reason string) {
	r.perms.mu.Lock()
	ap.closed = true
	r.perms.mu.Unlock()
	r.dropPermissions(func(pp *pendingPerm) bool { return pp.appr == ap }, reason)
}

func (r *Runtime) publishPermission(p troupe.Permission) {
	r.publish(p.Key(), events.AgentPermission{Turn: p.Turn, ID: string(p.ID), Tool: p.Tool, Title: p.Title,
		Input: p.Input, Cut: p.Cut, State: p.State, Allow: p.State == troupe.PermAllowed, Reason: p.Reason})
}

// Permissions lists the permission requests that wait on the person, in
// project p ("" for every project), oldest first.
func (r *Runtime) Permissions(p troupe.ProjectID) []troupe.Permission {
	r.perms.mu.Lock()
	out := []troupe.Permission{}
	for _, pp := range r.perms.pending {
		if p == "" || pp.perm.Project == p {
			out = append(out, pp.perm)
		}
	}
	r.perms.mu.Unlock()
	slices.SortFunc(out, func(a, b troupe.Permission) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), strings.Compare(string(a.ID), string(b.ID)))
	})
	return out
}

// PermissionInput reads the whole input of a pending permission request,
// from byte offset off, at most limit bytes (0: all of it), and its whole
// size: what the person approves is what runs, so none of it is hidden.
// An unknown or decided id is troupe.ErrNotFound.
func (r *Runtime) PermissionInput(id troupe.PermissionID, off, limit int) (string, int, error) {
	r.perms.mu.Lock()
	pp, ok := r.perms.pending[id]
	r.perms.mu.Unlock()
	if !ok {
		return "", 0, fmt.Errorf("no permission request %s waits on you: see `troupe permissions`: %w", id, troupe.ErrNotFound)
	}
	w := pp.whole
	off = min(max(off, 0), len(w))
	end := len(w)
	if limit > 0 && off+limit < end {
		end = off + limit
	}
	return w[off:end], len(w), nil
}

// Decide is the person's answer to a pending permission request: allowed,
// or denied with an optional reason shown to the agent. The agent is busy
// again once it has no other request waiting. An unknown id is
// troupe.ErrNotFound; one already decided (or dropped because its session
// ended) is troupe.ErrConflict.
func (r *Runtime) Decide(_ context.Context, id troupe.PermissionID, allow bool, reason string) (troupe.Permission, error) {
	if allow {
		return r.resolve(id, troupe.PermAllowed, "")
	}
	why := "the person denied it"
	if reason = strings.TrimSpace(reason); reason != "" {
		why += ": " + reason
	}
	return r.resolve(id, troupe.PermDenied, why)
}
