package claudesessions

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
)

// Store keeps the index between daemon runs (internal/store/sqlite
// implements it; MemStore in memory).
type Store interface {
	// ClaudeFiles returns every file the index saved.
	ClaudeFiles(ctx context.Context) ([]File, error)
	// SaveClaudeFiles records changed files and forgets removed paths, in
	// one transaction.
	SaveClaudeFiles(ctx context.Context, changed []File, removed []string) error
}

// Defaults of Options.
const (
	DefaultMaxLine = 8 << 20 // a line longer than this is skipped and counted
	DefaultMaxFile = 1 << 30 // nothing past this offset of a file is read
	// DefaultHeadTail is how much of a new file's head and tail a sync
	// reads when the file is bigger than twice this; Deepen reads the rest.
	DefaultHeadTail = 16 << 10
	// DefaultRescan is how old the last full stat pass may be when a
	// watcher reports: after it, a listing stats every file again.
	DefaultRescan = 30 * time.Second
)

// Options configures an Index. Dir is required.
type Options struct {
	// Dir is Claude Code's config folder: $CLAUDE_CONFIG_DIR, else
	// ~/.claude (ConfigDir). Transcripts are <Dir>/projects/*/*.jsonl.
	Dir     string
	Store   Store // nil: a MemStore
	Logger  *slog.Logger
	MaxLine int // default DefaultMaxLine
	MaxFile int64
	// HeadTail: see DefaultHeadTail; negative: a sync reads new files whole.
	HeadTail int64
	Rescan   time.Duration
	Now      func() time.Time
	// Workers reading files at once; default GOMAXPROCS.
	Workers int
}

// Index is the transcript index. Create it with NewIndex.
type Index struct {
	o    Options
	log  *slog.Logger
	root string // <Dir>/projects

	syncMu sync.Mutex // one Sync at a time; held while files are read

	// mu guards the fields below.
	mu       sync.Mutex
	loaded   bool
	files    map[string]*File // by path; a File is never changed once stored, only replaced
	watching bool             // a watcher reports every change
	dirty    map[string]bool  // paths reported since the last sync
	full     bool             // a full stat pass is due (overflow, new folder, start)
	lastFull time.Time
	report   SyncReport

	deepen chan struct{} // poked when a sync left files read at head and tail only
	noted  chan struct{} // poked (coalesced) after Watching or Changed: what tests wait on
}

// SyncReport says what the last Sync did.
type SyncReport struct {
	Full    bool          // every file was stat'ed
	Stated  int           // files stat'ed
	Read    int           // files read (wholly or from their last offset)
	Bytes   int64         // bytes read
	Removed int           // files gone since the last sync
	Errors  int           // files that could not be read (skipped)
	Took    time.Duration //
}

// NewIndex returns an index of o.Dir; nothing is read before the first
// Sync.
func NewIndex(o Options) *Index {
	if o.Store == nil {
		o.Store = NewMemStore()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxLine <= 0 {
		o.MaxLine = DefaultMaxLine
	}
	if o.MaxFile <= 0 {
		o.MaxFile = DefaultMaxFile
	}
	if o.HeadTail == 0 {
		o.HeadTail = DefaultHeadTail
	}
	if o.HeadTail < 0 {
		o.HeadTail = 0
	}
	if o.Rescan <= 0 {
		o.Rescan = DefaultRescan
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	return &Index{o: o, log: o.Logger, root: filepath.Join(o.Dir, "projects"),
		files: map[string]*File{}, dirty: map[string]bool{}, full: true, deepen: make(chan struct{}, 1), noted: make(chan struct{}, 1)}
}

// Root is the folder of the transcripts' project folders.
func (x *Index) Root() string { return x.root }

// Watching tells the index whether a watcher reports every change under
// Root (true once its watches are in place; false when it stops). While
// watching, a sync stats only the files reported since the last one, plus
// a full pass every Rescan.
func (x *Index) Watching(on bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.watching = on
	x.full = true
	x.note()
}

// note pokes noted without blocking.
func (x *Index) note() {
	select {
	case x.noted <- struct{}{}:
	default:
	}
}

// Changed reports a change under Root: a transcript's path, or "" when
// anything may have changed (a folder came or went, the watcher's queue
// overflowed).
func (x *Index) Changed(path string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	defer x.note()
	if path == "" {
		x.full = true
		return
	}
	if len(x.dirty) >= 4096 { // bounded: past this a full pass is as cheap
		x.full = true
		clear(x.dirty)
		return
	}
	x.dirty[path] = true
}

// Sync brings the index up to date with the folder: changed files are
// read (from their last offset when they only grew), removed ones
// forgotten, and the changes saved to the store.
func (x *Index) Sync(ctx context.Context) (SyncReport, error) {
	x.syncMu.Lock()
	defer x.syncMu.Unlock()
	start := x.o.Now()
	if err := x.load(ctx); err != nil {
		return SyncReport{}, err
	}
	x.mu.Lock()
	full := x.full || !x.watching || start.Sub(x.lastFull) >= x.o.Rescan
	dirty := x.dirty
	x.dirty = map[string]bool{}
	x.full = false
	// what the sync compares with: every stamp for a full pass, the
	// reported files' otherwise (no copy of the whole table)
	var known map[string]*File
	if full {
		known = make(map[string]*File, len(x.files))
		for p, f := range x.files {
			known[p] = f
		}
	} else {
		known = make(map[string]*File, len(dirty))
		for p := range dirty {
			if f, ok := x.files[p]; ok {
				known[p] = f
			}
		}
	}
	x.mu.Unlock()

	rep := SyncReport{Full: full}
	var cands []candidate
	var removed []string
	if full {
		seen, err := x.list()
		if err != nil {
			x.mu.Lock()
			x.full = true
			x.mu.Unlock()
			return rep, err
		}
		rep.Stated = len(seen)
		for p, st := range seen {
			f, ok := known[p]
			if !ok || f.Stamp != st {
				cands = append(cands, candidate{f: fileFor(p, f)})
			}
		}
		for p := range known {
			if _, ok := seen[p]; !ok {
				removed = append(removed, p)
			}
		}
	} else {
		for p := range dirty {
			if !x.transcriptPath(p) {
				continue
			}
			rep.Stated++
			fi, err := os.Lstat(p)
			f, ok := known[p]
			if err != nil || !fi.Mode().IsRegular() {
				if ok {
					removed = append(removed, p)
				}
				continue
			}
			if !ok || f.Stamp != stampOf(fi) {
				cands = append(cands, candidate{f: fileFor(p, f)})
			}
		}
	}
	changed := x.readAll(ctx, cands, x.o.HeadTail, &rep)
	rep.Removed = len(removed)
	if len(changed) > 0 || len(removed) > 0 {
		if err := x.o.Store.SaveClaudeFiles(ctx, changed, removed); err != nil {
			// the files stay stale in memory too: the next sync reads them again
			x.mu.Lock()
			x.full = true
			x.mu.Unlock()
			return rep, fmt.Errorf("save claude sessions index: %w", err)
		}
	}
	x.mu.Lock()
	for i := range changed {
		x.files[changed[i].Path] = &changed[i]
	}
	for _, p := range removed {
		delete(x.files, p)
	}
	if full {
		x.lastFull = start
	}
	rep.Took = x.o.Now().Sub(start)
	x.report = rep
	x.mu.Unlock()
	for _, f := range changed {
		if !f.Complete {
			x.pokeDeepen()
			break
		}
	}
	return rep, nil
}

func (x *Index) pokeDeepen() {
	select {
	case x.deepen <- struct{}{}:
	default:
	}
}

// complete reads path whole now if a sync read it at head and tail only
// (a caller that shows one session wants its exact counts).
func (x *Index) complete(ctx context.Context, path string) error {
	x.syncMu.Lock()
	defer x.syncMu.Unlock()
	x.mu.Lock()
	f, ok := x.files[path]
	x.mu.Unlock()
	if !ok || f.Complete {
		return nil
	}
	var rep SyncReport
	changed := x.readAll(ctx, []candidate{{f: *f}}, 0, &rep)
	if len(changed) == 0 {
		return nil // unreadable: the listing's summary stands
	}
	if err := x.o.Store.SaveClaudeFiles(ctx, changed, nil); err != nil {
		return fmt.Errorf("save claude sessions index: %w", err)
	}
	x.mu.Lock()
	x.files[path] = &changed[0]
	x.mu.Unlock()
	return nil
}

// DeepenBatch is how many files one Deepen call reads whole.
const DeepenBatch = 128

// Deepen reads whole up to DeepenBatch of the files a sync read at head
// and tail only, saves them, and reports whether some are left. It holds
// the sync lock while it reads (a listing waits for one batch at most).
// Run calls it in the background until none is left.
func (x *Index) Deepen(ctx context.Context) (more bool, err error) {
	x.syncMu.Lock()
	defer x.syncMu.Unlock()
	x.mu.Lock()
	var cands []candidate
	for _, f := range x.files {
		if !f.Complete {
			if len(cands) == DeepenBatch {
				more = true
				break
			}
			cands = append(cands, candidate{f: *f})
		}
	}
	x.mu.Unlock()
	if len(cands) == 0 {
		return false, nil
	}
	var rep SyncReport
	changed := x.readAll(ctx, cands, 0, &rep)
	if len(changed) > 0 {
		if err := x.o.Store.SaveClaudeFiles(ctx, changed, nil); err != nil {
			return true, fmt.Errorf("save claude sessions index: %w", err)
		}
	}
	x.mu.Lock()
	for i := range changed {
		x.files[changed[i].Path] = &changed[i]
	}
	x.mu.Unlock()
	if rep.Errors > 0 && len(changed) == 0 {
		return false, nil // unreadable now: the next sync's full pass sees them again
	}
	return more, nil
}

type candidate struct {
	f   File
	err error
	n   int64 // bytes read
}

func fileFor(path string, f *File) File {
	if f != nil {
		return *f
	}
	return File{Path: path, Summary: Summary{ID: strings.TrimSuffix(filepath.Base(path), ".jsonl")}}
}

// readAll reads the candidates with o.Workers goroutines (owned here:
// all have returned when it returns) and returns the files that read.
func (x *Index) readAll(ctx context.Context, cands []candidate, headTail int64, rep *SyncReport) []File {
	if len(cands) == 0 {
		return nil
	}
	// biggest first: the workers end together
	slices.SortFunc(cands, func(a, b candidate) int { return int(b.f.Stamp.Size - a.f.Stamp.Size) })
	next := make(chan int)
	out := make([]candidate, len(cands))
	var wg sync.WaitGroup
	for range min(x.o.Workers, len(cands)) {
		wg.Go(func() {
			r := reader{maxLine: x.o.MaxLine}
			for i := range next {
				before := r.n
				f, err := r.update(cands[i].f, x.o.MaxFile, headTail)
				out[i] = candidate{f: f, err: err, n: r.n - before}
			}
		})
	}
	for i := range cands {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	var changed []File
	for _, c := range out {
		if c.f.Path == "" { // not reached: ctx ended
			continue
		}
		if c.err != nil {
			rep.Errors++
			if !errors.Is(c.err, fs.ErrNotExist) {
				x.log.Debug("read claude transcript", "path", c.f.Path, "err", c.err)
			}
			continue
		}
		rep.Read++
		rep.Bytes += c.n
		changed = append(changed, c.f)
	}
	return changed
}

// list stats every transcript under the root: <root>/*/*.jsonl, regular
// files only, no symbolic link followed (neither a project folder nor a
// file).
func (x *Index) list() (map[string]Stamp, error) {
	out := map[string]Stamp{}
	dirs, err := os.ReadDir(x.root)
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list claude projects: %w", err)
	}
	for _, d := range dirs {
		if !d.IsDir() { // a symlink's type is symlink, not dir: skipped
			continue
		}
		dir := filepath.Join(x.root, d.Name())
		es, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range es {
			if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".jsonl") {
				continue
			}
			fi, err := e.Info()
			if err != nil || !fi.Mode().IsRegular() {
				continue
			}
			out[filepath.Join(dir, e.Name())] = stampOf(fi)
		}
	}
	return out, nil
}

// transcriptPath reports whether p is <root>/<folder>/<name>.jsonl.
func (x *Index) transcriptPath(p string) bool {
	if !strings.HasSuffix(p, ".jsonl") {
		return false
	}
	d := filepath.Dir(p)
	return filepath.Dir(d) == x.root && filepath.Base(d) != "." && filepath.Base(d) != ".."
}

// load reads the store once; files of another root are forgotten.
func (x *Index) load(ctx context.Context) error {
	x.mu.Lock()
	loaded := x.loaded
	x.mu.Unlock()
	if loaded {
		return nil
	}
	fs, err := x.o.Store.ClaudeFiles(ctx)
	if err != nil {
		return fmt.Errorf("load claude sessions index: %w", err)
	}
	var other []string
	x.mu.Lock()
	for _, f := range fs {
		if !x.transcriptPath(f.Path) {
			other = append(other, f.Path)
			continue
		}
		x.files[f.Path] = &f
	}
	x.loaded = true
	x.mu.Unlock()
	if len(other) > 0 {
		if err := x.o.Store.SaveClaudeFiles(ctx, nil, other); err != nil {
			x.log.Warn("forget claude sessions of another folder", "err", err)
		}
	}
	return nil
}

// Files returns the indexed files as of the last Sync, in no order.
func (x *Index) Files() []File {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := make([]File, 0, len(x.files))
	for _, f := range x.files {
		out = append(out, *f)
	}
	return out
}

// snapshot returns the indexed files, shared: callers must not change them.
func (x *Index) snapshot() []*File {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := make([]*File, 0, len(x.files))
	for _, f := range x.files {
		out = append(out, f)
	}
	return out
}

// LastSync is the report of the last Sync.
func (x *Index) LastSync() SyncReport {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.report
}

// MemStore is a Store in memory, for tests and a daemon without one.
type MemStore struct {
	mu    sync.Mutex // guards files
	files map[string]File
}

var _ Store = (*MemStore)(nil)

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore { return &MemStore{files: map[string]File{}} }

// ClaudeFiles implements Store.
func (m *MemStore) ClaudeFiles(context.Context) ([]File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]File, 0, len(m.files))
	for _, f := range m.files {
		out = append(out, f)
	}
	return out, nil
}

// SaveClaudeFiles implements Store.
func (m *MemStore) SaveClaudeFiles(_ context.Context, changed []File, removed []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, f := range changed {
		m.files[f.Path] = f
	}
	for _, p := range removed {
		delete(m.files, p)
	}
	return nil
}
