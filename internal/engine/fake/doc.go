// Package fake is the scripted, deterministic engine: it serves the tests of
// every package above the engine seam and the offline demo team.
//
// A fake agent runs as a real child process, so process ownership, crashes
// and restarts are exercised for real (contract C11). The Engine starts the
// program given in Options.Command (the troupe binary's hidden `fake-agent`
// subcommand in the daemon, the test binary itself in tests) and talks to it
// in JSON lines over stdin/stdout (see protocol.go for the wire format). The
// child's program is Main: for each message of a turn it answers
// "echo: <text>", or runs the directive lines the message carries ("!say",
// "!sleep", "!stream", "!ask", "!send", "!delegate", "!reply", "!bg",
// "!tool", "!think", "!permission", "!fail", "!crash", "!exit"), or the
// agent's `respond` script
// from the [agent.fake] table of team.toml — for new work only (messages,
// asks, delegations); replies, delegation results and task completions are
// acknowledged with echo. See directives.go for the list. When the session
// has an MCP endpoint (TROUPE_MCP_URL) and token (in the start frame on
// its stdin, never in its environment or command line), tool calls go over
// MCP as a real CLI's do; otherwise over the stdio protocol.
// Either way the session reports every kind of engine.Event: output,
// thinking (!think), each tool call and its result, a permission request
// decided by StartSpec.Approver (!permission), and before each turn end the
// turn's usage, with token counts derived from the lengths of its texts.
//
// Concurrency: Engine is stateless and safe for concurrent use. Each Session
// owns one child process, started with internal/proc (own process
// group; proc's reaper, the only caller of Wait, and its stderr reader,
// which keeps the last 4 KB for error reasons and bumps the activity token
// for every chunk), and these goroutines of its own: a stdout reader
// (decodes lines, bumps the activity token, emits Events), one goroutine per
// tool call in flight (Tools may block for hours; the reader keeps reading),
// and a lifecycle goroutine that closes Events once the child is gone and
// every other goroutine has stopped. Close stops the child by proc's
// escalation (close stdin, SIGTERM to the group, SIGKILL to the group, each
// wait bounded by Options.StopTimeout), always reaps it, and waits for every
// goroutine. Session methods are safe for concurrent use; one mutex guards
// the turn state; proc serialises the writes to the child's stdin.
//
// Events policy: Events is buffered; when the buffer is full the stdout
// reader waits for the consumer (never drops), which stalls the child through
// its pipe. After Close, events still undelivered are dropped.
//
// Who may import: the runtime wiring (internal/daemon) and tests. Tests of
// any package start fake agents by calling MaybeRunChild first thing in their
// TestMain and using TestCommand as Options.Command.
package fake
