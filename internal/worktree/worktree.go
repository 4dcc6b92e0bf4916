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
	"os"
	"os/exec"
	"path/filepath"
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
	out, code, stderr, err := gitCode(ctx, dir, env, args...)
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
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	// No automatic gc or maintenance: git would leave it running detached,
	// a process nobody owns.
	cmd := exec.CommandContext(ctx, "git", append([]string{"-c", "gc.auto=0", "-c", "maintenance.auto=false"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "LC_ALL=C", "GIT_OPTIONAL_LOCKS=0")
	for _, v := range []string{"GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"} {
		cmd.Env = append(cmd.Env, v+"=") // overridden below when env sets it
	}
	cmd.Env = dropEmpty(append(cmd.Env, env...))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	stdout, stderr := &capBuffer{max: MaxGitOutput}, &capBuffer{max: maxGitStderr}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err := cmd.Run()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return "", -1, "", fmt.Errorf("run git %s: no answer within %v: look for a lock or a hook that hangs in the repository", strings.Join(args, " "), Timeout)
	}
	if ctx.Err() != nil {
		return "", -1, "", fmt.Errorf("run git %s: %w", strings.Join(args, " "), ctx.Err())
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return stdout.String(), ee.ExitCode(), stderr.String(), nil
	}
	if err != nil {
		return "", -1, "", fmt.Errorf("run git: %w: install git", err)
	}
	return stdout.String(), 0, stderr.String(), nil
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

// CheckRepo reports why dir cannot give its agents worktrees: it must be
// the top folder of a git repository with a commit at base ("" = HEAD),
// and the git on PATH must be MinGit or newer.
func CheckRepo(ctx context.Context, dir, base string) error {
	if err := CheckGit(ctx); err != nil {
		return err
	}
	top, err := git(ctx, dir, nil, "rev-parse", "--show-toplevel")
	if err != nil {
		return fmt.Errorf("the project folder is not a git repository: run `git init` and commit in it, or remove workspace")
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
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("create worktree folder: %w", err)
	}
	// A folder left by a worktree deleted by hand is forgotten first.
	if _, err := git(ctx, dir, nil, "worktree", "prune"); err != nil {
		return "", fmt.Errorf("prune worktrees: %w", err)
	}
	branch := Branch(k.Agent)
	args := []string{"worktree", "add", "--quiet", path, branch}
	if _, err := git(ctx, dir, nil, "rev-parse", "--verify", "--quiet", "refs/heads/"+branch); err != nil {
		base, err := m.baseRef(ctx, spec, dir)
		if err != nil {
			return "", err
		}
		args = []string{"worktree", "add", "--quiet", "-b", branch, path, base}
	}
	if _, err := git(ctx, dir, nil, args...); err != nil {
		return "", fmt.Errorf("create worktree of %s: %w", k.Agent, err)
	}
	return path, nil
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

// Diff returns the agent's changes against its base, committed or not,
// new files included (through a scratch index: the agent's own index is
// not touched). stat: git's --stat summary instead of the patch.
func (m *Manager) Diff(ctx context.Context, k troupe.RuntimeKey, spec troupe.AgentSpec, dir string, stat bool) (string, error) {
	defer m.lock(k)()
	path, err := m.existing(k, spec)
	if err != nil {
		return "", err
	}
	base, err := m.forkPoint(ctx, k, spec, dir)
	if err != nil {
		return "", err
	}
	idx, err := os.CreateTemp(filepath.Dir(path), "."+string(k.Agent)+".index-*")
	if err != nil {
		return "", fmt.Errorf("create scratch index: %w", err)
	}
	idx.Close()
	os.Remove(idx.Name()) // git writes it anew
	defer os.Remove(idx.Name())
	env := []string{"GIT_INDEX_FILE=" + idx.Name()}
	if _, err := git(ctx, path, env, "read-tree", "HEAD"); err != nil {
		return "", fmt.Errorf("read worktree: %w", err)
	}
	if _, err := git(ctx, path, env, "add", "--all"); err != nil {
		return "", fmt.Errorf("read worktree: %w", err)
	}
	args := []string{"diff", "--cached", "--no-color", "--no-ext-diff"}
	if stat {
		args = append(args, "--stat")
	}
	out, err := git(ctx, path, env, append(args, base, "--")...)
	if err != nil {
		return "", fmt.Errorf("diff %s: %w", k.Agent, err)
	}
	return out, nil
}

// MergeResult is what Merge did.
type MergeResult struct {
	Committed bool   `json:"committed"` // the agent's uncommitted work was committed first
	Merged    bool   `json:"merged"`    // false: nothing to merge
	Branch    string `json:"branch"`    // the agent's branch
	Into      string `json:"into"`      // the project's branch
	Commit    string `json:"commit,omitempty"`
}

// Merge commits the agent's uncommitted work on its branch (the agent as
// author), then merges the branch into the project's current branch, but
// only when the project's tracked files are clean and the merge has no
// conflict (git merge-tree, before anything touches the project). A
// conflict is a troupe.ErrConflict naming the files; the project is left
// as it was.
func (m *Manager) Merge(ctx context.Context, k troupe.RuntimeKey, spec troupe.AgentSpec, dir string) (MergeResult, error) {
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
	if dirty, err := git(ctx, dir, nil, "status", "--porcelain", "--untracked-files=no"); err != nil {
		return res, fmt.Errorf("read project status: %w", err)
	} else if dirty != "" {
		return res, fmt.Errorf("the project has uncommitted changes (%s): commit or stash them, then merge again: %w", firstPaths(dirty), troupe.ErrConflict)
	}
	// The agent's work, committed on its branch.
	if _, err := git(ctx, path, nil, "add", "--all"); err != nil {
		return res, fmt.Errorf("stage %s's work: %w", k.Agent, err)
	}
	if _, code, _, err := gitCode(ctx, path, nil, "diff", "--cached", "--quiet"); err != nil {
		return res, err
	} else if code == 1 {
		env := []string{"GIT_AUTHOR_NAME=" + string(k.Agent), "GIT_AUTHOR_EMAIL=" + string(k.Agent) + "@troupe.invalid",
			"GIT_COMMITTER_NAME=troupe", "GIT_COMMITTER_EMAIL=troupe@troupe.invalid"}
		if _, err := git(ctx, path, env, "commit", "--quiet", "--no-verify", "-m", "troupe: work of "+string(k.Agent)); err != nil {
			return res, fmt.Errorf("commit %s's work: %w", k.Agent, err)
		}
		res.Committed = true
	}
	if _, code, _, err := gitCode(ctx, dir, nil, "merge-base", "--is-ancestor", "refs/heads/"+branch, "HEAD"); err != nil {
		return res, err
	} else if code == 0 {
		return res, nil // already in
	}
	out, code, stderr, err := gitCode(ctx, dir, nil, "merge-tree", "--write-tree", "--name-only", "--no-messages", "HEAD", "refs/heads/"+branch)
	switch {
	case err != nil:
		return res, err
	case code == 1:
		files := strings.Split(strings.TrimSpace(out), "\n")[1:]
		return res, fmt.Errorf("merging %s into %s conflicts in %s: nothing was changed; resolve it in the worktree (or merge by hand): %w",
			branch, res.Into, strings.Join(files, ", "), troupe.ErrConflict)
	case code != 0:
		return res, fmt.Errorf("check merge of %s: %s", branch, strings.TrimSpace(stderr))
	}
	var env []string
	if name, _ := git(ctx, dir, nil, "config", "user.email"); strings.TrimSpace(name) == "" {
		env = []string{"GIT_COMMITTER_NAME=troupe", "GIT_COMMITTER_EMAIL=troupe@troupe.invalid",
			"GIT_AUTHOR_NAME=troupe", "GIT_AUTHOR_EMAIL=troupe@troupe.invalid"}
	}
	if _, err := git(ctx, dir, env, "merge", "--no-ff", "--no-edit", "--no-verify", "-m", "Merge "+branch+" (troupe agent "+string(k.Agent)+")", "refs/heads/"+branch); err != nil {
		return res, fmt.Errorf("merge %s: %w", branch, err)
	}
	head, err := git(ctx, dir, nil, "rev-parse", "HEAD")
	if err != nil {
		return res, err
	}
	res.Merged, res.Commit = true, strings.TrimSpace(head)
	return res, nil
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
	if _, err := git(ctx, path, nil, "reset", "--quiet", "--hard", base); err != nil {
		return fmt.Errorf("reset worktree of %s: %w", k.Agent, err)
	}
	if _, err := git(ctx, path, nil, "clean", "-fdq"); err != nil {
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
	if !force {
		st, err := git(ctx, path, nil, "status", "--porcelain")
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
	if _, err := git(ctx, dir, nil, args...); err != nil {
		return fmt.Errorf("remove worktree of %s: %w", k.Agent, err)
	}
	return nil
}
