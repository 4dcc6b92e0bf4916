package project

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/troupe-dev/troupe/internal/atomicfile"
	"github.com/troupe-dev/troupe/internal/projfile"
	"github.com/troupe-dev/troupe/internal/troupe"
	"github.com/troupe-dev/troupe/internal/worktree"
)

// Info is a registered project with its team state.
type Info struct {
	troupe.Project
	Team *Team `json:"-"`
	// TeamError is why the team file on disk was not loaded, if it was not;
	// Team then holds the last good team, or nil.
	TeamError string `json:"team_error,omitempty"`
}

// Options configures a Registry. Store is required.
type Options struct {
	Store  Store
	Logger *slog.Logger
	// Check, if set, validates each agent's engine options whenever a team
	// is loaded (engine.Engine.Check); a failing check is a team error, as a
	// parse error is. See ParseTeamChecked.
	Check func(troupe.AgentSpec) error
	// Debounce is how long the watcher waits for a burst of file events to
	// settle before reloading; default 50ms.
	Debounce time.Duration
	// Memory, if set, is told of the memory-note folders Run watches and of
	// every change in them (see MemoryWatcher).
	Memory MemoryWatcher
	// Profiles is the folder of the person's agent profiles (ProfileDir);
	// "": ProfileDir of this process's environment. Run watches it: a
	// profile's change reloads the teams that use it.
	Profiles string
}

// MemoryDir is the folder of a project's memory notes (memory.Dir), whose
// changes Run reports to Options.Memory.
const MemoryDir = ".troupe/memory"

// MemoryWatcher is told by Run about each project's memory-note folder
// (MemoryDir): Watched(p, true) once a watch on it is in place, then
// Changed for each file event in it (name is the file's base name; "" when
// events were lost), and Watched(p, false) when the watch ends (the folder
// removed or moved, the project removed, Run returning). A project whose
// folder does not exist, or whose watch failed, is never Watched. Both
// methods run on Run's goroutine and must not block.
type MemoryWatcher interface {
	Watched(p troupe.ProjectID, on bool)
	Changed(p troupe.ProjectID, name string)
}

// entry is one project. Its info.Team is the team in force, which is the
// approved team (C17): the registry keeps the two the same, approving at
// once what only narrows.
type entry struct {
	// op serializes the loads, approvals and rejections of this project
	// (file read, merge, store write), so that the store ends with the
	// last one; it is taken before Registry.mu, never inside it. It guards
	// saved.
	op    sync.Mutex
	saved Approval // as last saved in the Store
	// Guarded by Registry.mu:
	info     Info
	source   []byte      // the team file's content last parsed; nil for none
	file     *Team       // that file's team; nil when none, or when the file does not load
	held     []HeldAgent // what file grants beyond the team in force
	heldChks []HeldCheck // the checks file adds or widens beyond the team in force
	rejected string      // digest of the file content the person rejected
	loaded   bool        // its team file was read once (Open or Add)
	// profiles are the profiles the team file names; resolved is the
	// team file followed by their contents, whose digest names what the
	// person approves or rejects (Pending.Digest).
	profiles []string
	resolved []byte
}

// Registry is the set of registered projects and their teams.
type Registry struct {
	store    Store
	log      *slog.Logger
	check    func(troupe.AgentSpec) error
	debounce time.Duration
	memory   MemoryWatcher // nil: memory folders are not watched
	profDir  string        // the person's profiles folder; "": none

	// mu guards the fields below.
	mu       sync.Mutex
	projects map[troupe.ProjectID]*entry
	onChange func(troupe.TeamChange)
	onRemove func(troupe.ProjectID)
	watcher  *fsnotify.Watcher // Run's, while it runs; nil otherwise
	// memWatched holds the projects whose memory folder the watcher
	// watches; memWarned is set once a watch on one failed (logged once).
	memWatched map[troupe.ProjectID]string
	memWarned  bool
}

// Open loads the registered projects from the store and their teams from
// disk. A team file that does not load leaves the last good team saved in
// the store in force. Open notifies nobody (List tells what it loaded) and
// holds no resource: there is nothing to close. Call Run to watch team files.
func Open(ctx context.Context, o Options) (*Registry, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Debounce <= 0 {
		o.Debounce = 50 * time.Millisecond
	}
	if o.Profiles == "" {
		o.Profiles = defaultProfileDir()
	}
	r := &Registry{store: o.Store, log: o.Logger, profDir: o.Profiles,
		check: o.Check, debounce: o.Debounce, memory: o.Memory, projects: map[troupe.ProjectID]*entry{},
		memWatched: map[troupe.ProjectID]string{}}
	ps, err := o.Store.Projects(ctx)
	if err != nil {
		return nil, fmt.Errorf("load projects: %w", err)
	}
	for _, p := range ps {
		e := &entry{info: Info{Project: p}}
		a, saved, err := o.Store.Approval(ctx, p.ID)
		if err != nil {
			return nil, fmt.Errorf("load approved team of %s: %w", p.ID, err)
		}
		if saved {
			e.saved, e.rejected = a, a.Rejected
		} else if last, err := o.Store.LastTeam(ctx, p.ID); err == nil && last != nil {
			// Registered before approvals were kept: the team it ran
			// last counts as approved.
			a.Team = last
		}
		if len(a.Team) > 0 {
			t, err := ParseTeamChecked(filepath.Join(p.Path, TeamFile)+" (approved)", a.Team, o.Check)
			if err != nil {
				r.log.Error("approved team not loaded: the project has no agent until a team is approved", "project", p.ID, "err", err)
			}
			e.info.Team = t
		}
		r.mu.Lock()
		r.projects[p.ID] = e
		r.mu.Unlock()
		r.load(ctx, p.ID, true, false)
	}
	return r, nil
}

// Listen sets the functions called after a team changes (and with the
// whole team, as added, of a project when it is added; Open calls
// neither: read the teams loaded at start with List) and after a project
// is removed. They must not block for long nor call back into the
// Registry. A setter, not an option: the listeners (the runtime) need the
// registry built first. Call it before Run and Add.
func (r *Registry) Listen(onChange func(troupe.TeamChange), onRemove func(troupe.ProjectID)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.onChange, r.onRemove = onChange, onRemove
}

// Run watches the team files of registered projects until ctx ends. It
// owns the file watcher: it creates it, first reloads every team (a file
// edited since Open is seen), and closes the watcher when it returns. It
// returns nil on cancellation.
func (r *Registry) Run(ctx context.Context) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("open file watcher: %w", err)
	}
	r.mu.Lock()
	if r.watcher != nil {
		r.mu.Unlock()
		w.Close()
		return errors.New("watch team files: already watching")
	}
	r.watcher = w
	roots := map[troupe.ProjectID]string{}
	var ids []troupe.ProjectID
	for id, e := range r.projects {
		roots[id] = e.info.Path
		if e.loaded { // Add loads the others, once watched
			ids = append(ids, id)
		}
	}
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.watcher = nil
		var unwatched []troupe.ProjectID
		for id := range r.memWatched {
			unwatched = append(unwatched, id)
		}
		clear(r.memWatched)
		r.mu.Unlock()
		w.Close()
		for _, id := range unwatched {
			r.memory.Watched(id, false)
		}
	}()
	for id, root := range roots {
		r.watch(id, root)
	}
	r.watchProfiles()
	for _, id := range ids {
		r.reload(ctx, id, false, false)
	}

	timer := time.NewTimer(time.Hour)
	timer.Stop()
	pending := map[troupe.ProjectID]bool{}
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if r.memoryEvent(ev) {
				continue
			}
			if id, ok := r.projectOfEvent(ev.Name); ok {
				if filepath.Base(ev.Name) == ".troupe" {
					switch {
					case ev.Has(fsnotify.Create):
						r.watch(id, filepath.Dir(ev.Name))
					case ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename):
						r.unwatchMemory(id) // its watch would follow the moved folder
					}
				}
				pending[id] = true
				timer.Reset(r.debounce)
			} else if ids, _ := r.profileEvent(ev); len(ids) > 0 {
				for _, id := range ids {
					pending[id] = true
				}
				timer.Reset(r.debounce)
			}
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			r.log.Warn("file watcher", "err", err)
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				r.memoryLost()
			}
		case <-timer.C:
			for id := range pending {
				r.reload(ctx, id, false, false)
			}
			clear(pending)
		}
	}
}

// watch adds watches on a project's root (to see .troupe appear), on its
// .troupe folder and on its memory folder when they exist, if Run is
// watching. Missing folders are not an error.
func (r *Registry) watch(id troupe.ProjectID, root string) {
	r.mu.Lock()
	if r.watcher == nil {
		r.mu.Unlock()
		return // Run watches every project when it starts
	}
	for _, dir := range []string{root, filepath.Join(root, ".troupe")} {
		if err := r.watcher.Add(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			r.log.Warn("watch folder", "path", dir, "err", err)
		}
	}
	r.mu.Unlock()
	r.watchMemory(id, root)
}

func (r *Registry) unwatch(id troupe.ProjectID, root string) {
	r.unwatchMemory(id)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.watcher == nil {
		return
	}
	_ = r.watcher.Remove(filepath.Join(root, ".troupe"))
	_ = r.watcher.Remove(root)
}

// watchMemory adds a watch on the memory folder of project id when it
// exists and is not watched yet, and tells Options.Memory. A project
// without the folder costs no watch. A failed watch (the inotify limit
// reached...) is logged once for the registry: the memory store then scans
// that folder at each search.
func (r *Registry) watchMemory(id troupe.ProjectID, root string) {
	if r.memory == nil {
		return
	}
	dir := filepath.Join(root, filepath.FromSlash(MemoryDir))
	r.mu.Lock()
	if r.watcher == nil || r.memWatched[id] != "" {
		r.mu.Unlock()
		return
	}
	err := r.watcher.Add(dir)
	switch {
	case err == nil:
		r.memWatched[id] = dir
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
	case !r.memWarned:
		r.memWarned = true
		r.log.Warn("watch memory notes folder: its searches will scan it (this is said once)", "project", id, "path", dir, "err", err)
	}
	watched := err == nil
	r.mu.Unlock()
	if watched {
		r.memory.Watched(id, true)
	}
}

// unwatchMemory ends the watch on project id's memory folder, if any, and
// tells Options.Memory.
func (r *Registry) unwatchMemory(id troupe.ProjectID) {
	r.mu.Lock()
	dir := r.memWatched[id]
	delete(r.memWatched, id)
	if dir != "" && r.watcher != nil {
		_ = r.watcher.Remove(dir) // gone already when the folder was removed
	}
	r.mu.Unlock()
	if dir != "" {
		r.memory.Watched(id, false)
	}
}

// memoryEvent handles an event of a memory folder, or of a file in one,
// and reports whether it was one.
func (r *Registry) memoryEvent(ev fsnotify.Event) bool {
	if r.memory == nil {
		return false
	}
	var root, file string
	parent := filepath.Dir(ev.Name)
	switch {
	case filepath.Base(ev.Name) == "memory" && filepath.Base(parent) == ".troupe":
		root = filepath.Dir(parent) // the folder itself
	case filepath.Base(parent) == "memory" && filepath.Base(filepath.Dir(parent)) == ".troupe":
		root, file = filepath.Dir(filepath.Dir(parent)), filepath.Base(ev.Name)
	default:
		return false
	}
	id, ok := r.projectAt(root)
	if !ok {
		return false
	}
	switch {
	case file != "":
		r.memory.Changed(id, file)
	case ev.Has(fsnotify.Create):
		r.watchMemory(id, root)
	case ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename):
		r.unwatchMemory(id)
	}
	return true
}

// memoryLost tells Options.Memory that events of every watched memory
// folder may have been lost.
func (r *Registry) memoryLost() {
	r.mu.Lock()
	var ids []troupe.ProjectID
	for id := range r.memWatched {
		ids = append(ids, id)
	}
	r.mu.Unlock()
	for _, id := range ids {
		r.memory.Changed(id, "")
	}
}

// projectAt returns the project whose folder is root.
func (r *Registry) projectAt(root string) (troupe.ProjectID, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, e := range r.projects {
		if e.info.Path == root {
			return id, true
		}
	}
	return "", false
}

// projectOfEvent maps a file event to the project whose team it may touch.
func (r *Registry) projectOfEvent(name string) (troupe.ProjectID, bool) {
	var dir string
	switch {
	case filepath.Base(name) == ".troupe":
		dir = filepath.Dir(name)
	case filepath.Base(filepath.Dir(name)) == ".troupe" && filepath.Base(name) == "team.toml":
		dir = filepath.Dir(filepath.Dir(name))
	default:
		return "", false
	}
	return r.projectAt(dir)
}

// reload loads the team file of project id and notifies what changed.
// initial reports the whole team as added, for a project just added;
// approve takes the file's team as approved by the person.
func (r *Registry) reload(ctx context.Context, id troupe.ProjectID, initial, approve bool) {
	if change, tell := r.load(ctx, id, initial, approve); tell {
		r.notify(change)
	}
}

// load loads the team file of project id, and returns what changed and
// whether that is worth telling. initial compares with no team, for a
// project just loaded or added. The file's agents are merged into the
// team in force (mergeTeam): what widens a grant is held, unless approve.
func (r *Registry) load(ctx context.Context, id troupe.ProjectID, initial, approve bool) (change troupe.TeamChange, tell bool) {
	r.mu.Lock()
	e, ok := r.projects[id]
	if !ok {
		r.mu.Unlock()
		return troupe.TeamChange{}, false
	}
	dir := e.info.Path
	r.mu.Unlock()
	e.op.Lock()
	defer e.op.Unlock()

	// No registry lock held from here to the next: the files are read,
	// and a slow one holds up this project alone.
	src, _, readErr := projfile.Team.ReadIn(dir, TeamFile)
	// The profiles the file names, and their contents after the file's:
	// what the person approves is the two together.
	var profiles []string
	var resolved []byte
	used := func(name string, psrc []byte) {
		if slices.Contains(profiles, name) {
			return // named by several agents: counted once
		}
		profiles = append(profiles, name)
		resolved = fmt.Appendf(resolved, "\x00profile %s\x00%s", name, psrc)
	}
	var team *Team
	var loadErr error
	switch {
	case errors.Is(readErr, fs.ErrNotExist):
		src, team = nil, nil // no team file: an empty team
	case readErr != nil:
		loadErr = readErr
	default:
		resolved = append(resolved, src...)
		team, loadErr = r.parseTeam(dir, src, used)
	}

	r.mu.Lock()
	if r.projects[id] != e {
		r.mu.Unlock()
		return troupe.TeamChange{}, false
	}
	change = troupe.TeamChange{Project: id}
	e.loaded = true
	e.profiles = profiles
	oldTeam := e.info.Team
	if loadErr != nil {
		change.Error = loadErr.Error()
		sameErr := e.info.TeamError == change.Error
		e.info.TeamError = change.Error
		e.file, e.held, e.heldChks = nil, nil, nil // nothing to approve
		r.mu.Unlock()
		if !sameErr {
			r.log.Warn("team file not loaded; keeping the last good team", "project", id, "err", loadErr)
		}
		return change, !sameErr
	}
	hadErr := e.info.TeamError != ""
	sameFile := bytes.Equal(e.source, src) && (e.source == nil) == (src == nil)
	sameResolved := sameFile && bytes.Equal(e.resolved, resolved)
	wasHeld := len(e.held)+len(e.heldChks) > 0
	next, held, heldChks := team, []HeldAgent(nil), []HeldCheck(nil)
	if approve {
		e.rejected = ""
	} else {
		next, held = mergeTeam(oldTeam, team)
		if next != nil {
			next.Checks, heldChks = mergeChecks(oldTeam, team)
		}
	}
	e.info.TeamError = ""
	e.info.Team, e.source, e.file, e.held, e.heldChks = next, src, team, held, heldChks
	e.resolved = resolved
	want := Approval{Rejected: e.rejected}
	d := digest(resolved)
	heldNow := len(held)+len(heldChks) > 0 && e.rejected != d && (!sameResolved || !wasHeld)
	r.mu.Unlock()

	r.saveApproval(ctx, e, next, want)
	if src != nil && !sameFile {
		if err := r.store.SaveTeam(ctx, id, src); err != nil && !errors.Is(err, troupe.ErrNotFound) {
			r.log.Error("save last good team", "project", id, "err", err)
		}
	}
	if initial {
		oldTeam = nil
	}
	change.Added, change.Removed, change.Changed = diffTeams(oldTeam, next)
	if heldNow {
		for _, h := range held {
			change.Held = append(change.Held, h.Agent)
		}
		for _, h := range heldChks {
			change.HeldChecks = append(change.HeldChecks, h.Check)
		}
		r.log.Warn("team change held for the person's approval (troupe team diff)", "project", id, "agents", change.Held, "checks", change.HeldChecks)
	}
	return change, initial || !change.Empty() || hadErr
}

// parseTeam parses src, the team file of the project in folder dir, its
// agents' profiles merged (used is told each profile read, with its
// contents), and checks each agent as the registry does (its engine,
// prompt file and workspace).
func (r *Registry) parseTeam(dir string, src []byte, used func(name string, src []byte)) (*Team, error) {
	return ParseTeamWith(filepath.Join(dir, TeamFile), src, TeamOptions{Profiles: r.profDir, Used: used, Check: func(a troupe.AgentSpec) error {
		if r.check != nil {
			if err := r.check(a); err != nil {
				return err
			}
		}
		if err := checkPromptFile(dir, a); err != nil {
			return err
		}
		return checkWorkspace(dir, a)
	}})
}

// saveApproval records team as project e's approved team, with a (whose
// Team it sets), when that differs from what is saved. The caller holds
// e.op. A failure is logged: the team stays in force in memory, and the
// last saved one is what the next start loads.
func (r *Registry) saveApproval(ctx context.Context, e *entry, team *Team, a Approval) {
	enc, err := EncodeTeam(team)
	if err == nil {
		a.Team = enc
		if bytes.Equal(a.Team, e.saved.Team) && a.Rejected == e.saved.Rejected && e.saved.Team != nil {
			return
		}
		err = r.store.SaveApproval(ctx, e.info.ID, a)
	}
	switch {
	case err == nil:
		e.saved = a
	case !errors.Is(err, troupe.ErrNotFound):
		r.log.Error("save approved team", "project", e.info.ID, "err", err)
	}
}

// Pending returns the change of project id's team file that waits for the
// person, and false when none does.
func (r *Registry) Pending(id troupe.ProjectID) (Pending, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.projects[id]
	if !ok || len(e.held)+len(e.heldChks) == 0 {
		return Pending{}, false
	}
	d := digest(e.resolved)
	return Pending{Project: id, Digest: d, Agents: slices.Clone(e.held), Checks: slices.Clone(e.heldChks), Rejected: e.rejected == d}, true
}

// Approve puts in force the team file of project id whose content has
// digest d (Pending.Digest), held changes included, and records it as
// approved. It fails with troupe.ErrNotFound when nothing waits, and with
// troupe.ErrConflict when the file changed since d was read.
func (r *Registry) Approve(ctx context.Context, id troupe.ProjectID, d string) error {
	e, err := r.decide(id, d)
	if err != nil {
		return fmt.Errorf("approve team of %s: %w", id, err)
	}
	defer e.op.Unlock()
	r.mu.Lock()
	next := e.file
	r.mu.Unlock()
	enc, err := EncodeTeam(next)
	if err != nil {
		return fmt.Errorf("approve team of %s: %w", id, err)
	}
	a := Approval{Team: enc}
	if err := r.store.SaveApproval(ctx, id, a); err != nil {
		return fmt.Errorf("approve team of %s: %w", id, err)
	}
	e.saved = a
	r.mu.Lock()
	old := e.info.Team
	e.info.Team, e.held, e.heldChks, e.rejected = next, nil, nil, ""
	r.mu.Unlock()
	change := troupe.TeamChange{Project: id}
	change.Added, change.Removed, change.Changed = diffTeams(old, next)
	r.log.Info("team change approved", "project", id, "digest", d)
	r.notify(change)
	return nil
}

// Reject keeps project id's approved team in force and records that the
// person rejected the team file whose content has digest d: it stays held
// (Pending says Rejected) and asks again only once the file changes. Its
// errors are Approve's.
func (r *Registry) Reject(ctx context.Context, id troupe.ProjectID, d string) error {
	e, err := r.decide(id, d)
	if err != nil {
		return fmt.Errorf("reject team of %s: %w", id, err)
	}
	defer e.op.Unlock()
	r.mu.Lock()
	team := e.info.Team
	r.mu.Unlock()
	enc, err := EncodeTeam(team)
	if err != nil {
		return fmt.Errorf("reject team of %s: %w", id, err)
	}
	a := Approval{Team: enc, Rejected: d}
	if err := r.store.SaveApproval(ctx, id, a); err != nil {
		return fmt.Errorf("reject team of %s: %w", id, err)
	}
	e.saved = a
	r.mu.Lock()
	e.rejected = d
	r.mu.Unlock()
	r.log.Info("team change rejected", "project", id, "digest", d)
	return nil
}

// decide returns project id's entry, its op lock held, when a change of
// digest d waits for the person.
func (r *Registry) decide(id troupe.ProjectID, d string) (*entry, error) {
	r.mu.Lock()
	e, ok := r.projects[id]
	r.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("project %s is not registered: %w", id, troupe.ErrNotFound)
	}
	e.op.Lock()
	r.mu.Lock()
	held, cur := len(e.held)+len(e.heldChks) > 0, digest(e.resolved)
	r.mu.Unlock()
	switch {
	case !held:
		e.op.Unlock()
		return nil, fmt.Errorf("no team change waits for approval: %w", troupe.ErrNotFound)
	case d != cur:
		e.op.Unlock()
		return nil, fmt.Errorf("the team file changed since digest %s was read: look at troupe team diff again: %w", short(d), troupe.ErrConflict)
	}
	return e, nil
}

func short(d string) string {
	if len(d) > 12 {
		return d[:12]
	}
	return d
}

func (r *Registry) notify(c troupe.TeamChange) {
	r.mu.Lock()
	f := r.onChange
	r.mu.Unlock()
	if f != nil {
		f(c)
	}
}

// diffTeams lists agents added, removed and changed from a to b.
func diffTeams(a, b *Team) (added, removed, changed []troupe.AgentID) {
	var as, bs []troupe.AgentSpec
	if a != nil {
		as = a.Agents
	}
	if b != nil {
		bs = b.Agents
	}
	for _, nb := range bs {
		i := slices.IndexFunc(as, func(x troupe.AgentSpec) bool { return x.Name == nb.Name })
		switch {
		case i < 0:
			added = append(added, nb.Name)
		case !sameSpec(as[i], nb):
			changed = append(changed, nb.Name)
		}
	}
	for _, na := range as {
		if !slices.ContainsFunc(bs, func(x troupe.AgentSpec) bool { return x.Name == na.Name }) {
			removed = append(removed, na.Name)
		}
	}
	return added, removed, changed
}

// sameSpec compares two definitions, ignoring where they sit in the file.
func sameSpec(a, b troupe.AgentSpec) bool {
	a.Line, b.Line = 0, 0
	return reflect.DeepEqual(a, b) // not by printing: the sandbox's *bool fields print as addresses
}

// Preview is what adding a folder would register: its canonical path and
// the team its team file holds (nil when it has none), with the digest of
// that file (AddSeen approves the team only when the file still has it),
// or the reason the team file does not load.
type Preview struct {
	Path      string
	Team      *Team
	Digest    string
	TeamError string
}

// Preview reads the folder at path as Add would register it, without
// registering it: the same checks of the path, the team file read and
// checked as a load does.
func (r *Registry) Preview(path string) (Preview, error) {
	canon, err := r.checkNew(path)
	if err != nil {
		return Preview{}, fmt.Errorf("preview project: %w", err)
	}
	out := Preview{Path: canon}
	src, _, err := projfile.Team.ReadIn(canon, TeamFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return out, nil
	case err != nil:
		out.TeamError = err.Error()
		return out, nil
	}
	// The digest covers the profiles the file names, as Pending's does:
	// a profile changed between the preview and the add is not approved.
	resolved := slices.Clone(src)
	var seen []string
	used := func(name string, psrc []byte) {
		if !slices.Contains(seen, name) {
			seen = append(seen, name)
			resolved = fmt.Appendf(resolved, "\x00profile %s\x00%s", name, psrc)
		}
	}
	if out.Team, err = r.parseTeam(canon, src, used); err != nil {
		out.Team, out.TeamError = nil, err.Error()
	}
	out.Digest = digest(resolved)
	return out, nil
}

// checkNew returns path made canonical if it can be registered: an existing
// directory, not a pseudo-file system, not registered yet.
func (r *Registry) checkNew(path string) (string, error) {
	canon, err := Canonical(path)
	if err != nil {
		return "", err
	}
	st, err := os.Stat(canon)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	if !st.IsDir() {
		return "", &troupe.FieldError{Field: "path", Msg: canon + " is not a directory: give the project's folder"}
	}
	if err := checkPlace(canon); err != nil {
		return "", err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.projects {
		if e.info.Path == canon {
			return "", fmt.Errorf("%s is already registered as project %s: %w", canon, e.info.ID, troupe.ErrAlreadyExists)
		}
	}
	return canon, nil
}

// AddSeen registers the folder at path as Add does, but approves its team
// only if its team file still has digest seen (Preview's): a file changed
// since the person looked at it is loaded held, its grants waiting for
// the person's approval (Pending) like any change of a team file.
func (r *Registry) AddSeen(ctx context.Context, path, seen string) (Info, error) {
	return r.add(ctx, path, func(id troupe.ProjectID) {
		r.reload(ctx, id, true, false)
		if _, held := r.Pending(id); held {
			if err := r.Approve(ctx, id, seen); err != nil {
				r.log.Warn("team file changed since the person saw it: held for approval", "project", id, "err", err)
			}
		}
	})
}

// Add registers the folder at path. path is made absolute and its symlinks
// resolved; it must be an existing directory not yet registered, and
// neither the file system's root nor in a pseudo-file system (/proc, /sys,
// /dev...). A home folder is accepted.
func (r *Registry) Add(ctx context.Context, path string) (Info, error) {
	// the person adding it approves its team
	return r.add(ctx, path, func(id troupe.ProjectID) { r.reload(ctx, id, true, true) })
}

// add registers the folder at path, then loads its team with load.
func (r *Registry) add(ctx context.Context, path string, load func(troupe.ProjectID)) (Info, error) {
	canon, err := r.checkNew(path)
	if err != nil {
		return Info{}, fmt.Errorf("add project: %w", err)
	}
	p := troupe.Project{ID: NewProjectID(), Path: canon, Name: filepath.Base(canon), AddedAt: time.Now().UTC()}
	if err := r.store.AddProject(ctx, p); err != nil {
		return Info{}, fmt.Errorf("add project %s: %w", path, err)
	}
	r.mu.Lock()
	r.projects[p.ID] = &entry{info: Info{Project: p}}
	r.mu.Unlock()
	r.watch(p.ID, canon)
	load(p.ID)
	info, _ := r.Get(p.ID)
	r.log.Info("project added", "project", p.ID, "path", canon)
	return info, nil
}

// Remove unregisters the project.
func (r *Registry) Remove(ctx context.Context, id troupe.ProjectID) error {
	if err := r.store.RemoveProject(ctx, id); err != nil {
		return fmt.Errorf("remove project %s: %w", id, err)
	}
	r.mu.Lock()
	e, ok := r.projects[id]
	delete(r.projects, id)
	r.mu.Unlock()
	if ok {
		r.unwatch(id, e.info.Path)
	}
	r.mu.Lock()
	f := r.onRemove
	r.mu.Unlock()
	if f != nil {
		f(id)
	}
	r.log.Info("project removed", "project", id)
	return nil
}

// List returns every registered project, ordered by registration.
func (r *Registry) List() []Info {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Info, 0, len(r.projects))
	for _, e := range r.projects {
		out = append(out, e.info)
	}
	slices.SortFunc(out, func(a, b Info) int {
		if c := a.AddedAt.Compare(b.AddedAt); c != 0 {
			return c
		}
		return strings.Compare(string(a.ID), string(b.ID))
	})
	return out
}

// Get returns the project with this id.
func (r *Registry) Get(id troupe.ProjectID) (Info, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.projects[id]
	if !ok {
		return Info{}, false
	}
	return e.info, true
}

// Resolve finds a project by id, or by a path inside it (the deepest
// registered project containing the path wins).
func (r *Registry) Resolve(ref string) (Info, error) {
	if info, ok := r.Get(troupe.ProjectID(ref)); ok {
		return info, nil
	}
	canon, err := Canonical(ref)
	if err != nil {
		return Info{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var best *entry
	for _, e := range r.projects {
		if within(canon, e.info.Path) && (best == nil || len(e.info.Path) > len(best.info.Path)) {
			best = e
		}
	}
	if best == nil {
		return Info{}, fmt.Errorf("find project of %s: no registered project contains it (register it with `troupe project add %s`): %w", canon, canon, troupe.ErrNotFound)
	}
	return best.info, nil
}

// within reports whether path is root or inside it.
func within(path, root string) bool {
	if path == root {
		return true
	}
	return strings.HasPrefix(path, strings.TrimSuffix(root, "/")+"/")
}

// Canonical returns the absolute path with every symlink resolved.
func Canonical(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("resolve path %s: %w", path, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("resolve path %s: %w", path, &troupe.FieldError{Field: "path", Msg: abs + " does not exist: create the folder or fix the path"})
	}
	if err != nil {
		return "", fmt.Errorf("resolve path %s: %w", path, err)
	}
	return real, nil
}

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// NewProjectID mints a fresh random project id ("p" + 16 base32 letters).
func NewProjectID() troupe.ProjectID {
	b := make([]byte, 10)
	rand.Read(b)
	return troupe.ProjectID("p" + idEncoding.EncodeToString(b))
}

// Agent returns the definition of agent k.Agent in project k.Project, and
// the project's folder. It implements the runtime's view of teams.
func (r *Registry) Agent(k troupe.RuntimeKey) (troupe.AgentSpec, string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.projects[k.Project]
	if !ok {
		return troupe.AgentSpec{}, "", false
	}
	a, ok := e.info.Team.Agent(k.Agent)
	return a, e.info.Path, ok
}

// Checks lists the checks in force of project p (the approved team's,
// C17), in file order.
func (r *Registry) Checks(p troupe.ProjectID) []troupe.Check {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.projects[p]
	if !ok || e.info.Team == nil {
		return nil
	}
	return slices.Clone(e.info.Team.Checks)
}

// Check returns the check in force named name of project p (the approved
// team's, C17), and the project's folder.
func (r *Registry) Check(p troupe.ProjectID, name troupe.CheckName) (troupe.Check, string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.projects[p]
	if !ok {
		return troupe.Check{}, "", false
	}
	c, ok := e.info.Team.Check(name)
	return c, e.info.Path, ok
}

// Agents lists the agents of project p in team order.
func (r *Registry) Agents(p troupe.ProjectID) []troupe.AgentSpec {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.projects[p]
	if !ok || e.info.Team == nil {
		return nil
	}
	return slices.Clone(e.info.Team.Agents)
}

// checkPromptFile refuses an agent whose prompt_file it could not start
// with: missing, outside the project folder dir, not a regular file, or
// over projfile.Prompt's cap. Better said when the team file is saved than
// when the agent starts (which reads it again, with the same reader).
func checkPromptFile(dir string, a troupe.AgentSpec) error {
	if a.PromptFile == "" {
		return nil
	}
	_, _, err := projfile.Prompt.ReadIn(dir, a.PromptFile)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return &troupe.FieldError{Field: "prompt_file", Msg: fmt.Sprintf("%s does not exist: create it, or fix the path (relative to the project folder)", a.PromptFile)}
	}
	return &troupe.FieldError{Field: "prompt_file", Msg: err.Error()}
}

// checkWorkspace checks that an agent with workspace = "worktree" can have
// one: the project folder is the top of a git repository with a commit (at
// its base, when it names one). It runs git, bounded in time.
func checkWorkspace(dir string, a troupe.AgentSpec) error {
	if a.Workspace != worktree.Worktree {
		if a.Base != "" {
			return &troupe.FieldError{Field: "base", Msg: `only an agent with workspace = "worktree" has a base: add workspace = "worktree", or remove base`}
		}
		return nil
	}
	if err := worktree.CheckRepo(context.Background(), dir, a.Base); err != nil {
		field, msg := "workspace", err.Error()
		switch {
		case a.Base != "" && strings.HasPrefix(err.Error(), "base "):
			field = "base"
		case a.Remote():
			// The runner's clone is made from the project's repository.
			field = "runner"
			if a.Runner == "" {
				field = "runner_labels"
			}
			msg = "cannot run on a runner: " + msg
			if errors.Is(err, worktree.ErrNotRepository) {
				msg = fmt.Sprintf("cannot run on a runner: %v; run `git init` and commit in it, or remove %s to run the agent on this machine", worktree.ErrNotRepository, field)
			}
		}
		return &troupe.FieldError{Field: field, Msg: msg}
	}
	return nil
}

// TeamFile returns the team file of project id as it is on disk, with its
// digest; a project with no team file gives nil and "".
func (r *Registry) TeamFile(id troupe.ProjectID) (src []byte, d string, err error) {
	info, ok := r.Get(id)
	if !ok {
		return nil, "", fmt.Errorf("read team file of %s: %w", id, troupe.ErrNotFound)
	}
	src, _, err = projfile.Team.ReadIn(info.Path, TeamFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("read team file of %s: %w", id, err)
	}
	return src, digest(src), nil
}

// WriteTeamFile replaces the team file of project id with src, the
// person's edit of the file whose digest was base ("" for no file): a file
// changed since (by an agent, an editor) is not written over, and the
// error matches troupe.ErrConflict. src must parse and pass the checks a
// load makes, and stay within the team file's size limit; nothing is
// written otherwise. The write is atomic and stays inside the project
// (.troupe or team.toml leading outside it through a symlink is refused).
// The file is then loaded as any change of it is: what widens a grant is
// held for the person's approval (C17), not approved by this write.
func (r *Registry) WriteTeamFile(ctx context.Context, id troupe.ProjectID, src []byte, base string) (Info, error) {
	info, ok := r.Get(id)
	if !ok {
		return Info{}, fmt.Errorf("write team file of %s: %w", id, troupe.ErrNotFound)
	}
	if int64(len(src)) > projfile.Team.Max {
		return Info{}, fmt.Errorf("write team file of %s: %w: %w", id, &troupe.FieldError{File: TeamFile,
			Msg: fmt.Sprintf("%d bytes, more than the limit of %d: make it smaller", len(src), projfile.Team.Max)}, troupe.ErrInvalid)
	}
	if _, err := r.parseTeam(info.Path, src, nil); err != nil {
		if !errors.Is(err, troupe.ErrInvalid) {
			err = fmt.Errorf("%w: %w", err, troupe.ErrInvalid)
		}
		return Info{}, fmt.Errorf("write team file of %s: %w", id, err)
	}
	_, now, err := r.TeamFile(id)
	if err != nil {
		return Info{}, fmt.Errorf("write team file of %s: %w", id, err)
	}
	if now != base {
		return Info{}, fmt.Errorf("write team file of %s: %s changed since you opened it: open it again and redo your change: %w", id, TeamFile, troupe.ErrConflict)
	}
	root, err := os.OpenRoot(info.Path)
	if err != nil {
		return Info{}, fmt.Errorf("write team file of %s: %w", id, err)
	}
	defer root.Close()
	if err := root.MkdirAll(filepath.Dir(TeamFile), 0o755); err != nil {
		return Info{}, fmt.Errorf("write team file of %s: %w", id, err)
	}
	if err := atomicfile.WriteIn(root, filepath.ToSlash(TeamFile), src, 0o644, atomicfile.Options{}); err != nil {
		return Info{}, fmt.Errorf("write team file of %s: %w", id, err)
	}
	r.log.Info("team file written by the person", "project", id, "digest", digest(src))
	r.reload(ctx, id, false, false)
	info, _ = r.Get(id)
	return info, nil
}

// profileFolders are the folders Run watches to follow the profiles: the
// profiles folder and the two above it (so that it is seen created), at
// most three watches whatever the number of profiles.
func (r *Registry) profileFolders() []string {
	if r.profDir == "" {
		return nil
	}
	troupeDir := filepath.Dir(r.profDir)
	return []string{filepath.Dir(troupeDir), troupeDir, r.profDir}
}

// watchProfiles adds watches on the profile folders that exist, if Run is
// watching. Missing folders are not an error.
func (r *Registry) watchProfiles() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.watcher == nil {
		return
	}
	for _, dir := range r.profileFolders() {
		if err := r.watcher.Add(dir); err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			r.log.Warn("watch profiles folder: a profile's change is seen when its team file changes or the daemon restarts", "path", dir, "err", err)
		}
	}
}

// profileEvent handles an event of the profile folders and reports
// whether it was one, with the projects to reload: those whose team names
// the profile changed, or every one naming a profile when the folder
// itself appeared or went.
func (r *Registry) profileEvent(ev fsnotify.Event) ([]troupe.ProjectID, bool) {
	folders := r.profileFolders()
	if len(folders) == 0 {
		return nil, false
	}
	parent := filepath.Dir(ev.Name)
	name := ""
	switch {
	case parent == r.profDir:
		n, ok := strings.CutSuffix(filepath.Base(ev.Name), ".toml")
		if !ok {
			return nil, true // an editor's temporary file
		}
		name = n
	case ev.Name == folders[1] || ev.Name == folders[2]:
		if ev.Has(fsnotify.Create) {
			r.watchProfiles()
		}
	case parent == folders[0] || parent == folders[1]:
		return nil, true // another entry of the config folder
	default:
		return nil, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []troupe.ProjectID
	for id, e := range r.projects {
		if name == "" && len(e.profiles) > 0 || name != "" && slices.Contains(e.profiles, name) {
			ids = append(ids, id)
		}
	}
	return ids, true
}
