package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/client"
	"github.com/troupe-dev/troupe/internal/memory"
)

// do sends a request with the token and decodes a 2xx answer into out.
func (f *fixture) do(t *testing.T, method, path, body string, out any) int {
	t.Helper()
	req, _ := http.NewRequest(method, f.ts.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode < 300 && out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
	return resp.StatusCode
}

// TestAPIMemoryNotes: the person lists, writes, reads and searches a
// project's memory notes; bad input is 400 naming the field, a missing note
// 404, and a file that is not a note is listed as a problem.
func TestAPIMemoryNotes(t *testing.T) {
	f := newFixtureWith(t, api.Options{Memory: memory.New(memory.Options{})})
	dir := teamDir(t)
	p, err := client.New(f.ts.URL, token).AddProject(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	base := "/api/projects/" + string(p.ID) + "/memory"
	var list api.MemoryList
	if code := f.do(t, "GET", base, "", &list); code != 200 || len(list.Notes) != 0 {
		t.Fatalf("empty list: %d %+v", code, list)
	}
	var n api.MemoryNote
	if code := f.do(t, "PUT", base+"/deploy-steps", `{"description":"how we deploy","body":"run make deploy with the blue flag\n"}`, &n); code != 200 {
		t.Fatalf("write: %d", code)
	}
	if n.Name != "deploy-steps" || n.Type != memory.DefaultType || n.Body == nil || *n.Body != "run make deploy with the blue flag\n" {
		t.Errorf("written note = %+v", n)
	}
	if b, err := os.ReadFile(filepath.Join(dir, ".troupe", "memory", "deploy-steps.md")); err != nil || !strings.Contains(string(b), "blue flag") {
		t.Errorf("note file: %q, %v", b, err)
	}
	os.WriteFile(filepath.Join(dir, ".troupe", "memory", "broken.md"), []byte("no front matter"), 0o644)
	if code := f.do(t, "GET", base, "", &list); code != 200 || len(list.Notes) != 1 || list.Notes[0].Body != nil || len(list.Problems) != 1 {
		t.Errorf("list: %d %+v", code, list)
	}
	n = api.MemoryNote{}
	if code := f.do(t, "GET", base+"/deploy-steps", "", &n); code != 200 || n.Body == nil || !strings.Contains(*n.Body, "blue flag") {
		t.Errorf("read: %d %+v", code, n)
	}
	list = api.MemoryList{}
	if code := f.do(t, "GET", base+"?q=blue", "", &list); code != 200 || len(list.Notes) != 1 || list.Notes[0].Name != "deploy-steps" {
		t.Errorf("search: %d %+v", code, list)
	}
	for _, c := range []struct {
		method, path, body string
		want               int
	}{
		{"GET", base + "/nothing-here", "", 404},
		{"PUT", base + "/x", `{"description":"line one\nline two","body":""}`, 400},
		{"PUT", base + "/---", `{"description":"d","body":""}`, 400},
		{"PUT", base + "/x", `{"description":"d","body":"b","extra":1}`, 400},
		{"GET", base + "?q=blue&limit=999", "", 400},
		{"GET", "/api/projects/nope/memory", "", 404},
	} {
		if code := f.do(t, c.method, c.path, c.body, nil); code != c.want {
			t.Errorf("%s %s %s: %d, want %d", c.method, c.path, c.body, code, c.want)
		}
	}
}
