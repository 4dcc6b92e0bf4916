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
)

// The files of a task directory, <Options.Dir>/<task id>/. This is the
// whole protocol between the Manager and a supervisor.
//
//   - spec.json: what to run (spec), written by the Manager before it
//     starts the supervisor; read once by the supervisor.
//   - supervisor.log: the supervisor's own stdout and stderr (diagnostics;
//     normally empty).
//   - output.log: the job's stdout and stderr, appended as written.
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
	statusFile     = "status.json"
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
	ID        ID            `json:"id"`
	Command   string        `json:"command"`
	Cwd       string        `json:"cwd"`
	Env       []string      `json:"env"`        // the job's whole environment
	Timeout   time.Duration `json:"timeout"`    // 0: none
	KillGrace time.Duration `json:"kill_grace"` // SIGTERM → SIGKILL
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
// 2 on bad usage.
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
	b, err := json.Marshal(st)
	if err == nil {
		err = writeFileAtomic(dir, statusFile, b)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: record task end: %v\n", supervisorName, err)
		return 1
	}
	return 0
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
	out, err := os.OpenFile(filepath.Join(dir, outputFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return status{State: Failed, ExitCode: -1, Reason: fmt.Sprintf("open output: %v", err), EndedAt: time.Now().UTC()}
	}
	defer out.Close()
	cmd := exec.Command(jobShell, "-c", sp.Command)
	cmd.Dir = sp.Cwd
	cmd.Env = sp.Env
	if cmd.Env == nil {
		cmd.Env = []string{} // never this process's environment
	}
	// *os.File outputs go to the job as they are: no copying goroutine, no
	// buffer in between. Stdin is /dev/null.
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	started := time.Now().UTC()
	if err := cmd.Start(); err != nil {
		return status{State: Failed, ExitCode: -1, Reason: fmt.Sprintf("start %s -c: %v", jobShell, err), StartedAt: started, EndedAt: time.Now().UTC()}
	}
	pgid := cmd.Process.Pid
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	var timeout, grace <-chan time.Time
	if sp.Timeout > 0 {
		t := time.NewTimer(sp.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	var state State // set when we end the job: Killed or TimedOut
	var reason string
	stop := func(s State, why string) {
		if state != "" {
			return
		}
		state, reason = s, why
		signalGroup(pgid, syscall.SIGTERM)
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
	// What the shell left behind in its group goes with it.
	signalGroup(pgid, syscall.SIGKILL)

	st := status{State: state, ExitCode: -1, Reason: reason, JobPID: pgid, StartedAt: started, EndedAt: ended}
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
	return st
}

// signalGroup sends sig to process group pgid; a group already gone is fine.
func signalGroup(pgid int, sig syscall.Signal) {
	if err := syscall.Kill(-pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		fmt.Fprintf(os.Stderr, "%s: signal job group %d: %v\n", supervisorName, pgid, err)
	}
}

// writeFileAtomic writes dir/name so that a reader sees either no file or
// the whole of b, also after a crash: temporary file, fsync, rename, fsync
// of the directory.
func writeFileAtomic(dir, name string, b []byte) (err error) {
	f, err := os.CreateTemp(dir, "."+name+".tmp*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(b); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(f.Name(), filepath.Join(dir, name)); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
