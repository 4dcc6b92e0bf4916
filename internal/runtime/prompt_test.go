package runtime

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// folderTeams is one project in a real folder.
type folderTeams struct {
	dir   string
	specs []troupe.AgentSpec
}

func (f folderTeams) Agent(k troupe.RuntimeKey) (troupe.AgentSpec, string, bool) {
	for _, a := range f.specs {
		if a.Name == k.Agent {
			return a, f.dir, true
		}
	}
	return troupe.AgentSpec{}, "", false
}

func (f folderTeams) Agents(troupe.ProjectID) []troupe.AgentSpec { return f.specs }

// TestPromptFileReadAtStartIsUntrusted: the prompt file is read again when
// the agent starts, with the project-file reader: a FIFO or a huge file put
// there after the team loaded fails the start with a clear error, at once.
func TestPromptFileReadAtStartIsUntrusted(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "prompts"), 0o755)
	file := filepath.Join(dir, "prompts", "lead.md")
	os.WriteFile(file, []byte("You lead."), 0o644)
	lead := spec("lead", time.Minute)
	lead.PromptFile = "prompts/lead.md"
	teams := folderTeams{dir: dir, specs: []troupe.AgentSpec{lead}}
	a := &actor{rt: New(Options{Teams: teams}), key: key("p1", "lead")}

	instr := func() (string, error) {
		type res struct {
			s   string
			err error
		}
		done := make(chan res, 1)
		go func() { s, err := a.instructions(context.Background(), lead, dir); done <- res{s, err} }()
		select {
		case r := <-done:
			return r.s, r.err
		case <-time.After(10 * time.Second):
			t.Fatal("instructions did not return within 10s: reading the prompt file blocks")
			return "", nil
		}
	}
	if s, err := instr(); err != nil || !strings.HasPrefix(s, "You lead.") {
		t.Fatalf("instructions = %q, %v", s, err)
	}
	os.Remove(file)
	if err := syscall.Mkfifo(file, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := instr(); err == nil || !strings.Contains(err.Error(), "prompts/lead.md: the prompt file is a named pipe (FIFO)") {
		t.Fatalf("FIFO prompt: err = %v", err)
	}
	os.Remove(file)
	os.WriteFile(file, make([]byte, 300<<10), 0o644)
	if _, err := instr(); err == nil || !strings.Contains(err.Error(), "over the 256 KB limit") {
		t.Fatalf("huge prompt: err = %v", err)
	}
}
