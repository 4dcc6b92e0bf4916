// Package journal keeps what each agent did, turn by turn, so the person
// can read any agent's recent work after the fact (`troupe log AGENT`, GET
// .../agents/{agent}/log): per turn its start (the messages it was given),
// its events in order (a run of output text, thinking, each tool call with
// its input and result, permission decisions, usage and cost, the engine's
// session id) and its end (final text, error, duration, usage).
//
// This package holds the vocabulary (Entry, Turn, Event), the caps every
// store applies (Cap: 64 KB per text, with the cut and the original size
// stated), the bounds of what is kept per agent (the newest MaxTurns turns
// and at most MaxAgentBytes; older turns are pruned when a turn starts),
// the Store contract (journaltest runs it against MemStore and the SQLite
// store) and the Writer that takes entries off the turn's path.
//
// Writes stay off the turn's path: the runtime's actor hands entries to a
// Writer (Add never blocks: a bounded queue, with what it could not queue
// counted per turn and stored with the turn as Dropped, "N events not
// kept"); the Writer's Run gathers entries for up to 100 ms and records
// them in chunks of 4, one Store.Record call (one transaction) each, so
// the store's writer is held for short spells between a turn's own
// commits. Entries still queued when the daemon is killed are lost: a
// crash may lose the last entries of a turn in flight, and that turn then
// shows no end.
//
// Concurrency: MemStore and Writer are safe for concurrent use; a Writer
// runs one goroutine, its Run, owned by its caller (the runtime's Run),
// which drains what is queued when its context ends. No map here is keyed
// by an agent id alone: agents by RuntimeKey, turns by RuntimeKey and
// TurnID (C1).
//
// Who may import: the runtime (its writer side), the store (it implements
// Store), the API and its client (the wire types). It imports troupe only.
package journal
