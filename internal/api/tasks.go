package api

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/troupe-dev/troupe/internal/task"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// Tasks is what the API needs of the background task manager.
type Tasks interface {
	Start(ctx context.Context, owner troupe.RuntimeKey, projectDir string, j task.Job) (task.Task, error)
	Task(ctx context.Context, p troupe.ProjectID, id task.ID) (task.Task, error)
	Tasks(ctx context.Context, p troupe.ProjectID) ([]task.Task, error)
	Kill(ctx context.Context, p troupe.ProjectID, id task.ID) error
	Output(ctx context.Context, p troupe.ProjectID, id task.ID, maxBytes int) (string, error)
}

// RunTaskRequest is the body of POST /api/projects/{id}/tasks.
type RunTaskRequest struct {
	Command        string  `json:"command"`
	Cwd            string  `json:"cwd,omitempty"`
	TimeoutSeconds float64 `json:"timeout_seconds,omitempty"`
	// MaxOutputBytes caps the output kept (its first half and its last
	// half); 0: the daemon's default (--task-max-output, 64 MB).
	MaxOutputBytes int64 `json:"max_output_bytes,omitempty"`
	// Owner is the agent the completion goes to (it wakes); empty: the person.
	Owner troupe.AgentID `json:"owner,omitempty"`
}

// Task is a background task as the API shows it: task.Task without the
// daemon's bookkeeping, which only ?debug=1 adds.
type Task struct {
	ID      task.ID          `json:"id"`
	Project troupe.ProjectID `json:"project"`
	Owner   troupe.AgentID   `json:"owner"` // an agent of Project, or "@person"
	Command string           `json:"command"`
	Cwd     string           `json:"cwd"`
	Timeout Duration         `json:"timeout"` // "0s": none
	// Runner is the runner the task runs on (its owner's); absent: the
	// daemon's machine. Cwd is then relative to the owner's worktree there.
	Runner   string     `json:"runner,omitempty"`
	State    task.State `json:"state"`
	ExitCode int        `json:"exit_code"`        // -1 when the job did not exit by itself
	Signal   string     `json:"signal,omitempty"` // e.g. "SIGTERM", when a signal ended the job
	Reason   string     `json:"reason,omitempty"` // why it failed, was killed or was lost
	// EndedAt is zero while the task runs.
	StartedAt time.Time `json:"started_at"`
	EndedAt   time.Time `json:"ended_at,omitzero"`
	// Stopped is what the supervisor stopped of the task when its job
	// ended (leftover processes, those that escaped with setsid or a
	// double fork included); absent when nothing was left.
	Stopped *task.Stopped `json:"stopped,omitempty"`
	// Output is how much output the task wrote and kept (the cut, past
	// its cap); absent before it starts and once its folder is pruned.
	Output *task.OutputSize `json:"output,omitempty"`
	// Debug is set only when asked with ?debug=1.
	Debug *TaskDebug `json:"debug,omitempty"`
}

// TaskDebug is how the daemon tracks a task, for debugging and tests.
type TaskDebug struct {
	// The supervisor process's pid and start time (clock ticks since boot).
	SupervisorPID   int    `json:"supervisor_pid"`
	SupervisorStart uint64 `json:"supervisor_start"`
	// Notified: the completion message was recorded for the owner.
	Notified bool `json:"notified"`
}

func toTask(t task.Task, debug bool) Task {
	out := Task{ID: t.ID, Project: t.Project, Owner: t.Owner, Command: t.Command, Cwd: t.Cwd,
		Timeout: Duration(t.Timeout), Runner: t.Runner, State: t.State, ExitCode: t.ExitCode, Signal: t.Signal, Reason: t.Reason,
		StartedAt: t.StartedAt, EndedAt: t.EndedAt, Stopped: t.Stopped, Output: t.Output}
	if debug {
		out.Debug = &TaskDebug{SupervisorPID: t.SupervisorPID, SupervisorStart: t.SupervisorStart, Notified: t.Notified}
	}
	return out
}

// wantDebug reads ?debug=; it answers a bad value itself.
func wantDebug(w http.ResponseWriter, r *http.Request) (debug, ok bool) {
	q := r.URL.Query().Get("debug")
	if q == "" {
		return false, true
	}
	debug, err := strconv.ParseBool(q)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid", "debug: give 1 to include the supervisor's pid, or leave it out")
		return false, false
	}
	return debug, true
}

// TaskOutput is the answer of GET .../tasks/{task}/output.
type TaskOutput struct {
	Output string `json:"output"`
}

func (s *Server) routeTasks() {
	s.mux.HandleFunc("GET /api/projects/{id}/tasks", s.listTasks)
	s.mux.HandleFunc("POST /api/projects/{id}/tasks", s.runTask)
	s.mux.HandleFunc("GET /api/projects/{id}/tasks/{task}", s.showTask)
	s.mux.HandleFunc("GET /api/projects/{id}/tasks/{task}/output", s.taskOutput)
	s.mux.HandleFunc("POST /api/projects/{id}/tasks/{task}/kill", s.killTask)
}

// taskProject resolves {id} for the task endpoints and reads ?debug=; it
// answers errors itself.
func (s *Server) taskProject(w http.ResponseWriter, r *http.Request) (p troupe.ProjectID, dir string, debug, ok bool) {
	debug, ok = wantDebug(w, r)
	if !ok {
		return "", "", false, false
	}
	id := troupe.ProjectID(r.PathValue("id"))
	info, ok := s.o.Registry.Get(id)
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", "project "+string(id)+" is not registered: see `troupe project list`")
		return "", "", false, false
	}
	if s.o.Tasks == nil {
		writeError(w, http.StatusServiceUnavailable, "internal", "this daemon runs no background tasks")
		return "", "", false, false
	}
	return id, info.Path, debug, true
}

func (s *Server) listTasks(w http.ResponseWriter, r *http.Request) {
	p, _, debug, ok := s.taskProject(w, r)
	if !ok {
		return
	}
	ts, err := s.o.Tasks.Tasks(r.Context(), p)
	if err != nil {
		s.fail(w, err)
		return
	}
	out := make([]Task, 0, len(ts))
	for _, t := range ts {
		out = append(out, toTask(t, debug))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) runTask(w http.ResponseWriter, r *http.Request) {
	var in RunTaskRequest
	if !decode(w, r, &in) || !checkPath(w, "cwd", in.Cwd, false) {
		return
	}
	p, dir, debug, ok := s.taskProject(w, r)
	if !ok {
		return
	}
	owner := troupe.RuntimeKey{Project: p, Agent: troupe.Person}
	if in.Owner != "" {
		if _, _, ok := s.o.Registry.Agent(troupe.RuntimeKey{Project: p, Agent: in.Owner}); !ok {
			writeError(w, http.StatusBadRequest, "invalid", "owner: "+troupe.NoAgent(in.Owner, s.teamNames(p)).Error())
			return
		}
		owner.Agent = in.Owner
	}
	if in.TimeoutSeconds < 0 {
		writeError(w, http.StatusBadRequest, "invalid", "timeout_seconds: must be 0 (no limit) or more")
		return
	}
	if in.MaxOutputBytes < 0 {
		writeError(w, http.StatusBadRequest, "invalid", "max_output_bytes: must be 0 (the default) or more")
		return
	}
	t, err := s.o.Tasks.Start(r.Context(), owner, dir, task.Job{Command: in.Command, Cwd: in.Cwd,
		Timeout: seconds(in.TimeoutSeconds), MaxOutput: in.MaxOutputBytes})
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, toTask(t, debug))
}

func (s *Server) showTask(w http.ResponseWriter, r *http.Request) {
	p, _, debug, ok := s.taskProject(w, r)
	if !ok {
		return
	}
	t, err := s.o.Tasks.Task(r.Context(), p, task.ID(r.PathValue("task")))
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toTask(t, debug))
}

func (s *Server) taskOutput(w http.ResponseWriter, r *http.Request) {
	p, _, _, ok := s.taskProject(w, r)
	if !ok {
		return
	}
	max := 64 << 10
	if q := r.URL.Query().Get("max_bytes"); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n <= 0 {
			writeError(w, http.StatusBadRequest, "invalid", "max_bytes: give a positive number of bytes")
			return
		}
		max = n
	}
	out, err := s.o.Tasks.Output(r.Context(), p, task.ID(r.PathValue("task")), max)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, TaskOutput{Output: out})
}

func (s *Server) killTask(w http.ResponseWriter, r *http.Request) {
	p, _, _, ok := s.taskProject(w, r)
	if !ok {
		return
	}
	if err := s.o.Tasks.Kill(r.Context(), p, task.ID(r.PathValue("task"))); err != nil {
		s.fail(w, err)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}
