package claudesessions

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/fsnotify/fsnotify"
)

// Watch follows Root with an fsnotify watcher and reports to the index
// (Watching, Changed) until ctx ends; it owns the watcher and closes it
// when it returns. The watches: Claude's config folder (for projects/ to
// appear), projects/ and each project folder in it. When a watch cannot be
// added (inotify's limit) the index is told it is not watching: every
// listing then stats every file, slower but right. It returns nil when ctx
// ends, and nil at once (not watching) when no watcher can be made.
func (x *Index) Watch(ctx context.Context) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		x.log.Warn("watch claude sessions: no file watcher, every listing stats every transcript", "err", err)
		return nil
	}
	defer w.Close()
	defer x.Watching(false)
	ok := x.addWatches(w)
	x.Watching(ok)
	for {
		select {
		case <-ctx.Done():
			return nil
		case err, open := <-w.Errors:
			if !open {
				return nil
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				x.Changed("")
				continue
			}
			x.log.Warn("watch claude sessions", "err", err)
			x.Changed("")
		case ev, open := <-w.Events:
			if !open {
				return nil
			}
			x.event(w, ev)
		}
	}
}

// addWatches watches the config folder, projects/ and its folders; false
// when one of them could not be watched.
func (x *Index) addWatches(w *fsnotify.Watcher) bool {
	if err := w.Add(x.o.Dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		x.log.Warn("watch claude sessions", "dir", x.o.Dir, "err", err)
		return false
	}
	if err := w.Add(x.root); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return true // no projects/ yet: its creation is an event of the config folder
		}
		x.log.Warn("watch claude sessions", "dir", x.root, "err", err)
		return false
	}
	es, err := os.ReadDir(x.root)
	if err != nil {
		return false
	}
	for _, e := range es {
		if !e.IsDir() {
			continue
		}
		if err := w.Add(filepath.Join(x.root, e.Name())); err != nil {
			x.log.Warn("watch claude sessions: every listing stats every transcript", "dir", e.Name(), "err", err)
			return false
		}
	}
	return true
}

func (x *Index) event(w *fsnotify.Watcher, ev fsnotify.Event) {
	name := filepath.Clean(ev.Name)
	switch {
	case name == x.root || filepath.Dir(name) == x.root:
		// projects/ itself or one of its folders came or went
		if ev.Has(fsnotify.Create) {
			if fi, err := os.Lstat(name); err == nil && fi.IsDir() {
				ok := true
				if name == x.root {
					ok = x.addWatches(w)
				} else if err := w.Add(name); err != nil {
					x.log.Warn("watch claude sessions: every listing stats every transcript", "dir", name, "err", err)
					ok = false
				}
				if !ok {
					x.Watching(false)
				}
			}
		}
		x.Changed("")
	case strings.HasSuffix(name, ".jsonl") && filepath.Dir(filepath.Dir(name)) == x.root:
		x.Changed(name)
	}
}
