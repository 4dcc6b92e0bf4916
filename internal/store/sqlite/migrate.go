package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
)

// migration is one step of the schema. Step i (0-based) takes the database
// from version i to version i+1; the version lives in PRAGMA user_version.
// Steps are append-only: never edit or reorder a released step, add a new
// one.
type migration struct {
	name  string
	stmts []string
}

var migrations = []migration{
	// version 1
	{
		name: "projects and their last good teams",
		stmts: []string{
			`CREATE TABLE projects (
				id       TEXT PRIMARY KEY,
				path     TEXT NOT NULL UNIQUE,
				name     TEXT NOT NULL,
				added_at INTEGER NOT NULL -- unix nanoseconds, UTC
			)`,
			`CREATE TABLE project_teams (
				project_id TEXT PRIMARY KEY REFERENCES projects(id) ON DELETE CASCADE,
				source     BLOB NOT NULL,
				saved_at   INTEGER NOT NULL -- unix nanoseconds, UTC
			)`,
		},
	},
	// version 2
	{
		name: "inboxes, conversations and requests",
		stmts: []string{
			// Not foreign-keyed to projects: the history may outlive a
			// removed project; ExpireProject ends what was still open.
			// AUTOINCREMENT: an id is never reused, even after the newest
			// rows are gone, so "after id" cursors stay valid.
			`CREATE TABLE messages (
				id          INTEGER PRIMARY KEY AUTOINCREMENT,
				project     TEXT NOT NULL,
				to_agent    TEXT NOT NULL,
				from_agent  TEXT NOT NULL,
				kind        TEXT NOT NULL,
				text        TEXT NOT NULL,
				request     TEXT NOT NULL, -- '' when none
				state       TEXT NOT NULL,
				reason      TEXT NOT NULL,
				turn        TEXT NOT NULL, -- '' when none
				redelivered INTEGER NOT NULL,
				created_at  INTEGER NOT NULL, -- unix nanoseconds, UTC
				done_at     INTEGER           -- unix nanoseconds, UTC; NULL until final
			)`,
			// An inbox: Pending, StartTurn, EndTurn.
			`CREATE INDEX messages_inbox ON messages (project, to_agent, state, id)`,
			// A conversation: Conversation.
			`CREATE INDEX messages_project ON messages (project, id)`,
			// Open mail only, small whatever the history: Recover (at every
			// start) and ExpireProject, which name no single inbox. They
			// repeat its WHERE term word for word and say INDEXED BY.
			`CREATE INDEX messages_open ON messages (project, to_agent, id)
				WHERE state IN ('queued', 'in_turn')`,
			`CREATE TABLE requests (
				id         TEXT PRIMARY KEY,
				project    TEXT NOT NULL,
				from_agent TEXT NOT NULL,
				to_agent   TEXT NOT NULL,
				kind       TEXT NOT NULL,
				question   TEXT NOT NULL,
				state      TEXT NOT NULL,
				answer     TEXT NOT NULL,
				error      TEXT NOT NULL,
				detached   INTEGER NOT NULL,
				message_id INTEGER NOT NULL REFERENCES messages (id), -- the ask or delegate message
				created_at INTEGER NOT NULL, -- unix nanoseconds, UTC
				done_at    INTEGER           -- unix nanoseconds, UTC; NULL while pending
			)`,
			// PendingRequests and ExpireProject.
			`CREATE INDEX requests_pending ON requests (created_at, id) WHERE state = 'pending'`,
		},
	},
	// version 3
	{
		name: "background tasks",
		stmts: []string{
			// Not foreign-keyed to projects, like messages. The completion
			// message goes into messages in the transaction that ends the
			// task (task.Store.CompleteTask).
			`CREATE TABLE tasks (
				seq              INTEGER PRIMARY KEY AUTOINCREMENT, -- creation order
				id               TEXT NOT NULL UNIQUE,
				project          TEXT NOT NULL,
				owner            TEXT NOT NULL,
				command          TEXT NOT NULL,
				cwd              TEXT NOT NULL,
				timeout          INTEGER NOT NULL, -- nanoseconds; 0: none
				state            TEXT NOT NULL,
				exit_code        INTEGER NOT NULL,
				signal           TEXT NOT NULL, -- '' when none
				reason           TEXT NOT NULL,
				started_at       INTEGER NOT NULL, -- unix nanoseconds, UTC
				ended_at         INTEGER,          -- unix nanoseconds, UTC; NULL while running
				supervisor_pid   INTEGER NOT NULL,
				supervisor_start INTEGER NOT NULL, -- field 22 of /proc/<pid>/stat
				notified         INTEGER NOT NULL,
				message_id       INTEGER REFERENCES messages (id) -- the completion; NULL while running
			)`,
			// Tasks of a project.
			`CREATE INDEX tasks_project ON tasks (project, seq)`,
			// RunningTasks (adoption at start, the per-project limit):
			// small whatever the history. Queries repeat its WHERE term.
			`CREATE INDEX tasks_running ON tasks (seq) WHERE state = 'running'`,
		},
	},
	// version 4
	{
		name: "memory notes full-text index",
		stmts: []string{
			// A cache of the notes' files (.troupe/memory/*.md), synced by
			// memory.Store before a search; it goes with its project.
			`CREATE TABLE memory_notes (
				id          INTEGER PRIMARY KEY,
				project_id  TEXT NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
				name        TEXT NOT NULL,
				description TEXT NOT NULL,
				type        TEXT NOT NULL,
				body        TEXT NOT NULL,
				path        TEXT NOT NULL,
				mod_time    INTEGER, -- unix nanoseconds, UTC; NULL when unknown
				UNIQUE (project_id, name)
			)`,
			// External-content FTS5 index of memory_notes, kept in step by
			// the triggers below.
			`CREATE VIRTUAL TABLE memory_fts USING fts5 (
				name, description, body,
				content = 'memory_notes', content_rowid = 'id',
				tokenize = 'unicode61 remove_diacritics 2'
			)`,
			`CREATE TRIGGER memory_notes_insert AFTER INSERT ON memory_notes BEGIN
				INSERT INTO memory_fts (rowid, name, description, body) VALUES (new.id, new.name, new.description, new.body);
			END`,
			`CREATE TRIGGER memory_notes_delete AFTER DELETE ON memory_notes BEGIN
				INSERT INTO memory_fts (memory_fts, rowid, name, description, body) VALUES ('delete', old.id, old.name, old.description, old.body);
			END`,
			`CREATE TRIGGER memory_notes_update AFTER UPDATE ON memory_notes BEGIN
				INSERT INTO memory_fts (memory_fts, rowid, name, description, body) VALUES ('delete', old.id, old.name, old.description, old.body);
				INSERT INTO memory_fts (rowid, name, description, body) VALUES (new.id, new.name, new.description, new.body);
			END`,
		},
	},
	// version 5
	{
		name: "idempotency keys of appended messages",
		stmts: []string{
			// inbox.Store.AppendOnce: NULL for a message appended without
			// a key (every message before this step). Since this step a
			// task's completion is appended with the key task:<id> before
			// the task row records its end (task.Manager), no longer in
			// CompleteTask's transaction as version 3 says.
			`ALTER TABLE messages ADD COLUMN idem_key TEXT`,
			// One message per key and project; keyed messages only (a
			// task's completion), so the index stays small. Queries
			// repeat its WHERE term.
			`CREATE UNIQUE INDEX messages_once ON messages (project, idem_key)
				WHERE idem_key IS NOT NULL`,
		},
	},
	// version 6
	{
		name: "agents' engine conversation ids",
		stmts: []string{
			// runtime.Sessions: the id each agent's engine reported for its
			// conversation, resumed by its next session. Not foreign-keyed
			// to projects, like messages: the runtime clears a removed
			// project's rows (ClearProjectSessions).
			`CREATE TABLE agent_sessions (
				project    TEXT NOT NULL,
				agent      TEXT NOT NULL,
				engine     TEXT NOT NULL,
				session_id TEXT NOT NULL,
				updated_at INTEGER NOT NULL, -- unix nanoseconds, UTC
				PRIMARY KEY (project, agent)
			)`,
		},
	},
	// version 7
	{
		name: "journal of each agent's turns",
		stmts: []string{
			// One row per turn of an agent (journal.Store): its start, end
			// and counts. Not foreign-keyed to projects, like messages.
			// Pruned per agent when a turn starts (journal.Prune).
			`CREATE TABLE journal_turns (
				id         INTEGER PRIMARY KEY AUTOINCREMENT, -- journal.Turn.Seq
				project    TEXT NOT NULL,
				agent      TEXT NOT NULL,
				turn       TEXT NOT NULL,
				started_at INTEGER NOT NULL, -- unix nanoseconds, UTC
				messages   TEXT NOT NULL,    -- JSON: []journal.Message
				ended_at   INTEGER,          -- unix nanoseconds, UTC; NULL while running or when the end was lost
				final      TEXT,             -- JSON: {text, text_cut, error, usage}; NULL with ended_at
				dropped    INTEGER NOT NULL, -- events not kept
				events     INTEGER NOT NULL, -- events kept: the last seq
				bytes      INTEGER NOT NULL, -- what the turn counts toward journal.MaxAgentBytes
				UNIQUE (project, agent, turn)
			)`,
			`CREATE INDEX journal_turns_agent ON journal_turns (project, agent, id)`,
			// A turn's events in order; they go with their turn.
			`CREATE TABLE journal_events (
				turn_id INTEGER NOT NULL REFERENCES journal_turns (id) ON DELETE CASCADE,
				seq     INTEGER NOT NULL,
				data    TEXT NOT NULL, -- JSON: journal.Event
				PRIMARY KEY (turn_id, seq)
			) WITHOUT ROWID`,
		},
	},
	// version 8
	{
		name: "conversation paging per agent",
		stmts: []string{
			// Conversation with an agent: the messages to it and those from
			// it, each an index range read from either end and merged, so
			// a page costs what it holds, never a scan of the project's
			// history (messages_inbox has state before id; messages_open
			// holds open mail only).
			`CREATE INDEX messages_to ON messages (project, to_agent, id)`,
			`CREATE INDEX messages_from ON messages (project, from_agent, id)`,
		},
	},
	// version 9
	{
		name: "memory notes' file stamps",
		stmts: []string{
			// memory.Entry.Stamp: the note file's size, modification time,
			// inode and mode when it was read, so that a daemon started
			// later re-reads only the files that changed. '' for the rows
			// before this step: those are read once again.
			`ALTER TABLE memory_notes ADD COLUMN stamp TEXT NOT NULL DEFAULT ''`,
		},
	},
	// version 10
	{
		name: "openai agents' conversations",
		stmts: []string{
			// openai.Store: the messages of each openai agent's
			// conversation with its model, in order (id), each with its
			// turn's number (trimmed from the oldest turn) and the
			// engine's JSON of the message. One conversation per agent
			// (KeepChat deletes the others). Not foreign-keyed to
			// projects, like messages.
			`CREATE TABLE openai_messages (
				id           INTEGER PRIMARY KEY AUTOINCREMENT,
				project      TEXT NOT NULL,
				agent        TEXT NOT NULL,
				conversation TEXT NOT NULL,
				turn         INTEGER NOT NULL,
				data         BLOB NOT NULL
			)`,
			`CREATE INDEX openai_messages_conversation ON openai_messages (project, agent, conversation, turn)`,
		},
	},
	// version 11
	{
		name: "index of the machine's Claude Code sessions",
		stmts: []string{
			// claudesessions.File: one row per transcript file under
			// <claude config>/projects; a cache of the files (size, mtime,
			// inode and how far it was read), rebuilt from them when lost.
			`CREATE TABLE claude_files (
				path       TEXT PRIMARY KEY,
				session_id TEXT NOT NULL,
				size       INTEGER NOT NULL,
				mtime      INTEGER NOT NULL, -- unix nanoseconds
				inode      INTEGER NOT NULL,
				read_to    INTEGER NOT NULL, -- end of the last complete line read
				complete   INTEGER NOT NULL, -- 1: read whole; 0: head and tail only (counts a lower bound)
				cwd        TEXT NOT NULL,
				title      TEXT NOT NULL,
				title_kind TEXT NOT NULL,
				prompt     TEXT NOT NULL,
				version    TEXT NOT NULL,
				git_branch TEXT NOT NULL,
				first_at   INTEGER NOT NULL, -- unix nanoseconds, UTC; 0: unknown
				last_at    INTEGER NOT NULL, -- unix nanoseconds, UTC; 0: unknown
				messages   INTEGER NOT NULL,
				model      TEXT NOT NULL,
				skipped    INTEGER NOT NULL
			)`,
			// Every Claude session id troupe's own agents had (the latest
			// per agent lives in agent_sessions; this keeps the earlier
			// ones), so a listing tells which sessions troupe made.
			`CREATE TABLE claude_agent_sessions (
				session_id TEXT PRIMARY KEY,
				project    TEXT NOT NULL,
				agent      TEXT NOT NULL,
				seen_at    INTEGER NOT NULL -- unix nanoseconds, UTC
			)`,
			`INSERT OR REPLACE INTO claude_agent_sessions (session_id, project, agent, seen_at)
				SELECT session_id, project, agent, updated_at FROM agent_sessions WHERE engine = 'claude'`,
		},
	},
	// version 12
	{
		name: "the team each project's person approved",
		stmts: []string{
			// project.Approval: the team in force (the approved one, as
			// project.EncodeTeam writes it) and the digest of the team
			// file content the person rejected ('' when none).
			`CREATE TABLE project_approvals (
				project_id TEXT PRIMARY KEY REFERENCES projects(id) ON DELETE CASCADE,
				team       BLOB NOT NULL,
				rejected   TEXT NOT NULL,
				saved_at   INTEGER NOT NULL -- unix nanoseconds, UTC
			)`,
		},
	},
	// version 13
	{
		name: "the runner a background task runs on",
		stmts: []string{
			// task.Task.Runner: '' on the daemon's machine.
			`ALTER TABLE tasks ADD COLUMN runner TEXT NOT NULL DEFAULT ''`,
		},
	},
	// version 14
	{
		name: "the results of the projects' checks",
		stmts: []string{
			// check.Result: one run of a check on an agent's workspace.
			// Not foreign-keyed to projects: removing a project removes
			// its results (RemoveProject), and an agent's oldest beyond
			// check.MaxResultsPerAgent go as new ones come.
			`CREATE TABLE check_results (
				id           INTEGER PRIMARY KEY AUTOINCREMENT,
				project      TEXT NOT NULL,
				agent        TEXT NOT NULL,
				check_name   TEXT NOT NULL,
				command      TEXT NOT NULL,
				dir          TEXT NOT NULL,
				state        TEXT NOT NULL,
				exit_code    INTEGER NOT NULL,
				reason       TEXT NOT NULL,
				turn         TEXT NOT NULL, -- '' when none
				started_at   INTEGER NOT NULL, -- unix nanoseconds, UTC
				duration_ms  INTEGER NOT NULL,
				output       TEXT NOT NULL, -- its tail, at most check.MaxOutput bytes
				output_bytes INTEGER NOT NULL,
				output_cut   TEXT NOT NULL
			)`,
			`CREATE INDEX check_results_agent ON check_results (project, agent, id)`,
		},
	},
	// version 15
	{
		name: "verified delegations",
		stmts: []string{
			// troupe.Request.Verify, Tries, Tried, Checking and Verdict:
			// the check a delegation names ('' none), the worker's turns
			// it may judge and has judged, whether troupe checks the
			// answer now (stored before the check runs, so a restart
			// runs it again), and the last verdict (troupe.Verdict as
			// JSON, NULL before the first).
			`ALTER TABLE requests ADD COLUMN verify TEXT NOT NULL DEFAULT ''`,
			`ALTER TABLE requests ADD COLUMN tries INTEGER NOT NULL DEFAULT 0`,
			`ALTER TABLE requests ADD COLUMN tried INTEGER NOT NULL DEFAULT 0`,
			`ALTER TABLE requests ADD COLUMN checking INTEGER NOT NULL DEFAULT 0`,
			`ALTER TABLE requests ADD COLUMN verdict TEXT`,
		},
	},
	// version 16
	{
		name: "the attempts: one task given to several agents, ranked by a check",
		stmts: []string{
			// attempt.Attempt: body is the whole attempt as JSON (its
			// members, each at most attempt.MaxOutput of check output);
			// state is kept apart to find the running ones at start. Not
			// foreign-keyed to projects: RemoveProject removes them, and a
			// project's oldest beyond attempt.KeepPerProject go as new
			// ones come.
			`CREATE TABLE attempts (
				id         INTEGER PRIMARY KEY AUTOINCREMENT,
				project    TEXT NOT NULL,
				state      TEXT NOT NULL,
				created_at INTEGER NOT NULL, -- unix nanoseconds, UTC
				body       TEXT NOT NULL
			)`,
			`CREATE INDEX attempts_project ON attempts (project, id)`,
		},
	},
}

// latestVersion is the schema version this binary writes.
func latestVersion() int { return len(migrations) }

// migrate applies the steps after version, each in its own IMMEDIATE
// transaction that re-reads user_version first, so a second process
// migrating the same file at the same time applies each step once.
func migrate(ctx context.Context, w *sql.DB, version int64, path string, log *slog.Logger) error {
	return migrateTo(ctx, w, version, int64(latestVersion()), path, log)
}

// migrateTo is migrate up to version target only (Repair builds the
// damaged file's own schema, copies, then migrates to the latest).
func migrateTo(ctx context.Context, w *sql.DB, version, target int64, path string, log *slog.Logger) error {
	for version < target {
		next, applied, err := migrateStep(ctx, w, path, target)
		if err != nil {
			return err
		}
		if applied {
			log.Info("store migrated", "from", next-1, "to", next, "step", migrations[next-1].name)
		}
		version = next
	}
	return nil
}

// migrateStep applies the step after the version it finds and returns the
// new version, and whether it applied a step.
func migrateStep(ctx context.Context, w *sql.DB, path string, target int64) (_ int64, applied bool, _ error) {
	tx, err := w.BeginTx(ctx, nil)
	if err != nil {
		return 0, false, fmt.Errorf("migrate schema: %w", err)
	}
	defer tx.Rollback() // no-op after Commit

	var version int64
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return 0, false, fmt.Errorf("migrate schema: %w", err)
	}
	if err := classify(path, applicationID, version, 0); err != nil {
		return 0, false, err
	}
	if version >= target {
		return version, false, nil // another process got here first
	}
	m := migrations[version]
	next := version + 1
	for _, s := range m.stmts {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return 0, false, fmt.Errorf("migrate schema to version %d (%s): %w", next, m.name, err)
		}
	}
	// PRAGMA arguments cannot be bound parameters; both values are integers
	// from this package.
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA application_id = %d", applicationID)); err != nil {
		return 0, false, fmt.Errorf("migrate schema to version %d: %w", next, err)
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", next)); err != nil {
		return 0, false, fmt.Errorf("migrate schema to version %d: %w", next, err)
	}
	if err := tx.Commit(); err != nil {
		return 0, false, fmt.Errorf("migrate schema to version %d: %w", next, err)
	}
	return next, true, nil
}
