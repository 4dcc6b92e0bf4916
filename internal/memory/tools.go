package memory

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/troupe-dev/troupe/internal/permission"
	"github.com/troupe-dev/troupe/internal/tool"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// Tools are the memory-note tools agents call (memory_search, memory_read,
// memory_write), served by s. Each reaches the caller's own project's notes
// only (C1, C2).
func Tools(s *Store) []tool.Tool {
	return []tool.Tool{
		{Spec: tool.Spec{Name: "memory_search", Description: "Search the project's memory notes (.troupe/memory) by words; returns names, descriptions and snippets.",
			Schema: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"},"limit":{"type":"integer","minimum":1,"maximum":50}},"required":["query"],"additionalProperties":false}`)},
			Handle: s.searchTool, Class: permission.Read},
		{Spec: tool.Spec{Name: "memory_read", Description: "Read one memory note by name.",
			Schema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"],"additionalProperties":false}`)},
			Handle: s.readTool, Class: permission.Read},
		{Spec: tool.Spec{Name: "memory_write", Description: "Create or replace a memory note: a markdown body with a name, a one-line description and a type (for example project, decision, howto). To replace a note, give its exact name.",
			Schema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","description":"lower-case words with dashes"},"description":{"type":"string"},"type":{"type":"string"},"body":{"type":"string"}},"required":["name","description","body"],"additionalProperties":false}`)},
			Handle: s.writeTool, Class: permission.Edit, Title: tool.ArgTitle("wants to write the memory note", "name")},
	}
}

func (s *Store) searchTool(ctx context.Context, c tool.Caller, args json.RawMessage) (string, error) {
	var in struct {
		Query string `json:"query"`
		Limit int    `json:"limit"`
	}
	if err := tool.DecodeArgs(args, &in, "query"); err != nil {
		return "", err
	}
	hits, err := s.Search(ctx, troupe.Project{ID: c.Key.Project, Path: c.Dir}, in.Query, in.Limit)
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
}

func (s *Store) readTool(ctx context.Context, c tool.Caller, args json.RawMessage) (string, error) {
	var in struct {
		Name string `json:"name"`
	}
	if err := tool.DecodeArgs(args, &in, "name"); err != nil {
		return "", err
	}
	n, err := s.Read(ctx, c.Dir, in.Name)
	if err != nil {
		return "", err
	}
	return string(Format(n)), nil
}

func (s *Store) writeTool(ctx context.Context, c tool.Caller, args json.RawMessage) (string, error) {
	var in struct {
		Name, Description, Type, Body string
	}
	if err := tool.DecodeArgs(args, &in, "name", "description", "body"); err != nil {
		return "", err
	}
	n, err := s.Write(ctx, c.Dir, Note{Name: in.Name, Description: in.Description, Type: in.Type, Body: in.Body})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("saved note %s", n.Name), nil
}

// Briefing is what every session of project p starts with besides its
// prompt: the index of the project's memory notes (IndexText), at most
// MaxBriefing bytes (see briefing). It comes from what the last sync saw,
// so it reads only the notes that changed since, and is made again only
// when some did; bad notes are left out (List says which).
func (s *Store) Briefing(ctx context.Context, p troupe.Project) string {
	ps, err := s.sync(ctx, p)
	if err != nil {
		s.log.Warn("memory notes for the briefing: reading them all", "project", p.ID, "err", err)
		notes, _ := s.List(ctx, p.Path)
		return briefing(notes)
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.brief == nil {
		notes := make([]Note, 0, len(ps.files))
		for file, f := range ps.files {
			if f.indexed {
				notes = append(notes, Note{Name: strings.TrimSuffix(file, ".md"), Description: f.desc, ModTime: time.Unix(0, f.stamp.mtime)})
			}
		}
		text := briefing(notes)
		ps.brief = &text
	}
	return *ps.brief
}
