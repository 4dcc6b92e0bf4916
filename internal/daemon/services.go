package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/troupe-dev/troupe/internal/memory"
	"github.com/troupe-dev/troupe/internal/project"
	"github.com/troupe-dev/troupe/internal/runtime"
	"github.com/troupe-dev/troupe/internal/task"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// services answers the agents' task and memory tools (runtime.Services):
// each call acts as the caller's RuntimeKey and reaches its own project's
// folder, tasks and notes only (C1, C2).
type services struct {
	reg   *project.Registry
	tasks *task.Manager
	notes *memory.Store
}

var _ runtime.Services = (*services)(nil)

func (s *services) Call(ctx context.Context, k troupe.RuntimeKey, tool string, args json.RawMessage) (string, error) {
	info, ok := s.reg.Get(k.Project)
	if !ok {
		return "", fmt.Errorf("your project is no longer registered")
	}
	switch tool {
	case "run_in_background":
		var in struct {
			Command        string  `json:"command"`
			Cwd            string  `json:"cwd"`
			TimeoutSeconds float64 `json:"timeout_seconds"`
		}
		if err := runtime.DecodeArgs(args, &in, "command"); err != nil {
			return "", err
		}
		t, err := s.tasks.Start(ctx, k, info.Path, in.Command, in.Cwd, time.Duration(in.TimeoutSeconds*float64(time.Second)))
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("started task %s; when it ends, a message with its exit code and last lines of output arrives in your inbox and wakes you", t.ID), nil
	case "task_status":
		var in struct {
			TaskID string `json:"task_id"`
		}
		if err := runtime.DecodeArgs(args, &in); err != nil {
			return "", err
		}
		if in.TaskID == "" {
			ts, err := s.tasks.Tasks(ctx, k.Project)
			if err != nil {
				return "", err
			}
			return toJSON(ts), nil
		}
		t, err := s.tasks.Task(ctx, k.Project, task.ID(in.TaskID))
		if err != nil {
			return "", err
		}
		return toJSON(t), nil
	case "task_output":
		var in struct {
			TaskID   string `json:"task_id"`
			MaxBytes int    `json:"max_bytes"`
		}
		if err := runtime.DecodeArgs(args, &in, "task_id"); err != nil {
			return "", err
		}
		if in.MaxBytes <= 0 {
			in.MaxBytes = 8000
		}
		return s.tasks.Output(ctx, k.Project, task.ID(in.TaskID), in.MaxBytes)
	case "task_kill":
		var in struct {
			TaskID string `json:"task_id"`
		}
		if err := runtime.DecodeArgs(args, &in, "task_id"); err != nil {
			return "", err
		}
		if err := s.tasks.Kill(ctx, k.Project, task.ID(in.TaskID)); err != nil {
			return "", err
		}
		return fmt.Sprintf("task %s is being stopped; its completion message will say it was killed", in.TaskID), nil
	case "memory_search":
		var in struct {
			Query string `json:"query"`
			Limit int    `json:"limit"`
		}
		if err := runtime.DecodeArgs(args, &in, "query"); err != nil {
			return "", err
		}
		hits, err := s.notes.Search(ctx, info.Project, in.Query, in.Limit)
		if err != nil {
			return "", err
		}
		if len(hits) == 0 {
			return "no note matches; memory_write records one", nil
		}
		var b strings.Builder
		for _, h := range hits {
			fmt.Fprintf(&b, "- %s: %s\n  %s\n", h.Note.Name, h.Note.Description, h.Snippet)
		}
		return b.String(), nil
	case "memory_read":
		var in struct {
			Name string `json:"name"`
		}
		if err := runtime.DecodeArgs(args, &in, "name"); err != nil {
			return "", err
		}
		n, err := s.notes.Read(ctx, info.Path, in.Name)
		if err != nil {
			return "", err
		}
		return string(memory.Format(n)), nil
	case "memory_write":
		var in struct {
			Name, Description, Type, Body string
		}
		if err := runtime.DecodeArgs(args, &in, "name", "description", "body"); err != nil {
			return "", err
		}
		n, err := s.notes.Write(ctx, info.Path, memory.Note{Name: in.Name, Description: in.Description, Type: in.Type, Body: in.Body})
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("saved note %s", n.Name), nil
	}
	return "", fmt.Errorf("tool %q is not served here", tool)
}

// briefing is what every session of project p starts with besides its
// prompt: the index of the project's memory notes.
func (s *services) briefing(ctx context.Context, dir string) string {
	notes, _ := s.notes.List(ctx, dir) // bad notes are left out; List says which
	return memory.IndexText(notes)
}

func toJSON(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return string(b)
}
