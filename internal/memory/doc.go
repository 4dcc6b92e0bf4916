// Package memory keeps a project's memory notes: markdown files with a small
// front matter in .troupe/memory/, which agents read, write and search through
// the MCP tools memory_read, memory_write and memory_search, and whose list
// (IndexText) starts every agent session.
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
// the index is a cache that Store brings up to date lazily, before a search,
// when the files' names, sizes, modification times or inodes changed. The
// index is partitioned by ProjectID (contract C1): two projects holding the
// same notes, a folder and its copy, never see each other's hits.
//
// Concurrency: a *Store is safe for concurrent use. It owns no goroutines;
// one mutex per project serializes the index syncs of that project, and
// writers never lock: concurrent writes of one note leave one of them whole,
// never a mix. Index implementations must be safe for concurrent use.
//
// Who imports it: the MCP tools and the runtime (for the session's opening
// instructions), and the wiring package, which gives the Store the SQLite
// index. It imports internal/troupe, internal/projfile (which reads every
// note: regular files only, without blocking, 1 MB at most) and the
// standard library only; the
// SQLite store imports it (for Note, Hit and the Index contract), never the
// other way round.
package memory
