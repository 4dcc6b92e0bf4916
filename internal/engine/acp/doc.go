// Package acp is the engine of agents speaking the Agent Client Protocol
// (ACP: JSON-RPC 2.0, one message a line, on the agent's stdin and stdout):
// engine = "acp" runs the agent's command and args; engine = "opencode"
// runs `opencode acp` (command replaces opencode) with OpenCode's settings
// passed (env.go). See docs/engines/codex-opencode.md ("OpenCode: ACP",
// "troupe's MCP endpoint from each CLI") for the measured behaviour of
// OpenCode this package relies on.
//
// Flow: initialize (protocol version 1; no file system or terminal offered:
// troupe serves neither), then session/load of StartSpec.Resume when the
// agent can load sessions (a refused load starts a new one), else
// session/new with the project folder and troupe's MCP endpoint as an HTTP
// server whose Authorization header carries the session's token (only when
// the agent declares mcpCapabilities.http; the token travels on the
// child's stdin, never in its argv or environment). The session id is
// reported as an EventSession. A turn is one session/prompt (engine.Render
// of the messages, after the agent's instructions on the first turn of a
// new session, since ACP has no system prompt); its answer is the turn's
// end (C7), "cancelled" after session/cancel (Interrupt) being
// "interrupted"; a failed prompt whose error says a usage or rate limit
// sets Event.Limit (limit.go). session/update notifications map onto events (message and
// thought chunks, tool calls and their results, usage); updates outside a
// turn (a loaded session's replayed history) are dropped.
// session/request_permission goes to the Approver and is answered with the
// option of the matching kind (allow_once, else allow_always; reject_once,
// else reject_always). Any other request of the agent is refused.
//
// Concurrency: Engine is stateless and safe for concurrent use. Each
// Session owns one child, started with internal/proc (own process
// group; proc's reaper and stderr reader, which bumps the activity token
// for every chunk), and these goroutines of its own: the reader, the
// internal/jsonrpc connection's Run over the child's stdio (every line
// bumps the activity token, C3), which delivers answers to the calls
// waiting for them, emits Events and at the end closes them;
// and one goroutine per permission request in flight, cancelled when its
// turn ends or is interrupted. Close stops the child by proc's escalation
// and waits for every goroutine. One mutex guards the turn state; the
// connection serialises the lines written to the child's stdin.
//
// Events policy: Events is buffered; when full, the reader waits for the
// consumer (never drops). After Close undelivered events are dropped.
//
// Who may import: the daemon's wiring (internal/daemon) and tests; tests
// that drive the real OpenCode use the opencodetest package.
package acp
