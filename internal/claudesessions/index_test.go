package claudesessions

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

const (
	sid1 = "11111111-2222-4333-8444-555555555555"
	sid2 = "22222222-2222-4333-8444-555555555555"
)

func userLine(sid, cwd, ts, text string) string {
	return `{"parentUuid":null,"isSidechain":false,"type":"user","message":{"role":"user","content":` + quote(text) +
		`},"uuid":"u","timestamp":"` + ts + `","sessionId":"` + sid + `","cwd":"` + cwd + `","version":"2.1.328","gitBranch":"main"}` + "\n"
}

func assistantLine(sid, ts, model, text string) string {
	return `{"parentUuid":"u","isSidechain":false,"message":{"id":"m","type":"message","role":"assistant","model":"` + model +
		`","content":[{"type":"text","text":` + quote(text) + `}]},"type":"assistant","uuid":"a","timestamp":"` + ts + `","sessionId":"` + sid + `"}` + "\n"
}

func quote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}

func writeT(t *testing.T, path, s string, app bool) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	flag := os.O_CREATE | os.O_WRONLY | os.O_TRUNC
	if app {
		flag = os.O_CREATE | os.O_WRONLY | os.O_APPEND
	}
	f, err := os.OpenFile(path, flag, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// Unchanged files are not read again; an appended file is read from its
// last offset only; a partial last line waits for its newline; a file
// rewritten from scratch is read again whole.
func TestIndexIncremental(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	p := filepath.Join(dir, "projects", "-w-a", sid1+".jsonl")
	head := userLine(sid1, "/w/a", "2026-11-29T10:00:00Z", "fix the parser") + assistantLine(sid1, "2026-11-29T10:00:01Z", "claude-opus-5-5", "ok")
	writeT(t, p, head, false)
	writeT(t, filepath.Join(dir, "projects", "-w-b", sid2+".jsonl"), userLine(sid2, "/w/b", "2026-11-29T09:00:00Z", "other"), false)
	store := NewMemStore()
	x := NewIndex(Options{Dir: dir, Store: store})
	rep, err := x.Sync(ctx)
	if err != nil || rep.Read != 2 {
		t.Fatalf("first sync: %+v %v", rep, err)
	}
	if rep, _ := x.Sync(ctx); rep.Read != 0 || rep.Bytes != 0 {
		t.Errorf("second sync of unchanged files read %d files, %d bytes", rep.Read, rep.Bytes)
	}
	more := assistantLine(sid1, "2026-11-29T11:00:00Z", "claude-sonnet-5-5", "more")
	partial := `{"type":"assistant","timest`
	writeT(t, p, more+partial, true)
	rep, _ = x.Sync(ctx)
	if rep.Read != 1 || rep.Bytes != int64(len(more+partial)) {
		t.Errorf("append: read %d files, %d bytes; want 1 file, %d bytes (what was appended only)", rep.Read, rep.Bytes, len(more+partial))
	}
	f := fileByID(t, x, sid1)
	if f.Messages != 3 || f.Model != "claude-sonnet-5-5" || f.Last.Hour() != 11 || f.Cwd != "/w/a" || f.Title != "fix the parser" || f.Skipped != 0 {
		t.Errorf("after append: %+v", f.Summary)
	}
	rest := `amp":"2026-11-29T12:00:00Z","message":{"model":"m2"}}` + "\n"
	writeT(t, p, rest, true)
	x.Sync(ctx)
	if f := fileByID(t, x, sid1); f.Messages != 4 || f.Last.Hour() != 12 || f.Offset != int64(len(head+more+partial+rest)) {
		t.Errorf("partial line completed: %+v offset %d", f.Summary, f.Offset)
	}
	// A new index on the same store reads nothing (restart).
	y := NewIndex(Options{Dir: dir, Store: store})
	if rep, _ := y.Sync(ctx); rep.Read != 0 {
		t.Errorf("restart read %d files", rep.Read)
	}
	// Rewritten (another inode): read whole, the old summary dropped.
	os.Remove(p)
	writeT(t, p, userLine(sid1, "/w/z", "2026-11-30T10:00:00Z", "new"), false)
	y.Sync(ctx)
	if f := fileByID(t, y, sid1); f.Cwd != "/w/z" || f.Messages != 1 {
		t.Errorf("rewritten: %+v", f.Summary)
	}
	os.Remove(p)
	if rep, _ := y.Sync(ctx); rep.Removed != 1 || len(y.Files()) != 1 {
		t.Errorf("removed: %+v, %d files", rep, len(y.Files()))
	}
}

// Truncated, garbled, foreign and over-long lines are skipped and counted;
// the rest of the file is indexed.
func TestIndexBadLinesCounted(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "projects", "-w", sid1+".jsonl")
	long := `{"type":"user","x":"` + strings.Repeat("y", 1000) + `"}` + "\n"
	s := "not json at all\n" +
		`{"type":"user","message":{"role":"user","conte` + "\n" + // truncated
		`{"type":"martian","sessionId":"x"}` + "\n" + // foreign
		"\n" +
		long +
		`{"type":"user","isSidechain":false,"message":{"role":"user","content":"<command-name>/clear</command-name>"},"cwd":"/w","timestamp":"2026-11-29T10:00:00Z"}` + "\n" +
		userLine(sid1, "/w/other", "2026-11-29T10:00:01Z", "real prompt") +
		`{"type":"ai-title","aiTitle":"Parser fix","sessionId":"x"}` + "\n" +
		`{"type":"summary","summary":"older","leafUuid":"l"}` + "\n"
	writeT(t, p, s, false)
	x := NewIndex(Options{Dir: dir, MaxLine: 512})
	if _, err := x.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	f := fileByID(t, x, sid1)
	if f.Skipped != 5 {
		t.Errorf("skipped %d, want 5 (garbage, truncated, foreign, empty, over MaxLine)", f.Skipped)
	}
	if f.Cwd != "/w" || f.Prompt != "real prompt" || f.Title != "Parser fix" || f.TitleKind != "ai" || f.Messages != 2 {
		t.Errorf("summary %+v", f.Summary)
	}
}

// FIFOs, symbolic links (to files or folders) and folders named .jsonl
// are not read, and nothing blocks.
func TestIndexHostileFiles(t *testing.T) {
	dir := t.TempDir()
	proj := filepath.Join(dir, "projects", "-w")
	writeT(t, filepath.Join(proj, sid1+".jsonl"), userLine(sid1, "/w", "2026-11-29T10:00:00Z", "hi"), false)
	if err := syscall.Mkfifo(filepath.Join(proj, "fifo.jsonl"), 0o600); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "secret.jsonl")
	writeT(t, outside, userLine(sid2, "/secret", "2026-11-29T10:00:00Z", "secret"), false)
	os.Symlink(outside, filepath.Join(proj, sid2+".jsonl"))
	os.Symlink(filepath.Dir(outside), filepath.Join(dir, "projects", "-linked"))
	os.Mkdir(filepath.Join(proj, "dir.jsonl"), 0o700)
	x := NewIndex(Options{Dir: dir})
	if _, err := x.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if fs := x.Files(); len(fs) != 1 || fs[0].ID != sid1 {
		t.Errorf("indexed %+v, want the one regular transcript", fs)
	}
	// A file swapped for a FIFO after the listing is refused at open (no block).
	if _, _, err := openFile(filepath.Join(proj, "fifo.jsonl")); err == nil {
		t.Error("opened a FIFO")
	}
}

// With a watcher reporting, a sync stats only the reported files.
func TestIndexWatchedSyncStatsReportedOnly(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	p1 := filepath.Join(dir, "projects", "-w", sid1+".jsonl")
	writeT(t, p1, userLine(sid1, "/w", "2026-11-29T10:00:00Z", "a"), false)
	writeT(t, filepath.Join(dir, "projects", "-w", sid2+".jsonl"), userLine(sid2, "/w", "2026-11-29T10:00:00Z", "b"), false)
	x := NewIndex(Options{Dir: dir})
	x.Watching(true)
	if rep, _ := x.Sync(ctx); !rep.Full || rep.Stated != 2 {
		t.Fatalf("first sync: %+v", rep)
	}
	if rep, _ := x.Sync(ctx); rep.Full || rep.Stated != 0 {
		t.Errorf("nothing reported: %+v, want no stat", rep)
	}
	writeT(t, p1, assistantLine(sid1, "2026-11-29T10:00:01Z", "m", "x"), true)
	x.Changed(p1)
	x.Changed(filepath.Join(dir, "elsewhere", "x.jsonl"))
	if rep, _ := x.Sync(ctx); rep.Full || rep.Stated != 1 || rep.Read != 1 {
		t.Errorf("one reported: %+v", rep)
	}
	x.Changed("")
	if rep, _ := x.Sync(ctx); !rep.Full {
		t.Errorf("overflow: %+v, want a full pass", rep)
	}
}
