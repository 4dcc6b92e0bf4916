package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/troupe"
	"github.com/troupe-dev/troupe/internal/web"
)

// runnersAPI stands in for the daemon's API as the web UI reads the
// runners and where each agent runs, with the runners' list set by the
// test; it serves the built UI as the daemon does (web.Handler).
type runnersAPI struct {
	// mu guards the fields below.
	mu   sync.Mutex
	list []api.RunnerInfo
	off  bool // GET /api/runners answers as a daemon without --runners
}

func (m *runnersAPI) handler() http.Handler {
	mux := http.NewServeMux()
	js := func(w http.ResponseWriter, code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(v)
	}
	empty := func(w http.ResponseWriter, _ *http.Request) { js(w, 200, []any{}) }
	mux.HandleFunc("GET /api/status", func(w http.ResponseWriter, _ *http.Request) {
		js(w, 200, api.Status{Version: "test", Projects: 1, Agents: 3})
	})
	mux.HandleFunc("GET /api/projects", func(w http.ResponseWriter, _ *http.Request) {
		js(w, 200, []api.Project{{ID: cpProject, Path: "/nowhere", Name: "app", Agents: 3, Team: "ok"}})
	})
	mux.HandleFunc("GET /api/projects/p1/agents", func(w http.ResponseWriter, _ *http.Request) {
		js(w, 200, []api.Agent{
			{Project: cpProject, Name: "lead", Engine: "fake", Mode: troupe.ModeStructured, State: troupe.StateIdle, Sandboxed: true},
			{Project: cpProject, Name: "coder", Engine: "fake", Mode: troupe.ModeStructured, State: troupe.StateBusy, Sandboxed: true, Runner: "gpu-box"},
			{Project: cpProject, Name: "trainer", Engine: "fake", Mode: troupe.ModeStructured, State: troupe.StateStopped, Sandboxed: true, RunnerLabels: []string{"arm"}},
		})
	})
	mux.HandleFunc("GET /api/projects/p1/messages", func(w http.ResponseWriter, _ *http.Request) {
		js(w, 200, api.Messages{Messages: []troupe.Message{}})
	})
	mux.HandleFunc("GET /api/projects/p1/tasks", empty)
	mux.HandleFunc("GET /api/permissions", empty)
	mux.HandleFunc("GET /api/team-changes", empty)
	mux.HandleFunc("GET /api/runners", func(w http.ResponseWriter, _ *http.Request) {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.off {
			js(w, 503, api.Error{Error: "this daemon runs no runners: start it with `troupe serve --runners ADDR`", Code: "internal"})
			return
		}
		js(w, 200, m.list)
	})
	mux.HandleFunc("GET /api/events", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	mux.HandleFunc("GET /favicon.svg", api.ServeFavicon)
	mux.Handle("/", web.Handler())
	return mux
}

// TestBrowserRunners drives the Runners view in headless Chromium: each
// runner with its labels, since when it is connected or when it was last
// seen, its agents (by project name, with their state, linked to them)
// and its load; the list read again while shown; a daemon without
// runners says how to start one with them. The team list and the agent
// view say where an agent runs: on its runner, or waiting for one with
// its labels; nothing for a local agent.
func TestBrowserRunners(t *testing.T) {
	since := time.Now().UTC().Add(-2 * time.Hour).Truncate(time.Second)
	m := &runnersAPI{list: []api.RunnerInfo{
		{Name: "gpu-box", Labels: []string{"gpu", "big"}, Connected: true, ConnectedSince: since, LastSeen: since,
			Agents: []api.RunnerAgent{{Project: cpProject, Agent: "coder", State: troupe.StateBusy}}, Load: api.RunnerLoad{Agents: 1, MaxAgents: 4}},
		{Name: "arm-box", Labels: []string{}, LastSeen: since, Agents: []api.RunnerAgent{}},
	}}
	srv := httptest.NewServer(m.handler())
	t.Cleanup(srv.Close)
	p := newPage(t, srv.URL+"/#/p/"+cpProject+"/runners")

	row := func(name string) string { return `document.querySelector('#runners tr[data-runner="` + name + `"]')` }
	p.wait("gpu-box listed", row("gpu-box"), 20*time.Second)
	gpu := eval[string](p, row("gpu-box")+".innerText")
	for _, want := range []string{"gpu, big", "since", "2h ago", "app/coder", "busy", "1/4"} {
		if !strings.Contains(gpu, want) {
			t.Errorf("gpu-box row %q lacks %q", gpu, want)
		}
	}
	if href := eval[string](p, row("gpu-box")+`.querySelector("a").getAttribute("href")`); href != "#/p/"+cpProject+"/agent/coder" {
		t.Errorf("the agent links to %q", href)
	}
	if arm := eval[string](p, row("arm-box")+".innerText"); !strings.Contains(arm, "no, last seen") || !strings.Contains(arm, "2h ago") {
		t.Errorf("arm-box row %q; want when it was last seen", arm)
	}

	// The team list says where each agent runs.
	where := func(agent string) string {
		return eval[string](p, `(e => e ? e.innerText : "")(document.querySelector('#agents tr[data-agent="`+agent+`"] .runs-on'))`)
	}
	if s := where("coder"); s != "on gpu-box" {
		t.Errorf("coder in the team list: %q, want on gpu-box", s)
	}
	if s := where("trainer"); !strings.Contains(s, "no runner yet") || !strings.Contains(s, "arm") {
		t.Errorf("trainer in the team list: %q, want waiting for a runner with its labels", s)
	}
	if s := where("lead"); s != "" {
		t.Errorf("a local agent says %q", s)
	}

	// Read again while shown: a runner connects.
	m.mu.Lock()
	m.list[1].Connected, m.list[1].ConnectedSince = true, time.Now().UTC()
	m.mu.Unlock()
	p.wait("arm-box connected", row("arm-box")+`.dataset.connected === "true"`, 20*time.Second)

	// The agent view says where it runs.
	p.click("open coder", `#runners tr[data-runner="gpu-box"] a`)
	p.wait("coder's view says its runner", `document.querySelector('#agent .runs-on').innerText === "on gpu-box"`, 20*time.Second)

	// A daemon without runners says how to have them.
	p.expectConsole("status of 503 (Service Unavailable)") // its answer
	m.mu.Lock()
	m.off = true
	m.mu.Unlock()
	p.click("open runners", "#tab-runners")
	p.wait("the daemon's answer", `[...document.querySelectorAll('#runners-view .err')].some(e => e.innerText.includes("troupe serve --runners ADDR"))`, 20*time.Second)
}
