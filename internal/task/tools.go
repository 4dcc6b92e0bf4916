package task

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/troupe-dev/troupe/internal/permission"
	"github.com/troupe-dev/troupe/internal/tool"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// Tools are the background-task tools agents call (run_in_background,
// task_status, task_output, task_kill), served by m. Each acts as its
// caller and reaches the caller's own tasks only (C1, C2, C15): the
// person's and other agents' tasks are not read, waited on or killed by an
// agent. run_in_background is a command: the permission gate decides it
// before it runs.
func Tools(m *Manager) []tool.Tool {
	return []tool.Tool{
		{Spec: tool.Spec{Name: "run_in_background", Description: "Run a shell command in the background. You get a task id at once; when the command ends, a message with its exit code and last lines of output arrives in your inbox and wakes you.",
			Schema: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string","description":"a shell command, run with /bin/sh -c"},"cwd":{"type":"string","description":"working directory inside the project (default: the project's folder, or your worktree when you have one)"},"timeout_seconds":{"type":"number","minimum":0,"description":"kill the command after this many seconds (0 or absent: no limit)"},"max_output_bytes":{"type":"integer","minimum":0,"description":"output kept: its first half and its last half, the middle cut (0 or absent: the daemon's default, 64 MB)"}},"required":["command"],"additionalProperties":false}`)},
			Handle: m.runTool, Class: permission.Command, Title: tool.ArgTitle("wants to run:", "command")},
		{Spec: tool.Spec{Name: "task_status", Description: "Show a background task's state (running, exited, killed, timed_out, ...) and exit code; without task_id, list the project's tasks.",
			Schema: json.RawMessage(`{"type":"object","properties":{"task_id":{"type":"string"}},"additionalProperties":false}`)},
			Handle: m.statusTool, Class: permission.Talk},
		{Spec: tool.Spec{Name: "task_output", Description: "Read the end of a background task's output. An output past its cap keeps its first half and its last half; the answer then starts with a line stating the cut.",
			Schema: json.RawMessage(`{"type":"object","properties":{"task_id":{"type":"string"},"max_bytes":{"type":"integer","minimum":1,"description":"how much of the end to read (default 8000)"}},"required":["task_id"],"additionalProperties":false}`)},
			Handle: m.outputTool, Class: permission.Talk},
		{Spec: tool.Spec{Name: "task_kill", Description: "Stop a running background task (SIGTERM, then SIGKILL). Its completion message says it was killed.",
			Schema: json.RawMessage(`{"type":"object","properties":{"task_id":{"type":"string"}},"required":["task_id"],"additionalProperties":false}`)},
			Handle: m.killTool, Class: permission.Talk},
	}
}

func (m *Manager) runTool(ctx context.Context, c tool.Caller, args json.RawMessage) (string, error) {
	var in struct {
		Command        string  `json:"command"`
		Cwd            string  `json:"cwd"`
		TimeoutSeconds float64 `json:"timeout_seconds"`
		MaxOutputBytes int64   `json:"max_output_bytes"`
	}
	if err := tool.DecodeArgs(args, &in, "command"); err != nil {
		return "", err
	}
	dir := c.Dir
	if c.Workdir != "" {
		dir = c.Workdir // the agent's worktree: its tasks run there
	}
	t, err := m.Start(ctx, c.Key, dir, Job{Command: in.Command, Cwd: in.Cwd,
		Timeout: time.Duration(in.TimeoutSeconds * float64(time.Second)), MaxOutput: in.MaxOutputBytes, Sandbox: c.Sandbox,
		Remote: c.Runner != ""}) // on the caller's runner, in its worktree and sandbox there
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("started task %s; when it ends, a message with its exit code and last lines of output arrives in your inbox and wakes you", t.ID), nil
}

func (m *Manager) statusTool(ctx context.Context, c tool.Caller, args json.RawMessage) (string, error) {
	var in struct {
		TaskID string `json:"task_id"`
	}
	if err := tool.DecodeArgs(args, &in); err != nil {
		return "", err
	}
	if in.TaskID == "" {
		ts, err := m.Tasks(ctx, c.Key.Project)
		if err != nil {
			return "", err
		}
		return tool.JSON(slices.DeleteFunc(ts, func(t Task) bool { return t.Owner != c.Key.Agent })), nil
	}
	t, err := m.own(ctx, c, ID(in.TaskID))
	if err != nil {
		return "", err
	}
	return tool.JSON(t), nil
}

func (m *Manager) outputTool(ctx context.Context, c tool.Caller, args json.RawMessage) (string, error) {
	var in struct {
		TaskID   string `json:"task_id"`
		MaxBytes int    `json:"max_bytes"`
	}
	if err := tool.DecodeArgs(args, &in, "task_id"); err != nil {
		return "", err
	}
	if in.MaxBytes <= 0 {
		in.MaxBytes = 8000
	}
	if _, err := m.own(ctx, c, ID(in.TaskID)); err != nil {
		return "", err
	}
	out, size, err := m.ReadOutput(ctx, c.Key.Project, ID(in.TaskID), in.MaxBytes)
	if err != nil {
		return "", err
	}
	if s := size.Statement(); s != "" {
		out = "[" + s + "]\n" + out
	}
	return out, nil
}

func (m *Manager) killTool(ctx context.Context, c tool.Caller, args json.RawMessage) (string, error) {
	var in struct {
		TaskID string `json:"task_id"`
	}
	if err := tool.DecodeArgs(args, &in, "task_id"); err != nil {
		return "", err
	}
	if _, err := m.own(ctx, c, ID(in.TaskID)); err != nil {
		return "", err
	}
	if err := m.Kill(ctx, c.Key.Project, ID(in.TaskID)); err != nil {
		return "", err
	}
	return fmt.Sprintf("task %s is being stopped; its completion message will say it was killed", in.TaskID), nil
}

// own is the caller's task id: another's (the person's, a teammate's) is
// answered as not found, so an agent learns nothing of it.
func (m *Manager) own(ctx context.Context, c tool.Caller, id ID) (Task, error) {
	t, err := m.Task(ctx, c.Key.Project, id)
	if err != nil {
		return Task{}, err
	}
	if t.Owner != c.Key.Agent {
		return Task{}, fmt.Errorf("task %s not found among your tasks (an agent reaches only the tasks it started): %w", id, troupe.ErrNotFound)
	}
	return t, nil
}
