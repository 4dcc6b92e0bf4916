package sqlite

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/memory"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// benchWords is the vocabulary of the benchmarks' note bodies.
var benchWords = strings.Fields(`session inbox watchdog adapter turn token agent project
	registry runtime engine request reply delegate task supervisor output journal event
	stream memory note index search folder watcher commit transaction store daemon
	socket timeout window ceiling cycle graph wake permission approval engine codex
	claude prompt briefing team file reload debounce snapshot resume fork policy`)

// benchNotes writes n notes into dir's memory folder: bodies of ~600
// bytes, "needle" in the first five whatever n, and settles the folder
// (its mtime in the past, as when nothing changed for a while).
func benchNotes(b *testing.B, dir string, n int) {
	b.Helper()
	mem := filepath.Join(dir, ".troupe", "memory")
	if err := os.MkdirAll(mem, 0o755); err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	base := time.Now().Add(-24 * time.Hour)
	for i := range n {
		var body strings.Builder
		for j := range 80 {
			body.WriteString(benchWords[r.IntN(len(benchWords))])
			if j%12 == 11 {
				body.WriteString(".\n")
			} else {
				body.WriteByte(' ')
			}
		}
		if i < 5 {
			body.WriteString("The needle is here.\n")
		}
		name := fmt.Sprintf("note-%05d", i)
		data := memory.Format(memory.Note{Name: name, Type: "project", Body: body.String(),
			Description: fmt.Sprintf("What note %d says about %s and %s", i, benchWords[i%len(benchWords)], benchWords[(i*7)%len(benchWords)])})
		file := filepath.Join(mem, name+".md")
		if err := os.WriteFile(file, data, 0o644); err != nil {
			b.Fatal(err)
		}
		mt := base.Add(time.Duration(i) * time.Second)
		if err := os.Chtimes(file, mt, mt); err != nil {
			b.Fatal(err)
		}
	}
	if err := os.Chtimes(mem, base, base); err != nil {
		b.Fatal(err)
	}
}

// benchProject opens a store in a temporary state dir with one registered
// project holding n notes.
func benchProject(b *testing.B, n int) (string, troupe.Project) {
	b.Helper()
	state, dir := b.TempDir(), b.TempDir()
	path := filepath.Join(state, "troupe.db")
	db, err := Open(b.Context(), path, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	p := troupe.Project{ID: "pbench", Path: dir, Name: "bench", AddedAt: time.Now()}
	if err := db.Projects().AddProject(b.Context(), p); err != nil {
		b.Fatal(err)
	}
	benchNotes(b, dir, n)
	return path, p
}

// reportLatency reports the p50 and p99 of samples in milliseconds.
func reportLatency(b *testing.B, samples []time.Duration) {
	slices.Sort(samples)
	if len(samples) == 0 {
		return
	}
	q := func(f float64) float64 { return float64(samples[int(f*float64(len(samples)-1))]) / 1e6 }
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}

// BenchmarkMemorySearch: memory.Store.Search on the FTS5 index when
// nothing changed since the last search, at 0, 100 and 10,000 notes; the
// query matches five notes at every size. watched: the folder's watcher
// reports changes (the daemon's case), so the check is one stat;
// unwatched: the fallback, which lists the folder and stats every file.
func BenchmarkMemorySearch(b *testing.B) {
	for _, n := range []int{0, 100, 10_000} {
		for _, watched := range []bool{true, false} {
			mode := "watched"
			if !watched {
				mode = "unwatched"
			}
			b.Run(fmt.Sprintf("notes=%d/%s", n, mode), func(b *testing.B) {
				path, p := benchProject(b, n)
				db, err := Open(b.Context(), path, Options{})
				if err != nil {
					b.Fatal(err)
				}
				defer db.Close()
				s := memory.New(memory.Options{Index: db.MemoryIndex()})
				s.Watched(p.ID, watched)
				ctx := b.Context()
				if _, err := s.Search(ctx, p, "needle", 10); err != nil { // the first index
					b.Fatal(err)
				}
				var samples []time.Duration
				for b.Loop() {
					t0 := time.Now()
					hits, err := s.Search(ctx, p, "needle", 10)
					samples = append(samples, time.Since(t0))
					if err != nil || len(hits) != min(n, 5) {
						b.Fatalf("Search = %d hits, %v; want %d", len(hits), err, min(n, 5))
					}
				}
				reportLatency(b, samples)
			})
		}
	}
}

// BenchmarkMemoryFirstSearch: the first search of a daemon, at 10,000
// notes. restart: the index persisted (a daemon restarted, nothing
// changed while it was down): the store reopened, the index's stamps
// reconciled with the folder, nothing read. cold: no index yet (a new
// project, or a database from before the stamps): every note read and
// indexed.
func BenchmarkMemoryFirstSearch(b *testing.B) {
	const n = 10_000
	b.Run(fmt.Sprintf("notes=%d/restart", n), func(b *testing.B) {
		path, p := benchProject(b, n)
		db, err := Open(b.Context(), path, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := memory.New(memory.Options{Index: db.MemoryIndex()}).Search(b.Context(), p, "needle", 10); err != nil {
			b.Fatal(err)
		}
		db.Close()
		for b.Loop() {
			b.StopTimer()
			db, err := Open(b.Context(), path, Options{})
			if err != nil {
				b.Fatal(err)
			}
			s := memory.New(memory.Options{Index: db.MemoryIndex()})
			b.StartTimer()
			hits, err := s.Search(b.Context(), p, "needle", 10)
			b.StopTimer()
			if err != nil || len(hits) != 5 {
				b.Fatalf("Search = %d hits, %v", len(hits), err)
			}
			db.Close()
			b.StartTimer()
		}
	})
	b.Run(fmt.Sprintf("notes=%d/cold", n), func(b *testing.B) {
		path, p := benchProject(b, n)
		for b.Loop() {
			b.StopTimer()
			db, err := Open(b.Context(), path, Options{})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := db.w.ExecContext(b.Context(), `DELETE FROM memory_notes`); err != nil {
				b.Fatal(err)
			}
			s := memory.New(memory.Options{Index: db.MemoryIndex()})
			b.StartTimer()
			hits, err := s.Search(b.Context(), p, "needle", 10)
			b.StopTimer()
			if err != nil || len(hits) != 5 {
				b.Fatalf("Search = %d hits, %v", len(hits), err)
			}
			db.Close()
			b.StartTimer()
		}
	})
}

// BenchmarkMemoryBriefing: the briefing every session starts with, at 100
// and 10,000 notes, nothing changed since the last sync; reports its size.
func BenchmarkMemoryBriefing(b *testing.B) {
	for _, n := range []int{100, 10_000} {
		b.Run(fmt.Sprintf("notes=%d", n), func(b *testing.B) {
			path, p := benchProject(b, n)
			db, err := Open(b.Context(), path, Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			s := memory.New(memory.Options{Index: db.MemoryIndex()})
			s.Watched(p.ID, true)
			ctx := context.Background()
			text := s.Briefing(ctx, p)
			for b.Loop() {
				text = s.Briefing(ctx, p)
			}
			b.ReportMetric(float64(len(text)), "bytes")
			b.ReportMetric(float64(len(memory.IndexText(allNotes(b, s, p)))), "whole-index-bytes")
		})
	}
}

// allNotes lists the project's notes (for the size of the whole index).
func allNotes(b *testing.B, s *memory.Store, p troupe.Project) []memory.Note {
	notes, err := s.List(context.Background(), p.Path)
	if err != nil {
		b.Fatal(err)
	}
	return notes
}
