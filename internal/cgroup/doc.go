// Package cgroup caps the memory and the number of processes (threads
// included) of each agent (issue 20's "resources"): one cgroup per agent,
// keyed by its RuntimeKey (contract C1: two projects' agents named alike
// get two cgroups), named under the daemon's state dir's identity (two
// daemons never share one), into which every process troupe starts for
// the agent is born.
//
// Two layouts, found at Open:
//   - cgroup v2, when the daemon's own cgroup has the memory and pids
//     controllers and is writable (delegated, as systemd does for a user
//     service with Delegate=yes): the daemon moves into a leaf of its own
//     (<own>/troupe-<id>-daemon, the "no internal processes" rule), enables
//     memory and pids below <own>, and makes <own>/troupe-<id>/project-<p>/agent-<a>.
//     A child is born in its cgroup by clone3 (SysProcAttr.UseCgroupFD).
//   - cgroup v1, when the memory and pids hierarchies are writable: one
//     folder per agent in each, below the daemon's own cgroup there. No
//     clone puts a child into a v1 cgroup: the child joins them before it
//     execs anything, so no fork escapes: a /bin/sh in front of bubblewrap
//     (JoinArgv), or the Landlock helper (`troupe sandbox-exec`,
//     internal/sandbox, Join). (Forking from a daemon thread moved
//     into the agent's cgroups was tried and dropped: while that thread is
//     there, an OOM in the agent's cgroup may choose the daemon.)
//
// Neither: no caps; Report says which are not in force and why, and the
// agents run without them (not an error).
//
// Concurrency: a Manager is safe for concurrent use (one mutex over its
// groups); its Run owns the retries of removals, Close the last ones. A
// Group is a value.
//
// Who imports it: the daemon (Manager), internal/sandbox (a Policy carries
// the agent's Group), internal/proc and internal/task (which start
// processes into a Group), the runtime and the openai engine (OOMKills),
// internal/project (ParseSize), api (FormatSize) and cli (Probe). It
// imports troupe's vocabulary only.
package cgroup
