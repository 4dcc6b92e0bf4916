package runtime

import (
	"encoding/json"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// TestQuietToolIsActivity (C3): an engine's own tool call that runs silent
// for ten turn_timeouts, within its own limit, is work: the ask waits and
// is answered, the turn is not cut, and the agent says what it runs and
// since when.
func TestQuietToolIsActivity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, twoAgents(time.Minute), 0)
		r := key(p1, "researcher")
		start := time.Now()
		ask := askAsync(t.Context(), h, r, "running 10m limit 30m then built")
		time.Sleep(4 * time.Minute)
		synctest.Wait()
		if title, since := h.rt.Doing(r); title != "running: go test ./..." || since != start {
			t.Errorf("doing = %q since %v, want the command since %v", title, since, start)
		}
		if st, _ := h.rt.AgentState(r); st != troupe.StateBusy {
			t.Errorf("state = %s, want busy", st)
		}
		req := ask.wait(t)
		if req.State != troupe.ReqAnswered || req.Answer != "built" {
			t.Fatalf("ask = %+v, want answered after the quiet command", req)
		}
		if title, _ := h.rt.Doing(r); title != "" {
			t.Errorf("doing after the turn = %q, want nothing", title)
		}
	})
}

// TestToolPastItsLimitIsSilence: past its own limit (and the grace troupe
// gives the engine to report its end), a tool call counts as silence
// again: the turn is cut one turn_timeout later, with no reply.
func TestToolPastItsLimitIsSilence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, twoAgents(time.Minute), 0)
		r := key(p1, "researcher")
		start := time.Now()
		req := askAsync(t.Context(), h, r, "running 1h limit 5m then too late").wait(t)
		took := time.Since(start)
		if req.State != troupe.ReqNoReply {
			t.Fatalf("ask = %+v, want no reply", req)
		}
		if want := 5*time.Minute + toolGrace + time.Minute; took < want || took > want+time.Minute {
			t.Errorf("cut after %v, want about %v (its limit, the grace, one turn_timeout)", took, want)
		}
	})
}

// TestToolWithoutALimitUsesToolTimeout: a call whose engine states no
// limit counts as activity for the agent's tool_timeout.
func TestToolWithoutALimitUsesToolTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lead, res := spec("lead", time.Minute), spec("researcher", time.Minute)
		res.ToolTimeout = 3 * time.Minute
		h := newHarness(t, staticTeams{p1: {lead, res}}, 0)
		r := key(p1, "researcher")
		start := time.Now()
		req := askAsync(t.Context(), h, r, "running 1h limit 0s then too late").wait(t)
		took := time.Since(start)
		if req.State != troupe.ReqNoReply || took < 4*time.Minute || took > 5*time.Minute {
			t.Fatalf("ask = %+v after %v, want no reply after tool_timeout 3m and one turn_timeout", req, took)
		}
		ok := askAsync(t.Context(), h, r, "running 2m limit 0s then done").wait(t)
		if ok.State != troupe.ReqAnswered {
			t.Fatalf("a 2 min call under tool_timeout 3m: %+v, want answered", ok)
		}
	})
}

func TestToolTitle(t *testing.T) {
	long := strings.Repeat("é", 200)
	for _, c := range []struct{ name, input, want string }{
		{"Bash", `{"command":"go test   ./...\n"}`, "running: go test ./..."},
		{"exec", `{"command":["cargo","build"]}`, "running: cargo build"},
		{"Read", `{"file_path":"/w/main.go"}`, "Read /w/main.go"},
		{"read_file", `{"path":"a.txt"}`, "read_file a.txt"},
		{"WebFetch", `{"url":"x"}`, "WebFetch"},
		{"Bash", `not json`, "Bash"},
	} {
		if got := toolTitle(c.name, json.RawMessage(c.input)); got != c.want {
			t.Errorf("toolTitle(%s, %s) = %q, want %q", c.name, c.input, got, c.want)
		}
	}
	got := toolTitle("Bash", json.RawMessage(`{"command":"`+long+`"}`))
	if len(got) > maxTitle+len("…") || !strings.HasSuffix(got, "…") || !strings.HasPrefix(got, "running: é") {
		t.Errorf("a long command's title = %q (%d bytes)", got, len(got))
	}
}
