package worktree

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// BenchmarkCreate10kFiles measures making an agent's worktree of a
// repository of 10,000 files (100 folders of 100 files of ~200 bytes):
// time per worktree, and its disk use (reported as MB/worktree).
func BenchmarkCreate10kFiles(b *testing.B) {
	repo := repoOfFiles(b, 100, 100)
	m := New(b.TempDir())
	spec := troupe.AgentSpec{Name: "a", Workspace: Worktree}
	ctx := context.Background()
	var bytes int64
	b.ResetTimer()
	for i := range b.N {
		k := troupe.RuntimeKey{Project: troupe.ProjectID(fmt.Sprintf("p%d", i)), Agent: troupe.AgentID(fmt.Sprintf("a%d", i))}
		path, err := m.Dir(ctx, k, spec, repo)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		bytes += diskUse(b, path)
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(bytes)/float64(b.N)/1e6, "MB/worktree")
}

// diskUse is the disk space (allocated blocks) of the files under dir.
func diskUse(b *testing.B, dir string) int64 {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		n += blocks(fi)
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// repoOfFiles is a repository of folders×files committed files
// (~200 bytes each, Go-like text).
func repoOfFiles(b *testing.B, folders, files int) string {
	b.Helper()
	repo := b.TempDir()
	for d := range folders {
		dir := filepath.Join(repo, fmt.Sprintf("pkg%03d", d))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := range files {
			body := fmt.Sprintf("package pkg%03d\n\n// File %d of folder %d.\nfunc F%d() int { return %d }\n%0120d\n", d, f, d, f, f*d, f)
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d.go", f)), []byte(body), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"commit", "-q", "-m", "files"}} {
		cmd := exec.Command("git", append([]string{"-c", "gc.auto=0"}, args...)...) // no gc left running detached
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=b", "GIT_AUTHOR_EMAIL=b@b", "GIT_COMMITTER_NAME=b", "GIT_COMMITTER_EMAIL=b@b")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	return repo
}

// BenchmarkCheckpoint measures a turn's checkpoints (issue 23): the
// snapshot at its start (Base) and the checkpoint at its end, after the
// turn changed `changed` files, in a repository of `files` files. One
// iteration is one turn: both snapshots, every git process they run
// (rev-parse, ls-files, add, write-tree, commit-tree, for-each-ref,
// diff-tree, update-ref), not the file writes. Also reported: the median
// of the end checkpoint alone and of the start's snapshot (end-p50-ms,
// base-p50-ms: what a turn's end and start wait for), and the
// repository's growth on disk per turn (KB/turn: loose objects, troupe's
// index, refs).
func BenchmarkCheckpoint(b *testing.B) {
	for _, c := range []struct{ folders, files, changed int }{{10, 100, 1}, {100, 100, 1}, {100, 100, 100}} {
		b.Run(fmt.Sprintf("files=%d/changed=%d", c.folders*c.files, c.changed), func(b *testing.B) {
			repo := repoOfFiles(b, c.folders, c.files)
			root := b.TempDir()
			m := New(root)
			k := troupe.RuntimeKey{Project: "p", Agent: "a"}
			ctx := context.Background()
			// The first snapshot reads every file once (troupe's index is
			// new): not a turn's cost.
			if _, err := m.Checkpoint(ctx, k, repo, "turn", "", "", DefaultRetention); err != nil {
				b.Fatal(err)
			}
			before := diskUse(b, filepath.Join(repo, ".git")) + diskUse(b, root)
			var ends, bases []time.Duration
			b.ResetTimer()
			for i := range b.N {
				t0 := time.Now()
				base, err := m.Base(ctx, k, repo)
				bases = append(bases, time.Since(t0))
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				for f := range c.changed {
					name := filepath.Join(repo, fmt.Sprintf("pkg%03d", f%c.folders), fmt.Sprintf("f%03d.go", f/c.folders))
					if err := os.WriteFile(name, []byte(fmt.Sprintf("package x\n// turn %d\n", i)), 0o644); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				t0 = time.Now()
				if _, err := m.Checkpoint(ctx, k, repo, "turn", "t", base, DefaultRetention); err != nil {
					b.Fatal(err)
				}
				ends = append(ends, time.Since(t0))
			}
			b.StopTimer()
			after := diskUse(b, filepath.Join(repo, ".git")) + diskUse(b, root)
			p50 := func(d []time.Duration) float64 {
				slices.Sort(d)
				return float64(d[len(d)/2].Microseconds()) / 1e3
			}
			b.ReportMetric(p50(ends), "end-p50-ms")
			b.ReportMetric(p50(bases), "base-p50-ms")
			b.ReportMetric(float64(after-before)/1e3/float64(b.N), "KB/turn")
		})
	}
}

// BenchmarkSnapshotBundle measures what a remote agent's turn end costs on
// its runner (issue 24): Snapshot of its worktree of 1,000 files (10
// folders of 100) with one file changed, then BundleCommit of it, thin
// against the previous snapshot and the base (what the daemon has). One
// iteration is both, every git process they run, not the file write.
// Also reported: their median (p50-ms), the bundle's size (B/bundle), and
// the median of ApplySnapshot of it into the daemon's worktree of the
// agent (apply-p50-ms, timed apart, not in ns/op).
func BenchmarkSnapshotBundle(b *testing.B) {
	repo := repoOfFiles(b, 10, 100)
	clone := filepath.Join(b.TempDir(), "p")
	ctx := context.Background()
	f, err := os.Create(filepath.Join(b.TempDir(), "base.bundle"))
	if err != nil {
		b.Fatal(err)
	}
	head, err := Bundle(ctx, repo, nil, f)
	f.Close()
	if err != nil {
		b.Fatal(err)
	}
	if _, err := ApplyBundle(ctx, clone, f.Name()); err != nil {
		b.Fatal(err)
	}
	work, err := RunnerWorktree(ctx, clone, "a", head)
	if err != nil {
		b.Fatal(err)
	}
	m := New(b.TempDir())
	dwork, err := m.Dir(ctx, troupe.RuntimeKey{Project: "p", Agent: "a"}, troupe.AgentSpec{Name: "a", Workspace: Worktree}, repo)
	if err != nil {
		b.Fatal(err)
	}
	// The first snapshot reads every file once (troupe's index is new):
	// not a turn's cost.
	prev, err := Snapshot(ctx, work, "")
	if err != nil {
		b.Fatal(err)
	}
	bundle := filepath.Join(b.TempDir(), "snap.bundle")
	var ends, applies []time.Duration
	var size int64
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		if err := os.WriteFile(filepath.Join(work, "pkg000", "f000.go"), []byte(fmt.Sprintf("package x\n// turn %d\n", i)), 0o644); err != nil {
			b.Fatal(err)
		}
		out, err := os.Create(bundle)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		t0 := time.Now()
		snap, err := Snapshot(ctx, work, "")
		if err != nil {
			b.Fatal(err)
		}
		if err := BundleCommit(ctx, clone, snap, []string{prev, head}, out); err != nil {
			b.Fatal(err)
		}
		ends = append(ends, time.Since(t0))
		b.StopTimer()
		fi, err := out.Stat()
		if err != nil {
			b.Fatal(err)
		}
		out.Close()
		size += fi.Size()
		t0 = time.Now()
		if err := ApplySnapshot(ctx, dwork, bundle, snap); err != nil {
			b.Fatal(err)
		}
		applies = append(applies, time.Since(t0))
		prev = snap
		b.StartTimer()
	}
	b.StopTimer()
	p50 := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Microseconds()) / 1e3
	}
	b.ReportMetric(p50(ends), "p50-ms")
	b.ReportMetric(p50(applies), "apply-p50-ms")
	b.ReportMetric(float64(size)/float64(b.N), "B/bundle")
}
