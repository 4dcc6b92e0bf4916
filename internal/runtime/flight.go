package runtime

// The engine's own tool calls in flight (a Bash command, a build): while
// one runs, up to its limit, the agent is working though silent (C3).

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// maxFlights bounds the tool calls an actor follows at once; past it a
// call is not followed (it then counts as silence, as before troupe knew
// of it) and the cut is logged.
const maxFlights = 64

// toolGrace is added to a call's own limit: the engine stops the call at
// its limit and reports the result a moment later.
const toolGrace = 15 * time.Second

// flight is one tool call of the engine's in flight.
type flight struct {
	title string    // what it does ("go test ./...")
	since time.Time // when the engine reported the call
	until time.Time // past this, it no longer counts as activity
}

// toolStarted follows the engine's tool call use; its limit is its own
// (use.Limit, plus toolGrace) or else the agent's tool_timeout.
func (a *actor) toolStarted(use *engine.ToolUse, now time.Time) {
	limit := cmp.Or(a.spec.ToolTimeout, troupe.DefaultToolTimeout)
	if use.Limit > 0 {
		limit = use.Limit + toolGrace
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.flights == nil {
		a.flights = make(map[string]flight)
	}
	if _, ok := a.flights[use.ID]; !ok && len(a.flights) >= maxFlights {
		a.log.Warn("tool call not followed: too many in flight", "tool", use.Name, "in_flight", len(a.flights))
		return
	}
	a.flights[use.ID] = flight{title: toolTitle(use.Name, use.Input), since: now, until: now.Add(limit)}
}

// toolEnded stops following tool call id. The end is itself activity,
// recorded under the same lock: a watchdog reading the actor between the
// two would otherwise see neither the call nor its end, and cut a turn
// whose command had just finished.
func (a *actor) toolEnded(id string, now time.Time) {
	a.mu.Lock()
	delete(a.flights, id)
	if now.After(a.actAt) {
		a.actAt = now
	}
	a.mu.Unlock()
}

// clearFlights forgets every call: the turn or the session ended. Called
// with mu held.
func (a *actor) clearFlights() { clear(a.flights) }

// flightActivity is the latest instant the calls in flight make the agent
// active at now: now while one runs within its limit, else the end of the
// last limit passed (silence counts from there). Zero without calls.
// Called with mu held.
func (a *actor) flightActivity(now time.Time) time.Time {
	var at time.Time
	for _, f := range a.flights {
		if now.Before(f.until) {
			return now
		}
		if f.until.After(at) {
			at = f.until
		}
	}
	return at
}

// doing is the oldest call in flight: what it does, since when.
func (a *actor) doing() (title string, since time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, f := range a.flights {
		if since.IsZero() || f.since.Before(since) {
			title, since = f.title, f.since
		}
	}
	return title, since
}

// maxTitle bounds a tool call's title, in bytes.
const maxTitle = 160

// toolTitle says what a tool call does: its command when it has one (Bash,
// run_command, a Codex command), else its name and the path it works on,
// else its name.
func toolTitle(name string, input json.RawMessage) string {
	var in struct {
		Command  json.RawMessage `json:"command"`
		Path     string          `json:"path"`
		FilePath string          `json:"file_path"`
	}
	json.Unmarshal(input, &in)
	title := name
	var cmd string
	var argv []string
	switch {
	case json.Unmarshal(in.Command, &cmd) == nil && cmd != "":
		title = "running: " + cmd
	case json.Unmarshal(in.Command, &argv) == nil && len(argv) > 0:
		title = "running: " + strings.Join(argv, " ")
	case in.FilePath != "":
		title = fmt.Sprintf("%s %s", name, in.FilePath)
	case in.Path != "":
		title = fmt.Sprintf("%s %s", name, in.Path)
	}
	title = strings.Join(strings.Fields(title), " ")
	if len(title) > maxTitle {
		cut := maxTitle
		for cut > 0 && !utf8.RuneStart(title[cut]) {
			cut--
		}
		title = title[:cut] + "…"
	}
	return title
}
