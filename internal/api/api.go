// Package api is the daemon's HTTP API: JSON endpoints under /api/, the
// numbered SSE event stream at /api/events, the one-time login that gives the
// web UI its cookie, and the guards of contract C12 (bearer token, Host and
// Origin checks against DNS rebinding).
//
// The wire types (in this file, talk.go, tasks.go, team.go and auth.go) are shared
// with internal/client, the only way the CLI, the web UI's tests and other
// tools talk to the daemon. A domain type goes on the wire as it is only
// when all its fields are the user's business (troupe.Request,
// troupe.Message); tasks get their own type, since task.Task carries the
// daemon's bookkeeping. Guards and login are in auth.go. Handlers hold no
// state of their own beyond the login sessions (guarded by their own mutex);
// every handler runs on the http.Server's goroutines and returns when its
// request ends. Only cmd wiring (internal/daemon) and internal/client may
// import api.
package api

import (
	"time"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// Status is the answer of GET /api/status.
type Status struct {
	// Running is true in every daemon's answer; `troupe status --json`
	// prints false, with StateDir alone, when no daemon answers there.
	Running   bool      `json:"running"`
	Version   string    `json:"version"`
	PID       int       `json:"pid"`
	Addr      string    `json:"addr"`
	StateDir  string    `json:"state_dir"`
	StartedAt time.Time `json:"started_at"`
	Projects  int       `json:"projects"`
	Agents    int       `json:"agents"`
	LastEvent uint64    `json:"last_event"`
}

// ShutdownResponse is POST /api/shutdown's answer: the daemon's pid,
// which exits once its agents' sessions are stopped.
type ShutdownResponse struct {
	PID int `json:"pid"`
}

// Project is a registered project as the API shows it.
type Project struct {
	ID      troupe.ProjectID `json:"id"`
	Path    string           `json:"path"`
	Name    string           `json:"name"`
	AddedAt time.Time        `json:"added_at"`
	Agents  int              `json:"agents"`
	// Team is the team's status: "ok" (team.toml loaded), "error" (it was
	// not: TeamError says why, and the last good team, if any, stays in
	// force) or "none" (no team loaded yet).
	Team      string `json:"team"`
	TeamError string `json:"team_error,omitempty"`
	// TeamHeld is set when the team file holds a change that waits for the
	// person (GET /api/projects/{id}/team/pending).
	TeamHeld bool `json:"team_held,omitempty"`
	// Grants, in the answer of POST /api/projects only, are the grants of
	// the team registered, which adding the project approved.
	Grants []AgentGrants `json:"grants,omitempty"`
}

// AddProjectRequest is the body of POST /api/projects. Digest, when set,
// is the digest of the team file the person saw (ProjectPreview): the
// team is approved only if the file still has it, else it is held.
type AddProjectRequest struct {
	Path   string `json:"path"`
	Digest string `json:"digest,omitempty"`
}

// ProjectPreview is POST /api/projects/preview: what adding the folder at
// Path would register, not registered yet: the grants of its team (an
// empty list with no team file), its checks, or TeamError. Adding it with
// Digest approves exactly this team.
type ProjectPreview struct {
	Path      string         `json:"path"`
	Grants    []AgentGrants  `json:"grants"`
	Checks    []troupe.Check `json:"checks,omitempty"`
	Digest    string         `json:"digest,omitempty"`
	TeamError string         `json:"team_error,omitempty"`
}

// TeamFile is GET and PUT /api/projects/{id}/team/file: the team file's
// text and the digest of the file it was read from (PUT: the file the
// edit was made from; "" for none). A PUT writes the text if the file
// still has that digest; what it widens is then held for approval.
type TeamFile struct {
	Text   string `json:"text"`
	Digest string `json:"digest"`
	Path   string `json:"path,omitempty"`
}

// VersionHeader names the version of troupe the daemon runs, on every
// answer to an authorized request: the CLI warns when it is not its own.
const VersionHeader = "Troupe-Version"

// Agent is one team member with its runtime state.
type Agent struct {
	Project     troupe.ProjectID `json:"project"`
	Name        troupe.AgentID   `json:"name"`
	Engine      troupe.Engine    `json:"engine"`
	Model       string           `json:"model,omitempty"`
	Mode        troupe.Mode      `json:"mode"`
	TurnTimeout Duration         `json:"turn_timeout"`
	// IdleTimeout is how long its session may stay idle before troupe
	// stops it; zero: never.
	IdleTimeout Duration          `json:"idle_timeout"`
	State       troupe.AgentState `json:"state"`
	Reason      string            `json:"reason,omitempty"`
	// SessionID is the engine's id of the agent's conversation, which its
	// next session resumes; empty: the next session starts a new one.
	SessionID string `json:"session_id"`
	// Sandboxed says whether the agent's processes run in its sandbox
	// (internal/sandbox); false: sandbox = false in its team, or an engine
	// not sandboxed by default.
	Sandboxed bool `json:"sandboxed"`
	// Doing is what it does when its engine runs a tool of its own ("running:
	// go test ./..."), since DoingSince; such a call counts as activity up
	// to its limit (the agent's tool_timeout when the engine states none).
	Doing      string    `json:"doing,omitempty"`
	DoingSince time.Time `json:"doing_since,omitzero"`
	// Caps are the sandboxed agent's memory and process caps and whether
	// this machine enforces them; nil when unsandboxed (no caps either).
	Caps *Caps `json:"caps,omitempty"`
	// Checkpoints says when the agent's workspace has no checkpoints
	// ("none: not a git repository…"); empty when it has them.
	Checkpoints string `json:"checkpoints,omitempty"`
	// Runner is where the agent runs: the runner it is placed on, else
	// the one its team names; empty: this machine, or (with RunnerLabels)
	// no runner with those labels placed yet.
	Runner string `json:"runner,omitempty"`
	// RunnerLabels are the labels its team requires of its runner.
	RunnerLabels []string `json:"runner_labels,omitempty"`
}

// Caps are an agent's resource caps (internal/cgroup).
type Caps struct {
	// Memory is a size ("4GiB") or "none"; Processes a count or "none".
	Memory    string `json:"memory"`
	Processes string `json:"processes"`
	// InForce says whether this machine enforces them; Why says why not,
	// and the fix.
	InForce bool   `json:"in_force"`
	Why     string `json:"why,omitempty"`
}

// Duration is a time.Duration that travels as text ("10m0s").
type Duration time.Duration

// MarshalText renders d like time.Duration.String.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText parses a Go duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Error is the body of every non-2xx answer.
type Error struct {
	Error string `json:"error"`
	// Code is one of "not_found", "already_exists", "conflict",
	// "invalid", "unauthorized", "forbidden", "internal".
	Code string `json:"code"`
}
