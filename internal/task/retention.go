package task

// Retention: ended tasks' folders kept 7 days, 1 GB and 256 folders per
// project at most, the oldest removed first.

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// prune removes the folders (spec, output, status) of tasks that ended
// longer ago than the retention; their rows stay, their output goes.
func (m *Manager) prune() {
	if m.retention < 0 {
		return
	}
	entries, err := os.ReadDir(m.dir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) { // no task ever ran
			m.log.Warn("list task folders", "err", err)
		}
		return
	}
	cutoff := time.Now().Add(-m.retention)
	n := 0
	for _, e := range entries {
		st, err := os.Stat(filepath.Join(m.dir, e.Name(), statusFile))
		if err != nil || st.ModTime().After(cutoff) {
			continue // running, or ended recently
		}
		if err := os.RemoveAll(filepath.Join(m.dir, e.Name())); err != nil {
			m.log.Warn("prune task folder", "task", e.Name(), "err", err)
			continue
		}
		n++
	}
	if n > 0 {
		m.log.Info("pruned the folders of old tasks", "count", n, "retention", m.retention)
	}
}

// pruneProject removes the folders of project p's oldest ended tasks
// while the project keeps more than Options.Folders folders or more than
// Options.FolderBytes bytes in them. Running tasks' folders count but are
// never removed; keep names one that is not removed either (none: "").
func (m *Manager) pruneProject(ctx context.Context, p troupe.ProjectID, keep ID) {
	ts, err := m.store.Tasks(ctx, p)
	if err != nil {
		m.log.Warn("list tasks to prune their folders", "project", p, "err", err)
		return
	}
	type folder struct {
		id    ID
		ended time.Time
		size  int64
	}
	var ended []folder
	var total int64
	count := 0
	for _, t := range ts {
		size, ok := dirSize(m.taskDir(t.ID))
		if !ok {
			continue
		}
		count++
		total += size
		if t.State.Final() && t.ID != keep {
			ended = append(ended, folder{t.ID, t.EndedAt, size})
		}
	}
	if count <= m.foldersMax && total <= m.folderMax {
		return
	}
	slices.SortStableFunc(ended, func(a, b folder) int { return a.ended.Compare(b.ended) })
	n := 0
	for _, f := range ended {
		if count <= m.foldersMax && total <= m.folderMax {
			break
		}
		if err := os.RemoveAll(m.taskDir(f.id)); err != nil {
			m.log.Warn("prune task folder", "task", f.id, "err", err)
			continue
		}
		count--
		total -= f.size
		n++
	}
	m.log.Info("pruned the folders of a project's oldest tasks", "project", p, "count", n,
		"folders", count, "bytes", total, "max_folders", m.foldersMax, "max_bytes", m.folderMax)
}

// dirSize is the bytes of the regular files in dir (a task folder holds no
// subfolders); ok is false when dir does not exist.
func dirSize(dir string) (int64, bool) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, false
	}
	var n int64
	for _, e := range ents {
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
	}
	return n, true
}
