package api_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/claudesessions"
)

const ccID = "11111111-2222-4333-8444-555555555555"

// claudeFixture is a daemon API over a Claude config folder holding one
// dead session whose folder exists.
func claudeFixture(t *testing.T) (*fixture, string) {
	t.Helper()
	dir, cwd := t.TempDir(), t.TempDir()
	p := filepath.Join(dir, "projects", "-x", ccID+".jsonl")
	os.MkdirAll(filepath.Dir(p), 0o700)
	line := fmt.Sprintf(`{"type":"user","message":{"role":"user","content":"fix it"},"timestamp":"2026-11-29T10:00:00Z","sessionId":%q,"cwd":%q}`+"\n", ccID, cwd)
	if err := os.WriteFile(p, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	m := claudesessions.NewMachine(claudesessions.MachineOptions{Dir: dir})
	return newFixtureWith(t, api.Options{Claude: m}), cwd
}

func (f *fixture) del(t *testing.T, path string) answer {
	t.Helper()
	req, _ := http.NewRequest("DELETE", f.ts.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, string(b)}
}

// The routes' answers and refusals: the listing, one session, a claim
// held once (a second is refused naming the holder and both ways out),
// its release, and the parameters checked.
func TestClaudeSessionRoutes(t *testing.T) {
	f, cwd := claudeFixture(t)
	auth := map[string]string{"Authorization": "Bearer " + token}
	a := f.get(t, "/api/claude-sessions?search=FIX", auth)
	var l api.ClaudeSessionList
	if a.StatusCode != 200 || json.Unmarshal([]byte(a.Body), &l) != nil || l.Total != 1 || l.Sessions[0].Cwd != cwd || !l.Sessions[0].CwdExists || l.Sessions[0].Title != "fix it" {
		t.Fatalf("list: %d %s", a.StatusCode, a.Body)
	}
	if a := f.get(t, "/api/claude-sessions?search=nothing", auth); !strings.Contains(a.Body, `"total":0`) {
		t.Errorf("search without a match: %s", a.Body)
	}
	for path, want := range map[string]int{
		"/api/claude-sessions/" + ccID:                              200,
		"/api/claude-sessions/not-an-id":                            400,
		"/api/claude-sessions/22222222-2222-4333-8444-555555555555": 404,
		"/api/claude-sessions?limit=-1":                             400,
		"/api/claude-sessions/" + ccID + "/transcript?offset=-1":    400,
		"/api/claude-sessions/" + ccID + "/transcript?wait=soon":    400,
	} {
		if a := f.get(t, path, auth); a.StatusCode != want {
			t.Errorf("GET %s = %d %s, want %d", path, a.StatusCode, a.Body, want)
		}
	}
	tr := f.get(t, "/api/claude-sessions/"+ccID+"/transcript?offset=0", auth)
	if !strings.Contains(tr.Body, `"text":"fix it"`) {
		t.Errorf("transcript: %s", tr.Body)
	}
	if a := f.post(t, "/api/claude-sessions/"+ccID+"/claim", `{"pid":0}`); a.StatusCode != 400 {
		t.Errorf("claim without a pid: %d", a.StatusCode)
	}
	// A pid no process has is the caller's mistake (400), not the daemon's.
	if a := f.post(t, "/api/claude-sessions/"+ccID+"/claim", `{"pid":2147483646}`); a.StatusCode != 400 {
		t.Errorf("claim for a pid nobody has: %d", a.StatusCode)
	}
	a = f.post(t, "/api/claude-sessions/"+ccID+"/claim", fmt.Sprintf(`{"pid":%d}`, os.Getpid()))
	var c api.ClaimResponse
	if a.StatusCode != 200 || json.Unmarshal([]byte(a.Body), &c) != nil || c.Claim == "" || c.Session.Cwd != cwd {
		t.Fatalf("claim: %d %s", a.StatusCode, a.Body)
	}
	a = f.post(t, "/api/claude-sessions/"+ccID+"/claim", fmt.Sprintf(`{"pid":%d}`, os.Getpid()))
	if msg := errorOf(t, a); a.StatusCode != 409 || !strings.Contains(msg, "held by") || !strings.Contains(msg, "troupe fork") || !strings.Contains(msg, "troupe observe") {
		t.Errorf("second claim: %d %s", a.StatusCode, msg)
	}
	if a := f.get(t, "/api/claude-sessions/"+ccID, auth); !strings.Contains(a.Body, `"held_by"`) {
		t.Errorf("held session: %s", a.Body)
	}
	if a := f.del(t, "/api/claude-sessions/"+ccID+"/claim/"+c.Claim); a.StatusCode != 204 {
		t.Errorf("release: %d %s", a.StatusCode, a.Body)
	}
	if a := f.del(t, "/api/claude-sessions/"+ccID+"/claim/"+c.Claim); a.StatusCode != 404 {
		t.Errorf("second release: %d", a.StatusCode)
	}
	if a := f.post(t, "/api/claude-sessions/"+ccID+"/hand-off", `{"project":"nope","agent":"a"}`); a.StatusCode != 503 && a.StatusCode != 404 {
		t.Errorf("hand-off without a runtime or project: %d %s", a.StatusCode, a.Body)
	}
}

// A daemon without the index says so.
func TestClaudeSessionRoutesWithoutIndex(t *testing.T) {
	f := newFixtureWith(t, api.Options{})
	if a := f.get(t, "/api/claude-sessions", map[string]string{"Authorization": "Bearer " + token}); a.StatusCode != 503 {
		t.Errorf("no index: %d", a.StatusCode)
	}
}
