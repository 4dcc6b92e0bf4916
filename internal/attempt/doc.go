// Package attempt gives one task to several worktree agents from the same
// base and ranks their work by troupe's own check (best of N): the
// person's `troupe attempt "TASK" --agents a,b,c [--check NAME]`.
//
// Start checks the request (the task bounded like any request, at most
// MaxAgents agents, each a worktree agent of the project on this machine,
// in no other running attempt, at most MaxRunningPerProject attempts
// running in the project), resolves the check (the one named, else the
// project's only one), and records the project's HEAD commit as the base.
// Each agent's worktree is brought to that base while the agent is idle
// (worktree.Manager.Start): one holding uncommitted or unmerged work is
// refused with the fix (troupe worktree reset AGENT). Then the task is
// delegated from the person to each agent (runtime.Delegate: one request
// each), and the attempt is recorded.
//
// A Manager goroutine per running attempt (owned by Run) waits for each
// member's request to end, then runs the check on its worktree
// (check.Checker.Run: sandboxed, recorded on the agent's latest turn),
// counts its change against the base (files, lines added and deleted,
// committed or not), its time (from the delegation to the check's end)
// and its cost (the agent's turns in that window, from the journal, when
// its engine reports one). Each step is saved (Store): after a daemon
// restart Run resumes every running attempt: a member whose request ended
// without a recorded check gets it run; a pending one keeps waiting.
//
// When every member is done, Rank orders them: the check passed first;
// then, with the same verdict, a member that changed something before one
// that changed nothing (an empty change has nothing to merge, so it never
// beats a change, passing or not, with the same verdict); then the
// smaller change (lines), the shorter time, the lower cost (unknown last),
// the name. Each member gets its rank and a one-line reason; the winner
// is the first when its check passed and it changed something. Discard
// names the losers whose worktrees the person's reset puts back (the API
// resets them through the same path as `troupe worktree reset`).
//
// The Store keeps the newest KeepPerProject attempts of each project
// (SQLite in the daemon, MemStore in tests).
package attempt
