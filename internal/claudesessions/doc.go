// Package claudesessions knows the Claude Code sessions of this machine:
// an index of the transcripts under <config>/projects/*/*.jsonl, their
// liveness read from the CLI's registry <config>/sessions/<pid>.json, and
// the resume policy (contracts C8, C9 in docs/CONTRACTS.md).
//
//   - Index (index.go) keeps one summary per transcript file: the session
//     id, its original cwd (read inside the transcript, never decoded from
//     the folder's name), title, first and last time, messages, model, size.
//     It is incremental and persisted through a Store (the SQLite store
//     implements it): a file whose size, mtime and inode are unchanged is
//     not read again, a file that grew is read from where the last read
//     stopped. Bytes are read once; JSON is parsed only for the few lines
//     that carry a listing's fields (the head up to the first prompt, the
//     titles, and the last line's time and model are taken by a cheap scan).
//     Truncated, garbled or foreign lines are skipped and counted. A Watcher
//     (fsnotify) tells the index which files changed; without it every
//     listing stats every file.
//   - Registry (registry.go) reads the registry files at every query (never
//     cached): a session is live iff a file names it, its pid exists and
//     field 22 of /proc/<pid>/stat equals the file's procStart. Anything
//     unreadable or in doubt reads as live.
//   - Claims (claims.go) is the one-writer rule inside troupe: one holder
//     per session id (a person's `troupe resume`, a team agent's session),
//     checked together with the registry.
//
// Concurrency: Index methods are safe for concurrent use (one mutex guards
// its table; files are read without it held, one sync at a time). The
// Watcher's goroutine is owned by its Run, which returns when its context
// ends. Registry and Claims are safe for concurrent use. Files under the
// config folder are treated as hostile: regular files only, opened without
// following symbolic links and without blocking, lines and reads bounded.
//
// Who may import it: the daemon's wiring, the API (through its own
// interface) and the store (for the Store types).
package claudesessions
