// Package check runs a project's checks: the commands its approved team
// declares in team.toml's [checks] (troupe.Check), run by troupe itself in
// an agent's workspace to verify the agent's work, its verdict measured
// by troupe and never taken from the agent.
//
// A check is the approved team's (contract C17: project.Registry.Check,
// never the team file the agent may have edited in its worktree). It runs
// as a task of troupe's own (task.Manager.RunOwn): the same supervisor as
// an agent's background task, in the agent's sandbox, its output capped,
// its timeout enforced on the whole process group, what it leaves behind
// stopped; its end comes back to the Checker, not to the agent's inbox.
// The folder it runs in is the check's dir below the agent's workspace
// (its worktree, or the project folder), resolved to a real path that must
// stay inside the workspace: a dir that is a link out of it is refused.
//
// Each run is a Result: the check's name, the command as run, its verdict
// (passed, failed, timed_out, error), exit code, duration, the tail of its
// output (the cut said), and the agent's latest turn when it started (the
// turn it checked). Results are kept in a Store (SQLite in the daemon,
// MemStore in tests, both held to checktest's suite), the newest
// MaxResultsPerAgent of each agent, and published (Options.Publish) for
// the event feed.
//
// Run is the one entry point, for the person (CLI, API) and for troupe's
// own callers (a verified delegation, an attempt): Run(ctx, key, name)
// returns the Result once recorded. Results lists them by agent, turn and
// check. A Checker owns no goroutine: Run runs on its caller's, bounded per
// project (Options.MaxPerProject runs at once; more wait their turn or
// their context's end).
//
// An agent on a runner: its checks are not run yet (Run fails naming the
// runner); a check runs on the daemon's machine only.
package check
