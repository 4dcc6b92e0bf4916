package sqlite

import (
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/inbox"
)

// queryPlan is the EXPLAIN QUERY PLAN of query with args, one detail a
// line, indented by depth.
func queryPlan(t *testing.T, db *DB, query string, args ...any) []string {
	t.Helper()
	rows, err := db.r.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		t.Fatalf("explain %s: %v", query, err)
	}
	defer rows.Close()
	depth := map[int]int{}
	var out []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		depth[id] = depth[parent] + 1
		out = append(out, strings.Repeat("  ", depth[id]-1)+detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestConversationQueryPlans: every page of a conversation is read through
// index ranges, never a scan of the messages table. The project's pages
// need no sort; an agent's pages merge its two ranges (to it, from it),
// each sorted after its LIMIT, so at most a page each.
func TestConversationQueryPlans(t *testing.T) {
	db := openTest(t, newPath(t))
	for _, q := range []inbox.Page{
		{}, {Newest: true, Limit: 50}, {Newest: true, Before: 100, Limit: 50}, {After: 100, Limit: 50},
		{After: 10, Before: 100, Newest: true},
		{Agent: "dev"}, {Agent: "dev", Newest: true, Limit: 50}, {Agent: "dev", Newest: true, Before: 100, Limit: 50},
		{Agent: "dev", After: 100, Limit: 50},
	} {
		query, args := conversationQuery("p1", q)
		plan := queryPlan(t, db, query, args...)
		text := strings.Join(plan, "\n")
		t.Logf("%+v:\n%s", q, text)
		want := []string{"SEARCH messages USING INDEX messages_project (project=? AND id>? AND id<?)"}
		if q.Agent != "" {
			want = []string{
				"SEARCH messages USING INDEX messages_to (project=? AND to_agent=? AND id>? AND id<?)",
				"SEARCH messages USING INDEX messages_from (project=? AND from_agent=? AND id>? AND id<?)",
			}
		}
		for _, w := range want {
			if !strings.Contains(text, w) {
				t.Errorf("plan of %+v lacks %q:\n%s", q, w, text)
			}
		}
		for _, line := range plan {
			if strings.Contains(line, "SCAN messages") || (q.Agent == "" && strings.Contains(line, "TEMP B-TREE")) {
				t.Errorf("plan of %+v: %s:\n%s", q, strings.TrimSpace(line), text)
			}
		}
	}
}
