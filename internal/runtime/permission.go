package runtime

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// approver returns the Approver of k's sessions.
func (r *Runtime) approver(k troupe.RuntimeKey) engine.Approver { return teamApprover{r: r, key: k} }

// teamApprover decides an engine's permission requests from the agent's
// definition as it is now: troupe's own tools (mcp__troupe__*) are always
// allowed, a tool named in allowed_tools is allowed, and everything else
// is denied with a reason that says where to allow it. Asking the person
// for the rest is the permission flow of the engines that need one.
type teamApprover struct {
	r   *Runtime
	key troupe.RuntimeKey
}

func (t teamApprover) Approve(_ context.Context, p engine.Permission) (engine.Decision, error) {
	spec, _, ok := t.r.o.Teams.Agent(t.key)
	switch {
	case !ok:
		return engine.Decision{Reason: fmt.Sprintf("%s is no longer in its project's team", t.key.Agent)}, nil
	case strings.HasPrefix(p.Tool, "mcp__troupe__"), slices.Contains(spec.AllowedTools, p.Tool):
		return engine.Decision{Allow: true}, nil
	}
	return engine.Decision{Reason: fmt.Sprintf("%s is not in the allowed_tools of agent %q in .troupe/team.toml: the person can add it there", p.Tool, t.key.Agent)}, nil
}

// setResume records the engine's own id of k's conversation, for its next
// session (StartSpec.Resume).
func (r *Runtime) setResume(k troupe.RuntimeKey, id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.resume[k] = id
}

// resumeID is the conversation k's next session continues; "" for a new one.
func (r *Runtime) resumeID(k troupe.RuntimeKey) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.resume[k]
}

// forget drops what the runtime keeps of k's conversation.
func (r *Runtime) forget(k troupe.RuntimeKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.resume, k)
}
