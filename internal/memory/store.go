package memory

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/troupe-dev/troupe/internal/atomicfile"
	"github.com/troupe-dev/troupe/internal/projfile"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// Dir is the directory of a project's notes, relative to the project root.
const Dir = ".troupe/memory"

// DefaultType is the type Write gives a note written without one.
const DefaultType = "project"

// Options configures New. The zero value is ready to use.
type Options struct {
	// Index serves Search. Nil means a new MemIndex.
	Index Index
	// Logger receives warnings about notes left out of the index. Nil
	// discards them.
	Logger *slog.Logger
}

// Store reads, writes and searches the memory notes of project folders. It
// keeps no notes itself: the files are the truth, the Index a cache of
// them, brought up to date per project (see sync.go). A Store is safe for
// concurrent use.
type Store struct {
	idx Index
	log *slog.Logger

	mu sync.Mutex
	// mu guards projects (the map, not its values) and each value's dir.
	projects map[troupe.ProjectID]*projectSync

	// hook, set by tests, runs at the named steps of a write and fails it
	// with its error.
	hook func(step string) error
	// observe, set by tests, is told of each directory scan ("scan", the
	// memory directory) and each note file read ("read", its path).
	observe func(what, path string)
}

// New returns a Store.
func New(opts Options) *Store {
	s := &Store{idx: opts.Index, log: opts.Logger, projects: map[troupe.ProjectID]*projectSync{}}
	if s.idx == nil {
		s.idx = NewMemIndex()
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s
}

// NotesError lists the note files that could not be read, each a
// *troupe.FieldError or an I/O error naming the file. List returns it
// along with the good notes.
type NotesError struct {
	Errs []error
}

func (e *NotesError) Error() string {
	const show = 3
	var b strings.Builder
	for i, err := range e.Errs[:min(show, len(e.Errs))] {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(err.Error())
	}
	if len(e.Errs) > show {
		fmt.Fprintf(&b, "; and %d more bad notes", len(e.Errs)-show)
	}
	return b.String()
}

// Unwrap gives the errors of the files.
func (e *NotesError) Unwrap() []error { return e.Errs }

// List returns the notes of the project in folder dir, in name order,
// without their bodies. A project without a .troupe/memory directory has no
// notes.
//
// Files in .troupe/memory that are not notes are left out and reported: when
// some *.md files are bad (no valid front matter, a name that does not match
// the file name, a symlink...), List returns the good notes and an error
// wrapping a *NotesError. Files whose names start with a dot or do not end
// in ".md" are ignored. Any other error comes with no notes.
func (s *Store) List(ctx context.Context, dir string) ([]Note, error) {
	notes, bad, err := s.load(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("list memory notes: %w", err)
	}
	for i := range notes {
		notes[i].Body = ""
	}
	if len(bad) > 0 {
		return notes, fmt.Errorf("list memory notes: %w", &NotesError{Errs: bad})
	}
	return notes, nil
}

// Read returns the note called name (after Sanitize, so "Liveness Probe"
// reads liveness-probe.md) of the project in folder dir. A missing note
// fails with an error matching troupe.ErrNotFound; a bad one with a
// *troupe.FieldError.
func (s *Store) Read(ctx context.Context, dir, name string) (Note, error) {
	clean := Sanitize(name)
	if clean == "" {
		return Note{}, fmt.Errorf("read memory note: %w", badName(name))
	}
	if err := ctx.Err(); err != nil {
		return Note{}, err
	}
	abs, root, err := openDir(dir, false)
	if err != nil {
		return Note{}, fmt.Errorf("read memory note %s: %w", clean, err)
	}
	err = fs.ErrNotExist
	if root != nil {
		defer root.Close()
		var n Note
		if n, err = readNote(root, abs, clean+".md"); err == nil {
			return n, nil
		}
	}
	if errors.Is(err, fs.ErrNotExist) {
		err = fmt.Errorf("no note of this name (memory_search finds notes by their words): %w", troupe.ErrNotFound)
	}
	return Note{}, fmt.Errorf("read memory note %s: %w", clean, err)
}

// Write saves n in the project in folder dir, as .troupe/memory/<name>.md,
// replacing the note of that name if there is one (only when n.Name is
// that name exactly: a name that sanitizes to an existing note's, like
// "Liveness Probe" for liveness-probe, is refused with an error matching
// troupe.ErrAlreadyExists, not written over it), and returns it as saved:
// with its sanitized name, Path and ModTime. It creates .troupe/memory when
// missing.
//
// n.Name goes through Sanitize; a name that sanitizes to "" is refused. An
// empty Type is saved as DefaultType. The other fields are checked as Parse
// checks them; errors are *troupe.FieldErrors naming the field.
//
// The write is atomic: the note goes to a temporary file in the same
// directory, which is synced to disk and then renamed over the note, and
// the directory is synced. A reader sees the old note or the new one, never
// a part; a failed write leaves the old note and no temporary file. It
// never writes outside .troupe/memory: a .troupe or .troupe/memory that is
// a symlink leading outside the project is refused.
func (s *Store) Write(ctx context.Context, dir string, n Note) (Note, error) {
	raw, name := n.Name, Sanitize(n.Name)
	if name == "" {
		return Note{}, fmt.Errorf("write memory note: %w", badName(n.Name))
	}
	n.Name, n.Path, n.ModTime = name, "", time.Time{}
	if n.Type == "" {
		n.Type = DefaultType
	}
	file := name + ".md"
	rel := Dir + "/" + file
	if field, msg := checkNote(n); msg != "" {
		return Note{}, fmt.Errorf("write memory note %s: %w", name, &troupe.FieldError{File: rel, Field: field, Msg: msg})
	}
	if invalidUTF8([]byte(n.Body)) >= 0 {
		return Note{}, fmt.Errorf("write memory note %s: %w", name, &troupe.FieldError{File: rel, Field: "body", Msg: "not valid UTF-8"})
	}
	data := Format(n)
	if len(data) > MaxNoteSize {
		return Note{}, fmt.Errorf("write memory note %s: %w", name, &troupe.FieldError{File: rel, Field: "body",
			Msg: fmt.Sprintf("note is %d bytes, more than the limit of %d: split it into several notes", len(data), MaxNoteSize)})
	}
	if err := ctx.Err(); err != nil {
		return Note{}, err
	}

	abs, root, err := openDir(dir, true)
	if err != nil {
		return Note{}, fmt.Errorf("write memory note %s: %w", name, err)
	}
	defer root.Close()
	// A name that is not its own sanitized form ("Liveness Probe") must not
	// replace the note it collides with (liveness-probe): only the note's
	// own name replaces it.
	replace := raw == name
	err = atomicfile.WriteIn(root, file, data, 0o644, atomicfile.Options{NoReplace: !replace, Step: s.hook})
	s.changed(abs, file) // even after a failure: the rename may have happened
	if errors.Is(err, fs.ErrExist) && !replace {
		return Note{}, fmt.Errorf("write memory note %q: it becomes %s, the name of an existing note (%s), which it would replace: to replace that note, write it with the name %q; otherwise choose another name: %w",
			raw, name, rel, name, troupe.ErrAlreadyExists)
	}
	if err != nil {
		return Note{}, fmt.Errorf("write memory note %s: %w", name, err)
	}
	fi, err := root.Lstat(file)
	if err != nil {
		return Note{}, fmt.Errorf("write memory note %s: %w", name, err)
	}
	n.Path = filepath.Join(abs, filepath.FromSlash(Dir), file)
	n.ModTime = fi.ModTime()
	return n, nil
}

// Remove deletes the note called name (after Sanitize) of the project in
// folder dir and returns it as it was. A missing note fails with an error
// matching troupe.ErrNotFound. Like Write, it never touches a file outside
// .troupe/memory, and the directory is synced after the removal.
func (s *Store) Remove(ctx context.Context, dir, name string) (Note, error) {
	clean := Sanitize(name)
	if clean == "" {
		return Note{}, fmt.Errorf("remove memory note: %w", badName(name))
	}
	n, err := s.Read(ctx, dir, clean)
	if err != nil {
		return Note{}, fmt.Errorf("remove memory note: %w", err)
	}
	abs, root, err := openDir(dir, false)
	if err != nil {
		return Note{}, fmt.Errorf("remove memory note %s: %w", clean, err)
	}
	if root == nil {
		return Note{}, fmt.Errorf("remove memory note %s: no note of this name: %w", clean, troupe.ErrNotFound)
	}
	defer root.Close()
	file := clean + ".md"
	err = root.Remove(file)
	s.changed(abs, file)
	if errors.Is(err, fs.ErrNotExist) {
		return Note{}, fmt.Errorf("remove memory note %s: no note of this name: %w", clean, troupe.ErrNotFound)
	}
	if err != nil {
		return Note{}, fmt.Errorf("remove memory note %s: %w", clean, err)
	}
	if d, err := root.Open("."); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return n, nil
}

// Search returns at most limit notes of project p (limit <= 0 means
// DefaultSearchLimit, and at most MaxSearchLimit) matching query, most
// relevant first; see Index.Search for what matches. Before searching it
// brings the index up to date with the files that changed since the last
// search (see Watched for what that costs). Bad note files are left out of
// the index (and logged once), not reported: List reports them.
func (s *Store) Search(ctx context.Context, p troupe.Project, query string, limit int) ([]Hit, error) {
	if p.ID == "" || p.Path == "" {
		return nil, fmt.Errorf("search memory notes: project without id or path: %w", troupe.ErrInvalid)
	}
	if len(Terms(query)) == 0 {
		return []Hit{}, nil
	}
	if limit <= 0 {
		limit = DefaultSearchLimit
	}
	limit = min(limit, MaxSearchLimit)
	if _, err := s.sync(ctx, p); err != nil {
		return nil, fmt.Errorf("search memory notes: %w", err)
	}
	hits, err := s.idx.Search(ctx, p.ID, query, limit)
	if err != nil {
		return nil, fmt.Errorf("search memory notes: %w", err)
	}
	if hits == nil {
		hits = []Hit{}
	}
	return hits, nil
}

// load reads every note of the project in dir.
func (s *Store) load(ctx context.Context, dir string) ([]Note, []error, error) {
	abs, root, err := openDir(dir, false)
	if err != nil || root == nil {
		return []Note{}, nil, err
	}
	defer root.Close()
	files, err := scan(root)
	if err != nil {
		return nil, nil, err
	}
	return readAll(ctx, root, abs, files)
}

// scan lists the note files (*.md, not hidden) of the memory directory, in
// name order.
func scan(root *os.Root) ([]fs.FileInfo, error) {
	d, err := root.Open(".")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	entries, err := d.ReadDir(-1)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", Dir, err)
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	var files []fs.FileInfo
	for _, e := range entries {
		if !isNoteFile(e.Name()) {
			continue
		}
		fi, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since ReadDir
		}
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", Dir, err)
		}
		files = append(files, fi)
	}
	return files, nil
}

// isNoteFile reports whether a file of the memory directory may be a note:
// its name ends in ".md" and does not start with a dot (a write's
// temporary file does).
func isNoteFile(name string) bool {
	return !strings.HasPrefix(name, ".") && strings.HasSuffix(name, ".md")
}

// readAll reads the notes of files, setting the bad ones aside.
func readAll(ctx context.Context, root *os.Root, abs string, files []fs.FileInfo) ([]Note, []error, error) {
	notes := []Note{}
	var bad []error
	for _, fi := range files {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		n, err := readNote(root, abs, fi.Name())
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue // removed since the scan
		case err != nil:
			bad = append(bad, err)
		default:
			notes = append(notes, n)
		}
	}
	return notes, bad, nil
}

// readNote reads and parses file in the memory directory of the project in
// abs, and checks that the note's name is the file's. A missing file fails
// with an error matching fs.ErrNotExist.
func readNote(root *os.Root, abs, file string) (Note, error) {
	rel := Dir + "/" + file
	stem := strings.TrimSuffix(file, ".md")
	if Sanitize(stem) != stem {
		msg := "the file name is not a note name: " + nameRule
		if s := Sanitize(stem); s != "" {
			msg = fmt.Sprintf("the file name is not a note name: rename it to %s.md", s)
		}
		return Note{}, &troupe.FieldError{File: rel, Msg: msg}
	}
	// Lstat first, so that a symlink is refused, not followed; then read
	// with projfile (no wait on a FIFO, 1 MB cap) and check that the file
	// read is the one checked. A writer renaming a new version over the
	// note in between makes that fail: try again.
	var (
		data    []byte
		modTime time.Time
	)
	for attempt := 1; ; attempt++ {
		fi, err := root.Lstat(file)
		if err != nil {
			return Note{}, fmt.Errorf("read %s: %w", rel, err)
		}
		if err := checkFile(rel, fi); err != nil {
			return Note{}, err
		}
		var ofi fs.FileInfo
		data, ofi, err = projfile.Note.Read(root, file)
		if fe, ok := errors.AsType[*troupe.FieldError](err); ok {
			fe.File = rel
			return Note{}, fe
		}
		if err != nil {
			return Note{}, fmt.Errorf("read %s: %w", rel, err)
		}
		if os.SameFile(fi, ofi) {
			modTime = ofi.ModTime()
			break
		}
		if attempt == 5 {
			return Note{}, fmt.Errorf("read %s: the file keeps being replaced: try again", rel)
		}
	}
	n, lines, err := parse(rel, data)
	if err != nil {
		return Note{}, err
	}
	if n.Name != stem {
		return Note{}, &troupe.FieldError{File: rel, Line: lines.name, Field: "name",
			Msg: fmt.Sprintf("%q does not match the file name: rename the file to %s.md, or the note to %q", n.Name, n.Name, stem)}
	}
	n.Path = filepath.Join(abs, filepath.FromSlash(Dir), file)
	n.ModTime = modTime
	return n, nil
}

// checkFile refuses what is not a regular file of a reasonable size.
func checkFile(rel string, fi fs.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return &troupe.FieldError{File: rel, Msg: "is " + projfile.Describe(fi.Mode()) + ": a note must be a regular file in " + Dir}
	}
	if fi.Size() > MaxNoteSize {
		return &troupe.FieldError{File: rel,
			Msg: fmt.Sprintf("note is %d bytes, more than the limit of %d: split it into several notes", fi.Size(), MaxNoteSize)}
	}
	return nil
}

func badName(name string) error {
	return &troupe.FieldError{Field: "name", Msg: fmt.Sprintf("%q has no letter or digit: %s", name, nameRule)}
}

// openDir opens the memory directory of the project in dir, creating it
// when create is set. Without create, a missing directory gives a nil Root
// and no error. It returns the project's absolute path with the Root.
//
// The Root keeps every later access inside the memory directory. Before
// opening it, openDir refuses, with a message saying what to do, a .troupe
// or .troupe/memory that leads outside the project through a symlink, or
// that is a symlink with an absolute target even inside the project:
// os.Root would refuse both, with a less helpful message.
func openDir(dir string, create bool) (string, *os.Root, error) {
	if dir == "" {
		return "", nil, fmt.Errorf("no project directory: %w", troupe.ErrInvalid)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", nil, err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", nil, fmt.Errorf("project directory: %w", err)
	}
	for _, rel := range []string{".troupe", Dir} {
		p := filepath.Join(abs, filepath.FromSlash(rel))
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			continue
		} else if err != nil {
			return "", nil, err
		}
		target, err := filepath.EvalSymlinks(p)
		if err != nil {
			return "", nil, fmt.Errorf("%s: %w", rel, err)
		}
		if !within(real, target) {
			return "", nil, fmt.Errorf("%s leads to %s, outside the project: notes must stay inside the project, so make %s a real directory: %w",
				rel, target, rel, troupe.ErrInvalid)
		}
		if link, err := os.Readlink(p); err == nil && filepath.IsAbs(link) {
			return "", nil, fmt.Errorf("%s is a symlink to the absolute path %s: make it a relative symlink or a real directory: %w",
				rel, link, troupe.ErrInvalid)
		}
	}
	proj, err := os.OpenRoot(abs)
	if err != nil {
		return "", nil, fmt.Errorf("project directory: %w", err)
	}
	defer proj.Close()
	if create {
		if err := proj.MkdirAll(Dir, 0o755); err != nil {
			return "", nil, fmt.Errorf("create %s: %w", Dir, err)
		}
	}
	root, err := proj.OpenRoot(Dir)
	if !create && errors.Is(err, fs.ErrNotExist) {
		return abs, nil, nil
	}
	if err != nil {
		return "", nil, fmt.Errorf("open %s: %w", Dir, err)
	}
	return abs, root, nil
}

// within reports whether path is base or inside it. Both are clean
// absolute paths.
func within(base, path string) bool {
	rel, err := filepath.Rel(base, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
