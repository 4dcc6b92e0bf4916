package task

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/troupe-dev/troupe/internal/atomicfile"
	"github.com/troupe-dev/troupe/internal/cgroup"
	"github.com/troupe-dev/troupe/internal/pidfd"
	"github.com/troupe-dev/troupe/internal/procstat"
)

// The files of a task directory, <Options.Dir>/<task id>/. This is the
// whole protocol between the Manager and a supervisor.
//
//   - spec.json: what to run (spec), written by the Manager before it
//     starts the supervisor; read once by the supervisor.
//   - supervisor.log: the supervisor's own stdout and stderr (diagnostics;
//     normally empty).
//   - status.reserve: written by the Manager before it starts the
//     supervisor (reserveSize bytes): blocks kept for status.json. A
//     supervisor that cannot write status.json because the disk is full
//     removes it and tries again; it removes it anyway once status.json
//     is written.
//   - output.log: the first half of the job's stdout and stderr (up to
//     spec.MaxOutput/2 bytes), through a pipe the supervisor copies.
//   - output.tail: the rest, as a ring holding its last spec.MaxOutput/2
//     bytes (see capped.go); absent while the output fits in output.log.
//   - status.json: how the job ended (status), written by the supervisor
//     atomically (temporary file, fsync, rename, fsync of the directory)
//     just before it exits. Present means final.
//   - kill: written by Manager.Kill before it sends SIGTERM to the
//     supervisor. A supervisor that finds it does not start the job; and
//     a supervisor that the SIGTERM ended before it could catch signals
//     (while the Go runtime starts) leaves no status file but this one
//     and no output.log: the task was killed before it started.
//
// The supervisor is started as `<Options.Supervisor...> <task dir>` with
// SupervisorEnv=1 in its environment.
const (
	specFile       = "spec.json"
	supervisorLog  = "supervisor.log"
	outputFile     = "output.log"
	outputTailFile = "output.tail"
	statusFile     = "status.json"
	reserveFile    = "status.reserve"
	reserveSize    = 16 << 10
	killFile       = "kill"
	defaultGrace   = 5 * time.Second
	jobShell       = "/bin/sh"
	supervisorName = "troupe task-supervise"
)

// SupervisorEnv marks a supervisor process: the Manager sets it to "1" in
// every supervisor's environment (never in a job's), and MaybeRunSupervisor
// runs SuperviseMain when it is.
const SupervisorEnv = "TROUPE_TASK_SUPERVISOR"

// spec is what a supervisor runs (spec.json).
type spec struct {
	ID      ID     `json:"id"`
	Command string `json:"command"`
	// Argv, when set, is what runs instead of sh -c Command: the same
	// command wrapped in the owner's sandbox. Its first process (the
	// sandbox's bubblewrap) is the group's leader and gets no SIGTERM: the
	// job's own processes do (signalJob).
	Argv      []string      `json:"argv,omitempty"`
	Cwd       string        `json:"cwd"`
	Env       []string      `json:"env"`        // the job's whole environment
	Timeout   time.Duration `json:"timeout"`    // 0: none
	KillGrace time.Duration `json:"kill_grace"` // SIGTERM → SIGKILL
	MaxOutput int64         `json:"max_output"` // output kept: first half, last half; 0: DefaultMaxOutput
	// Cgroup is the owner's cgroup (its sandbox's caps): the job is born
	// in it (v2), or Argv's sandbox helper joins it (v1). Its OOM kills
	// during the job make the job's end "out of memory".
	Cgroup cgroup.Group `json:"cgroup,omitzero"`
}

// status is how a job ended (status.json).
type status struct {
	State     State     `json:"state"`
	ExitCode  int       `json:"exit_code"`
	Signal    string    `json:"signal,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	JobPID    int       `json:"job_pid,omitempty"`
	StartedAt time.Time `json:"started_at,omitzero"`
	EndedAt   time.Time `json:"ended_at"`
	// Stopped is what was left of the job when it ended and was stopped.
	Stopped *Stopped `json:"stopped,omitempty"`
}

func (s status) result() Result {
	return Result{State: s.State, ExitCode: s.ExitCode, Signal: s.Signal, Reason: s.Reason, EndedAt: s.EndedAt}
}

// MaybeRunSupervisor runs the supervisor and exits when this process was
// started as one (SupervisorEnv is "1"), with the task directory as its
// last argument; otherwise it returns at once. Tests that start tasks with
// TestSupervisorCommand call it first thing in TestMain:
//
//	func TestMain(m *testing.M) {
//		task.MaybeRunSupervisor()
//		os.Exit(m.Run())
//	}
func MaybeRunSupervisor() {
	if os.Getenv(SupervisorEnv) == "1" && len(os.Args) > 1 {
		os.Exit(SuperviseMain(os.Args[len(os.Args)-1:]))
	}
}

// TestSupervisorCommand is the Options.Supervisor that runs supervisors
// from a test binary: the binary itself, whose TestMain must call
// MaybeRunSupervisor. The -test.run=^$ argument is a guard: a test binary
// that forgot MaybeRunSupervisor runs no test in the child, exits without a
// status file, and the task ends as lost instead of recursing.
func TestSupervisorCommand() []string {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	return []string{exe, "-test.run=^$"}
}

// SuperviseMain is the program of `troupe task-supervise TASKDIR`: it runs
// the task described by TASKDIR/spec.json to its end and records it in
// TASKDIR/status.json. It returns the process's exit status: 0 when the
// status file was written (whatever the job did), 1 when it could not be,
// 2 on bad usage, exitNoSpace when it could not be for want of disk space
// (the Manager then records the task as failed for that reason).
func SuperviseMain(args []string) int {
	if len(args) != 1 || args[0] == "" {
		fmt.Fprintf(os.Stderr, "usage: %s TASKDIR\n", supervisorName)
		return 2
	}
	dir := args[0]
	// Caught from the start, so a kill that arrives before the job starts
	// is not lost. SIGHUP is caught (and ignored below) rather than
	// ignored: an ignored signal would stay ignored in the job.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)

	var st status
	sp, err := readSpec(dir)
	if err == nil && !waitGate() {
		st = status{State: Failed, ExitCode: -1, Reason: neverRan, EndedAt: time.Now().UTC()}
	} else if err != nil {
		st = status{State: Failed, ExitCode: -1, Reason: err.Error(), EndedAt: time.Now().UTC()}
	} else {
		st = supervise(dir, sp, sigs)
	}
	if err := writeStatus(dir, st); err != nil {
		fmt.Fprintf(os.Stderr, "%s: record task end: %v\n", supervisorName, err)
		if errors.Is(err, syscall.ENOSPC) {
			return exitNoSpace
		}
		return 1
	}
	return 0
}

// exitNoSpace is the exit status of a supervisor that could not write
// status.json for want of disk space, even after freeing its reserve.
const exitNoSpace = 3

// oomReason is the reason of a job whose processes the OOM killer killed
// (n of them) at its owner's memory cap.
func oomReason(n uint64) string {
	return fmt.Sprintf("out of memory: the OOM killer killed %d of the agent's processes meanwhile, at its memory cap (sandbox.memory in .troupe/team.toml)", n)
}

// noSpaceReason is the reason of a task that failed for want of disk space.
func noSpaceReason(file string) string {
	return "no space left on device while writing " + file + ": free some disk space and run it again"
}

// writeStatus writes status.json. When the disk is full it frees the
// blocks the Manager reserved for it (status.reserve) and tries again, so
// that the end of a task that filled the disk is still recorded.
func writeStatus(dir string, st status) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	err = atomicfile.Write(filepath.Join(dir, statusFile), b, 0o600)
	if errors.Is(err, syscall.ENOSPC) {
		if rerr := os.Remove(filepath.Join(dir, reserveFile)); rerr == nil {
			err = atomicfile.Write(filepath.Join(dir, statusFile), b, 0o600)
		}
	}
	if err != nil {
		return err
	}
	os.Remove(filepath.Join(dir, reserveFile))
	return nil
}

// The start gate: the Manager gives the supervisor the read end of a pipe
// as fd 3 and writes gateGo to it once the task is recorded in its store.
// If the daemon dies first, the pipe closes without it and the job never
// runs: no job runs that the daemon could not tell its owner about.
const gateGo = "go\n"

// neverRan is the reason of a task whose daemon stopped before recording it.
const neverRan = "the daemon stopped before it had recorded the task: the command never ran"

// waitGate blocks until the Manager opens the gate (true) or the pipe
// closes without it (false).
func waitGate() bool {
	f := os.NewFile(3, "gate")
	if f == nil {
		return false
	}
	defer f.Close()
	b := make([]byte, len(gateGo))
	n, _ := io.ReadFull(f, b)
	return string(b[:n]) == gateGo
}

func readSpec(dir string) (spec, error) {
	var sp spec
	b, err := os.ReadFile(filepath.Join(dir, specFile))
	if err != nil {
		return sp, fmt.Errorf("read task spec: %w", err)
	}
	if err := json.Unmarshal(b, &sp); err != nil {
		return sp, fmt.Errorf("read task spec %s: %w", filepath.Join(dir, specFile), err)
	}
	if sp.Command == "" || sp.Cwd == "" {
		return sp, fmt.Errorf("read task spec %s: no command or no cwd", filepath.Join(dir, specFile))
	}
	if sp.KillGrace <= 0 {
		sp.KillGrace = defaultGrace
	}
	return sp, nil
}

// killedBeforeStart is the reason of a task killed before its job started.
const killedBeforeStart = "killed on request before it started"

// supervise runs the job and returns how it ended.
func supervise(dir string, sp spec, sigs <-chan os.Signal) status {
	if _, err := os.Stat(filepath.Join(dir, killFile)); err == nil {
		return status{State: Killed, ExitCode: -1, Reason: killedBeforeStart, EndedAt: time.Now().UTC()}
	}
	// Orphans of the job (setsid'd, double-forked) become our children.
	if err := becomeSubreaper(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v: processes that leave the job's group will not be stopped with it\n", supervisorName, err)
	}
	out, err := openCappedLog(dir, sp.MaxOutput)
	if err != nil {
		return failedToStart(fmt.Errorf("open output: %w", err))
	}
	defer out.Close()
	// The job writes into a pipe; copy() below keeps the output within
	// its cap and sees a full disk.
	pr, pw, err := os.Pipe()
	if err != nil {
		return failedToStart(fmt.Errorf("open output pipe: %w", err))
	}
	defer pr.Close()
	cmd := exec.Command(jobShell, "-c", sp.Command)
	if len(sp.Argv) > 0 {
		cmd = exec.Command(sp.Argv[0], sp.Argv[1:]...)
	}
	cmd.Dir = sp.Cwd
	cmd.Env = sp.Env
	if cmd.Env == nil {
		cmd.Env = []string{} // never this process's environment
	}
	// Stdin is /dev/null; stdout and stderr the pipe's write end, as it is.
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	started := time.Now().UTC()
	ooms := sp.Cgroup.OOMKills()
	err = sp.Cgroup.Start(cmd)
	pw.Close() // the job holds it now
	if err != nil {
		return status{State: Failed, ExitCode: -1, Reason: fmt.Sprintf("start %s -c: %v", jobShell, err), StartedAt: started, EndedAt: time.Now().UTC()}
	}
	pgid := cmd.Process.Pid
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// The copier ends when every holder of the pipe's write end (the job
	// and whatever it started) has closed it, or when pr is closed.
	copied := make(chan struct{})
	writeFailed := make(chan error, 1)
	go func() {
		defer close(copied)
		copyOutput(out, pr, writeFailed)
	}()

	var timeout, grace <-chan time.Time
	if sp.Timeout > 0 {
		t := time.NewTimer(sp.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	var state State // set when we end the job: Killed, TimedOut, or Failed (its output could not be written)
	var reason string
	stop := func(s State, why string) {
		if state != "" {
			return
		}
		state, reason = s, why
		if len(sp.Argv) > 0 {
			if err := pidfd.SignalGroupButLeader(pgid, syscall.SIGTERM); err != nil {
				fmt.Fprintf(os.Stderr, "%s: signal job group %d: %v\n", supervisorName, pgid, err)
			}
		} else {
			signalGroup(pgid, syscall.SIGTERM)
		}
		t := time.NewTimer(sp.KillGrace)
		grace = t.C
	}
	var werr error
wait:
	for {
		select {
		case werr = <-done:
			break wait
		case <-timeout:
			stop(TimedOut, fmt.Sprintf("ran past its timeout of %s", sp.Timeout))
		case err := <-writeFailed:
			why := fmt.Sprintf("%v: its output could not be kept", err)
			var we *writeError
			if errors.Is(err, syscall.ENOSPC) && errors.As(err, &we) {
				why = noSpaceReason(we.file)
			}
			stop(Failed, why)
		case s := <-sigs:
			if s == syscall.SIGHUP {
				continue
			}
			if state != "" { // asked again: no more grace
				signalGroup(pgid, syscall.SIGKILL)
				continue
			}
			stop(Killed, "killed on request")
		case <-grace:
			signalGroup(pgid, syscall.SIGKILL)
		}
	}
	ended := time.Now().UTC()
	// What the job left behind, in its group or out of it, goes with it.
	self, _ := procstat.Read(os.Getpid())
	left := stopLeftovers(self.Session, pgid, sp.KillGrace)
	// Every writer is gone: the copier drains the pipe and ends. A process
	// outside this tree that holds the pipe (handed over a socket) gets a
	// bounded wait, then its end is cut.
	select {
	case <-copied:
	case <-time.After(sp.KillGrace):
		pr.Close()
		<-copied
	}
	if state == "" {
		select {
		case err := <-writeFailed: // the last bytes did not fit
			if errors.Is(err, syscall.ENOSPC) {
				var we *writeError
				errors.As(err, &we)
				state, reason = Failed, noSpaceReason(we.file)
			}
		default:
		}
	}

	st := status{State: state, ExitCode: -1, Reason: reason, JobPID: pgid, StartedAt: started, EndedAt: ended, Stopped: left}
	var ws syscall.WaitStatus
	if cmd.ProcessState != nil {
		ws, _ = cmd.ProcessState.Sys().(syscall.WaitStatus)
	}
	switch {
	case cmd.ProcessState == nil:
		st.State, st.Reason = Failed, fmt.Sprintf("wait for the job: %v", werr)
	case ws.Signaled():
		st.Signal = unix.SignalName(ws.Signal())
		if st.Signal == "" {
			st.Signal = ws.Signal().String()
		}
		if st.State == "" {
			st.State, st.Reason = Failed, "killed by "+st.Signal
		}
	default:
		st.ExitCode = ws.ExitStatus()
		if st.State == "" {
			st.State = Exited
		}
	}
	if n := sp.Cgroup.OOMKills() - ooms; n > 0 && (st.State == Exited || st.State == Failed) {
		st.State, st.Reason = Failed, oomReason(n)
	}
	return st
}

// failedToStart is the status of a job that could not start because of
// err; a full disk is said as such.
func failedToStart(err error) status {
	why := err.Error()
	if errors.Is(err, syscall.ENOSPC) {
		why = noSpaceReason(outputFile)
	}
	return status{State: Failed, ExitCode: -1, Reason: why, EndedAt: time.Now().UTC()}
}

// copyOutput copies the job's output from r into out until r ends. The
// first write error is sent on failed (once); what follows is read and
// dropped, so the job never blocks on a full pipe.
func copyOutput(out *cappedLog, r io.Reader, failed chan<- error) {
	buf := make([]byte, 64<<10)
	var werr error
	for {
		n, err := r.Read(buf)
		if n > 0 && werr == nil {
			if _, werr = out.Write(buf[:n]); werr != nil {
				failed <- werr
			}
		}
		if err != nil {
			return
		}
	}
}

// signalGroup sends sig to process group pgid; a group already gone is fine.
func signalGroup(pgid int, sig syscall.Signal) {
	if err := syscall.Kill(-pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		fmt.Fprintf(os.Stderr, "%s: signal job group %d: %v\n", supervisorName, pgid, err)
	}
}
