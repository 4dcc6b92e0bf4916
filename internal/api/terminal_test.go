package api_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/client"
	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/term"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// termRuntime serves one real terminal (a shell REPL) as agent "a"'s.
type termRuntime struct {
	fakeRuntime
	t *term.Terminal
}

func (r *termRuntime) Terminal(_ context.Context, k troupe.RuntimeKey) (engine.Terminal, error) {
	if k.Agent != "a" {
		return nil, fmt.Errorf("%s is not in terminal mode: %w", k.Agent, troupe.ErrConflict)
	}
	return termAdapter{r.t}, nil
}

type termAdapter struct{ t *term.Terminal }

func (a termAdapter) Attach() (engine.TerminalViewer, error) { return a.t.Attach() }
func (a termAdapter) Size() (int, int)                       { return a.t.Size() }
func (a termAdapter) InUse() bool                            { return a.t.Viewers() > 0 }

// TestAPITerminalWebSocket attaches through the API: the screen first, then
// the live output; keys reach the program; a resize reaches it as its
// window size; no token, no attach.
func TestAPITerminalWebSocket(t *testing.T) {
	script := `printf 'ready> '; while IFS= read -r l; do case "$l" in size) stty size;; *) echo "got $l";; esac; printf 'ready> '; done`
	tm, err := term.Start(term.Options{Argv: []string{"/bin/sh", "-c", script}, Env: []string{"PATH=" + os.Getenv("PATH")}, Cols: 80, Rows: 24, StopTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer tm.Close(context.Background())
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := tm.WaitFor(ctx, func(s term.Screen) bool { return strings.Contains(s.Text(), "ready>") }); err != nil {
		t.Fatal(err)
	}
	rt := &termRuntime{t: tm}
	f := newFixtureWith(t, api.Options{Runtime: rt})
	cl := client.New(f.ts.URL, token)
	p, err := cl.AddProject(ctx, teamDir(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.New(f.ts.URL, "wrong").AttachTerminal(ctx, p.ID, "a"); err == nil || !strings.Contains(err.Error(), "401") && !strings.Contains(err.Error(), "token") {
		t.Errorf("attach with a wrong token: %v", err)
	}
	a, err := cl.AttachTerminal(ctx, p.ID, "a")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.Cols != 80 || a.Rows != 24 {
		t.Errorf("size %d×%d, want 80×24", a.Cols, a.Rows)
	}
	e := term.NewEmulator(80, 24, nil)
	defer e.Close()
	read := func(want string) {
		t.Helper()
		for !term.Contains(e.Text(), want) {
			b, err := a.Read(ctx)
			if err != nil {
				t.Fatalf("waiting for %q: %v; screen:\n%s", want, err, e.Text())
			}
			e.Write(b)
		}
	}
	read("ready>") // the snapshot
	if err := a.Type(ctx, []byte("hello\r")); err != nil {
		t.Fatal(err)
	}
	read("got hello")
	if err := a.Resize(ctx, 100, 30); err != nil {
		t.Fatal(err)
	}
	if err := a.Type(ctx, []byte("size\r")); err != nil {
		t.Fatal(err)
	}
	read("30 100")
	if tm.PersonTypedAt().IsZero() {
		t.Error("the person's keys were not noted")
	}
	_, err = cl.AttachTerminal(ctx, p.ID, "b")
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != http.StatusConflict {
		t.Errorf("attach to a structured agent: %v", err)
	}
}
