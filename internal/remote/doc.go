// Package remote runs agents on other machines: the daemon's side
// (Daemon, whose Engine starts a runner's agent's session) and the
// runner's (Runner, which runs those sessions on its own engines), over
// the NATS bus of internal/bus.
//
// The link crosses at the engine seam (internal/engine), not at a CLI's
// bytes: the runner drives the agent's CLI with its own engine, in its
// own clone of the project, under its own sandbox, and sends the typed
// events. What crosses:
//
//   - daemon → runner, requests on bus.ToRunner(name): start, send (a
//     turn), interrupt, close. A runner not connected answers nothing:
//     the start fails at once saying so.
//   - daemon → runner, the background tasks of its agents (tasks.go):
//     taskstart (a task the daemon recorded, run by the runner's own
//     task.Manager in the agent's worktree and sandbox there), taskkill,
//     taskoutput.
//   - runner → daemon, requests on bus.FromRunner(name): hello (at each
//     (re)connection: its sessions; the daemon answers those it still
//     knows, the runner closes the others), tool (a troupe tool call of
//     an engine that runs its own loop), approve (a permission request:
//     the person decides on the daemon), mcp (one HTTP request of an
//     agent's CLI to the runner's local MCP endpoint, with the session's
//     own token, run on the daemon's endpoint), bundle (a chunk of the
//     git bundle that brings the runner's clone to the agent's head).
//   - runner → daemon, durably: every event of a session and its end, in
//     order, published to the runner's JetStream stream with a request
//     (the stream's acknowledgement comes back on the runner's inbox;
//     the runner has no JetStream API right) and an id per record
//     (<session>:<seq>), tried again until acknowledged. The daemon
//     consumes the stream, hands each record to its session once
//     (sequence numbers drop repeats) and acknowledges it after.
//   - runner → daemon, durably: a background task's end, kept first in
//     the runner's task records (<Root>/.task-records), then published to
//     the stream with the task's completion key as its id until
//     acknowledged; the daemon records it with task.Manager.CompleteRemote
//     (the same key: a redelivery is no second message) before it
//     acknowledges it. The answer to each hello lists the tasks the
//     daemon records as running on the runner; the runner reports those
//     it has no record of as lost, the same way.
//   - a terminal-mode agent's terminal (terminal.go): the daemon asks to
//     attach a viewer, type, resize, detach (requests on
//     bus.ToRunner(name)) and returns credit (published); the runner
//     publishes the viewer's output on bus.FromRunner(name)+".term.<viewer>",
//     numbered, within that credit window.
//   - runner → daemon, published: a heartbeat with each session's
//     activity count (stderr output is activity too, C3). A runner
//     silent for MissedBeats beats is unreachable: its sessions end with
//     that reason.
//
// Inboxes, asks, permissions, memory notes and checkpoints stay with the
// daemon. Every map here is keyed by a runner's name or a session's id;
// each session carries its RuntimeKey (C1).
//
// Concurrency: Daemon.Run and Runner.Run own every goroutine they start
// (request handlers, pumps, the stream's consumer) and wait for them.
package remote
