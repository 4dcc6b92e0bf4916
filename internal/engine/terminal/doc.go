// Package terminal runs agents in terminal mode (mode = "terminal",
// contract C10): the agent's own TUI on a PTY (internal/term), its state
// read from its screen, its input written as a person would type it, and
// a person able to attach to it.
//
// Session is what every terminal agent shares: one loop goroutine that
// reads the screen after every output (and on a Driver's poll), answers
// the dialogs the Driver knows by selecting the wanted option explicitly,
// reports an unknown one as EventBlocked (never idle), writes a turn's
// input as a bracketed paste then Enter, by one writer, only when the
// program is idle and the attached person has not typed for QuietFor, and
// ends the turn when the Driver says so. Activity (C3) is a change of what
// the screen says, its animation aside (spinners, elapsed-time counters:
// animation.go), plus what the Driver reports (Claude's transcript). An
// EventDriver also reports the program's tool calls (a call in flight is
// activity up to its limit) and the usage limit a turn ended on.
//
// A Driver knows one program: Claude Code's TUI (internal/engine/claude
// builds one) or, in this package, the generic engine ("terminal"): any
// CLI, with the patterns that mean idle, busy and a dialog in the agent's
// [agent.terminal] table.
//
// Concurrency: a Session owns its loop goroutine, its watcher goroutine and
// its Terminal (whose child is in its own process group); Close stops them
// all. Its methods are safe for concurrent use.
package terminal
