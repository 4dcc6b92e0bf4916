package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// runWithRunner is run with runnerAdminCmds attached under a `runner`
// command, as the runner's own command attaches them.
func runWithRunner(args []string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	root, g := newRoot(&out, &errb, false, false)
	parent := &cobra.Command{Use: "runner"}
	parent.AddCommand(runnerAdminCmds(g)...)
	root.AddCommand(parent)
	root.SetArgs(args)
	if err := root.ExecuteContext(context.Background()); err != nil {
		return 1, out.String(), err.Error()
	}
	return 0, out.String(), errb.String()
}

// TestRunnerAddWritesCredsOnce: troupe runner add writes the credentials
// the daemon minted to a file of mode 0600 and says how to start the
// runner; an existing file is never overwritten, and the daemon is not
// asked then (credentials minted but not kept would be lost); a refusal
// of the daemon leaves no file. troupe runner revoke asks the daemon.
func TestRunnerAddWritesCredsOnce(t *testing.T) {
	var mu sync.Mutex
	var calls []string
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/runners", func(w http.ResponseWriter, r *http.Request) {
		var req api.AddRunnerRequest
		json.NewDecoder(r.Body).Decode(&req)
		mu.Lock()
		calls = append(calls, "add "+req.Name)
		mu.Unlock()
		if req.Name == "taken" {
			w.WriteHeader(http.StatusConflict)
			json.NewEncoder(w).Encode(api.Error{Error: "runner taken has credentials already", Code: "already_exists"})
			return
		}
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(api.RunnerCreds{Name: req.Name, Creds: "CREDS OF " + req.Name + "\n", Note: "shown once"})
	})
	mux.HandleFunc("DELETE /api/runners/{name}", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls = append(calls, "revoke "+r.PathValue("name"))
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	dir := serveFake(t, mux)
	file := filepath.Join(t.TempDir(), "gpu.creds")

	code, out, errs := runWithRunner([]string{"--state-dir", dir, "runner", "add", "gpu-box", "-o", file})
	if code != 0 {
		t.Fatalf("add: exit %d: %s", code, errs)
	}
	b, err := os.ReadFile(file)
	if err != nil || string(b) != "CREDS OF gpu-box\n" {
		t.Fatalf("creds file = %q, %v", b, err)
	}
	if fi, _ := os.Stat(file); fi.Mode().Perm() != 0o600 {
		t.Errorf("creds file mode %v, want 0600", fi.Mode().Perm())
	}
	if !strings.Contains(out, "troupe runner --creds "+file+"\n") {
		t.Errorf("add said %q; want how to start the runner", out)
	}

	code, _, errs = runWithRunner([]string{"--state-dir", dir, "runner", "add", "other", "-o", file})
	if code == 0 || !strings.Contains(errs, "never overwrites") {
		t.Errorf("add over an existing file: exit %d, %q; want a refusal", code, errs)
	}
	if b, _ := os.ReadFile(file); string(b) != "CREDS OF gpu-box\n" {
		t.Errorf("the existing file became %q", b)
	}

	taken := filepath.Join(t.TempDir(), "taken.creds")
	code, _, errs = runWithRunner([]string{"--state-dir", dir, "runner", "add", "taken", "-o", taken})
	if _, err := os.Stat(taken); code == 0 || !strings.Contains(errs, "has credentials already") || err == nil {
		t.Errorf("add of a taken name: exit %d, %q, file left: %v; want the daemon's refusal and no file", code, errs, err == nil)
	}
	if code, _, errs := runWithRunner([]string{"--state-dir", dir, "runner", "add", "Bad_Name"}); code == 0 || !strings.Contains(errs, "bad runner name") {
		t.Errorf("add of a bad name: exit %d, %q", code, errs)
	}

	code, out, errs = runWithRunner([]string{"--state-dir", dir, "runner", "revoke", "gpu-box"})
	if code != 0 || !strings.Contains(out, "revoked") {
		t.Fatalf("revoke: exit %d, %q %q", code, out, errs)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := "add gpu-box,add taken,revoke gpu-box"; strings.Join(calls, ",") != want {
		t.Errorf("the daemon was asked %q, want %q", calls, want)
	}
}

// TestRunnersListing: troupe runners shows each runner's labels, since
// when it is connected (or when it was last seen), its agents by project
// name and its load; --json is the API's list.
func TestRunnersListing(t *testing.T) {
	since := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	rs := []api.RunnerInfo{
		{Name: "gpu-box", Labels: []string{"gpu", "big"}, Connected: true, ConnectedSince: since, LastSeen: since.Add(time.Hour),
			Agents: []api.RunnerAgent{{Project: "p1", Agent: "coder", State: troupe.StateBusy}, {Project: "p9", Agent: "x", State: troupe.StateIdle}},
			Load:   api.RunnerLoad{Agents: 2, MaxAgents: 4}},
		{Name: "arm", Labels: []string{}, LastSeen: since.Add(-time.Hour), Agents: []api.RunnerAgent{}},
		{Name: "new", Labels: []string{}, Agents: []api.RunnerAgent{}},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/runners", func(w http.ResponseWriter, _ *http.Request) { json.NewEncoder(w).Encode(rs) })
	mux.HandleFunc("GET /api/projects", func(w http.ResponseWriter, _ *http.Request) {
		json.NewEncoder(w).Encode([]api.Project{{ID: "p1", Name: "app"}})
	})
	dir := serveFake(t, mux)
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"--state-dir", dir, "runners"}, &out, &errb, false, false); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	at := func(t time.Time) string { return t.Local().Format("2006-01-02 15:04:05") }
	lines := strings.Split(out.String(), "\n")
	for i, want := range [][]string{
		{"NAME", "LABELS", "CONNECTED", "AGENTS", "LOAD"},
		{"gpu-box", "gpu,big", "since " + at(since), "app/coder (busy), p9/x (idle)", "2/4"},
		{"arm", "-", "no, last seen " + at(since.Add(-time.Hour)), "-", "0"},
		{"new", "-", "no, never connected", "-", "0"},
	} {
		for _, w := range want {
			if i >= len(lines) || !strings.Contains(lines[i], w) {
				t.Errorf("line %d lacks %q:\n%s", i, w, out.String())
			}
		}
	}
	out.Reset()
	if code := run(context.Background(), []string{"--state-dir", dir, "runners", "--json"}, &out, &errb, false, false); code != 0 {
		t.Fatalf("--json: exit %d: %s", code, errb.String())
	}
	var wrapped struct{ Runners []api.RunnerInfo }
	err := json.Unmarshal(out.Bytes(), &wrapped)
	back := wrapped.Runners
	if err != nil || len(back) != 3 || back[0].Load.MaxAgents != 4 {
		t.Errorf("--json = %s, %v", out.String(), err)
	}
}

// TestAgentsShowWhereTheyRun: troupe agents has a RUNNER column when an
// agent of the team runs on a runner (local, the runner, or the labels it
// waits for one with), and none for a team all on this machine.
func TestAgentsShowWhereTheyRun(t *testing.T) {
	agents := []api.Agent{{Project: "p1", Name: "lead", Engine: "fake", State: troupe.StateIdle}}
	var mu sync.Mutex
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/projects/resolve", func(w http.ResponseWriter, _ *http.Request) {
		json.NewEncoder(w).Encode(api.Project{ID: "p1", Path: "/work/app", Name: "app", Team: "ok"})
	})
	mux.HandleFunc("GET /api/projects/p1/agents", func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		json.NewEncoder(w).Encode(agents)
	})
	dir := serveFake(t, mux)
	list := func() string {
		var out, errb bytes.Buffer
		if code := run(context.Background(), []string{"--state-dir", dir, "--project", "p1", "agents"}, &out, &errb, false, false); code != 0 {
			t.Fatalf("exit %d: %s", code, errb.String())
		}
		return out.String()
	}
	if out := list(); strings.Contains(out, "RUNNER") {
		t.Errorf("a team on this machine alone has a RUNNER column:\n%s", out)
	}
	mu.Lock()
	agents = append(agents, api.Agent{Project: "p1", Name: "coder", Engine: "fake", State: troupe.StateBusy, Runner: "gpu-box"},
		api.Agent{Project: "p1", Name: "trainer", Engine: "fake", State: troupe.StateStopped, RunnerLabels: []string{"gpu", "big"}})
	mu.Unlock()
	out := list()
	lines := strings.Split(out, "\n")
	// RUNNER is the column before the last, WHY (empty here: "-").
	for i, want := range []string{"RUNNER", "local", "gpu-box", "none yet (labels gpu,big)"} {
		last := "-"
		if i == 0 {
			last = "WHY"
		}
		if i >= len(lines) || !strings.HasSuffix(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(lines[i]), last)), want) {
			t.Errorf("line %d does not end with %q then %s:\n%s", i, want, last, out)
		}
	}
}
