// Package claude is the engine of agents with engine = "claude": one
// long-lived Claude Code process per agent session, driven in headless
// stream-json mode (`claude -p --input-format stream-json --output-format
// stream-json --verbose`). See docs/engines/claude-code.md for the
// measured behaviour of the CLI this package relies on.
//
// A turn is one user line on the CLI's stdin (engine.Render of the turn's
// messages); the CLI's stdout lines map onto engine events: text and
// thinking as they stream (--include-partial-messages), tool calls and
// their results, and the turn's end from the protocol's own `result` line
// (C7), with its usage; a result the model refused for a usage or rate
// limit carries Event.Limit, its reset from the turn's rate_limit_event
// (docs/engines/claude-code.md, "Usage and rate limits"). Permission requests come as `can_use_tool` control
// requests (--permission-prompt-tool stdio) and are decided by the
// session's Approver. troupe's MCP endpoint is given with --mcp-config (a
// 0600 file in a private folder, removed when the session ends) and its
// tools are always allowed (--allowedTools mcp__troupe). The session id is
// minted (--session-id) or resumed (--resume); a resume the CLI refuses
// ("No conversation found with session ID") starts a fresh conversation,
// reported with a new EventSession. The child's environment is built from
// the person's Claude login and settings only (C11, env.go).
//
// Concurrency: Engine is stateless and safe for concurrent use. Each Session
// owns one CLI process at a time, started with internal/proc (own
// process group; proc's reaper and its stderr reader, which keeps the tail
// and bumps the activity token for every chunk), and these goroutines of
// its own: the lifecycle goroutine, which reads stdout (every line bumps the
// activity token, C3), emits Events, replaces the child once if a resume is
// refused, and at the end closes Events; and one goroutine per permission
// request in flight (the Approver may block for hours; the reader keeps
// reading), cancelled when its turn ends. Close stops the child by proc's
// escalation (close stdin, SIGTERM to the group, SIGKILL to the group, each
// wait bounded) and waits for every goroutine. One mutex guards the turn
// state; proc serialises the writes to the child's stdin.
//
// Events policy: Events is buffered; when the buffer is full the stdout
// reader waits for the consumer (never drops), which stalls the CLI through
// its pipe. After Close, events still undelivered are dropped.
//
// Who may import: the daemon's wiring (internal/daemon) and tests; tests
// that drive the real CLI use the claudetest package.
package claude
