package layout

import (
	"encoding/json"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const mod = "github.com/troupe-dev/troupe/"

type pkg struct {
	ImportPath string
	Name       string
	Doc        string
	Imports    []string
	Deps       []string
	Standard   bool
}

func load(t *testing.T) []pkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", mod+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	var ps []pkg
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	if len(ps) < 5 {
		t.Fatalf("go list found only %d packages", len(ps))
	}
	return ps
}

// only: an outside library (prefix) and the packages allowed to import it directly.
var only = map[string][]string{
	"modernc.org/sqlite":                     {"internal/store/sqlite"},
	"github.com/modelcontextprotocol/go-sdk": {"internal/mcp"},
	"github.com/creack/pty":                  {"internal/term"},
	"github.com/charmbracelet/x/vt":          {"internal/term"},
	"github.com/charmbracelet/ultraviolet":   {"internal/term"},
	"github.com/coder/websocket":             {"internal/api", "internal/client"},
	"github.com/spf13/cobra":                 {"internal/cli"},
	"github.com/BurntSushi/toml":             {"internal/project"},
	"github.com/fsnotify/fsnotify":           {"internal/project", "internal/claudesessions"},
	"github.com/nats-io/nats-server":         {"internal/bus"},
	"github.com/nats-io/nats.go":             {"internal/bus", "internal/remote"},
	"github.com/nats-io/jwt":                 {"internal/bus"},
	"github.com/nats-io/nkeys":               {"internal/bus"},
	mod + "internal/daemon":                  {"internal/cli"},
	mod + "internal/store/sqlite":            {"internal/daemon"},
	mod + "internal/web":                     {"internal/daemon"},
}

// never: a package and what it must not depend on, even indirectly.
var never = map[string][]string{
	"internal/client": {mod + "internal/daemon", mod + "internal/store/sqlite", "modernc.org/sqlite"},
	"internal/api":    {mod + "internal/daemon", mod + "internal/store/sqlite", "modernc.org/sqlite"},
	"internal/events": {mod + "internal/project", mod + "internal/api"},
	"internal/troupe": {}, // checked separately: standard library only
	// Engines see the vocabulary, the tool catalogue and their own seam only.
	"internal/engine":          {mod + "internal/project", mod + "internal/runtime"},
	"internal/engine/fake":     {mod + "internal/project", mod + "internal/runtime"},
	"internal/engine/claude":   {mod + "internal/project", mod + "internal/runtime"},
	"internal/engine/terminal": {mod + "internal/project", mod + "internal/runtime"},
	// The terminal layer knows processes, not agents.
	"internal/term":         {mod + "internal/project", mod + "internal/runtime", mod + "internal/api"},
	"internal/engine/codex": {mod + "internal/project", mod + "internal/runtime"},
	"internal/engine/acp":   {mod + "internal/project", mod + "internal/runtime"},
	// The openai engine keeps its conversations through its own Store
	// interface: the SQLite store is the daemon's to give it.
	"internal/engine/openai": {mod + "internal/project", mod + "internal/runtime", mod + "internal/store/sqlite"},
	// The runtime drives engines through their seam and reads teams
	// through its own interface: no project registry, store or transport.
	"internal/runtime": {mod + "internal/project", mod + "internal/store/sqlite", mod + "internal/mcp", mod + "internal/api"},
	// The project-file reader serves the registry, the runtime and the
	// memory store: it depends on none of them.
	"internal/projfile": {mod + "internal/project", mod + "internal/runtime", mod + "internal/memory"},
	// Doctor checks the machine from the CLI process: no daemon, runtime or store.
	"internal/doctor": {mod + "internal/runtime", mod + "internal/store/sqlite", mod + "internal/daemon"},
	// The journal's vocabulary is shared by the runtime, the store and the API.
	"internal/journal": {mod + "internal/runtime", mod + "internal/store/sqlite", mod + "internal/engine", mod + "internal/api"},
	// The MCP endpoint serves whatever catalogue it is given.
	"internal/mcp":  {mod + "internal/runtime", mod + "internal/project"},
	"internal/tool": {mod + "internal/runtime", mod + "internal/engine", mod + "internal/project"},
	// Shared by every engine: they know processes and the Session seam,
	// never the runtime above it or the projects.
	"internal/proc":              {mod + "internal/runtime", mod + "internal/project"},
	"internal/engine/enginetest": {mod + "internal/runtime", mod + "internal/project"},
	// The fake model server is a test fixture for every engine: it knows HTTP only.
	"internal/fakemodel": {mod + "internal/runtime", mod + "internal/engine", mod + "internal/project"},
	// The store implements the interfaces of inbox, task, project and
	// memory; the runtime is their user, not its dependency.
	"internal/store/sqlite": {mod + "internal/runtime"},
	// Process handles are below every owner of child processes.
	"internal/pidfd": {mod + "internal"},
	// The one reader of /proc/<pid>/stat is below everything that checks a
	// process by its pid.
	"internal/procstat": {mod + "internal"},
	// The one atomic write is below everything that writes a file.
	"internal/atomicfile": {mod + "internal"},
	// The one UTF-8-safe clip is below every package that bounds a text.
	"internal/clip": {mod + "internal"},
	// The one JSON-RPC transport knows framing and ids, no engine.
	"internal/jsonrpc": {mod + "internal"},
	// The sandbox is below every owner of an agent's processes: it knows
	// paths and the vocabulary, no runtime, project registry or engine.
	"internal/sandbox": {mod + "internal/runtime", mod + "internal/project", mod + "internal/engine", mod + "internal/task", mod + "internal/daemon"},
	// The Claude sessions of the machine are read by the daemon and served
	// by the API: they know no runtime, store, project registry or API.
	"internal/claudesessions": {mod + "internal/runtime", mod + "internal/store/sqlite", mod + "internal/project", mod + "internal/api"},
	// Claude Code's file formats are below both of their readers (the
	// engine's terminal driver, the sessions index): they know no troupe
	// package at all.
	"internal/claudefmt": {mod + "internal"},
	// The inbox is below everything that delivers or fills it.
	"internal/inbox": {mod + "internal/runtime", mod + "internal/engine", mod + "internal/project", mod + "internal/task"},
}

func TestImportRules(t *testing.T) {
	for _, p := range load(t) {
		rel := strings.TrimPrefix(p.ImportPath, mod)
		for _, imp := range p.Imports {
			for lib, allowed := range only {
				if (imp == lib || strings.HasPrefix(imp, lib+"/")) && !slices.Contains(allowed, rel) {
					t.Errorf("%s imports %s; only %v may (see ARCHITECTURE.md)", rel, imp, allowed)
				}
			}
		}
		for _, d := range p.Deps {
			for _, bad := range never[rel] {
				if d == bad || strings.HasPrefix(d, bad+"/") {
					t.Errorf("%s depends on %s, which ARCHITECTURE.md forbids", rel, d)
				}
			}
		}
		if rel == "internal/troupe" {
			for _, imp := range p.Imports {
				if strings.Contains(strings.SplitN(imp, "/", 2)[0], ".") {
					t.Errorf("internal/troupe imports %s: the vocabulary package uses the standard library only", imp)
				}
			}
		}
	}
}

func TestEveryPackageHasADocAndAGoodName(t *testing.T) {
	for _, p := range load(t) {
		if p.Doc == "" {
			t.Errorf("%s has no package doc: say its job, its concurrency model, who may import it", p.ImportPath)
		}
		switch p.Name {
		case "util", "utils", "common", "helpers", "misc":
			t.Errorf("%s is a grab-bag package: name it after what it provides", p.ImportPath)
		}
	}
}
