// Package task runs background shell jobs for an agent (or the person) and
// tells the owner when they end: the "run_in_background" tool of the agents
// and the task half of contracts C1, C6 and C11 (docs/CONTRACTS.md).
//
// # Job
//
// Manager.Start validates a command (non-empty, a timeout of at most 24 h, a
// working directory that resolves inside the project folder, at most
// Options.MaxPerProject running tasks per project), writes the task's spec
// into its own directory <Dir>/<id>/ and starts a supervisor process for it:
// the troupe binary's hidden `task-supervise` command (SuperviseMain), in a
// new session (setsid), stdin from /dev/null, stdout and stderr to a file, so
// it outlives the daemon, a SIGKILL of the daemon's process group included.
// Only then is the task recorded in the Store, as running, and only after
// that does the supervisor run the job: it waits at a start gate (a pipe on
// its fd 3) that the Manager opens once the task is recorded. A daemon that
// dies in between closes the gate unopened; the job never runs and the
// supervisor records why, so no job runs that its owner cannot hear of.
//
// The supervisor makes itself a child subreaper (PR_SET_CHILD_SUBREAPER)
// and runs `/bin/sh -c COMMAND` in its own process group with a built
// environment (PATH, HOME, LANG, TMPDIR and Options.Env; never the daemon's
// own variables), its output through a pipe into a capped log (capped.go:
// output.log holds the first half of the cap, output.tail a ring of the
// last half; readers state the cut), enforces the timeout, forwards a
// SIGTERM it receives (Manager.Kill) to the job's group, escalates to
// SIGKILL after a grace. When the job's main process ends, every
// descendant still there — in its group or not: a setsid'd or
// double-forked process is re-parented to the supervisor — is stopped by
// escalation (SIGTERM, the grace, SIGKILL) and reaped (leftover.go); the
// supervisor then records how the job ended and what it stopped in
// status.json (atomically: temporary file, fsync, rename) and exits. See
// supervise.go for the files of a task directory. If the supervisor itself
// dies, the Manager kills every process left in the supervisor's session.
//
// # Bounds
//
// A task keeps at most its cap of output (Job.MaxOutput, default
// Options.MaxOutput, 64 MB). A project keeps its ended tasks' folders
// Options.Retention (7 days), and at most Options.FolderBytes (1 GB) and
// Options.Folders (256) of them, the oldest removed first when a task
// starts or ends. A full disk fails a Start with ErrNoSpace and nothing
// left behind; a job whose output meets a full disk is stopped and ends
// failed, "no space left on device while writing output.log", its status
// written from blocks reserved at Start (status.reserve), so that it is
// never taken for lost.
//
// # Completion
//
// The Manager watches every running task's supervisor through a pidfd
// (pidfd_open(2)) registered in Go's poller: the supervisor's exit, which
// follows the status file, wakes the watcher at once, without any polling
// loop, for supervisors this process started and for those it adopted after
// a restart alike. The watcher then reads status.json (or, when there is
// none, records the task as lost with the reason and kills what is left of
// its session), and completes it in two steps, one transaction each: it
// appends the completion message to the owner's inbox (Options.Inbox) under
// the idempotency key task:<id>, then records the end and the message's id
// in the task row (Store.CompleteTask), exactly once. A daemon that dies
// between the two leaves the task running in the store; the next one
// completes it again, and the key keeps the message single. Options.Notify
// is called after that, so the runtime can wake the owner. At start, Run
// adopts every task the store says is running: a supervisor that is still
// there (same pid and /proc start time) is watched; one that is gone is
// completed from its status file, or as lost.
//
// # Tasks on runners
//
// An owner on a runner (Job.Remote, tool.Caller.Runner) has its tasks run
// there: the daemon's Manager records the row (Task.Runner) and asks
// Options.Remote to start it; Kill and ReadOutput of such a task go to
// Options.Remote; adoption leaves it alone. The runner runs it with its
// own Manager, given the daemon's id (Job.ID), whose ends go to
// Options.Reporter instead of an inbox; the daemon takes each end back
// with CompleteRemote, which posts the message under the same key and
// completes the row, once. See internal/remote's tasks.go.
//
// # Concurrency
//
// A Manager is safe for concurrent use. Run owns every goroutine the
// Manager starts: one watcher per running task, blocked in the poller on
// the supervisor's pidfd. When Run's context ends, the watchers stop and Run
// returns after them; the supervisors keep running and the next Run adopts
// them. Start and Kill work whether Run runs or not: a task started while
// Run is not running is watched by the next Run. One mutex (startMu)
// serializes Starts, so the per-project limit holds; another (mu) guards
// the set of watched tasks. Runtime state is keyed by task ID, never by
// agent (C1); every lookup from outside is scoped by project.
//
// # Who imports it
//
// The daemon's wiring (internal/daemon) builds the Manager with the SQLite
// store as its Store and Inbox, and internal/cli wires SuperviseMain as
// `troupe task-supervise`; the runtime and the MCP endpoint reach it
// through the interfaces they define. Tests of other packages call MaybeRunSupervisor from TestMain and
// use TestSupervisorCommand as Options.Supervisor. It imports the standard
// library, golang.org/x/sys/unix and internal/troupe only. Linux only
// (pidfd_open needs Linux 5.3).
package task
