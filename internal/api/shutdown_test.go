package api_test

import (
	"encoding/json"
	"net/http"
	"os"
	"testing"

	"github.com/troupe-dev/troupe/internal/api"
)

// postAs POSTs path with the token, or without it when bearer is "".
func (f *fixture) postAs(t *testing.T, path, bearer string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("POST", f.ts.URL+path, nil)
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestAPIShutdown: POST /api/shutdown asks the daemon to stop (troupe
// stop) with the token only, and answers with the pid that stops; a
// server that cannot stop says so.
func TestAPIShutdown(t *testing.T) {
	asked := 0
	f := newFixtureWith(t, api.Options{Shutdown: func() { asked++ }})
	if resp := f.postAs(t, "/api/shutdown", ""); resp.StatusCode != http.StatusUnauthorized || asked != 0 {
		t.Fatalf("without the token: %d, asked %d times", resp.StatusCode, asked)
	}
	resp := f.postAs(t, "/api/shutdown", token)
	defer resp.Body.Close()
	var r api.ShutdownResponse
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != http.StatusAccepted || r.PID != os.Getpid() || asked != 1 {
		t.Fatalf("shutdown: %d %+v %v, asked %d times", resp.StatusCode, r, err, asked)
	}
	if resp := newFixture(t).postAs(t, "/api/shutdown", token); resp.StatusCode != http.StatusNotImplemented {
		t.Fatalf("a server without Shutdown: %d, want 501", resp.StatusCode)
	}
}
