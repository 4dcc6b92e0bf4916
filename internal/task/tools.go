package task

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/troupe-dev/troupe/internal/tool"
)

// Tools are the background-task tools agents call (run_in_background,
// task_status, task_output, task_kill), served by m. Each acts as its
// caller and reaches its own project's tasks only (C1, C2).
func Tools(m *Manager) []tool.Tool {
	return []tool.Tool{
		{Spec: tool.Spec{Name: "run_in_background", Description: "Run a shell command in the background. You get a task id at once; when the command ends, a message with its exit code and last lines of output arrives in your inbox and wakes you.",
			Schema: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string","description":"a shell command, run with /bin/sh -c"},"cwd":{"type":"string","description":"working directory inside the project (default: the project's folder, or your worktree when you have one)"},"timeout_seconds":{"type":"number","minimum":0,"description":"kill the command after this many seconds (0 or absent: no limit)"},"max_output_bytes":{"type":"integer","minimum":0,"description":"output kept: its first half and its last half, the middle cut (0 or absent: the daemon's default, 64 MB)"}},"required":["command"],"additionalProperties":false}`)},
			Handle: m.runTool},
		{Spec: tool.Spec{Name: "task_status", Description: "Show a background task's state (running, exited, killed, timed_out, ...) and exit code; without task_id, list the project's tasks.",
			Schema: json.RawMessage(`{"type":"object","properties":{"task_id":{"type":"string"}},"additionalProperties":false}`)},
			Handle: m.statusTool},
		{Spec: tool.Spec{Name: "task_output", Description: "Read the end of a background task's output. An output past its cap keeps its first half and its last half; the answer then starts with a line stating the cut.",
			Schema: json.RawMessage(`{"type":"object","properties":{"task_id":{"type":"string"},"max_bytes":{"type":"integer","minimum":1,"description":"how much of the end to read (default 8000)"}},"required":["task_id"],"additionalProperties":false}`)},
			Handle: m.outputTool},
		{Spec: tool.Spec{Name: "task_kill", Description: "Stop a running background task (SIGTERM, then SIGKILL). Its completion message says it was killed.",
			Schema: json.RawMessage(`{"type":"object","properties":{"task_id":{"type":"string"}},"required":["task_id"],"additionalProperties":false}`)},
			Handle: m.killTool},
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
		Timeout: time.Duration(in.TimeoutSeconds * float64(time.Second)), MaxOutput: in.MaxOutputBytes})
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
		return tool.JSON(ts), nil
	}
	t, err := m.Task(ctx, c.Key.Project, ID(in.TaskID))
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
	out, size, err := m.output(ctx, c.Key.Project, ID(in.TaskID), in.MaxBytes)
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
	if err := m.Kill(ctx, c.Key.Project, ID(in.TaskID)); err != nil {
		return "", err
	}
	return fmt.Sprintf("task %s is being stopped; its completion message will say it was killed", in.TaskID), nil
}
