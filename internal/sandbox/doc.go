// Package sandbox confines every process troupe starts for an agent (its
// engine's CLI and all it runs, the openai engine's commands, the agent's
// background tasks) to one Policy (contract C16): the agent's workspace,
// its engine's own state, build caches and a private temporary folder
// writable; troupe's state dir, the other projects and worktrees and the
// person's credential stores hidden; tool configuration inside the
// workspace (.troupe/, .git/config, .git/hooks, .claude/, .codex/,
// .mcp.json) read-only; the daemon's and other agents' processes out of
// sight. Network is unchanged unless a Policy turns it off.
//
// Two mechanisms enforce a Policy, both kept by others, no mount code of
// ours: bubblewrap (Wrap builds a bwrap argv: a read-only view of /, the
// writable and hidden paths mounted over it, its own pid namespace) where
// it is installed and user namespaces are allowed; else Landlock, through
// go-landlock, applied by a helper (troupe's own binary, hidden command
// `sandbox-exec`, HelperMain) that restricts itself then execs the
// program. Landlock only adds access, so hidden paths are honoured by
// granting their siblings instead of their parents (Complement); what it
// cannot do is stated by Detect's report: no private /tmp or pid
// namespace, and no new entry directly in a folder that holds a hidden or
// read-only path. A Policy's Binds (a folder of troupe's for the agent
// shown at another path: Claude Code's session registry, named by pids
// that every pid namespace repeats) are made by bubblewrap only.
//
// A Policy also carries the agent's memory and process caps (Caps, from
// its team) and the cgroup that enforces them (Cgroup, made by the daemon
// with internal/cgroup): under cgroup v1 Wrap puts a /bin/sh that joins it
// in front of bubblewrap, and the Landlock helper joins it before it
// restricts itself; under v2 internal/proc and internal/task start
// the wrapped command straight into it.
//
// Concurrency: a Policy is a value; Build, Wrap and BwrapArgv are pure
// functions of their arguments (Detect runs its probe once per process
// and caches it; safe for concurrent use). No goroutines.
//
// Who imports it: the daemon (which builds policies), the runtime and the
// engine seam (which carry them), internal/proc and internal/task
// (which wrap argvs), internal/cli (the helper command) and doctor. It
// imports troupe's vocabulary and internal/cgroup only.
package sandbox
