package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// TestInboxFetchesOnlyWhatItPrints: troupe inbox asks the daemon for the
// newest page it prints (limit, before, agent passed through), prints it
// oldest first, and names the command for the older ones on stderr.
func TestInboxFetchesOnlyWhatItPrints(t *testing.T) {
	var mu sync.Mutex
	var queries []url.Values
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/projects/resolve", func(w http.ResponseWriter, _ *http.Request) {
		json.NewEncoder(w).Encode(api.Project{ID: "p1", Path: "/work/app", Name: "app", Team: "ok"})
	})
	mux.HandleFunc("GET /api/projects/p1/messages", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		queries = append(queries, r.URL.Query())
		mu.Unlock()
		var page api.Messages
		for id := int64(8); id <= 10; id++ {
			page.Messages = append(page.Messages, troupe.Message{ID: id, Project: "p1", From: "dev", To: "lead",
				Kind: troupe.KindMessage, Text: fmt.Sprintf("message %d", id), State: troupe.MsgDelivered, CreatedAt: time.Now()})
		}
		page.Before = 8
		json.NewEncoder(w).Encode(page)
	})
	dir := serveFake(t, mux)

	for _, c := range []struct {
		args []string
		want url.Values
		hint string
	}{
		{[]string{"inbox"}, url.Values{"limit": {"50"}}, "older messages: troupe inbox --before 8"},
		{[]string{"inbox", "dev", "--limit", "3", "--before", "11"}, url.Values{"agent": {"dev"}, "limit": {"3"}, "before": {"11"}},
			"older messages: troupe inbox dev --before 8"},
	} {
		mu.Lock()
		queries = nil
		mu.Unlock()
		var out, errb bytes.Buffer
		if code := run(context.Background(), append([]string{"--state-dir", dir, "--project", "p1"}, c.args...), &out, &errb, false, false); code != 0 {
			t.Fatalf("%v: exit %d: %s", c.args, code, errb.String())
		}
		mu.Lock()
		if len(queries) != 1 || queries[0].Encode() != c.want.Encode() {
			t.Errorf("%v: the daemon was asked %v, want one call with %v", c.args, queries, c.want)
		}
		mu.Unlock()
		if i, j := strings.Index(out.String(), "message 8"), strings.Index(out.String(), "message 10"); i < 0 || j < i {
			t.Errorf("%v: not printed oldest first:\n%s", c.args, out.String())
		}
		if !strings.Contains(errb.String(), c.hint) {
			t.Errorf("%v: stderr %q lacks %q", c.args, errb.String(), c.hint)
		}
	}
	for _, bad := range [][]string{{"inbox", "--limit", "0"}, {"inbox", "--limit", "1001"}, {"inbox", "--before", "-1"}} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), append([]string{"--state-dir", dir, "--project", "p1"}, bad...), &out, &errb, false, false); code == 0 || !strings.Contains(errb.String(), bad[1]) {
			t.Errorf("%v: exit %d, stderr %q; want a refusal naming the flag", bad, code, errb.String())
		}
	}
}
