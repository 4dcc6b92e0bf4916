// Package claudefmt is the one reader of Claude Code's files on disk, as
// docs/engines/claude-code.md measures them: its config folder
// (ConfigDir), the folder name it gives a working directory under
// projects/ (MungePath), the session registry files <config>/sessions/
// <pid>.json (RegistryFile, ReadRegistryFile), and transcript lines (a
// cheap scan, ScanLine; the head and titles; the entries a turn's reader
// needs, Entry). The engine's terminal-mode driver (internal/engine/
// claude) and the machine's sessions index (internal/claudesessions) both
// read through it. One change troupe makes to them: the trust and API-key
// answers of the TUI's dialogs in the global config file (Approve, under
// the CLI's own lock, LockGlobalConfig), which a sandboxed CLI cannot save
// itself. Standard library only; every read is bounded.
package claudefmt
