package worktree

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// BenchmarkCreate10kFiles measures making an agent's worktree of a
// repository of 10,000 files (100 folders of 100 files of ~200 bytes):
// time per worktree, and its disk use (reported as MB/worktree).
func BenchmarkCreate10kFiles(b *testing.B) {
	repo := b.TempDir()
	for d := range 100 {
		dir := filepath.Join(repo, fmt.Sprintf("pkg%03d", d))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := range 100 {
			body := fmt.Sprintf("package pkg%03d\n\n// File %d of folder %d.\nfunc F%d() int { return %d }\n%0120d\n", d, f, d, f, f*d, f)
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d.go", f)), []byte(body), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"commit", "-q", "-m", "10k files"}} {
		cmd := exec.Command("git", append([]string{"-c", "gc.auto=0"}, args...)...) // no gc left running detached
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=b", "GIT_AUTHOR_EMAIL=b@b", "GIT_COMMITTER_NAME=b", "GIT_COMMITTER_EMAIL=b@b")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("git %v: %v %s", args, err, out)
		}
	}
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
