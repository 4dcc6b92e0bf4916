// Package memory keeps a project's memory notes: markdown files with a small
// front matter in .troupe/memory/, which agents read, write and search through
// the MCP tools memory_read, memory_write and memory_search, and whose list
// starts every agent session (Briefing: the whole index, IndexText, up to
// MaxBriefing bytes, 8 KB; past it the most recently changed notes and a
// line "N more notes: search them with memory_search").
//
// A note is one file, .troupe/memory/<name>.md:
//
//	---
//	name: ticket95-adapter-aware-liveness-probe
//	description: one line saying what the note is for
//	metadata:
//	  type: project
//	---
//	markdown body...
//
// Parse reads that format (a strict subset of YAML, see Parse for the rules)
// and Format writes it. Store lists, reads, writes and searches the notes of
// a project folder. Writes are atomic (a temporary file in the same
// directory, fsync, rename, fsync of the directory), note names are
// sanitized into file names (Sanitize; a name that sanitizes to another
// note's file is refused, not written over it), and no name, symlink or
// "..", can make Store read or write outside the project's .troupe/memory
// directory.
//
// Search goes through an Index, defined here and implemented by the SQLite
// store (full-text search with FTS5) and by MemIndex (in memory, for tests
// and for a daemon without a database). The files stay the source of truth:
// the index is a cache that Store brings up to date per project, before a
// search or a briefing, reading only the files whose stamps (size,
// modification time, inode, mode) changed; the index keeps the stamps, so
// a restarted daemon reconciles it instead of rebuilding it. Changes are
// reported per project, by Write and by Changed (the daemon forwards the
// project registry's file events on .troupe/memory); while a project's
// folder is Watched, a search that finds nothing reported and the folder's
// stat unchanged lists and reads nothing. sync.go tells the whole scheme.
// The index is partitioned by ProjectID (contract C1): two projects
// holding the same notes, a folder and its copy, never see each other's
// hits, and a change in one never makes the other rescan.
//
// Concurrency: a *Store is safe for concurrent use. It owns no goroutines
// (the watcher is the project registry's); one mutex per project
// serializes the index syncs of that project, and another, never held
// across I/O, takes the reports (Watched, Changed), so the watcher never
// waits on a sync. Writers never lock: concurrent writes of one note leave
// one of them whole, never a mix. Index implementations must be safe for
// concurrent use.
//
// Who imports it: the MCP tools and the runtime (for the session's opening
// instructions), and the wiring package, which gives the Store the SQLite
// index. It imports internal/troupe, internal/projfile (which reads every
// note: regular files only, without blocking, 1 MB at most) and the
// standard library only; the
// SQLite store imports it (for Note, Hit and the Index contract), never the
// other way round.
package memory
