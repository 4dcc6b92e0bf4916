package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/client"
	"github.com/troupe-dev/troupe/internal/inbox"
	"github.com/troupe-dev/troupe/internal/statedir"
	"github.com/troupe-dev/troupe/internal/store/sqlite"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// Issue 19, item 7: what agents send is bounded by the person's limits,
// not by the agents. Sizes are kept modest so the tests run fast.

// boundsTeam: relay sends 20 copies of what it is given to sink over MCP
// (the fake agent's send_message), then says the tool's result.
var boundsTeam = `
[[agent]]
name = "relay"
engine = "fake"

[agent.fake]
respond = "!send sink ` + strings.Repeat("{text}", 20) + `\n!say {result}"

[[agent]]
name = "sink"
engine = "fake"

[agent.fake]
respond = "!say got it"
`

func boundsRig(t *testing.T, team string, extra ...string) (*daemon, *client.Client, troupe.ProjectID, string, string) {
	t.Helper()
	state, proj := t.TempDir(), t.TempDir()
	writeTeam(t, proj, team)
	d := startDaemon(t, state, append([]string{"--project", proj}, extra...)...)
	cl, err := client.FromStateDir(state)
	if err != nil {
		t.Fatal(err)
	}
	p, err := cl.ResolveProject(context.Background(), proj)
	if err != nil {
		t.Fatal(err)
	}
	return d, cl, p.ID, state, proj
}

// TestAttackBoundsAMessageIsCappedWhereItEnters: an agent's send_message
// of 1.2 MB over MCP is a tool error that names the 1 MB cap and says to
// send a file's path; nothing reaches the other agent. The person's own
// send over the cap is refused too.
func TestAttackBoundsAMessageIsCappedWhereItEnters(t *testing.T) {
	_, cl, p, _, _ := boundsRig(t, boundsTeam)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, err := cl.Ask(ctx, p, "relay", strings.Repeat("x", 60<<10), 0) // whole in a turn
	if err != nil {
		t.Fatal(err)
	}
	if req.State != troupe.ReqAnswered || !strings.Contains(req.Answer, "error: ") || !strings.Contains(req.Answer, "1 MB") ||
		!strings.Contains(req.Answer, "file") {
		t.Fatalf("relay's send of 1.2 MB: %s %.300q, want a tool error naming the 1 MB cap and a file", req.State, req.Answer)
	}
	page, err := cl.Conversation(ctx, p, "sink", 0, 0)
	if err != nil || len(page.Messages) != 0 {
		t.Errorf("sink's conversation: %d messages, %v; want none", len(page.Messages), err)
	}
	// Under the cap it goes through.
	req, err = cl.Ask(ctx, p, "relay", strings.Repeat("y", 10<<10), 0)
	if err != nil || !strings.Contains(req.Answer, "sent to sink") {
		t.Fatalf("relay's send of 200 KB: %v %.300q, want it sent", err, req.Answer)
	}
	// The person: the runtime's cap, then the API's 1 MB body.
	if _, err := cl.Send(ctx, p, "sink", strings.Repeat("z", 1<<20+1)); err == nil {
		t.Errorf("the person's send of 1 MB and a byte was accepted")
	}
}

// TestAttackBoundsAConversationPageIsBoundedInBytes: 70 messages of 100 KB
// make a page of at most 4 MB of text, each clipped at 64 KB with its
// size, the cursor leading to the rest; troupe inbox --show prints one
// whole.
func TestAttackBoundsAConversationPageIsBoundedInBytes(t *testing.T) {
	d, cl, p, state, proj := boundsRig(t, `
[[agent]]
name = "sink"
engine = "fake"
turn_timeout = "10m"

[agent.fake]
respond = "!say got it"
`)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	big := strings.Repeat("0123456789", 10<<10)
	var last troupe.Message
	for i := range 70 {
		m, err := cl.Send(ctx, p, "sink", fmt.Sprintf("%02d%s", i, big))
		if err != nil {
			t.Fatal(err)
		}
		last = m
	}
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+d.addr+"/api/projects/"+string(p)+"/messages?agent=sink&limit=1000", nil)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := os.ReadFile(statedir.Dir(state).TokenFile())
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page api.Messages
	body := &countingReader{r: resp.Body}
	if err := json.NewDecoder(body).Decode(&page); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET messages: %d %v", resp.StatusCode, err)
	}
	if body.n > 4<<20+256<<10 || len(page.Messages) >= 70 || page.Before == 0 {
		t.Errorf("a page of %d messages in %d bytes, before %d; want at most about 4 MB, not all 70, and a cursor back", len(page.Messages), body.n, page.Before)
	}
	for _, m := range page.Messages {
		if m.From == troupe.Person && (!m.Clipped || m.Size != len(big)+2 || len(m.Text) > 64<<10) {
			t.Fatalf("message %d in the page: %d bytes, clipped %v, size %d; want 64 KB at most, clipped, size %d", m.ID, len(m.Text), m.Clipped, m.Size, len(big)+2)
		}
	}
	out := mustTroupe(t, state, proj, "inbox", "--show", fmt.Sprint(last.ID))
	if !strings.Contains(out, "69"+big+"\n") {
		t.Errorf("troupe inbox --show %d: %d bytes, want the message whole", last.ID, len(out))
	}
	list := mustTroupe(t, state, proj, "inbox", "sink", "--limit", "3")
	if !strings.Contains(list, fmt.Sprintf("(%d bytes: --show", len(big)+2)) {
		t.Errorf("troupe inbox does not say a clipped text's size: %s", list)
	}
}

type countingReader struct {
	r interface{ Read([]byte) (int, error) }
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// TestAttackBoundsSessionsAndTeams: a team file of more agents than the
// limit is refused naming the file, the count and the limit; past
// --max-sessions an agent waits, its state saying so in troupe agents,
// and runs once the busy one's turn ends.
func TestAttackBoundsSessionsAndTeams(t *testing.T) {
	var team strings.Builder
	for i := range 65 {
		fmt.Fprintf(&team, "[[agent]]\nname = \"a%d\"\nengine = \"fake\"\n\n", i)
	}
	state, proj := t.TempDir(), t.TempDir()
	writeTeam(t, proj, team.String())
	startDaemon(t, state)
	// Registered, as a project with a bad team file is: no agent loaded,
	// the error said.
	if _, errs, _ := runCLI(t, state, proj, "project", "add", proj); !strings.Contains(errs, "team.toml") ||
		!strings.Contains(errs, "65 agents") || !strings.Contains(errs, "at most 64") {
		t.Errorf("project add of a team of 65: %q, want an error naming team.toml, 65 agents and 64", errs)
	}
	if out, _, _ := runCLI(t, state, proj, "agents"); strings.Contains(out, "a64") || strings.Contains(out, "a0 ") {
		t.Errorf("troupe agents lists agents of the refused team:\n%s", out)
	}

	_, cl, p, state, proj := boundsRig(t, `
[[agent]]
name = "a"
engine = "fake"

[[agent]]
name = "b"
engine = "fake"
`, "--max-sessions", "1")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := cl.Send(ctx, p, "a", "!sleep 1h"); err != nil {
		t.Fatal(err)
	}
	waitAgent(t, cl, p, "a", troupe.StateBusy)
	if _, err := cl.Send(ctx, p, "b", "hello"); err != nil {
		t.Fatal(err)
	}
	waitAgent(t, cl, p, "b", troupe.StateWaiting)
	if out := mustTroupe(t, state, proj, "agents"); !strings.Contains(out, "waiting for a session slot (1 live") {
		t.Errorf("troupe agents does not say b waits for a slot:\n%s", out)
	}
	// a's turn ends: its idle session gives the slot to b, which answers.
	mustTroupe(t, state, proj, "interrupt", "a")
	waitAgent(t, cl, p, "b", troupe.StateIdle)
	page, err := cl.Conversation(ctx, p, "b", 0, 0)
	if err != nil || len(page.Messages) != 1 || page.Messages[0].State != troupe.MsgDelivered {
		t.Errorf("b's conversation: %+v, %v; want hello delivered", page.Messages, err)
	}
}

// TestAttackBoundsARemovedProjectLeavesNoMessages: troupe project remove
// deletes the project's messages from the database and the files of its
// oversize messages.
func TestAttackBoundsARemovedProjectLeavesNoMessages(t *testing.T) {
	d, cl, p, state, proj := boundsRig(t, `
[[agent]]
name = "sink"
engine = "fake"

[agent.fake]
respond = "!say got it"
`)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// 300 KB: more than a turn takes, so it is delivered cut and kept in
	// a file.
	if _, err := cl.Ask(ctx, p, "sink", strings.Repeat("x", 300<<10), 0); err != nil {
		t.Fatal(err)
	}
	files := filepath.Join(state, "messages", string(p))
	if ents, err := os.ReadDir(files); err != nil || len(ents) != 1 {
		t.Fatalf("the oversize message's file: %v %v, want one", ents, err)
	}
	mustTroupe(t, state, proj, "project", "remove")
	if logs := d.logs.waitFor(30*time.Second, "messages deleted by the retention rule"); !strings.Contains(logs, "messages deleted by the retention rule") {
		t.Fatalf("no retention pass after the removal; logs:\n%s", logs)
	}
	if _, err := os.Stat(files); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the removed project's message files: %v, want them gone", err)
	}
	if err := d.stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	db, err := sqlite.Open(ctx, statedir.Dir(state).DB(), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if ms, err := db.Inbox().Conversation(ctx, p, inbox.Page{}); err != nil || len(ms) != 0 {
		t.Errorf("the removed project's conversation in the database: %d messages, %v; want none", len(ms), err)
	}
}
