package cgroup

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// Limits are one agent's caps; zero: no cap of that kind.
type Limits struct {
	// Memory in bytes (swap included where the machine has swap).
	Memory int64 `json:"memory,omitempty"`
	// Processes counts processes and their threads (the pids controller).
	Processes int64 `json:"processes,omitempty"`
}

// Report says which caps are in force on this machine, and why not.
type Report struct {
	// Version is "v2", "v1", or "" (no caps).
	Version string `json:"version,omitempty"`
	// Memory and Processes say whether that cap can be set.
	Memory    bool `json:"memory"`
	Processes bool `json:"processes"`
	// Why says why a cap is not in force, and the fix.
	Why string `json:"why,omitempty"`
}

// Text is the report in a sentence.
func (r Report) Text() string {
	var on []string
	if r.Memory {
		on = append(on, "memory")
	}
	if r.Processes {
		on = append(on, "processes")
	}
	s := "caps off"
	if len(on) > 0 {
		s = "caps on (cgroup " + r.Version + "): " + strings.Join(on, ", ")
	}
	if r.Why != "" {
		s += " — " + r.Why
	}
	return s
}

// Group is one agent's cgroup: its folder under cgroup v2, or its folders
// in the v1 memory and pids hierarchies. The zero Group is none. It is
// written into a task's spec (JSON), so a task's supervisor starts the job
// in it.
type Group struct {
	Dir    string `json:"dir,omitempty"`    // v2
	Memory string `json:"memory,omitempty"` // v1
	Pids   string `json:"pids,omitempty"`   // v1
}

// IsZero reports whether g is no cgroup.
func (g *Group) IsZero() bool { return g == nil || *g == Group{} }

// Start starts cmd with its first process born in g: under v2 by clone3
// into the cgroup's folder (SysProcAttr.UseCgroupFD), so nothing of it
// ever runs outside. Under v1 (and with no cgroup) it is cmd.Start: there
// the program joins by itself before it runs anything, through the
// sandbox's helper (internal/sandbox.Wrap puts it first in the command
// line; it calls Join, then execs). A cgroup at its process cap fails the
// start (EAGAIN), saying so.
func (g *Group) Start(cmd *exec.Cmd) error {
	if g.IsZero() || g.Dir == "" {
		return startErr(cmd.Start())
	}
	f, err := os.Open(g.Dir)
	if err != nil {
		return fmt.Errorf("open cgroup: %w", err)
	}
	defer f.Close()
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.UseCgroupFD = true
	cmd.SysProcAttr.CgroupFD = int(f.Fd())
	return startErr(cmd.Start())
}

// NeedsJoin reports whether a process must join g by itself (Join): g
// is a cgroup v1 one, which no clone puts a child into.
func (g *Group) NeedsJoin() bool { return !g.IsZero() && g.Dir == "" }

// joinScript is the program of JoinArgv: /bin/sh writes its own pid into
// each file before "--", then execs what follows (the files and the argv
// are arguments, never part of the script).
const joinScript = `for f do shift; [ "$f" = -- ] && exec "$@"; echo $$ > "$f" || exit 125; done; exit 125`

// JoinArgv is argv run by a /bin/sh that first joins g, when g must be
// joined (NeedsJoin: cgroup v1), else argv itself. The shell costs one
// exec of /bin/sh, far less than one of troupe's own binary (README,
// "Sandbox").
func (g *Group) JoinArgv(argv []string) []string {
	if !g.NeedsJoin() {
		return argv
	}
	a := []string{"/bin/sh", "-c", joinScript, "sh"}
	for _, d := range []string{g.Memory, g.Pids} {
		if d != "" {
			a = append(a, filepath.Join(d, "cgroup.procs"))
		}
	}
	a = append(a, "--")
	return append(a, argv...)
}

// Join moves this process (all its threads) into g. The sandbox's helper
// calls it first thing, before it execs the program.
func (g *Group) Join() error {
	pid := []byte(strconv.Itoa(os.Getpid()))
	for _, d := range []string{g.Dir, g.Memory, g.Pids} {
		if d == "" {
			continue
		}
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), pid, 0); err != nil {
			return fmt.Errorf("join cgroup %s: %w", d, err)
		}
	}
	return nil
}

// startErr says what a start refused by the process cap means.
func startErr(err error) error {
	if errors.Is(err, syscall.EAGAIN) {
		return fmt.Errorf("%w: the agent is at its process cap (sandbox.processes in .troupe/team.toml)", err)
	}
	return err
}

// OOMKills is how many processes of g the OOM killer has killed so far (0
// when unknown).
func (g *Group) OOMKills() uint64 {
	var file string
	switch {
	case g.IsZero():
		return 0
	case g.Dir != "":
		file = filepath.Join(g.Dir, "memory.events")
	case g.Memory != "":
		file = filepath.Join(g.Memory, "memory.oom_control")
	default:
		return 0
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "oom_kill "); ok {
			n, _ := strconv.ParseUint(v, 10, 64)
			return n
		}
	}
	return 0
}

// OffEnv=off in the daemon's environment turns the caps off (agents run
// without them, said as on a machine that has none); tests use it.
const OffEnv = "TROUPE_CAPS"

const offWhy = OffEnv + "=off in the daemon's environment: unset it for memory and process caps"

// Options configure a Manager.
type Options struct {
	// StateDir is the daemon's state dir: its real path names the
	// cgroups (troupe-<12 hex digits of its SHA-256>).
	StateDir string
	// Root is where the machine's /proc and /sys/fs/cgroup are read
	// ("": "/"); tests point it at a made-up tree.
	Root   string
	Logger *slog.Logger
}

// Manager makes, updates and removes the agents' cgroups of one daemon.
type Manager struct {
	log    *slog.Logger
	report Report
	v2own  string // the daemon's own cgroup under v2
	v2     string // base folder under v2: <own>/troupe-<id>
	v1mem  string // base folders under v1
	v1pids string

	// mu guards groups and gone.
	mu     sync.Mutex
	groups map[troupe.RuntimeKey]Group
	gone   map[troupe.RuntimeKey]Group // removed agents whose cgroup still holds processes
}

// Name is the cgroup name of a daemon whose state dir is stateDir.
func Name(stateDir string) string {
	if r, err := filepath.EvalSymlinks(stateDir); err == nil {
		stateDir = r
	}
	sum := sha256.Sum256([]byte(filepath.Clean(stateDir)))
	return "troupe-" + hex.EncodeToString(sum[:6])
}

// Open finds what this machine allows and sets it up: under v2 it moves
// this process into a leaf cgroup of its own and enables memory and pids
// below its cgroup; under v1 it makes the base folders. Leftover empty
// cgroups of an earlier run are removed. It never fails: Report says what
// is in force.
func Open(o Options) *Manager {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Manager{log: log.With("component", "cgroup"), groups: map[troupe.RuntimeKey]Group{}, gone: map[troupe.RuntimeKey]Group{}}
	if os.Getenv(OffEnv) == "off" {
		m.report = Report{Why: offWhy}
		m.log.Info("agents' resource caps", "caps", m.report.Text())
		return m
	}
	name := Name(o.StateDir)
	p := probe(o.Root)
	switch {
	case p.v2ok:
		base, err := setupV2(p.v2own, name)
		if err == nil {
			m.v2own, m.v2 = p.v2own, base
			m.report = Report{Version: "v2", Memory: true, Processes: true}
			break
		}
		p.v2why = err.Error()
		fallthrough
	default:
		var whys []string
		if p.v2why != "" {
			whys = append(whys, p.v2why)
		}
		mk := func(own, ctrl string) string {
			if own == "" {
				whys = append(whys, "cgroup v1: no "+ctrl+" hierarchy")
				return ""
			}
			base := filepath.Join(own, name)
			if err := os.MkdirAll(base, 0o755); err != nil {
				whys = append(whys, fmt.Sprintf("cgroup v1: %s not writable (%v)", ctrl, err))
				return ""
			}
			return base
		}
		m.v1mem, m.v1pids = mk(p.v1mem, "memory"), mk(p.v1pids, "pids")
		if m.v1mem != "" || m.v1pids != "" {
			m.report = Report{Version: "v1", Memory: m.v1mem != "", Processes: m.v1pids != ""}
			if !m.report.Memory || !m.report.Processes {
				m.report.Why = strings.Join(whys, "; ")
			}
		} else {
			m.report = Report{Why: strings.Join(whys, "; ") + ": " + fix}
		}
	}
	m.sweep(false)
	m.log.Info("agents' resource caps", "caps", m.report.Text())
	return m
}

// fix is what a person does for caps on a machine that has none.
const fix = "agents run without memory and process caps; for them run the daemon in a cgroup v2 with memory and pids delegated " +
	"(systemd-run --user -p Delegate=yes troupe serve) or as a user who may write the cgroup v1 memory and pids hierarchies"

// Report says which caps are in force.
func (m *Manager) Report() Report { return m.report }

// Group makes or updates agent k's cgroup with lim (zero: no cap of that
// kind) and returns it; the zero Group when this machine gives no caps. Lowering a
// cap below what the agent holds may fail (v1: memory still in use); the
// cgroup is returned with the error.
func (m *Manager) Group(k troupe.RuntimeKey, lim Limits) (Group, error) {
	if m == nil || (m.v2 == "" && m.v1mem == "" && m.v1pids == "") {
		return Group{}, nil
	}
	if !k.Valid() {
		return Group{}, fmt.Errorf("make cgroup: bad agent %q", k.String())
	}
	rel := filepath.Join("project-"+string(k.Project), "agent-"+string(k.Agent))
	var g Group
	var errs []error
	if m.v2 != "" {
		proj := filepath.Join(m.v2, filepath.Dir(rel))
		if err := mkdirV2(proj); err != nil {
			return Group{}, err
		}
		g.Dir = filepath.Join(m.v2, rel)
		if err := os.Mkdir(g.Dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return Group{}, fmt.Errorf("make cgroup %s: %w", g.Dir, err)
		}
		errs = append(errs, write(g.Dir, "memory.max", maxText(lim.Memory)))
		if _, err := os.Stat(filepath.Join(g.Dir, "memory.swap.max")); err == nil {
			swap := "max"
			if lim.Memory > 0 {
				swap = "0"
			}
			errs = append(errs, write(g.Dir, "memory.swap.max", swap))
		}
		errs = append(errs, write(g.Dir, "pids.max", maxText(lim.Processes)))
	} else {
		if m.v1mem != "" {
			g.Memory = filepath.Join(m.v1mem, rel)
			if err := os.MkdirAll(g.Memory, 0o755); err != nil {
				return Group{}, fmt.Errorf("make cgroup %s: %w", g.Memory, err)
			}
			v := "-1"
			if lim.Memory > 0 {
				v = strconv.FormatInt(lim.Memory, 10)
			}
			// memsw (memory + swap) must stay ≥ the memory limit: set in
			// the order that keeps it so.
			memsw := filepath.Join(g.Memory, "memory.memsw.limit_in_bytes")
			if _, err := os.Stat(memsw); err == nil && lim.Memory <= 0 {
				errs = append(errs, write(g.Memory, "memory.memsw.limit_in_bytes", v))
			}
			errs = append(errs, write(g.Memory, "memory.limit_in_bytes", v))
			if _, err := os.Stat(memsw); err == nil && lim.Memory > 0 {
				errs = append(errs, write(g.Memory, "memory.memsw.limit_in_bytes", v))
			}
		}
		if m.v1pids != "" {
			g.Pids = filepath.Join(m.v1pids, rel)
			if err := os.MkdirAll(g.Pids, 0o755); err != nil {
				return Group{}, fmt.Errorf("make cgroup %s: %w", g.Pids, err)
			}
			errs = append(errs, write(g.Pids, "pids.max", maxText(lim.Processes)))
		}
	}
	m.mu.Lock()
	m.groups[k] = g
	delete(m.gone, k)
	m.mu.Unlock()
	if err := errors.Join(errs...); err != nil {
		return g, fmt.Errorf("set caps of %s: %w", k, err)
	}
	return g, nil
}

// Update sets the caps of agent k's cgroup to lim when it has one (its
// team changed them): lowered or raised at once for what runs in it.
func (m *Manager) Update(k troupe.RuntimeKey, lim Limits) error {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	_, ok := m.groups[k]
	m.mu.Unlock()
	if !ok {
		return nil
	}
	_, err := m.Group(k, lim)
	return err
}

func maxText(n int64) string {
	if n <= 0 {
		return "max"
	}
	return strconv.FormatInt(n, 10)
}

func write(dir, file, v string) error {
	if err := os.WriteFile(filepath.Join(dir, file), []byte(v), 0); err != nil {
		return fmt.Errorf("write %s %s: %w", file, v, err)
	}
	return nil
}

// Remove removes agent k's cgroup (the agent left its team). One that
// still holds processes (a task running on) is kept, said in the log, and
// removed by Run once they are gone.
func (m *Manager) Remove(k troupe.RuntimeKey) {
	if m == nil {
		return
	}
	m.mu.Lock()
	g, ok := m.groups[k]
	delete(m.groups, k)
	if ok {
		m.gone[k] = g
	}
	m.mu.Unlock()
	if ok {
		m.retry(true)
	}
}

// RemoveProject removes the cgroups of every agent of project p.
func (m *Manager) RemoveProject(p troupe.ProjectID) {
	if m == nil {
		return
	}
	m.mu.Lock()
	for k, g := range m.groups {
		if k.Project == p {
			delete(m.groups, k)
			m.gone[k] = g
		}
	}
	m.mu.Unlock()
	m.retry(true)
}

// Run retries the removal of kept cgroups every 2 s until ctx ends.
func (m *Manager) Run(ctx context.Context) error {
	if m == nil {
		return nil
	}
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			m.retry(false)
		case <-ctx.Done():
			return nil
		}
	}
}

// Close removes every cgroup m made that is empty (the daemon stops,
// its agents' sessions stopped): those that still hold processes (tasks
// outlive the daemon) are kept and said in the log; the next daemon on
// this state dir takes them up again, or removes them once empty.
func (m *Manager) Close() {
	if m == nil {
		return
	}
	m.mu.Lock()
	for k, g := range m.groups {
		m.gone[k] = g
		delete(m.groups, k)
	}
	m.mu.Unlock()
	// Processes that were just stopped may still be on their way out (a
	// sandbox's reaper that init reaps late): a second at most for them.
	for range 20 {
		if m.retry(false) == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	m.retry(true)
	m.sweep(true)
	if m.v2own != "" {
		// Best effort: the controllers enabled below the daemon's cgroup
		// go back off, so the next daemon can start in it. Refused
		// (EBUSY) while a cgroup below still uses them (a task, another
		// daemon's), which is what should happen.
		if err := write(m.v2own, "cgroup.subtree_control", "-memory -pids"); err != nil {
			m.log.Debug("controllers left on below the daemon's cgroup", "err", err)
		}
	}
}

// retry removes the kept cgroups that are empty now; say logs those kept.
// It returns how many are kept.
func (m *Manager) retry(say bool) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, g := range m.gone {
		n, err := g.remove()
		switch {
		case err == nil:
			delete(m.gone, k)
			m.log.Debug("cgroup removed", "project", k.Project, "agent", k.Agent)
		case say:
			m.log.Info("cgroup kept: processes still run in it; removed once they end", "project", k.Project, "agent", k.Agent, "processes", n, "err", err)
		}
	}
	return len(m.gone)
}

// remove removes g's folders; it fails, with the number of processes
// left, while one holds any.
func (g Group) remove() (int, error) {
	var errs []error
	n := 0
	for _, d := range []string{g.Dir, g.Memory, g.Pids} {
		if d == "" {
			continue
		}
		if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
			n = max(n, len(procs(d)))
			errs = append(errs, err)
		}
	}
	return n, errors.Join(errs...)
}

// procs lists the processes in cgroup folder d.
func procs(d string) []int {
	b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var out []int
	for f := range strings.FieldsSeq(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// sweep removes the empty agent and project folders below the bases
// (left by an earlier run, or by this one at its stop), and, at the
// stop (final), the bases when empty.
func (m *Manager) sweep(final bool) {
	for _, base := range []string{m.v2, m.v1mem, m.v1pids} {
		if base == "" {
			continue
		}
		projects, _ := filepath.Glob(filepath.Join(base, "project-*"))
		for _, p := range projects {
			agents, _ := filepath.Glob(filepath.Join(p, "agent-*"))
			for _, a := range agents {
				if m.live(a) {
					continue
				}
				os.Remove(a) // busy: kept
			}
			os.Remove(p)
		}
		if final {
			os.Remove(base)
		}
	}
}

// live reports whether folder d is the cgroup of an agent of this run.
func (m *Manager) live(d string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, g := range m.groups {
		if d == g.Dir || d == g.Memory || d == g.Pids {
			return true
		}
	}
	return false
}

// found is what probe read of the machine.
type found struct {
	v2own  string // this process's cgroup v2 folder, when its caps can be had
	v2ok   bool
	v2why  string
	v1mem  string // this process's folders in the v1 hierarchies
	v1pids string
}

// probe reads /proc/self/cgroup and /proc/self/mountinfo below root and
// says where this process's cgroups are and whether v2 caps can be had.
// It changes nothing.
func probe(root string) found {
	if root == "" {
		root = "/"
	}
	var f found
	cg, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		f.v2why = fmt.Sprintf("no cgroups (%v)", err)
		return f
	}
	mi, err := os.ReadFile(filepath.Join(root, "proc/self/mountinfo"))
	if err != nil {
		f.v2why = fmt.Sprintf("no cgroups (%v)", err)
		return f
	}
	mounts := parseMounts(mi)
	paths := parseCgroups(cg)
	at := func(m mount, path string) string {
		rel, ok := strings.CutPrefix(path, m.root)
		if m.root == "/" {
			rel, ok = path, true
		}
		if !ok {
			return ""
		}
		return filepath.Join(root, m.point, rel)
	}
	for _, m := range mounts {
		switch {
		case m.fstype == "cgroup2":
			if p, ok := paths[""]; ok && f.v2own == "" {
				f.v2own = at(m, p)
			}
		case m.fstype == "cgroup" && slices.Contains(m.opts, "memory") && f.v1mem == "":
			f.v1mem = at(m, paths["memory"])
		case m.fstype == "cgroup" && slices.Contains(m.opts, "pids") && f.v1pids == "":
			f.v1pids = at(m, paths["pids"])
		}
	}
	if f.v2own == "" {
		f.v2why = "no cgroup v2"
		return f
	}
	ctrl, err := os.ReadFile(filepath.Join(f.v2own, "cgroup.controllers"))
	if err != nil {
		f.v2why = fmt.Sprintf("cgroup v2: %v", err)
		return f
	}
	have := strings.Fields(string(ctrl))
	if !slices.Contains(have, "memory") || !slices.Contains(have, "pids") {
		f.v2why = fmt.Sprintf("cgroup v2: memory and pids are not delegated to %s (it has: %s)", f.v2own, cmpOr(strings.Join(have, " "), "none"))
		return f
	}
	if err := unix.Access(f.v2own, unix.W_OK); err != nil {
		f.v2why = fmt.Sprintf("cgroup v2: %s is not writable (no delegation): %v", f.v2own, err)
		return f
	}
	f.v2ok = true
	return f
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// setupV2 enables memory and pids below own, moving this process into a
// leaf of its own first (a cgroup with controllers enabled for its
// children holds no process), and makes the base folder own/name.
func setupV2(own, name string) (string, error) {
	sub, _ := os.ReadFile(filepath.Join(own, "cgroup.subtree_control"))
	enabled := strings.Fields(string(sub))
	if !slices.Contains(enabled, "memory") || !slices.Contains(enabled, "pids") {
		me := os.Getpid()
		for _, p := range procs(own) {
			if p != me {
				return "", fmt.Errorf("cgroup v2: %s holds other processes than the daemon (pid %d): run the daemon in a cgroup of its own", own, p)
			}
		}
		leaf := filepath.Join(own, name+"-daemon")
		if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("cgroup v2: make %s: %w", leaf, err)
		}
		if err := write(leaf, "cgroup.procs", strconv.Itoa(me)); err != nil {
			return "", fmt.Errorf("cgroup v2: move the daemon into %s: %w", leaf, err)
		}
		if err := write(own, "cgroup.subtree_control", "+memory +pids"); err != nil {
			return "", fmt.Errorf("cgroup v2: enable memory and pids in %s: %w", own, err)
		}
	}
	base := filepath.Join(own, name)
	if err := mkdirV2(base); err != nil {
		return "", err
	}
	return base, nil
}

// mkdirV2 makes a cgroup v2 folder whose children get memory and pids.
func mkdirV2(dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("make cgroup %s: %w", dir, err)
	}
	if err := write(dir, "cgroup.subtree_control", "+memory +pids"); err != nil {
		return fmt.Errorf("cgroup v2: enable memory and pids in %s: %w", dir, err)
	}
	return nil
}

type mount struct {
	root, point, fstype string
	opts                []string
}

// parseMounts reads /proc/self/mountinfo's cgroup mounts.
func parseMounts(b []byte) []mount {
	var out []mount
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		a, z := strings.Fields(pre), strings.Fields(post)
		if len(a) < 5 || len(z) < 3 || !strings.HasPrefix(z[0], "cgroup") {
			continue
		}
		out = append(out, mount{root: a[3], point: a[4], fstype: z[0], opts: strings.Split(z[2], ",")})
	}
	return out
}

// parseCgroups reads /proc/self/cgroup: controller → path ("" for v2).
func parseCgroups(b []byte) map[string]string {
	out := map[string]string{}
	for line := range strings.Lines(string(b)) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			out[""] = parts[2]
			continue
		}
		for c := range strings.SplitSeq(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	return out
}

// Probe says what Open would find for a daemon started from this process,
// changing nothing (troupe doctor).
func Probe() Report {
	if os.Getenv(OffEnv) == "off" {
		return Report{Why: offWhy}
	}
	f := probe("")
	if f.v2ok {
		return Report{Version: "v2", Memory: true, Processes: true}
	}
	var whys []string
	if f.v2why != "" {
		whys = append(whys, f.v2why)
	}
	ok := func(own, ctrl string) bool {
		if own == "" {
			whys = append(whys, "cgroup v1: no "+ctrl+" hierarchy")
			return false
		}
		if err := unix.Access(own, unix.W_OK); err != nil {
			whys = append(whys, fmt.Sprintf("cgroup v1: %s not writable (%v)", ctrl, err))
			return false
		}
		return true
	}
	mem, pids := ok(f.v1mem, "memory"), ok(f.v1pids, "pids")
	switch {
	case mem && pids:
		return Report{Version: "v1", Memory: true, Processes: true}
	case mem || pids:
		return Report{Version: "v1", Memory: mem, Processes: pids, Why: strings.Join(whys, "; ")}
	}
	return Report{Why: strings.Join(whys, "; ") + ": " + fix}
}
