// Package project keeps the registry of projects and parses their teams.
//
// A project is a folder identified by its canonical real path; its ProjectID
// is minted here and persisted through a Store, never written into the folder.
// A project's team lives in .troupe/team.toml (see ParseTeam); the Registry
// watches that file and reloads it on change, keeping the last good team when
// an edit is invalid.
//
// Registry is safe for concurrent use: one mutex guards its project table.
// Open loads the projects and holds no resource; Run owns the file watcher
// (created when Run starts, closed when it returns) and is the registry's
// only goroutine. The same watcher watches each project's memory-note
// folder (MemoryDir) when it exists, and reports its events to
// Options.Memory (a MemoryWatcher): one owner of fsnotify and of the
// inotify watches, at most three per project (the folder, .troupe and the
// memory folder). It may import internal/troupe and the TOML and fsnotify libraries; it
// must not import the store driver or any runtime package.
package project

import (
	"context"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// TeamFile is the path of a project's team file, relative to the project root.
const TeamFile = ".troupe/team.toml"

// Store persists the project registry. Implementations must be safe for
// concurrent use.
type Store interface {
	// AddProject records p. It fails with troupe.ErrAlreadyExists when p.ID
	// or p.Path is already registered.
	AddProject(ctx context.Context, p troupe.Project) error
	// Projects lists registered projects ordered by AddedAt, then ID.
	Projects(ctx context.Context) ([]troupe.Project, error)
	// RemoveProject deletes the project and its saved team. It fails with
	// troupe.ErrNotFound when id is not registered.
	RemoveProject(ctx context.Context, id troupe.ProjectID) error
	// SaveTeam records the source of the project's last good team file.
	// It fails with troupe.ErrNotFound when id is not registered.
	SaveTeam(ctx context.Context, id troupe.ProjectID, source []byte) error
	// LastTeam returns the source saved by SaveTeam, or nil when none was.
	LastTeam(ctx context.Context, id troupe.ProjectID) ([]byte, error)
	// SaveApproval records the project's approved team and rejected file,
	// replacing the last. It fails with troupe.ErrNotFound when id is not
	// registered.
	SaveApproval(ctx context.Context, id troupe.ProjectID, a Approval) error
	// Approval returns what SaveApproval saved, and false when nothing was
	// (also when id is not registered).
	Approval(ctx context.Context, id troupe.ProjectID) (Approval, bool, error)
}

// Approval is what the person decided about a project's team (C17): Team
// is the team in force, as EncodeTeam writes it (empty: no agent);
// Rejected is the digest of the team file content they rejected, "" when
// none.
type Approval struct {
	Team     []byte
	Rejected string
}

// Team is a parsed, validated team file.
type Team struct {
	Agents []troupe.AgentSpec
	// Checks are the project's checks ([checks]), in file order.
	Checks []troupe.Check
}

// Agent returns the agent named name, or false.
func (t *Team) Agent(name troupe.AgentID) (troupe.AgentSpec, bool) {
	if t == nil {
		return troupe.AgentSpec{}, false
	}
	for _, a := range t.Agents {
		if a.Name == name {
			return a, true
		}
	}
	return troupe.AgentSpec{}, false
}
