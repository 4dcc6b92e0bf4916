// Package term runs a program on a pseudo-terminal and reads its screen
// through a headless terminal emulator (contract C10): terminal-mode agents
// (Claude Code's TUI, a CLI troupe has no protocol for) are driven by what
// their screen shows, never by ANSI-stripped bytes.
//
// Emulator is troupe's own small interface over the emulator library
// (github.com/charmbracelet/x/vt, a fork kept in third_party/vt through a
// replace directive: its speed work, the 64 KB parser buffer and its bug
// fixes, ED 1 erasing only up to the cursor among them, are code there,
// listed in its NOTICE; nothing here reaches into it). Here: its replies to
// terminal queries are drained (else a query blocks its Write forever), and
// every read of the screen is a copy taken under one lock. Terminal is a child on a PTY (its
// master fd non-blocking, so reads are stoppable) feeding an Emulator, with
// one input writer, resizes, and a fan-out of the raw bytes to attached
// viewers. Match and Normalize compare screen text whitespace-insensitively.
//
// Concurrency: every method of Emulator and Terminal is safe for concurrent
// use. A Terminal owns two goroutines (the PTY reader and the input writer)
// and its child (own session and process group, reaped by proc,
// stopped by escalation); Close stops all of them.
//
// Only this package imports the PTY and emulator libraries (the layout
// test holds that rule).
package term
