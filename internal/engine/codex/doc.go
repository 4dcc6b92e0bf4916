// Package codex is the engine of agents with engine = "codex": one
// long-lived `codex app-server` process per agent session, driven over its
// stdio JSON-RPC protocol (newline-delimited). See
// docs/engines/codex-opencode.md ("Codex: configuration", "Codex:
// app-server") for the measured behaviour of the CLI this package relies on.
//
// The session starts with `initialize`/`initialized`, then `thread/start`
// (a new conversation) or `thread/resume` (StartSpec.Resume, the thread id
// reported earlier); a resume the server refuses starts a new thread. The
// thread id is reported as an EventSession. A turn is one `turn/start` with
// engine.Render's text; the server's notifications map onto events
// (agent-message deltas as output, command executions, file changes and MCP
// tool calls as tool calls and results, reasoning as thinking, token usage)
// and the turn ends with the protocol's own `turn/completed` (C7): its
// status says whether it failed (the turn's error, else the server's last
// error notification; a usage or rate limit sets Event.Limit, with no reset
// time: Codex gives none) or was interrupted (`turn/interrupt`). Approval
// requests from the server (`item/commandExecution/requestApproval`,
// `item/fileChange/requestApproval`) are decided by the session's Approver.
//
// Argv: command app-server [args] -c key=value…: troupe's MCP server as
// mcp_servers.troupe (streamable HTTP URL, required, tool_timeout_sec from
// tool_timeout), mcp_optional_startup_grace_ms = 0, then the agent's
// [agent.codex] config table, each key a TOML-encoded -c override. The
// session's bearer token never is on the command line: Codex reads it from
// the variable TROUPE_MCP_TOKEN of the child's environment
// (bearer_token_env_var; Codex has no file for it). The environment is
// readable only by the same user (/proc/<pid>/environ is 0400), unlike the
// command line, but the commands the agent runs inherit it unless the
// person's shell_environment_policy excludes it. The instructions go as the
// thread's developerInstructions, over stdin. The person's ~/.codex login
// and settings stay in force (CODEX_HOME passes through when set). The
// child's environment is built with proc.Env (env.go).
//
// Concurrency: Engine is stateless and safe for concurrent use. Each
// Session owns one app-server process, started with internal/proc
// (own process group; proc's reaper and its stderr reader, which bumps the
// activity token for every chunk), and these goroutines of its own: the
// reader, the internal/jsonrpc connection's Run over the child's stdio,
// which reads stdout (every line bumps the activity token, C3),
// dispatches responses to their callers, maps notifications to Events and
// at the end closes Events; and one goroutine per approval request in
// flight (the Approver may block for hours), cancelled when its turn ends.
// Close stops the child by proc's escalation and waits for every goroutine.
// One mutex guards the session's state; the connection serialises writes
// to stdin.
//
// Events policy: as the claude engine's: buffered, the reader waits for the
// consumer (never drops); after Close undelivered events are dropped.
//
// Who may import: the daemon's wiring (internal/daemon) and tests; tests
// that drive the real CLI use the codextest package.
package codex
