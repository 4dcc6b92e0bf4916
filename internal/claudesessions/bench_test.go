package claudesessions_test

// Benchmarks of the index on a synthetic tree made from the fixtures'
// lines (generated once per run in a temporary folder, removed at the end
// unless TROUPE_BENCH_KEEP=1; never part of `go test` without -bench).
// Sizes: 10,000 sessions of 200 MB and of 2 GB in all.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/claudesessions"
	"github.com/troupe-dev/troupe/internal/store/sqlite"
)

var (
	treesMu sync.Mutex
	trees   = map[string]string{} // size name → config dir
	treeTop string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if treeTop != "" && os.Getenv("TROUPE_BENCH_KEEP") != "1" {
		os.RemoveAll(treeTop)
	}
	os.Exit(code)
}

// template is one fixture transcript with the id and cwd it names.
type template struct {
	blob    []byte
	id, cwd string
}

func templates(tb testing.TB) []template {
	files, _ := filepath.Glob("testdata/transcripts/*/*/*.jsonl")
	var out []template
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			tb.Fatal(err)
		}
		t := template{blob: b, id: strings.TrimSuffix(filepath.Base(p), ".jsonl")}
		for l := range bytes.SplitSeq(b, []byte{'\n'}) {
			var v struct{ Cwd string }
			if json.Unmarshal(l, &v) == nil && v.Cwd != "" {
				t.cwd = v.Cwd
				break
			}
		}
		out = append(out, t)
	}
	if len(out) == 0 {
		tb.Fatal("no fixture transcripts")
	}
	return out
}

// tree returns the config dir of a generated tree of n sessions, about
// total bytes, in 200 project folders: session i is fixture i%13 with its
// id and cwd replaced, repeated to its size (sizes vary ×0.2 to ×1.8 of
// the mean); one session in 100 has a garbled line.
func tree(tb testing.TB, n int, total int64) string {
	tb.Helper()
	name := fmt.Sprintf("n%d-b%d", n, total)
	treesMu.Lock()
	defer treesMu.Unlock()
	if d, ok := trees[name]; ok {
		return d
	}
	keep := os.Getenv("TROUPE_BENCH_KEEP") == "1"
	if treeTop == "" {
		if keep { // reused by the next run
			treeTop = filepath.Join(os.TempDir(), "troupe-ccbench")
		} else {
			d, err := os.MkdirTemp("", "troupe-ccbench-")
			if err != nil {
				tb.Fatal(err)
			}
			treeTop = d
		}
	}
	dir := filepath.Join(treeTop, name)
	if _, err := os.Stat(filepath.Join(dir, "complete")); err == nil && keep {
		trees[name] = dir
		return dir
	}
	os.RemoveAll(dir)
	ts := templates(tb)
	start := time.Now()
	mean := total / int64(n)
	factors := []float64{0.2, 0.6, 1.0, 1.4, 1.8}
	var written int64
	for i := range n {
		t := ts[i%len(ts)]
		proj := fmt.Sprintf("/home/person/code/proj-%03d", i%200)
		id := fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i)
		blob := bytes.ReplaceAll(bytes.ReplaceAll(t.blob, []byte(t.id), []byte(id)), []byte(t.cwd), []byte(proj))
		folder := filepath.Join(dir, "projects", strings.ReplaceAll(proj, "/", "-"))
		if err := os.MkdirAll(folder, 0o700); err != nil {
			tb.Fatal(err)
		}
		want := int64(float64(mean) * factors[i%len(factors)])
		var buf bytes.Buffer
		lines := bytes.SplitAfter(blob, []byte{'\n'})
		for j := 0; int64(buf.Len()) < want; j++ {
			buf.Write(lines[j%len(lines)])
			if i%100 == 7 && j == 5 {
				buf.WriteString(`{"type":"assistant","message":{"conte` + "\n")
			}
		}
		if err := os.WriteFile(filepath.Join(folder, id+".jsonl"), buf.Bytes(), 0o600); err != nil {
			tb.Fatal(err)
		}
		written += int64(buf.Len())
	}
	os.WriteFile(filepath.Join(dir, "complete"), nil, 0o600)
	tb.Logf("generated %d sessions, %.0f MB, in %v", n, float64(written)/1e6, time.Since(start).Round(time.Millisecond))
	trees[name] = dir
	return dir
}

var sizes = []struct {
	name  string
	total int64
}{{"200MB", 200 << 20}, {"2GB", 2 << 30}}

const sessions = 10_000

func openDB(b *testing.B) *sqlite.DB {
	b.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "troupe.db"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	return db
}

func treeBytes(x *claudesessions.Index) int64 {
	var n int64
	for _, f := range x.Files() {
		n += f.Stamp.Size
	}
	return n
}

// BenchmarkClaudeIndexCold: a first sync of the whole tree into an empty
// SQLite store, 10,000 rows saved: read=headtail is the listing's sync
// (head and tail of each file), read=whole the same followed by Deepen
// until every file is read whole (exact counts; the daemon does this part
// in the background).
func BenchmarkClaudeIndexCold(b *testing.B) {
	for _, sz := range sizes {
		for _, whole := range []bool{false, true} {
			read := "headtail"
			if whole {
				read = "whole"
			}
			b.Run(fmt.Sprintf("sessions=%d/size=%s/read=%s", sessions, sz.name, read), func(b *testing.B) {
				dir := tree(b, sessions, sz.total)
				var total, bytesRead int64
				for b.Loop() {
					b.StopTimer()
					db := openDB(b)
					x := claudesessions.NewIndex(claudesessions.Options{Dir: dir, Store: db.ClaudeSessions()})
					b.StartTimer()
					rep, err := x.Sync(context.Background())
					if err != nil || rep.Read != sessions {
						b.Fatalf("%+v %v", rep, err)
					}
					bytesRead = rep.Bytes
					for more := whole; more; {
						if more, err = x.Deepen(context.Background()); err != nil {
							b.Fatal(err)
						}
					}
					total = treeBytes(x)
				}
				b.ReportMetric(float64(total)/1e6/(b.Elapsed().Seconds()/float64(b.N)), "tree-MB/s")
				reportMS(b)
				if !whole {
					b.ReportMetric(float64(bytesRead)/1e6, "MB-read")
				}
			})
		}
	}
}

// BenchmarkClaudeFullParseBaseline: what a naive indexer does with the
// same tree and workers: decode every line of every file with
// encoding/json (no store).
func BenchmarkClaudeFullParseBaseline(b *testing.B) {
	for _, sz := range sizes {
		b.Run(fmt.Sprintf("sessions=%d/size=%s", sessions, sz.name), func(b *testing.B) {
			dir := tree(b, sessions, sz.total)
			files, _ := filepath.Glob(filepath.Join(dir, "projects", "*", "*.jsonl"))
			var total int64
			for b.Loop() {
				total = fullParse(b, files)
			}
			b.ReportMetric(float64(total)/1e6/(b.Elapsed().Seconds()/float64(b.N)), "tree-MB/s")
			reportMS(b)
		})
	}
}

func fullParse(b *testing.B, files []string) int64 {
	next := make(chan string)
	var mu sync.Mutex
	var total int64
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for p := range next {
				data, err := os.ReadFile(p)
				if err != nil {
					b.Error(err)
					continue
				}
				msgs, cwd := 0, ""
				for l := range bytes.SplitSeq(data, []byte{'\n'}) {
					var v map[string]any
					if json.Unmarshal(l, &v) != nil {
						continue
					}
					if t, _ := v["type"].(string); t == "user" || t == "assistant" {
						msgs++
					}
					if c, _ := v["cwd"].(string); cwd == "" {
						cwd = c
					}
				}
				mu.Lock()
				total += int64(len(data))
				mu.Unlock()
				_ = msgs
			}
		})
	}
	for _, f := range files {
		next <- f
	}
	close(next)
	wg.Wait()
	return total
}

// syncedMachine is a machine whose index is up to date and whole (the
// daemon's state once its background reading is done).
func syncedMachine(b *testing.B, dir string) *claudesessions.Machine {
	b.Helper()
	m := claudesessions.NewMachine(claudesessions.MachineOptions{Dir: dir, Store: openDB(b).ClaudeSessions()})
	if _, err := m.Index.Sync(context.Background()); err != nil {
		b.Fatal(err)
	}
	for more := true; more; {
		var err error
		if more, err = m.Index.Deepen(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	return m
}

// BenchmarkClaudeListWarm: `troupe sessions` on an indexed tree where
// nothing changed: watched (the daemon's case: no stat, the registry
// read, 10,000 sessions filtered and sorted, newest 50 kept) and
// unwatched (every file stat'ed).
func BenchmarkClaudeListWarm(b *testing.B) {
	for _, sz := range sizes {
		for _, watched := range []bool{true, false} {
			b.Run(fmt.Sprintf("sessions=%d/size=%s/watched=%v", sessions, sz.name, watched), func(b *testing.B) {
				m := syncedMachine(b, tree(b, sessions, sz.total))
				m.Index.Watching(watched)
				m.Index.Sync(context.Background()) // the full pass Watching asks for
				for b.Loop() {
					l, err := m.List(context.Background(), claudesessions.Query{Limit: 50})
					if err != nil || l.Total != sessions || l.Sync.Read != 0 {
						b.Fatalf("%d sessions, %+v, %v", l.Total, l.Sync, err)
					}
				}
				reportMS(b)
			})
		}
	}
}

// BenchmarkClaudeAppendReread: one line (~1.5 KB, an assistant block)
// appended to one transcript, reported by the watcher, then a sync: only
// the new bytes are read, one row saved.
func BenchmarkClaudeAppendReread(b *testing.B) {
	sz := sizes[1]
	b.Run(fmt.Sprintf("sessions=%d/size=%s", sessions, sz.name), func(b *testing.B) {
		dir := tree(b, sessions, sz.total)
		m := syncedMachine(b, dir)
		m.Index.Watching(true)
		m.Index.Sync(context.Background())
		path := m.Index.Files()[0].Path
		line := []byte(`{"parentUuid":"p","isSidechain":false,"message":{"id":"m","type":"message","role":"assistant","model":"claude-opus-5-5","content":[{"type":"text","text":"` +
			strings.Repeat("lorem ipsum ", 100) + `"}]},"type":"assistant","uuid":"u","timestamp":"2026-11-30T10:00:00.000Z","sessionId":"s"}` + "\n")
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		for b.Loop() {
			f.Write(line)
			m.Index.Changed(path)
			rep, err := m.Index.Sync(context.Background())
			if err != nil || rep.Read != 1 || rep.Bytes != int64(len(line)) {
				b.Fatalf("%+v %v", rep, err)
			}
		}
		reportMS(b)
	})
}

// BenchmarkClaudeRestart: a new daemon on a store holding the index of an
// unchanged tree: the rows loaded, every file stat'ed, none read.
func BenchmarkClaudeRestart(b *testing.B) {
	sz := sizes[1]
	b.Run(fmt.Sprintf("sessions=%d/size=%s", sessions, sz.name), func(b *testing.B) {
		dir := tree(b, sessions, sz.total)
		db := openDB(b)
		if _, err := claudesessions.NewIndex(claudesessions.Options{Dir: dir, Store: db.ClaudeSessions()}).Sync(context.Background()); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			rep, err := claudesessions.NewIndex(claudesessions.Options{Dir: dir, Store: db.ClaudeSessions()}).Sync(context.Background())
			if err != nil || rep.Read != 0 || rep.Stated != sessions {
				b.Fatalf("%+v %v", rep, err)
			}
		}
		reportMS(b)
	})
}

// reportMS reports the mean time of an iteration in milliseconds (the
// unit of BENCHMARKS.md's targets).
func reportMS(b *testing.B) {
	b.ReportMetric(b.Elapsed().Seconds()*1000/float64(b.N), "ms/op")
}
