package memory

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// How the index follows the files, per project:
//
//   - The Store remembers, per project, the stamp (size, modification time,
//     inode, mode) of every note file it last read, and the stamp of the
//     memory directory itself. The index stores each note's stamp too, so a
//     Store started later (a daemon restart) loads them with Entries and
//     reads only the files whose stamps differ: a reconciliation, not a
//     rebuild.
//   - Changes are reported per project: by Write (its own writes) and by
//     Changed (the daemon forwards the project registry's file-system
//     events on .troupe/memory). Nothing is shared between projects: a
//     write in one never makes another rescan.
//   - Before a search, the cheap check: when the project's folder is
//     watched (Watched), nothing was reported and one stat of the
//     directory finds it as it was, the index is up to date and no file is
//     listed or read. Reported names are stat'ed alone. A changed directory
//     (a file created, removed or renamed: seen before its event arrives)
//     or a report of "anything" makes a scan: one listing and one stat per
//     file, and only the files whose stamps changed are read.
//   - A folder that is not watched (no watcher, a watch that failed, a
//     folder that appeared since) is scanned at every search: correct,
//     slower, still reading only what changed.

// fileStamp is what a directory listing tells of a note file: when any
// field differs, the file may have changed and is read again.
type fileStamp struct {
	size  int64
	mtime int64 // unix nanoseconds
	ino   uint64
	mode  fs.FileMode
}

func stampOf(fi fs.FileInfo) fileStamp {
	return fileStamp{size: fi.Size(), mtime: fi.ModTime().UnixNano(), ino: inode(fi), mode: fi.Mode()}
}

// String is the stamp as an Index keeps it: "size:mtime:inode:mode".
func (f fileStamp) String() string {
	return fmt.Sprintf("%d:%d:%d:%o", f.size, f.mtime, f.ino, uint32(f.mode))
}

// parseStamp reads String's form; anything else gives a stamp that matches
// no file (size -1), so the file is read again.
func parseStamp(s string) fileStamp {
	bad := fileStamp{size: -1}
	parts := strings.Split(s, ":")
	if len(parts) != 4 {
		return bad
	}
	size, err1 := strconv.ParseInt(parts[0], 10, 64)
	mtime, err2 := strconv.ParseInt(parts[1], 10, 64)
	ino, err3 := strconv.ParseUint(parts[2], 10, 64)
	mode, err4 := strconv.ParseUint(parts[3], 8, 32)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return bad
	}
	return fileStamp{size: size, mtime: mtime, ino: ino, mode: fs.FileMode(mode)}
}

// dirStamp is the memory directory as one stat sees it: its modification
// time changes when an entry is created, removed or renamed (not when a
// file is written in place: only a watcher tells that).
type dirStamp struct {
	exists bool
	mtime  int64
	ino    uint64
}

// statDir stats the memory directory at path; ok is false when the stat
// failed otherwise than by its absence (the scan then says why).
func statDir(path string) (d dirStamp, ok bool) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return dirStamp{}, true
	}
	if err != nil || !fi.IsDir() {
		return dirStamp{}, false
	}
	return dirStamp{exists: true, mtime: fi.ModTime().UnixNano(), ino: inode(fi)}, true
}

// fileState is what the Store last saw of one note file.
type fileState struct {
	stamp   fileStamp
	indexed bool   // a good note, in the index; false for a bad file
	desc    string // its description, for the briefing
}

// maxPending bounds the names reported between two syncs of a project;
// past it, the next sync scans the folder.
const maxPending = 1024

// projectSync is what the index holds for one project, and what was
// reported changed since.
type projectSync struct {
	// abs is the project folder searches gave; guarded by Store.mu.
	abs string

	// mu is held during a sync of the project; it guards the fields below
	// it, up to dmu.
	mu     sync.Mutex
	synced bool                  // files and dir are what the index holds
	root   string                // the project folder they are of
	dir    dirStamp              // the memory directory before the last scan
	files  map[string]*fileState // by file name: every note file seen, good or bad
	brief  *string               // the briefing of files, once made; nil when they changed

	// dmu guards the fields below. It is never held across I/O, so that
	// whoever reports changes never waits on a sync.
	dmu     sync.Mutex
	watched bool            // changes of the folder are reported (Watched)
	all     bool            // anything may have changed: scan the folder
	names   map[string]bool // note files reported changed since the last sync
}

// mark records that file changed; "" means anything may have.
func (ps *projectSync) mark(file string) {
	ps.dmu.Lock()
	defer ps.dmu.Unlock()
	switch {
	case ps.all:
	case file == "" || len(ps.names) >= maxPending:
		ps.all, ps.names = true, nil
	case isNoteFile(file):
		if ps.names == nil {
			ps.names = map[string]bool{}
		}
		ps.names[file] = true
	}
}

// take returns what was reported since the last take, and clears it.
func (ps *projectSync) take() (watched, all bool, names []string) {
	ps.dmu.Lock()
	defer ps.dmu.Unlock()
	for name := range ps.names {
		names = append(names, name)
	}
	watched, all = ps.watched, ps.all
	ps.all, ps.names = false, nil
	return watched, all, names
}

// project returns the sync state of project id, made on first use. A
// non-empty abs records the project's folder, for Write's reports.
func (s *Store) project(id troupe.ProjectID, abs string) *projectSync {
	s.mu.Lock()
	defer s.mu.Unlock()
	ps := s.projects[id]
	if ps == nil {
		ps = &projectSync{}
		s.projects[id] = ps
	}
	if abs != "" {
		ps.abs = abs
	}
	return ps
}

// Watched tells s whether the memory folder (.troupe/memory) of project p
// is watched from now on: while it is, every change of a file in it is
// reported with Changed, and a search that finds nothing reported and the
// folder's own stat unchanged lists and reads nothing. Watched(p, true)
// makes the next search scan once (what changed before the watch began
// was not reported); after Watched(p, false), and for a project never
// watched, every search lists the folder and stats its files, reading only
// those that changed. It never blocks on I/O.
func (s *Store) Watched(p troupe.ProjectID, on bool) {
	ps := s.project(p, "")
	ps.dmu.Lock()
	ps.watched = on
	ps.dmu.Unlock()
	if on {
		ps.mark("")
	}
}

// Changed tells s that the file called name in the memory folder of
// project p changed: written, created, removed or renamed. name "" means
// that anything in the folder may have (a lost event). Files that cannot
// be notes (hidden, not *.md) are ignored. It never blocks on I/O.
func (s *Store) Changed(p troupe.ProjectID, name string) {
	s.project(p, "").mark(name)
}

// Forget drops what s knows of project p, once it is removed. (The index's
// rows of a removed project go with it.)
func (s *Store) Forget(p troupe.ProjectID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.projects, p)
}

// changed reports a write of file in the project folder abs to every
// project of that folder.
func (s *Store) changed(abs, file string) {
	s.mu.Lock()
	var hit []*projectSync
	for _, ps := range s.projects {
		if ps.abs == abs {
			hit = append(hit, ps)
		}
	}
	s.mu.Unlock()
	for _, ps := range hit {
		ps.mark(file)
	}
}

func (s *Store) saw(what, path string) {
	if s.observe != nil {
		s.observe(what, path)
	}
}

// sync brings the index up to date with the notes of project p, and
// returns the project's state.
func (s *Store) sync(ctx context.Context, p troupe.Project) (*projectSync, error) {
	abs, err := filepath.Abs(p.Path)
	if err != nil {
		return nil, err
	}
	ps := s.project(p.ID, abs)
	ps.mu.Lock()
	defer ps.mu.Unlock()
	watched, all, names := ps.take()
	dir, ok := statDir(filepath.Join(abs, filepath.FromSlash(Dir)))
	if ps.synced && ps.root == abs && !all && ok && dir == ps.dir {
		switch {
		case !dir.exists:
			return ps, nil // no folder: no notes, nothing to list
		case watched && len(names) == 0:
			return ps, nil // the cheap check: nothing reported, no entry added or removed
		case watched:
			err = s.update(ctx, p.ID, abs, ps, dir, names)
		default:
			err = s.update(ctx, p.ID, abs, ps, dir, nil)
		}
	} else {
		err = s.update(ctx, p.ID, abs, ps, dir, nil)
	}
	if err != nil {
		ps.synced = false
		ps.mark("") // what was taken is not done: the next sync scans
		return nil, err
	}
	return ps, nil
}

// update brings the index up to date with the files named, or with every
// file of the folder when names is nil, reading only those whose stamps
// changed. dir is the folder's stamp taken before. ps.mu is held.
func (s *Store) update(ctx context.Context, id troupe.ProjectID, abs string, ps *projectSync, dir dirStamp, names []string) error {
	if !ps.synced || ps.root != abs {
		// First sync of this Store: start from what the index holds.
		es, err := s.idx.Entries(ctx, id)
		if err != nil {
			return fmt.Errorf("read index: %w", err)
		}
		ps.files, ps.brief = make(map[string]*fileState, len(es)), nil
		for _, e := range es {
			ps.files[e.Name+".md"] = &fileState{stamp: parseStamp(e.Stamp), indexed: true, desc: e.Description}
		}
		ps.root = abs
		names = nil
	}
	_, root, err := openDir(abs, false)
	if err != nil {
		return err
	}
	if root != nil {
		defer root.Close()
	}

	// now: the stamps on disk of the files to look at; absent ones are gone.
	now := map[string]fileStamp{}
	look := names
	if names == nil {
		if root != nil {
			s.saw("scan", filepath.Join(abs, filepath.FromSlash(Dir)))
			files, err := scan(root)
			if err != nil {
				return err
			}
			for _, fi := range files {
				now[fi.Name()] = stampOf(fi)
			}
		}
		look = make([]string, 0, max(len(now), len(ps.files)))
		for name := range now {
			look = append(look, name)
		}
		for name := range ps.files {
			if _, ok := now[name]; !ok {
				look = append(look, name)
			}
		}
	} else if root != nil {
		for _, name := range names {
			fi, err := root.Lstat(name)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return fmt.Errorf("stat %s/%s: %w", Dir, name, err)
			}
			now[name] = stampOf(fi)
		}
	}

	var (
		put  []Entry
		drop []string
		bad  []error
		next = map[string]*fileState{} // applied once the index took it; nil: gone
	)
	gone := func(name string, old *fileState) {
		if old != nil {
			if old.indexed {
				drop = append(drop, strings.TrimSuffix(name, ".md"))
			}
			next[name] = nil
		}
	}
	for _, name := range look {
		old := ps.files[name]
		st, ok := now[name]
		if !ok {
			gone(name, old)
			continue
		}
		if old != nil && old.stamp == st {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		// The stamp was taken before the read: the content read is at
		// least as new, and a later change shows as another stamp.
		s.saw("read", filepath.Join(abs, filepath.FromSlash(Dir), name))
		n, err := readNote(root, abs, name)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			gone(name, old)
		case err != nil:
			bad = append(bad, err)
			if old != nil && old.indexed {
				drop = append(drop, strings.TrimSuffix(name, ".md"))
			}
			next[name] = &fileState{stamp: st}
		default:
			put = append(put, Entry{Note: n, Stamp: st.String()})
			next[name] = &fileState{stamp: st, indexed: true, desc: n.Description}
		}
	}
	if len(bad) > 0 {
		s.log.Warn("memory notes left out of the search index", "project", id, "err", &NotesError{Errs: bad})
	}
	if len(put) > 0 || len(drop) > 0 {
		if err := s.idx.Update(ctx, id, put, drop); err != nil {
			return fmt.Errorf("index notes: %w", err)
		}
	}
	if len(next) > 0 {
		ps.brief = nil
	}
	for name, f := range next {
		if f == nil {
			delete(ps.files, name)
		} else {
			ps.files[name] = f
		}
	}
	ps.dir, ps.synced = dir, true
	return nil
}
