package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/client"
	"github.com/troupe-dev/troupe/internal/inbox"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// TestAPIMessagesPages: GET .../messages gives the newest page by default,
// pages back with before and the answer's cursor, follows with after,
// filters by agent, and refuses what is not a page.
func TestAPIMessagesPages(t *testing.T) {
	store := inbox.NewMemStore()
	f := newFixtureWith(t, api.Options{Runtime: &fakeRuntime{conv: store}})
	cl := client.New(f.ts.URL, token)
	ctx := t.Context()
	p, err := cl.AddProject(ctx, teamDir(t))
	if err != nil {
		t.Fatal(err)
	}
	var all, ofQA []int64
	for i := range 120 {
		to, from := troupe.AgentID("dev"), troupe.AgentID("lead")
		if i%3 == 0 {
			to, from = "lead", "qa"
		}
		m, err := store.Append(ctx, troupe.Message{Project: p.ID, To: to, From: from, Kind: troupe.KindMessage, Text: fmt.Sprint(i)})
		if err != nil {
			t.Fatal(err)
		}
		store.Append(ctx, troupe.Message{Project: "pother", To: "dev", From: "lead", Kind: troupe.KindMessage, Text: "other"})
		all = append(all, m.ID)
		if from == "qa" {
			ofQA = append(ofQA, m.ID)
		}
	}
	ids := func(ms []troupe.Message) []int64 {
		var out []int64
		for _, m := range ms {
			out = append(out, m.ID)
		}
		return out
	}

	// The default: the newest 50, oldest first, and the cursor back.
	page, err := cl.Conversation(ctx, p.ID, "", 0, 0)
	if err != nil || !slices.Equal(ids(page.Messages), all[70:]) || page.Before != all[70] || page.After != 0 {
		t.Fatalf("default page = %v before %d after %d, %v; want the newest 50 and before %d", ids(page.Messages), page.Before, page.After, err, all[70])
	}
	// Paging back reads everything once; the last page has no cursor.
	var back []int64
	for before, n := int64(0), 0; ; n++ {
		page, err := cl.Conversation(ctx, p.ID, "", before, 40)
		if err != nil || n > 3 {
			t.Fatalf("page %d back: %v (or too many pages)", n, err)
		}
		back = append(ids(page.Messages), back...)
		if page.Before == 0 {
			break
		}
		before = page.Before
	}
	if !slices.Equal(back, all) {
		t.Errorf("paging back by 40 read %v, want %v", back, all)
	}
	// One agent's history.
	page, err = cl.Conversation(ctx, p.ID, "qa", 0, 30)
	if err != nil || !slices.Equal(ids(page.Messages), ofQA[10:]) || page.Before != ofQA[10] {
		t.Errorf("qa's newest 30 = %v before %d, %v; want %v before %d", ids(page.Messages), page.Before, err, ofQA[10:], ofQA[10])
	}
	// Following: after=N gives the oldest after N, and after continues
	// while there are more.
	ms, err := cl.Messages(ctx, p.ID, "", all[9], 0)
	if err != nil || !slices.Equal(ids(ms), all[10:60]) {
		t.Errorf("after %d = %v, %v; want %v", all[9], ids(ms), err, all[10:60])
	}
	for _, c := range []struct {
		query string
		want  []int64
		after int64
	}{
		{"after=0&limit=5", all[:5], all[4]},
		{fmt.Sprintf("after=%d", all[100]), all[101:], 0},
		{fmt.Sprintf("after=%d&limit=19", all[100]), all[101:], 0},
		{fmt.Sprintf("after=%d&before=%d&limit=3", all[10], all[20]), all[17:20], 0},
	} {
		var got api.Messages
		a := f.get(t, "/api/projects/"+string(p.ID)+"/messages?"+c.query, map[string]string{"Authorization": "Bearer " + token})
		if a.StatusCode != http.StatusOK || json.Unmarshal([]byte(a.Body), &got) != nil ||
			!slices.Equal(ids(got.Messages), c.want) || got.After != c.after {
			t.Errorf("?%s: %d %s; want %v after %d", c.query, a.StatusCode, a.Body, c.want, c.after)
		}
	}
	// An empty page is an empty list.
	if a := f.get(t, "/api/projects/"+string(p.ID)+"/messages?agent=nobody", map[string]string{"Authorization": "Bearer " + token}); a.StatusCode != http.StatusOK || a.Body != "{\"messages\":[]}\n" {
		t.Errorf("nobody's messages: %d %q", a.StatusCode, a.Body)
	}
	for _, q := range []string{"limit=1001", "limit=-1", "before=x", "after=-2", "before=-1"} {
		if a := f.get(t, "/api/projects/"+string(p.ID)+"/messages?"+q, map[string]string{"Authorization": "Bearer " + token}); a.StatusCode != http.StatusBadRequest {
			t.Errorf("?%s: %d %s, want 400", q, a.StatusCode, a.Body)
		}
	}
}

// TestAPIMessagesPageIsBoundedInBytes: a page of long messages holds at
// most inbox.MaxPageBytes of text, each text clipped with its size; the
// cursor still leads back through every message once, and a message is
// read whole through GET .../messages/{msg}, a part at a time.
func TestAPIMessagesPageIsBoundedInBytes(t *testing.T) {
	store := inbox.NewMemStore()
	f := newFixtureWith(t, api.Options{Runtime: &fakeRuntime{conv: store}})
	cl := client.New(f.ts.URL, token)
	ctx := t.Context()
	p, err := cl.AddProject(ctx, teamDir(t))
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("0123456789", 10<<10) // 100 KB
	var all []int64
	for range 100 {
		m, err := store.Append(ctx, troupe.Message{Project: p.ID, To: "dev", From: "lead", Kind: troupe.KindMessage, Text: big})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, m.ID)
	}
	var back []int64
	for before, n := int64(0), 0; ; n++ {
		a := f.get(t, fmt.Sprintf("/api/projects/%s/messages?limit=1000&before=%d", p.ID, before), map[string]string{"Authorization": "Bearer " + token})
		var page api.Messages
		if err := json.Unmarshal([]byte(a.Body), &page); a.StatusCode != http.StatusOK || err != nil || n > 3 {
			t.Fatalf("page %d back: %d %.200s (or too many pages)", n, a.StatusCode, a.Body)
		}
		if len(a.Body) > inbox.MaxPageBytes+64<<10 {
			t.Errorf("page %d back is %d bytes, want at most about %d", n, len(a.Body), inbox.MaxPageBytes)
		}
		for _, m := range page.Messages {
			if !m.Clipped || m.Size != len(big) || len(m.Text) != inbox.ClipBytes {
				t.Fatalf("message %d: %d bytes, clipped %v, size %d; want %d, clipped, size %d", m.ID, len(m.Text), m.Clipped, m.Size, inbox.ClipBytes, len(big))
			}
			back = append(back, m.ID)
		}
		if page.Before == 0 {
			break
		}
		before = page.Before
	}
	slices.Sort(back)
	if !slices.Equal(back, all) {
		t.Errorf("paging back read %d messages, want the %d once each", len(back), len(all))
	}
	whole := "é" + strings.Repeat("€", 500<<10) // 1.5 MB
	m, err := store.Append(ctx, troupe.Message{Project: p.ID, To: "dev", From: "lead", Kind: troupe.KindMessage, Text: whole})
	if err != nil {
		t.Fatal(err)
	}
	part, err := cl.MessageText(ctx, p.ID, m.ID, 0)
	if err != nil || part.Next == 0 || part.Next != len(part.Message.Text) || part.Message.Size != len(whole) {
		t.Errorf("first part: next %d, %d bytes of %d, %v; want a next offset after it", part.Next, len(part.Message.Text), part.Message.Size, err)
	}
	got, err := cl.WholeMessage(ctx, p.ID, m.ID)
	if err != nil || got.Text != whole || got.Clipped {
		t.Errorf("whole message: %d bytes (clipped %v), %v; want the %d bytes", len(got.Text), got.Clipped, err, len(whole))
	}
	for _, q := range []string{fmt.Sprintf("%d?offset=1", m.ID), fmt.Sprintf("%d?offset=-1", m.ID), "x"} {
		if a := f.get(t, "/api/projects/"+string(p.ID)+"/messages/"+q, map[string]string{"Authorization": "Bearer " + token}); a.StatusCode != http.StatusBadRequest {
			t.Errorf("messages/%s: %d %s, want 400", q, a.StatusCode, a.Body)
		}
	}
	if a := f.get(t, fmt.Sprintf("/api/projects/%s/messages/%d", p.ID, m.ID+1000), map[string]string{"Authorization": "Bearer " + token}); a.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown message: %d %s, want 404", a.StatusCode, a.Body)
	}
}
