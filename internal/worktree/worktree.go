// Package worktree gives an agent whose team entry says workspace =
// "worktree" a git worktree of its own, outside the person's project folder:
// <state>/worktrees/<project id>/<agent>, on the branch troupe/<agent> made
// from the project's HEAD (or the agent's base). It shows the agent's
// changes (Diff), merges them into the project's current branch only when
// that is clean and free of conflicts (Merge, checked first with git
// merge-tree), resets and removes the worktree. Every git runs as its own
// child process, in its own process group, bounded in time.
//
// Nothing here writes to the person's working tree except Merge, after its
// checks.
package worktree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// Workspaces an agent may have (AgentSpec.Workspace).
const (
	Project  = "project"  // the project folder itself (the default)
	Worktree = "worktree" // a git worktree of its own
)

// Timeout bounds one git command.
const Timeout = 2 * time.Minute

// Branch is the branch of agent's worktree.
func Branch(agent troupe.AgentID) string { return "troupe/" + string(agent) }

// Manager owns the worktrees under one folder (<state>/worktrees).
type Manager struct {
	root string

	mu    sync.Mutex
	locks map[troupe.RuntimeKey]*sync.Mutex // one per agent: git commands on one worktree run one at a time
}

// New returns a Manager of the worktrees under root.
func New(root string) *Manager {
	return &Manager{root: root, locks: make(map[troupe.RuntimeKey]*sync.Mutex)}
}

// Path is where agent k's worktree is (or would be).
func (m *Manager) Path(k troupe.RuntimeKey) string {
	return filepath.Join(m.root, string(k.Project), string(k.Agent))
}

func (m *Manager) lock(k troupe.RuntimeKey) func() {
	m.mu.Lock()
	l, ok := m.locks[k]
	if !ok {
		l = new(sync.Mutex)
		m.locks[k] = l
	}
	m.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// git runs git with args in dir and returns its stdout. env is added to
// the environment. A non-zero exit is an error carrying git's stderr.
func git(ctx context.Context, dir string, env []string, args ...string) (string, error) {
	return gitWith(ctx, dir, env, nil, args...)
}

// gitWith is git with cfg, -c options (a repoGuard's) before args.
func gitWith(ctx context.Context, dir string, env, cfg []string, args ...string) (string, error) {
	out, code, stderr, err := gitCodeWith(ctx, dir, env, cfg, args...)
	if err != nil {
		return out, err
	}
	if code != 0 {
		return out, fmt.Errorf("git %s: %s", strings.Join(args, " "), strings.TrimSpace(stderr))
	}
	return out, nil
}

// gitCode runs git and returns its stdout, exit code and stderr; err is set
// only when git could not run or was cut by the time limit.
func gitCode(ctx context.Context, dir string, env []string, args ...string) (string, int, string, error) {
	return gitCodeWith(ctx, dir, env, nil, args...)
}

// gitCodeWith is gitCode with cfg, -c options before args.
func gitCodeWith(ctx context.Context, dir string, env, cfg []string, args ...string) (string, int, string, error) {
	stdout := &capBuffer{max: MaxGitOutput}
	code, stderr, err := runGit(ctx, dir, env, cfg, stdout, args...)
	if err != nil {
		return "", code, stderr, err
	}
	return stdout.String(), code, stderr, nil
}

// alwaysConfig is given to every git troupe runs. No automatic gc or
// maintenance: git would leave it running detached, a process nobody
// owns. No hooks and no fsmonitor: the repository's .git, which an
// agent's worktree shares, would name programs for troupe to run.
var alwaysConfig = []string{
	"-c", "gc.auto=0", "-c", "maintenance.auto=false",
	"-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false",
}

// runGit runs git with args in dir, its stdout to stdout, and returns its
// exit code and stderr; err is set only when git could not run or was cut
// by the time limit.
func runGit(ctx context.Context, dir string, env, cfg []string, stdout io.Writer, args ...string) (int, string, error) {
	return runGitStdin(ctx, dir, env, cfg, nil, stdout, args...)
}

// runGitIn runs git with args in dir, env added to its environment and
// stdin its input, and returns its output; a non-zero exit is an error
// carrying git's stderr.
func runGitIn(ctx context.Context, dir string, env []string, stdin string, args ...string) (string, error) {
	stdout := &capBuffer{max: MaxGitOutput}
	code, stderr, err := runGitStdin(ctx, dir, env, nil, strings.NewReader(stdin), stdout, args...)
	if err != nil {
		return "", err
	}
	if code != 0 {
		return "", fmt.Errorf("git %s: %s", strings.Join(args, " "), strings.TrimSpace(stderr))
	}
	return stdout.String(), nil
}

// runGitStdin is runGit with stdin as git's input (nil: none).
func runGitStdin(ctx context.Context, dir string, env, cfg []string, stdin io.Reader, stdout io.Writer, args ...string) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	argv := append(append(slices.Clone(alwaysConfig), cfg...), args...)
	cmd := exec.CommandContext(ctx, "git", argv...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "LC_ALL=C", "GIT_OPTIONAL_LOCKS=0")
	for _, v := range []string{"GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"} {
		cmd.Env = append(cmd.Env, v+"=") // overridden below when env sets it
	}
	cmd.Env = dropEmpty(append(cmd.Env, env...))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	stderr := &capBuffer{max: maxGitStderr}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	err := cmd.Run()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return -1, "", fmt.Errorf("run git %s: no answer within %v: look for a lock or a hook that hangs in the repository", strings.Join(args, " "), Timeout)
	}
	if ctx.Err() != nil {
		return -1, "", fmt.Errorf("run git %s: %w", strings.Join(args, " "), ctx.Err())
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ee.ExitCode() < 0 { // killed by a signal: say which, git wrote nothing about it
			return -1, strings.TrimSpace(stderr.String() + "\n(git " + ee.String() + ")"), nil
		}
		return ee.ExitCode(), stderr.String(), nil
	}
	if err != nil {
		return -1, "", fmt.Errorf("run git: %w: install git", err)
	}
	return 0, stderr.String(), nil
}

// MaxGitOutput bounds what one git command's output is kept of (a diff
// of a huge file the agent made): past it the rest is counted, not kept,
// and a last line says so.
const MaxGitOutput = 16 << 20

// maxGitStderr bounds what is kept of git's stderr (shown in errors).
const maxGitStderr = 64 << 10

// capBuffer keeps the first max bytes written and counts the rest; it
// never fails a write (git goes on to its end).
type capBuffer struct {
	max int
	buf bytes.Buffer
	cut int64
}

func (c *capBuffer) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); room < len(p) {
		c.cut += int64(len(p) - max(room, 0))
		c.buf.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return c.buf.Write(p)
}

func (c *capBuffer) String() string {
	if c.cut == 0 {
		return c.buf.String()
	}
	return strings.ToValidUTF8(c.buf.String(), "") + fmt.Sprintf("\n[cut: %d bytes more of git's output not shown]\n", c.cut)
}

// dropEmpty keeps the last value of each variable and drops those left
// empty by the GIT_* resets.
func dropEmpty(env []string) []string {
	last := make(map[string]string, len(env))
	var order []string
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if _, ok := last[k]; !ok {
			order = append(order, k)
		}
		last[k] = v
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		if v := last[k]; v != "" || !strings.HasPrefix(k, "GIT_") {
			out = append(out, k+"="+v)
		}
	}
	return out
}

// ErrNotRepository is CheckRepo's error for a folder in no git
// repository.
var ErrNotRepository = errors.New("the project folder is not a git repository")

// CheckRepo reports why dir cannot give its agents worktrees: it must be
// the top folder of a git repository with a commit at base ("" = HEAD),
// and the git on PATH must be MinGit or newer.
func CheckRepo(ctx context.Context, dir, base string) error {
	if err := CheckGit(ctx); err != nil {
		return err
	}
	top, err := git(ctx, dir, nil, "rev-parse", "--show-toplevel")
	if err != nil {
		return fmt.Errorf("%w: run `git init` and commit in it, or remove workspace", ErrNotRepository)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fmt.Errorf("resolve project folder: %w", err)
	}
	if strings.TrimSpace(top) != real {
		return fmt.Errorf("the project folder is inside the git repository %s, not its top folder: register %s as the project, or remove workspace", strings.TrimSpace(top), strings.TrimSpace(top))
	}
	ref := base
	if ref == "" {
		ref = "HEAD"
	}
	if _, err := git(ctx, dir, nil, "rev-parse", "--verify", "--quiet", ref+"^{commit}"); err != nil {
		if base == "" {
			return fmt.Errorf("the project's repository has no commit yet: commit once, then reload the team")
		}
		return fmt.Errorf("base %q is not a commit of the project's repository: name a branch, tag or commit", base)
	}
	return nil
}

// Dir returns agent k's working folder: the project folder dir, or its
// worktree, created on first use (and after a Remove) and reused after.
func (m *Manager) Dir(ctx context.Context, k troupe.RuntimeKey, spec troupe.AgentSpec, dir string) (string, error) {
	if spec.Workspace != Worktree {
		return dir, nil
	}
	defer m.lock(k)()
	return m.ensure(ctx, k, spec, dir)
}

func (m *Manager) ensure(ctx context.Context, k troupe.RuntimeKey, spec troupe.AgentSpec, dir string) (string, error) {
	path := m.Path(k)
	if _, err := os.Stat(filepath.Join(path, ".git")); err == nil {
		return path, nil
	}
	base := func() (string, error) { return m.baseRef(ctx, spec, dir) }
	if err := addWorktree(ctx, dir, nil, path, k.Agent, base); err != nil {
		return "", err
	}
	return path, nil
}

// addMu serialises addWorktree.
var addMu sync.Mutex

// addWorktree makes the worktree path of the repository that git finds
// in dir (with env) on agent's branch: the branch as it is when it
// exists, else made at the commit base names.
func addWorktree(ctx context.Context, dir string, env []string, path string, agent troupe.AgentID, base func() (string, error)) error {
	// One at a time: a prune of the repository while git adds another
	// worktree to it breaks that add (".git/worktrees/x/commondir" read
	// half made). Made rarely, so one lock for every repository.
	addMu.Lock()
	defer addMu.Unlock()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create worktree folder: %w", err)
	}
	// A folder left by a worktree deleted by hand is forgotten first.
	if _, err := git(ctx, dir, env, "worktree", "prune"); err != nil {
		return fmt.Errorf("prune worktrees: %w", err)
	}
	branch := Branch(agent)
	args := []string{"worktree", "add", "--quiet", path, branch}
	if _, err := git(ctx, dir, env, "rev-parse", "--verify", "--quiet", "refs/heads/"+branch); err != nil {
		b, err := base()
		if err != nil {
			return err
		}
		args = []string{"worktree", "add", "--quiet", "-b", branch, path, b}
	}
	guard, err := repoGuardEnv(ctx, dir, env)
	if err != nil {
		return err
	}
	if _, err := gitWith(ctx, dir, env, guard, args...); err != nil {
		return fmt.Errorf("create worktree of %s: %w", agent, err)
	}
	return nil
}

// baseRef is the commit the agent's branch starts from: its base, or the
// project's HEAD.
func (m *Manager) baseRef(ctx context.Context, spec troupe.AgentSpec, dir string) (string, error) {
	ref := spec.Base
	if ref == "" {
		ref = "HEAD"
	}
	out, err := git(ctx, dir, nil, "rev-parse", "--verify", ref+"^{commit}")
	if err != nil {
		return "", fmt.Errorf("resolve base %s: %w", ref, err)
	}
	return strings.TrimSpace(out), nil
}

// existing returns agent k's worktree, or an error when it has none.
func (m *Manager) existing(k troupe.RuntimeKey, spec troupe.AgentSpec) (string, error) {
	if spec.Workspace != Worktree {
		return "", fmt.Errorf("%s works in the project folder, not a worktree: set workspace = \"worktree\" in its [[agent]] table: %w", k.Agent, troupe.ErrInvalid)
	}
	path := m.Path(k)
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		return "", fmt.Errorf("the worktree of %s, %s, is a symbolic link, not the folder troupe made: remove the link (troupe makes the worktree again at the agent's next start): %w", k.Agent, path, troupe.ErrConflict)
	}
	if _, err := os.Stat(filepath.Join(path, ".git")); err != nil {
		return "", fmt.Errorf("%s has no worktree yet: it gets one when it starts (send it a message): %w", k.Agent, troupe.ErrNotFound)
	}
	return path, nil
}

// onBranch refuses to change a worktree whose HEAD is not the agent's
// branch: Reset's reset --hard and clean, Merge's add and commit would act
// on whatever that checkout is (a .git file pointed at the project's own
// repository would have them reset or commit the person's branch).
func onBranch(ctx context.Context, k troupe.RuntimeKey, path string) error {
	want := "refs/heads/" + Branch(k.Agent)
	head, err := git(ctx, path, nil, "symbolic-ref", "--quiet", "HEAD")
	if head = strings.TrimSpace(head); err != nil || head != want {
		if head == "" {
			head = "a detached HEAD"
		}
		return fmt.Errorf("the worktree of %s is on %s, not %s: check out %s in %s first: %w", k.Agent, head, want, Branch(k.Agent), path, troupe.ErrConflict)
	}
	return nil
}

// forkPoint is the commit the agent's changes are counted from: where its
// branch leaves the project's base (its base, or the project's HEAD).
func (m *Manager) forkPoint(ctx context.Context, k troupe.RuntimeKey, spec troupe.AgentSpec, dir string) (string, error) {
	base, err := m.baseRef(ctx, spec, dir)
	if err != nil {
		return "", err
	}
	out, err := git(ctx, dir, nil, "merge-base", base, "refs/heads/"+Branch(k.Agent))
	if err != nil {
		return "", fmt.Errorf("find base of %s: %w", Branch(k.Agent), err)
	}
	return strings.TrimSpace(out), nil
}

// DiffResult is an agent's changes against its base.
type DiffResult struct {
	// Diff is git's patch (or --stat summary): tool configuration first,
	// always as text, then the other files.
	Diff string `json:"diff"`
	// Config lists the changed files that are tool configuration
	// (IsToolConfig), sorted: Merge refuses them unless they are named.
	Config []string `json:"config"`
	// Cut: the diff was longer than MaxGitOutput; Diff holds its start
	// and a last line saying how much more there was. Merge needs force.
	Cut bool `json:"cut"`
	// Tree is the git tree of the work shown: MergeOptions.Tree merges
	// only that.
	Tree string `json:"tree"`
	// MergeCommand is the troupe merge command that merges exactly this
	// work: --expect Tree, each Config file named, --force when Cut.
	MergeCommand string `json:"merge_command"`
	// Outlook is where the branch stands against its base (the diff is
	// against Outlook.ForkPoint) and what a merge of this work would do.
	Outlook Outlook `json:"outlook"`
}

// Diff returns the agent's changes against its base, committed or not,
// new files included (through a scratch index: the agent's own index is
// not touched). stat: git's --stat summary instead of the patch.
func (m *Manager) Diff(ctx context.Context, k troupe.RuntimeKey, spec troupe.AgentSpec, dir string, stat bool) (DiffResult, error) {
	defer m.lock(k)()
	path, err := m.existing(k, spec)
	if err != nil {
		return DiffResult{}, err
	}
	guard, err := repoGuard(ctx, path)
	if err != nil {
		return DiffResult{}, err
	}
	res, err := m.diff(ctx, k, spec, dir, path, guard, stat)
	if err != nil {
		return res, err
	}
	res.Outlook = m.outlook(ctx, k, spec, dir, res.Outlook.ForkPoint, res.Tree)
	return res, nil
}

// diffConfig is given to the git diffs Diff runs: no attribute, driver or
// configuration may hide or rewrite a change (with --no-textconv and
// --no-ext-diff, and --text for tool configuration).
var diffConfig = []string{
	"-c", "core.attributesFile=/dev/null", "-c", "core.quotePath=true", "-c", "diff.relative=false",
	"-c", "diff.noprefix=false", "-c", "diff.mnemonicPrefix=false", "-c", "diff.srcPrefix=a/", "-c", "diff.dstPrefix=b/",
}

// maxSpecBytes bounds the pathspecs given to one git diff; more paths
// are shown by more runs.
const maxSpecBytes = 128 << 10

// diff is Diff with the lock held, the worktree at path and guard, the
// repository's guard.
func (m *Manager) diff(ctx context.Context, k troupe.RuntimeKey, spec troupe.AgentSpec, dir, path string, guard []string, stat bool) (DiffResult, error) {
	base, err := m.forkPoint(ctx, k, spec, dir)
	if err != nil {
		return DiffResult{}, err
	}
	env, tree, done, err := scratchTree(ctx, k, path, guard)
	if err != nil {
		return DiffResult{}, err
	}
	defer done()
	cfg := append(slices.Clone(guard), diffConfig...)
	names := &capBuffer{max: MaxGitOutput}
	if code, stderr, err := runGit(ctx, path, env, cfg, names, "diff", "--cached", "--name-only", "-z", "--no-renames", "--ignore-submodules=none", base, "--"); err != nil {
		return DiffResult{}, err
	} else if code != 0 {
		return DiffResult{}, fmt.Errorf("diff %s: %s", k.Agent, strings.TrimSpace(stderr))
	} else if names.cut > 0 {
		return DiffResult{}, fmt.Errorf("list %s's changed files: more than %d bytes of names: reset its worktree (troupe worktree reset %s --yes) or look at it with git", k.Agent, MaxGitOutput, k.Agent)
	}
	var all []string
	if s := strings.TrimSuffix(names.buf.String(), "\x00"); s != "" {
		all = strings.Split(s, "\x00")
	}
	res := DiffResult{Config: ToolConfig(all), Tree: tree}
	args := []string{"diff", "--cached", "--no-color", "--no-ext-diff", "--no-textconv", "--ignore-submodules=none"}
	if stat {
		args = append(args, "--stat")
	}
	// Tool configuration first, as text whatever its attributes say
	// (-diff, binary) and without renames (a rename's content is shown).
	// git's --stat counts a file its attributes call binary as binary,
	// --text or not: the summary is counted here from the text patch.
	textArgs := args
	if stat {
		textArgs = slices.DeleteFunc(slices.Clone(args), func(a string) bool { return a == "--stat" })
	}
	cfgOut := &capBuffer{max: MaxGitOutput}
	for _, specs := range pathspecs(":(literal)", res.Config) {
		a := append(append(slices.Clone(textArgs), "--text", "--no-renames", base, "--"), specs...)
		if code, stderr, err := runGit(ctx, path, env, cfg, cfgOut, a...); err != nil {
			return DiffResult{}, err
		} else if code != 0 {
			return DiffResult{}, fmt.Errorf("diff %s: %s", k.Agent, strings.TrimSpace(stderr))
		}
	}
	out := &capBuffer{max: MaxGitOutput}
	switch {
	case len(res.Config) == 0:
	case stat:
		io.WriteString(out, patchStat(cfgOut.buf.String(), cfgOut.cut > 0))
	default:
		out.Write(cfgOut.buf.Bytes())
		out.cut += cfgOut.cut
	}
	run := func(specs []string) error {
		a := append(append(slices.Clone(args), base, "--"), specs...)
		code, stderr, err := runGit(ctx, path, env, cfg, out, a...)
		if err != nil {
			return err
		}
		if code != 0 {
			return fmt.Errorf("diff %s: %s", k.Agent, strings.TrimSpace(stderr))
		}
		return nil
	}
	// Then the rest.
	switch {
	case len(res.Config) == 0:
		err = run(nil)
	case len(res.Config) == len(all):
	default:
		if groups := pathspecs(":(exclude,literal)", res.Config); len(groups) == 1 {
			err = run(groups[0])
			break
		}
		for _, specs := range pathspecs(":(literal)", slices.DeleteFunc(all, IsToolConfig)) {
			if err = run(specs); err != nil {
				break
			}
		}
	}
	if err != nil {
		return DiffResult{}, err
	}
	res.Diff, res.Cut = out.String(), out.cut > 0
	res.MergeCommand = mergeCommand(k.Agent, res.Tree, res.Config, res.Cut)
	res.Outlook.ForkPoint = base
	return res, nil
}

// patchStat is a --stat summary of a git patch, counted from its lines
// (what a file's attributes say does not count); cut: the patch is the
// start of a longer one.
func patchStat(patch string, cut bool) string {
	type file struct {
		name     string
		add, del int
	}
	var files []file
	for line := range strings.Lines(patch) {
		line = strings.TrimSuffix(line, "\n")
		switch {
		case strings.HasPrefix(line, "diff --git "):
			files = append(files, file{name: patchName(strings.TrimPrefix(line, "diff --git "))})
		case len(files) == 0, strings.HasPrefix(line, "+++ "), strings.HasPrefix(line, "--- "):
		case strings.HasPrefix(line, "+"):
			files[len(files)-1].add++
		case strings.HasPrefix(line, "-"):
			files[len(files)-1].del++
		}
	}
	var b strings.Builder
	width, adds, dels := 0, 0, 0
	for _, f := range files {
		width = max(width, len(f.name))
	}
	for _, f := range files {
		fmt.Fprintf(&b, " %-*s | %d %s%s\n", width, f.name, f.add+f.del, strings.Repeat("+", min(f.add, 40)), strings.Repeat("-", min(f.del, 40)))
		adds, dels = adds+f.add, dels+f.del
	}
	fmt.Fprintf(&b, " %d tool configuration file(s) changed, %d insertions(+), %d deletions(-)\n", len(files), adds, dels)
	if cut {
		b.WriteString(" [cut: the tool configuration's diff is longer than troupe shows; counted from its start]\n")
	}
	return b.String()
}

// patchName is the path of a "diff --git a/P b/P" header's rest (no
// renames: both names the same), unquoted when git quoted it.
func patchName(rest string) string {
	if strings.HasPrefix(rest, `"`) {
		if q, err := strconv.QuotedPrefix(rest); err == nil {
			if name, err := strconv.Unquote(q); err == nil {
				return strings.TrimPrefix(name, "a/")
			}
		}
		return rest
	}
	if n := (len(rest) - len("a/ b/")) / 2; n > 0 && strings.HasPrefix(rest, "a/") {
		return rest[2 : 2+n]
	}
	return rest
}

// pathspecs returns paths, each with the pathspec magic prefix, in groups
// of at most maxSpecBytes.
func pathspecs(magic string, paths []string) [][]string {
	var groups [][]string
	var cur []string
	size := 0
	for _, p := range paths {
		s := magic + p
		if len(cur) > 0 && size+len(s) > maxSpecBytes {
			groups = append(groups, cur)
			cur, size = nil, 0
		}
		cur = append(cur, s)
		size += len(s) + 1
	}
	if len(cur) > 0 {
		groups = append(groups, cur)
	}
	return groups
}

// MergeResult is what Merge did.
type MergeResult struct {
	Committed bool   `json:"committed"` // the agent's uncommitted work was committed first
	Merged    bool   `json:"merged"`    // false: nothing to merge
	Branch    string `json:"branch"`    // the agent's branch
	Into      string `json:"into"`      // the project's branch
	Commit    string `json:"commit,omitempty"`
	// Config lists the tool configuration files the merge brought in
	// (each named in MergeOptions.IncludeConfig).
	Config []string `json:"config,omitempty"`
}

// MergeOptions is what the person allows a Merge.
type MergeOptions struct {
	// IncludeConfig names the tool configuration files (IsToolConfig)
	// the merge may change, each by its path as Diff's Config lists it.
	IncludeConfig []string
	// Force merges even when the agent's diff is cut (DiffResult.Cut):
	// the person has seen the changes some other way.
	Force bool
	// Tree, when set, is the DiffResult.Tree the person read: the merge
	// is refused when the agent's work is no longer that.
	Tree string
}

// maxNamed bounds the files an error names.
const maxNamed = 50

// Merge commits the agent's uncommitted work on its branch (the agent as
// author), then merges the branch into the project's current branch, but
// only when the project's tracked files are clean, the merge has no
// conflict (git merge-tree, before anything touches the project), it
// changes no tool configuration the person did not name in
// opt.IncludeConfig, and the agent's diff is whole (else opt.Force). A
// refusal is a troupe.ErrConflict naming the files; the project is left
// as it was. The branch merged is the commit checked, even when the agent
// commits again meanwhile.
func (m *Manager) Merge(ctx context.Context, k troupe.RuntimeKey, spec troupe.AgentSpec, dir string, opt MergeOptions) (MergeResult, error) {
	defer m.lock(k)()
	path, err := m.existing(k, spec)
	if err != nil {
		return MergeResult{}, err
	}
	if err := onBranch(ctx, k, path); err != nil {
		return MergeResult{}, err
	}
	branch := Branch(k.Agent)
	res := MergeResult{Branch: branch}
	into, err := git(ctx, dir, nil, "symbolic-ref", "--quiet", "--short", "HEAD")
	if err != nil {
		return res, fmt.Errorf("the project is on a detached HEAD: check out the branch to merge into: %w", troupe.ErrConflict)
	}
	res.Into = strings.TrimSpace(into)
	if res.Into == branch {
		return res, fmt.Errorf("the project folder has %s checked out: check out your own branch: %w", branch, troupe.ErrConflict)
	}
	if err := checkTop(ctx, dir); err != nil {
		return res, err
	}
	wtGuard, err := repoGuard(ctx, path)
	if err != nil {
		return res, err
	}
	guard, err := repoGuard(ctx, dir)
	if err != nil {
		return res, err
	}
	if dirty, err := gitWith(ctx, dir, nil, guard, "status", "--porcelain", "--untracked-files=no"); err != nil {
		return res, fmt.Errorf("read project status: %w", err)
	} else if dirty != "" {
		return res, fmt.Errorf("the project has uncommitted changes (%s): commit or stash them, then merge again: %w", firstPaths(dirty), troupe.ErrConflict)
	}
	// What the person can review: the agent's diff, whole, and its tool
	// configuration named. Checked before anything is committed.
	d, err := m.diff(ctx, k, spec, dir, path, wtGuard, false)
	if err != nil {
		return res, err
	}
	if opt.Tree != "" && opt.Tree != d.Tree {
		return res, fmt.Errorf("%s's work changed since the diff you read (tree %s, now %s): nothing was changed; read troupe diff %s again, then merge: %w",
			k.Agent, opt.Tree, d.Tree, k.Agent, troupe.ErrConflict)
	}
	if d.Cut && !opt.Force {
		return res, fmt.Errorf("the diff of %s is cut at %d MB (troupe diff %s shows only its start): nothing was changed; review the branch with git (git diff HEAD...%s, and the worktree %s), then merge with --force: %w",
			branch, MaxGitOutput>>20, k.Agent, branch, path, troupe.ErrConflict)
	}
	if err := includedConfig(branch, k.Agent, d.Config, opt.IncludeConfig); err != nil {
		return res, err
	}
	// The agent's work, committed on its branch.
	if _, err := gitWith(ctx, path, nil, wtGuard, "add", "--all"); err != nil {
		return res, fmt.Errorf("stage %s's work: %w", k.Agent, err)
	}
	if _, code, _, err := gitCodeWith(ctx, path, nil, wtGuard, "diff", "--cached", "--quiet", "--no-ext-diff", "--no-textconv"); err != nil {
		return res, err
	} else if code == 1 {
		env := []string{"GIT_AUTHOR_NAME=" + string(k.Agent), "GIT_AUTHOR_EMAIL=" + string(k.Agent) + "@troupe.invalid",
			"GIT_COMMITTER_NAME=troupe", "GIT_COMMITTER_EMAIL=troupe@troupe.invalid"}
		if _, err := gitWith(ctx, path, env, wtGuard, "commit", "--quiet", "--no-verify", "--no-gpg-sign", "-m", "troupe: work of "+string(k.Agent)); err != nil {
			return res, fmt.Errorf("commit %s's work: %w", k.Agent, err)
		}
		res.Committed = true
	}
	// The commit checked below is the one merged.
	tip, err := git(ctx, dir, nil, "rev-parse", "--verify", "refs/heads/"+branch+"^{commit}")
	if err != nil {
		return res, fmt.Errorf("resolve %s: %w", branch, err)
	}
	tip = strings.TrimSpace(tip)
	// What is merged is what was checked above: the agent did not change
	// its work meanwhile, nor staged a file the diff leaves out (a file
	// its .gitignore names, added with git add -f).
	if tipTree, err := git(ctx, dir, nil, "rev-parse", "--verify", tip+"^{tree}"); err != nil {
		return res, fmt.Errorf("resolve %s: %w", branch, err)
	} else if tipTree = strings.TrimSpace(tipTree); tipTree != d.Tree {
		return res, fmt.Errorf("the work committed on %s (tree %s) is not the work its diff showed (tree %s): the agent changed it meanwhile, or had staged a file the diff leaves out; nothing was changed in your checkout: read troupe diff %s again (it shows the commit now), then merge: %w",
			branch, tipTree, d.Tree, k.Agent, troupe.ErrConflict)
	}
	if _, code, _, err := gitCode(ctx, dir, nil, "merge-base", "--is-ancestor", tip, "HEAD"); err != nil {
		return res, err
	} else if code == 0 {
		return res, nil // already in
	}
	out, code, stderr, err := gitCodeWith(ctx, dir, nil, guard, "merge-tree", "--write-tree", "--name-only", "--no-messages", "HEAD", tip)
	switch {
	case err != nil:
		return res, err
	case code == 1:
		files := strings.Split(strings.TrimSpace(out), "\n")[1:]
		return res, fmt.Errorf("merging %s into %s conflicts in %s: nothing was changed; resolve it in the worktree (or merge by hand): %w",
			branch, res.Into, strings.Join(files, ", "), troupe.ErrConflict)
	case code != 0:
		hint := ""
		if slices.ContainsFunc(guard, func(s string) bool { return strings.HasPrefix(s, "merge.") }) {
			hint = " (troupe does not run the merge drivers the repository's own config defines: merge by hand)"
		}
		return res, fmt.Errorf("check merge of %s: %s%s", branch, strings.TrimSpace(stderr), hint)
	}
	// What the merge changes in the person's checkout: no tool
	// configuration the person did not name (the branch may bring more
	// than the agent's diff showed: commits of its base, work committed
	// since).
	tree, _, _ := strings.Cut(out, "\n")
	names, err := gitWith(ctx, dir, nil, guard, "diff-tree", "-r", "-z", "--name-only", "--no-renames", "HEAD", strings.TrimSpace(tree))
	if err != nil {
		return res, fmt.Errorf("list the files merging %s changes: %w", branch, err)
	}
	var changed []string
	if s := strings.TrimSuffix(names, "\x00"); s != "" {
		changed = strings.Split(s, "\x00")
	}
	res.Config = ToolConfig(changed)
	if err := includedConfig(branch, k.Agent, res.Config, opt.IncludeConfig); err != nil {
		return res, err
	}
	var env []string
	if name, _ := git(ctx, dir, nil, "config", "user.email"); strings.TrimSpace(name) == "" {
		env = []string{"GIT_COMMITTER_NAME=troupe", "GIT_COMMITTER_EMAIL=troupe@troupe.invalid",
			"GIT_AUTHOR_NAME=troupe", "GIT_AUTHOR_EMAIL=troupe@troupe.invalid"}
	}
	if _, err := gitWith(ctx, dir, env, guard, "merge", "--no-ff", "--no-edit", "--no-verify", "--no-stat", "-m", "Merge "+branch+" (troupe agent "+string(k.Agent)+")", tip); err != nil {
		return res, fmt.Errorf("merge %s: %w", branch, err)
	}
	head, err := git(ctx, dir, nil, "rev-parse", "HEAD")
	if err != nil {
		return res, err
	}
	res.Merged, res.Commit = true, strings.TrimSpace(head)
	return res, nil
}

// includedConfig refuses the tool configuration files of changed that
// the person did not name in include.
func includedConfig(branch string, agent troupe.AgentID, changed, include []string) error {
	var missing []string
	for _, f := range changed {
		if !slices.Contains(include, f) {
			missing = append(missing, f)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	named, flags := missing, make([]string, 0, min(len(missing), maxNamed))
	if len(named) > maxNamed {
		named = append(slices.Clone(named[:maxNamed]), fmt.Sprintf("and %d more (troupe diff %s lists them)", len(missing)-maxNamed, agent))
	}
	for _, f := range missing[:min(len(missing), maxNamed)] {
		flags = append(flags, "--include-config "+shellQuote(f))
	}
	return fmt.Errorf("merging %s would change tool configuration (what agents, engines, git or your editor may do or run): %s; nothing was changed; review them (troupe diff %s shows them first), then merge again naming each: %s: %w",
		branch, strings.Join(named, ", "), agent, strings.Join(flags, " "), troupe.ErrConflict)
}

// mergeCommand is the troupe merge that merges exactly the work of tree.
func mergeCommand(agent troupe.AgentID, tree string, config []string, force bool) string {
	words := []string{"troupe", "merge", string(agent), "--expect", tree}
	for _, f := range config {
		words = append(words, "--include-config", shellQuote(f))
	}
	if force {
		words = append(words, "--force")
	}
	return strings.Join(words, " ")
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// checkTop refuses a project folder that is not its repository's top: a
// core.worktree in the repository's config would have the merge write
// somewhere else.
func checkTop(ctx context.Context, dir string) error {
	top, err := git(ctx, dir, nil, "rev-parse", "--show-toplevel")
	if err != nil {
		return fmt.Errorf("read the project's repository: %w", err)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fmt.Errorf("resolve project folder: %w", err)
	}
	if strings.TrimSpace(top) != real {
		return fmt.Errorf("the project's repository works on %s, not the project folder %s (core.worktree?): fix .git/config, then merge again: %w", strings.TrimSpace(top), real, troupe.ErrConflict)
	}
	return nil
}

// firstPaths names the first few paths of git status --porcelain output.
func firstPaths(status string) string {
	lines := strings.Split(strings.TrimRight(status, "\n"), "\n")
	var paths []string
	for i, l := range lines {
		if i == 3 {
			paths = append(paths, fmt.Sprintf("and %d more", len(lines)-3))
			break
		}
		if len(l) > 3 {
			paths = append(paths, l[3:])
		}
	}
	return strings.Join(paths, ", ")
}

// Reset puts the agent's worktree and branch back at its base: its
// commits since and its uncommitted work are dropped.
func (m *Manager) Reset(ctx context.Context, k troupe.RuntimeKey, spec troupe.AgentSpec, dir string) error {
	defer m.lock(k)()
	path, err := m.existing(k, spec)
	if err != nil {
		return err
	}
	if err := onBranch(ctx, k, path); err != nil {
		return err
	}
	base, err := m.baseRef(ctx, spec, dir)
	if err != nil {
		return err
	}
	guard, err := repoGuard(ctx, path)
	if err != nil {
		return err
	}
	if _, err := gitWith(ctx, path, nil, guard, "reset", "--quiet", "--hard", base); err != nil {
		return fmt.Errorf("reset worktree of %s: %w", k.Agent, err)
	}
	if _, err := gitWith(ctx, path, nil, guard, "clean", "-fdq"); err != nil {
		return fmt.Errorf("clean worktree of %s: %w", k.Agent, err)
	}
	return nil
}

// Remove deletes the agent's worktree folder; its branch stays. It refuses
// when the worktree holds uncommitted work, unless force.
func (m *Manager) Remove(ctx context.Context, k troupe.RuntimeKey, spec troupe.AgentSpec, dir string, force bool) error {
	defer m.lock(k)()
	path, err := m.existing(k, spec)
	if err != nil {
		return err
	}
	guard, err := repoGuard(ctx, path)
	if err != nil {
		return err
	}
	if !force {
		st, err := gitWith(ctx, path, nil, guard, "status", "--porcelain")
		if err != nil {
			return fmt.Errorf("read worktree status: %w", err)
		}
		if st != "" {
			return fmt.Errorf("the worktree of %s has uncommitted changes (%s): merge them, or remove it with --force: %w", k.Agent, firstPaths(st), troupe.ErrConflict)
		}
	}
	args := []string{"worktree", "remove", path}
	if force {
		args = []string{"worktree", "remove", "--force", path}
	}
	if _, err := gitWith(ctx, dir, nil, guard, args...); err != nil {
		return fmt.Errorf("remove worktree of %s: %w", k.Agent, err)
	}
	return nil
}
