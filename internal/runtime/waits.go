package runtime

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// waitGraph is the wait-for graph of asks (C13), one per project: an edge
// from → to for every ask that is pending while its asker still waits on
// it (inside its ask_agent call, or the person's `troupe ask`). An ask
// that would close a cycle is refused before it is recorded: each agent of
// the cycle would wait on the next, and none could end its turn to answer.
//
// What is not an edge: a delegation or a message (they never block); an ask
// once detached (its asker got a request id and carried on: the answer goes
// to its inbox, nobody waits); the pending asks a new daemon re-arms after a
// restart (their askers' tool calls died with the old daemon, so nobody
// waits on them either). The person is a node: it can be the source of
// edges but never a target (agents cannot ask it), so it never closes a
// cycle; it is there so the graph says who waits on whom.
//
// The check and the add are one step under mu, so of two concurrent asks
// x → y and y → x exactly one is refused.
type waitGraph struct {
	mu       sync.Mutex                         // guards projects
	projects map[troupe.ProjectID]*projectWaits // a project without edges has no entry
}

// projectWaits are the edges of one project, by request: a request is waited
// on by its asker, and the person may wait on its own request more than once
// (two `troupe ask --wait` of the same id), hence n.
type projectWaits struct {
	edges map[troupe.RequestID]waitEdge
}

type waitEdge struct {
	from, to troupe.AgentID
	n        int // waits in flight on this request
}

func newWaitGraph() waitGraph {
	return waitGraph{projects: map[troupe.ProjectID]*projectWaits{}}
}

// wait records that from waits on request id, asked of to in project p. It
// returns a *CycleError, and records nothing, when to already waits on
// from, directly or through others.
func (g *waitGraph) wait(p troupe.ProjectID, id troupe.RequestID, from, to troupe.AgentID) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	pw := g.projects[p]
	if pw == nil {
		pw = &projectWaits{edges: map[troupe.RequestID]waitEdge{}}
		g.projects[p] = pw
	}
	if e, ok := pw.edges[id]; ok {
		e.n++
		pw.edges[id] = e
		return nil
	}
	if path := pw.path(to, from); path != nil {
		if len(pw.edges) == 0 {
			delete(g.projects, p)
		}
		return &CycleError{Cycle: append([]troupe.AgentID{from}, path...)}
	}
	pw.edges[id] = waitEdge{from: from, to: to, n: 1}
	return nil
}

// unwait ends one wait on request id; the edge goes with the last one.
func (g *waitGraph) unwait(p troupe.ProjectID, id troupe.RequestID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	pw := g.projects[p]
	if pw == nil {
		return
	}
	if e, ok := pw.edges[id]; ok {
		if e.n--; e.n > 0 {
			pw.edges[id] = e
			return
		}
		delete(pw.edges, id)
	}
	if len(pw.edges) == 0 {
		delete(g.projects, p)
	}
}

// ended drops the edge of request id, which ended: its waiters are about to
// return. Done at once when the request ends (not when each waiter gets to
// run), so the target's next turn never sees a stale edge back to it.
func (g *waitGraph) ended(p troupe.ProjectID, id troupe.RequestID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if pw := g.projects[p]; pw != nil {
		delete(pw.edges, id)
		if len(pw.edges) == 0 {
			delete(g.projects, p)
		}
	}
}

// waiting reports whether request id of project p is still waited on.
func (g *waitGraph) waiting(p troupe.ProjectID, id troupe.RequestID) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	pw := g.projects[p]
	if pw == nil {
		return false
	}
	_, ok := pw.edges[id]
	return ok
}

// forget drops every edge of project p (it was removed).
func (g *waitGraph) forget(p troupe.ProjectID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.projects, p)
}

// path returns a path of waits from → … → to (from excluded, to included),
// or nil when there is none. Depth first over the project's edges, which
// are few (one per waiting asker), each node visited once.
func (pw *projectWaits) path(from, to troupe.AgentID) []troupe.AgentID {
	var seen []troupe.AgentID // the project's waiting agents: a handful
	var walk func(at troupe.AgentID, trail []troupe.AgentID) []troupe.AgentID
	walk = func(at troupe.AgentID, trail []troupe.AgentID) []troupe.AgentID {
		trail = append(trail, at)
		if at == to {
			return trail
		}
		if slices.Contains(seen, at) {
			return nil
		}
		seen = append(seen, at)
		for _, e := range pw.edges {
			if e.from == at {
				if p := walk(e.to, trail); p != nil {
					return p
				}
			}
		}
		return nil
	}
	return walk(from, nil)
}

// CycleError refuses an ask that would close a cycle of asks (C13). It
// matches troupe.ErrConflict.
type CycleError struct {
	// Cycle lists the agents in wait order, the asker first and last:
	// lead → researcher → lead.
	Cycle []troupe.AgentID
}

func (e *CycleError) Error() string {
	names := make([]string, len(e.Cycle))
	for i, a := range e.Cycle {
		names[i] = string(a)
	}
	to := "it"
	if len(e.Cycle) > 1 {
		to = names[1]
	}
	return fmt.Sprintf("ask refused: asking %s would close a cycle of asks: %s (each waits on the next, so none could answer). "+
		"Answer the question you were asked with what you have (reply, or end your turn), or use send_message, which does not wait.",
		to, strings.Join(names, " → "))
}

func (e *CycleError) Unwrap() error { return troupe.ErrConflict }
