package claudesessions

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/fsnotify/fsnotify"
)

// Run is the index's background work, until ctx ends: it follows Root
// with an fsnotify watcher and reports to the index (Watching, Changed),
// and reads whole, batch by batch (Deepen), the files a sync read at head
// and tail only. It owns the watcher and closes it when it returns. The
// watches: Claude's config folder (for projects/ to appear), projects/ and
// each project folder in it. When a watch cannot be added (inotify's
// limit) or no watcher can be made, the index is told it is not watching:
// every listing then stats every file, slower but right. It returns nil
// when ctx ends.
func (x *Index) Run(ctx context.Context) error {
	var events <-chan fsnotify.Event
	var errs <-chan error
	w, err := fsnotify.NewWatcher()
	if err != nil {
		x.log.Warn("watch claude sessions: no file watcher, every listing stats every transcript", "err", err)
	} else {
		defer w.Close()
		defer x.Watching(false)
		x.Watching(x.addWatches(w))
		events, errs = w.Events, w.Errors
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-x.deepen:
			more, err := x.Deepen(ctx)
			if err != nil && ctx.Err() == nil {
				x.log.Warn("index claude sessions", "err", err)
			}
			if more {
				x.pokeDeepen() // one batch at a time: events are handled in between
			}
		case err, open := <-errs:
			if !open {
				errs = nil
				continue
			}
			if !errors.Is(err, fsnotify.ErrEventOverflow) {
				x.log.Warn("watch claude sessions", "err", err)
			}
			x.Changed("")
		case ev, open := <-events:
			if !open {
				events = nil
				continue
			}
			x.event(w, ev)
		}
	}
}

// addWatches watches the config folder, projects/ and its folders; false
// when one of them could not be watched. A config folder that does not
// exist yet (Claude Code never ran as this user) is waited for through its
// parent folder, so that its first session is seen at once.
func (x *Index) addWatches(w *fsnotify.Watcher) bool {
	if err := w.Add(x.o.Dir); errors.Is(err, os.ErrNotExist) {
		parent := filepath.Dir(filepath.Clean(x.o.Dir))
		if err := w.Add(parent); err != nil {
			x.log.Warn("watch claude sessions: every listing stats every transcript", "dir", parent, "err", err)
			return false
		}
		return true
	} else if err != nil {
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
	case name == filepath.Clean(x.o.Dir):
		// The config folder came (it was watched for through its parent):
		// watch it and what it holds now.
		if ev.Has(fsnotify.Create) && !x.addWatches(w) {
			x.Watching(false)
		}
		x.Changed("")
	case filepath.Dir(name) == filepath.Dir(filepath.Clean(x.o.Dir)):
		// another entry of the config folder's parent: not ours
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
