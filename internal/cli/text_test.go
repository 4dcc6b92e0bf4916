package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/statedir"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// hostile is what an agent might write to take over the person's
// terminal: retitle it (OSC 0 … BEL), clear it (CSI 2 J), and a C1 CSI,
// both as a Unicode character and as a lone byte.
const hostile = "hi\x1b]0;pwned\x07 \x1b[2J \u009b31m \x9b1A\tok\nbye"

func TestSafeText(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{hostile, `hi\x1b]0;pwned\x07 \x1b[2J \x9b31m \x9b1A` + "\tok\nbye"},
		{"plain text, tabs\tand\nnewlines", "plain text, tabs\tand\nnewlines"},
		{"héllo ✓ 日本 \u00a0 \ufffd", "héllo ✓ 日本 \u00a0 \ufffd"},
		{"cr\r del\x7f nul\x00 bell\a", `cr\x0d del\x7f nul\x00 bell\x07`},
		{"\xff\xfe cut \xe2\x9c", `\xff\xfe cut \xe2\x9c`},
		{"", ""},
		// Bidi controls: a reversed file name, an isolate that hides a
		// command's end.
		{"invoice\u202Efdp.exe", `invoice\u{202e}fdp.exe`},
		{"a\u202Ab\u202Bc\u202Cd\u202De", `a\u{202a}b\u{202b}c\u{202c}d\u{202d}e`},
		{"\u2066rm -rf\u2069 \u2067x\u2068y", `\u{2066}rm -rf\u{2069} \u{2067}x\u{2068}y`},
		{"ltr\u200E rtl\u200F alm\u061C", `ltr\u{200e} rtl\u{200f} alm\u{061c}`},
		// Zero-width and invisible characters.
		{"ad\u200Bmin \u200Cx\u200Dy w\u2060j \uFEFFbom", `ad\u{200b}min \u{200c}x\u{200d}y w\u{2060}j \u{feff}bom`},
		{"soft\u00ADhyphen \u2062times", `soft\u{00ad}hyphen \u{2062}times`},
		{"tag\U000E0041\U000E007F", `tag\u{e0041}\u{e007f}`},
		{"line\u2028para\u2029end", `line\u{2028}para\u{2029}end`},
		// Printable neighbours stay.
		{"\u00AC \u00AE \u2010 \u2070 \u200A \uFEFE \U0001F600", "\u00AC \u00AE \u2010 \u2070 \u200A \uFEFE \U0001F600"},
	} {
		if got := safeText(c.in); got != c.want {
			t.Errorf("safeText(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestPlural(t *testing.T) {
	for n, want := range map[int]string{0: "0 agents", 1: "1 agent", 2: "2 agents"} {
		if got := plural(n, "agent", "agents"); got != want {
			t.Errorf("plural(%d) = %q, want %q", n, got, want)
		}
	}
	if got := moreLines("a\nb\n"); got != " (+1 line)" {
		t.Errorf("moreLines of two lines = %q", got)
	}
}

// fakeDaemon serves the few endpoints the tests below use, with texts an
// agent could have written, and returns a state dir pointing at it.
func fakeDaemon(t *testing.T) string {
	t.Helper()
	p := api.Project{ID: "p1", Path: "/work/app", Name: "app", Agents: 1, Team: "error",
		TeamError: "team.toml: line 3: \x1b[2Jbad"}
	mux := http.NewServeMux()
	reply := func(v any) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) { json.NewEncoder(w).Encode(v) }
	}
	mux.HandleFunc("GET /api/projects/resolve", reply(p))
	mux.HandleFunc("GET /api/projects/p1/messages", reply(api.Messages{Messages: []troupe.Message{{ID: 1, Project: "p1", From: "dev", To: troupe.Person,
		Kind: troupe.KindMessage, Text: hostile, State: troupe.MsgDelivered, CreatedAt: time.Now()}}}))
	mux.HandleFunc("POST /api/projects/p1/agents/dev/ask", reply(troupe.Request{ID: "r1", State: troupe.ReqAnswered, Answer: hostile}))
	mux.HandleFunc("GET /api/projects/p1/agents", reply([]api.Agent{{Project: "p1", Name: "dev", Engine: "fake", State: troupe.StateFailed, Reason: "engine said \x1b]0;pwned\x07"}}))
	return serveFake(t, mux)
}

// serveFake serves mux as a daemon and returns a state dir pointing at it.
func serveFake(t *testing.T, mux *http.ServeMux) string {
	t.Helper()
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	dir := t.TempDir()
	d := statedir.Dir(dir)
	os.WriteFile(d.AddrFile(), []byte(strings.TrimPrefix(ts.URL, "http://")+"\n"), 0o600)
	os.WriteFile(d.TokenFile(), []byte(strings.Repeat("ab", 32)+"\n"), 0o600) // 32 bytes in hex, as statedir wants
	return dir
}

// TestEscapesNeutralisedOnATerminal: what agents wrote reaches a terminal
// with its control characters shown as \xNN; --raw, or output that is not
// a terminal, keeps the bytes; --json stays JSON either way.
func TestEscapesNeutralisedOnATerminal(t *testing.T) {
	dir := fakeDaemon(t)
	for _, c := range []struct {
		name    string
		args    []string
		tty     bool
		escaped bool
	}{
		{"inbox on a terminal", []string{"inbox"}, true, true},
		{"inbox on a terminal with --raw", []string{"inbox", "--raw"}, true, false},
		{"inbox to a pipe", []string{"inbox"}, false, false},
		{"ask on a terminal", []string{"ask", "dev", "hello"}, true, true},
		{"ask to a pipe", []string{"ask", "dev", "hello"}, false, false},
		{"agents on a terminal", []string{"agents"}, true, true},
		{"agents with --raw", []string{"--raw", "agents"}, true, false},
	} {
		var out, errb bytes.Buffer
		args := append([]string{"--state-dir", dir, "--project", "p1"}, c.args...)
		if code := run(context.Background(), args, &out, &errb, c.tty, c.tty); code != 0 {
			t.Fatalf("%s: exit %d: %s", c.name, code, errb.String())
		}
		both := out.String() + errb.String()
		hasESC := strings.ContainsAny(both, "\x1b\u009b\a")
		switch {
		case c.escaped && hasESC:
			t.Errorf("%s: control characters reached the terminal:\n%q", c.name, both)
		case c.escaped && !strings.Contains(both, `\x1b]0;pwned\x07`):
			t.Errorf("%s: the escape is not shown as text:\n%q", c.name, both)
		case !c.escaped && !hasESC:
			t.Errorf("%s: bytes not kept as they are:\n%q", c.name, both)
		}
	}
	// --json on a terminal: JSON, the text as it was.
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"--state-dir", dir, "--project", "p1", "inbox", "--json"}, &out, &errb, true, true); code != 0 {
		t.Fatalf("inbox --json: exit %d: %s", code, errb.String())
	}
	var page struct{ Messages []troupe.Message }
	err := json.Unmarshal(out.Bytes(), &page)
	ms := page.Messages
	if err != nil || len(ms) != 1 || ms[0].Text != strings.ToValidUTF8(hostile, "\ufffd") {
		t.Errorf("inbox --json on a terminal: %v %q", err, out.String())
	}
	// The team error, a warning on stderr, is neutralised on a terminal too.
	errb.Reset()
	run(context.Background(), []string{"--state-dir", dir, "--project", "p1", "agents"}, &out, &errb, false, true)
	if strings.Contains(errb.String(), "\x1b") || !strings.Contains(errb.String(), `\x1b[2Jbad`) {
		t.Errorf("team error on a terminal's stderr: %q", errb.String())
	}
}

func TestIsTerminalOfAFile(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if isTerminal(f) || isTerminal(&bytes.Buffer{}) {
		t.Error("a file or a buffer taken for a terminal")
	}
}

// TestTaskRunTakesOneQuotedCommand: an unquoted command (several
// arguments) is refused with the quoted form to type instead.
func TestTaskRunTakesOneQuotedCommand(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"--state-dir", t.TempDir(), "task", "run", "make", "test"}, &out, &errb, false, false)
	if code == 0 || !strings.Contains(errb.String(), `troupe task run "make test && echo ok"`) {
		t.Fatalf("task run make test: exit %d, stderr %q", code, errb.String())
	}
}

// TestResumeFolderNeutralised: the folder `troupe resume` and `fork`
// announce comes from a transcript: on a terminal its escape sequences
// are shown, not run (a clipboard write in a folder's name).
func TestResumeFolderNeutralised(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "x\x1b]52;c;ZWNobyBwd25lZA==\x07y")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	root, g := newRoot(&out, &errb, true, true)
	if err := runClaude(root, g, "true", dir, []string{"--resume", "id"}); err != nil {
		t.Fatal(err)
	}
	if s := errb.String(); strings.Contains(s, "\x1b") || !strings.Contains(s, "running true --resume id in") {
		t.Errorf("stderr %q", s)
	}
}

// TestWarnsOfAnotherDaemonVersion: a daemon that says it runs another
// version of troupe gets one warning on stderr; the same version none.
func TestWarnsOfAnotherDaemonVersion(t *testing.T) {
	for _, c := range []struct {
		daemon string
		warns  bool
	}{{"9.9.9", true}, {version(), false}, {"", false}} {
		mux := http.NewServeMux()
		mux.HandleFunc("GET /api/status", func(w http.ResponseWriter, _ *http.Request) {
			if c.daemon != "" {
				w.Header().Set(api.VersionHeader, c.daemon)
			}
			json.NewEncoder(w).Encode(api.Status{Version: c.daemon, PID: 1})
		})
		dir := serveFake(t, mux)
		var out, errb bytes.Buffer
		if code := run(context.Background(), []string{"--state-dir", dir, "status"}, &out, &errb, false, false); code != 0 {
			t.Fatalf("status: exit %d: %s", code, errb.String())
		}
		want := "warning: the daemon runs troupe 9.9.9, this CLI is " + version()
		if got := strings.Count(errb.String(), "warning: the daemon runs"); got != map[bool]int{true: 1, false: 0}[c.warns] ||
			c.warns && !strings.Contains(errb.String(), want) {
			t.Errorf("daemon %q: stderr %q, want a warning: %v", c.daemon, errb.String(), c.warns)
		}
	}
}
