package worktree

// Transfer: how a project's commits reach a runner's clone and an agent's
// work there comes back to the daemon (issue 24), as git bundles; the
// bytes travel some other way (the caller's).
//
// Daemon → runner: Bundle writes the project's HEAD commit and its
// history, thin against the commits the runner has (Haves); on the runner
// ApplyBundle keeps it at BaseRef of the runner's own clone (a bare
// repository) and RunnerWorktree gives an agent its worktree there, on
// its branch troupe/<agent>:
//
//	<clone>/troupe/worktrees/<agent>   the agent's worktree
//	<clone>/troupe/indexes/<agent>/    Snapshot's own index of it
//
// Runner → daemon: at a turn's end Snapshot commits the worktree's files
// as they are through that index (the agent's index, HEAD and branch do
// not move), BundleCommit writes that commit thin against what the daemon
// has, and on the daemon ApplySnapshot keeps it at SnapshotRefs<agent>
// (named, like the agent's branch, by the agent within its project's
// repository) and makes the agent's local worktree hold exactly its
// files, HEAD, branch and index unmoved, through troupe's own index of
// that worktree (<its folder in .git>/troupe/index): the daemon's
// checkpoints, diff and merge then see the turn as a local agent's.
//
// A bundle is untrusted bytes from another machine: its size is bounded
// (MaxBundle), its header is read here before git sees it and must name
// exactly the one ref expected, no hook runs, and a snapshot's files are
// checked (their paths git's own, no "..", ".git" or submodule; sizes
// bounded) before one is written. On error, what a writer was given is
// not a bundle: the caller drops it.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// Refs of transfer.
const (
	// BaseRef holds, in a runner's clone, the project's HEAD as last
	// applied; it is also the one ref of a project's bundle.
	BaseRef = "refs/troupe/base"
	// SnapshotRef is the one ref of a snapshot's bundle.
	SnapshotRef = "refs/troupe/snapshot"
	// SnapshotRefs prefixes the daemon's ref of each agent's last
	// applied snapshot (SnapshotRefs + agent): it keeps the snapshot and
	// the agent's commits in it, which the next bundle is thin against.
	SnapshotRefs = "refs/troupe/snapshots/"
)

// MaxBundle bounds a bundle's size, written or applied (a variable for
// tests): a bigger one is refused.
var MaxBundle int64 = 2 << 30

// MaxSnapshotBytes bounds the sum of the sizes of a snapshot's files that
// ApplySnapshot writes (a variable for tests); each file is bounded by
// MaxCheckpointFile, as Snapshot leaves bigger ones out.
var MaxSnapshotBytes int64 = 8 << 30

// MaxHaves bounds the commits a bundle is thin against (have, basis).
const MaxHaves = 256

// maxBundleHeader bounds a bundle's header (its lines before the pack).
const maxBundleHeader = 1 << 20

// staleIndexLock is the age past which a lock on a runner's snapshot
// index is a dead git's: every git troupe runs is killed at Timeout.
const staleIndexLock = Timeout + time.Minute

// ErrMissingPrerequisites: a thin bundle needs commits the repository it
// is applied to lacks; a full one (no have, no basis) does not.
var ErrMissingPrerequisites = errors.New("the repository lacks the commits the bundle is thin against: send a full bundle")

// Bundle writes to w a git bundle of the HEAD commit of the repository in
// repo (the project's folder) and its history, under the one ref BaseRef,
// thin against the commits of have (the runner's Haves) that repo holds;
// the others are ignored; at most MaxHaves. It returns the commit. When
// have already holds it, the bundle holds that commit again, thin against
// its parents (git makes no empty bundle). A repository with no commit is
// an error saying so.
func Bundle(ctx context.Context, repo string, have []string, w io.Writer) (head string, err error) {
	r, code, stderr, err := readRepo(ctx, repo, "HEAD")
	switch {
	case err != nil:
		return "", fmt.Errorf("bundle the project: %w", err)
	case strings.Contains(stderr, "not a git repository"):
		return "", fmt.Errorf("bundle the project: %s is not a git repository: run git init and commit in it", repo)
	case code != 0:
		return "", fmt.Errorf("bundle the project: its repository has no commit yet: commit once in %s", repo)
	}
	if err := writeBundle(ctx, r, BaseRef, have, w); err != nil {
		return "", fmt.Errorf("bundle the project: %w", err)
	}
	return r.commit, nil
}

// BundleCommit writes to w a git bundle of commit (a Snapshot's) of the
// repository in repo (the runner's clone) and its history, under the one
// ref SnapshotRef, thin against the commits of basis (what the daemon
// has) that repo holds; the others are ignored; at most MaxHaves.
func BundleCommit(ctx context.Context, repo, commit string, basis []string, w io.Writer) error {
	if !isOID(commit) {
		return fmt.Errorf("bundle commit %q: not a commit id: %w", commit, troupe.ErrInvalid)
	}
	r, code, stderr, err := readRepo(ctx, repo, commit)
	switch {
	case err != nil:
		return fmt.Errorf("bundle commit %s: %w", commit, err)
	case code != 0:
		return fmt.Errorf("bundle commit %s: not a commit of %s (%s): %w", commit, repo, strings.TrimSpace(stderr), troupe.ErrNotFound)
	}
	if err := writeBundle(ctx, r, SnapshotRef, basis, w); err != nil {
		return fmt.Errorf("bundle commit %s: %w", commit, err)
	}
	return nil
}

// repoRead is what a bundle is made from: the repository in dir (git run
// there with env), its objects' folder and format, and the commit.
type repoRead struct {
	dir             string
	env             []string
	objects, format string
	commit          string
}

// readRepo reads the repository in dir and resolves rev to a commit in
// one git: a non-zero code (stderr says why) when dir is no repository
// or rev no commit of it.
func readRepo(ctx context.Context, dir, rev string) (repoRead, int, string, error) {
	r := repoRead{dir: dir, env: repoEnv(dir)}
	out, code, stderr, err := gitCode(ctx, dir, r.env, "rev-parse", "--path-format=absolute", "--git-path", "objects",
		"--show-object-format", "--is-shallow-repository", rev+"^{commit}", "--")
	if err != nil || code != 0 {
		return r, code, stderr, err
	}
	f := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(f) != 5 || !isOID(f[3]) {
		return r, 0, "", fmt.Errorf("read the repository %s: git rev-parse said %q", dir, out)
	}
	if f[2] == "true" {
		return r, 0, "", fmt.Errorf("the repository %s is shallow (part of its history is missing): run git fetch --unshallow in it", dir)
	}
	r.objects, r.format, r.commit = f[0], f[1], f[3]
	return r, 0, "", nil
}

// writeBundle writes to w a bundle of r's commit and its history, under
// the one ref ref, thin against the commits of exclude that r holds. git
// names in a bundle only refs, and the repository's own are not to be
// touched: the ref is in a scratch repository that reads r's objects.
func writeBundle(ctx context.Context, r repoRead, ref string, exclude []string, w io.Writer) error {
	have, err := commitsIn(ctx, r.dir, r.env, exclude)
	if err != nil {
		return err
	}
	if len(have) > 0 {
		// git refuses an empty bundle: when the other side has the
		// commit, the bundle holds it again, thin against its parents.
		out, err := runGitIn(ctx, r.dir, r.env, revList(r.commit, have), "rev-list", "-n1", "--stdin")
		if err != nil {
			return fmt.Errorf("compare with the commits the other side has: %w", err)
		}
		if strings.TrimSpace(out) == "" {
			parents, err := git(ctx, r.dir, r.env, "rev-parse", r.commit+"^@")
			if err != nil {
				return fmt.Errorf("read the parents of %s: %w", r.commit, err)
			}
			have = strings.Fields(parents)
		}
	}
	tmp, err := scratchRepo(r.format, ref, r.commit)
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	env := append(slices.Clone(r.env), "GIT_DIR="+tmp, "GIT_OBJECT_DIRECTORY="+r.objects)
	bw := &boundedWriter{w: w, max: MaxBundle}
	code, stderr, err := runGitStdin(ctx, tmp, env, nil, strings.NewReader(revList(ref, have)), bw, "bundle", "create", "--quiet", "-", "--stdin")
	switch {
	case bw.over:
		return fmt.Errorf("the bundle is over %d MB (MaxBundle), too big to send: run that agent on the daemon's machine: %w", MaxBundle>>20, troupe.ErrInvalid)
	case bw.err != nil:
		return fmt.Errorf("write the bundle: %w", bw.err)
	case err != nil:
		return err
	case code != 0:
		return fmt.Errorf("git bundle create: %s", strings.TrimSpace(stderr))
	}
	return nil
}

// revList is git rev-list's --stdin input for rev and its history without
// that of not.
func revList(rev string, not []string) string {
	var b strings.Builder
	b.WriteString(rev + "\n")
	for _, n := range not {
		b.WriteString("^" + n + "\n")
	}
	return b.String()
}

// scratchRepo makes a repository of object format format in a new
// temporary folder, holding the one ref ref at commit and no object (git
// runs there with GIT_OBJECT_DIRECTORY set); the caller removes it. It is
// written as gitrepository-layout(5) says, not by git init and
// update-ref: two git processes less on every turn's end.
func scratchRepo(format, ref, commit string) (string, error) {
	tmp, err := os.MkdirTemp("", "troupe-bundle-")
	if err != nil {
		return "", fmt.Errorf("make a scratch repository: %w", err)
	}
	config := "[core]\n\trepositoryformatversion = 0\n\tbare = true\n"
	if format != "sha1" {
		config = "[core]\n\trepositoryformatversion = 1\n\tbare = true\n[extensions]\n\tobjectformat = " + format + "\n"
	}
	files := []struct{ name, body string }{
		{"HEAD", "ref: " + ref + "\n"},
		{"config", config},
		{filepath.FromSlash(ref), commit + "\n"},
	}
	err = os.Mkdir(filepath.Join(tmp, "objects"), 0o700)
	for _, f := range files {
		if err == nil {
			err = os.MkdirAll(filepath.Dir(filepath.Join(tmp, f.name)), 0o700)
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(tmp, f.name), []byte(f.body), 0o600)
		}
	}
	if err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("make a scratch repository: %w", err)
	}
	return tmp, nil
}

// commitsIn returns the commits of ids that the repository in dir holds,
// without repeats; ids that are not commit ids or not there are left out.
// More than MaxHaves ids is an error.
func commitsIn(ctx context.Context, dir string, env, ids []string) ([]string, error) {
	if len(ids) > MaxHaves {
		return nil, fmt.Errorf("%d commits to be thin against: at most %d (the newest tips): %w", len(ids), MaxHaves, troupe.ErrInvalid)
	}
	var in strings.Builder
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if isOID(id) && !seen[id] {
			seen[id] = true
			in.WriteString(id + "\n")
		}
	}
	if in.Len() == 0 {
		return nil, nil
	}
	out, err := runGitIn(ctx, dir, env, in.String(), "cat-file", "--batch-check=%(objectname) %(objecttype)")
	if err != nil {
		return nil, fmt.Errorf("look up the commits to be thin against: %w", err)
	}
	var have []string
	for line := range strings.Lines(out) {
		if id, typ, _ := strings.Cut(strings.TrimSpace(line), " "); typ == "commit" {
			have = append(have, id)
		}
	}
	return have, nil
}

// boundedWriter passes at most max bytes to w; past that it fails (over).
// err is w's own error.
type boundedWriter struct {
	w      io.Writer
	max, n int64
	over   bool
	err    error
}

func (b *boundedWriter) Write(p []byte) (int, error) {
	if b.n+int64(len(p)) > b.max {
		b.over = true
		return 0, errors.New("bundle over MaxBundle")
	}
	n, err := b.w.Write(p)
	b.n += int64(n)
	if err != nil {
		b.err = err
	}
	return n, err
}

// repoEnv is the environment git needs to find the repository in repo:
// GIT_DIR when repo is a bare repository's own folder (a runner's clone;
// git's discovery of one may be turned off by safe.bareRepository), none
// when it is a checkout's.
func repoEnv(repo string) []string {
	if abs, err := filepath.Abs(repo); err == nil {
		repo = abs // git runs in repo: a relative GIT_DIR would be read from there
	}
	head, err1 := os.Lstat(filepath.Join(repo, "HEAD"))
	objects, err2 := os.Stat(filepath.Join(repo, "objects"))
	refs, err3 := os.Stat(filepath.Join(repo, "refs"))
	if err1 == nil && err2 == nil && err3 == nil && head.Mode().IsRegular() && objects.IsDir() && refs.IsDir() {
		return []string{"GIT_DIR=" + repo}
	}
	return nil
}

// isOID says whether s is a full commit id as git writes it (sha1 or
// sha256, lower-case hex).
func isOID(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	return strings.Trim(s, "0123456789abcdef") == ""
}

// bundleHeader is what a bundle says before its pack.
type bundleHeader struct {
	format  string // object format: sha1 or sha256
	prereqs []string
	refs    [][2]string // {id, name}
	size    int64       // the header's bytes
}

// readBundleHeader reads a bundle's header (git's formats v2 and v3) from
// r: at most maxBundleHeader bytes; a v3 capability other than the object
// format (a partial bundle's filter) is refused.
func readBundleHeader(r io.Reader) (bundleHeader, error) {
	br := bufio.NewReader(io.LimitReader(r, maxBundleHeader))
	h := bundleHeader{format: "sha1"}
	line := func() (string, error) {
		s, err := br.ReadString('\n')
		if err != nil {
			return "", fmt.Errorf("its header is cut or longer than %d KB", maxBundleHeader>>10)
		}
		h.size += int64(len(s))
		return strings.TrimSuffix(s, "\n"), nil
	}
	sig, err := line()
	if err != nil || (sig != "# v2 git bundle" && sig != "# v3 git bundle") {
		return h, errors.New("not a git bundle")
	}
	v3 := sig == "# v3 git bundle"
	for {
		l, err := line()
		if err != nil {
			return h, err
		}
		switch {
		case l == "":
			return h, h.check()
		case v3 && l[0] == '@':
			key, val, _ := strings.Cut(l[1:], "=")
			if key != "object-format" || (val != "sha1" && val != "sha256") {
				return h, fmt.Errorf("it has the capability %q, which troupe does not take", l)
			}
			h.format = val
		case l[0] == '-':
			id, _, _ := strings.Cut(l[1:], " ")
			h.prereqs = append(h.prereqs, id)
		default:
			id, name, _ := strings.Cut(l, " ")
			h.refs = append(h.refs, [2]string{id, name})
		}
	}
}

// check refuses ids that are not of h's object format.
func (h bundleHeader) check() error {
	n := 40
	if h.format == "sha256" {
		n = 64
	}
	ids := slices.Clone(h.prereqs)
	for _, r := range h.refs {
		ids = append(ids, r[0])
	}
	for _, id := range ids {
		if len(id) != n || !isOID(id) {
			return fmt.Errorf("its header names %q, not a %s object id", id, h.format)
		}
	}
	return nil
}

// openBundle checks the bundle file path before git reads it: a regular
// file of at most MaxBundle bytes whose one ref is want. It returns its
// header and path made absolute (git reads no option or URL from it).
func openBundle(path, want string) (bundleHeader, string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return bundleHeader{}, "", fmt.Errorf("read bundle %s: %w", path, err)
	}
	fi, err := os.Lstat(abs)
	if err != nil {
		return bundleHeader{}, "", fmt.Errorf("read bundle: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return bundleHeader{}, "", fmt.Errorf("read bundle %s: not a regular file: %w", abs, troupe.ErrInvalid)
	}
	if fi.Size() > MaxBundle {
		return bundleHeader{}, "", fmt.Errorf("bundle %s is %d MB, over troupe's limit of %d MB (MaxBundle): refused: %w", abs, fi.Size()>>20, MaxBundle>>20, troupe.ErrInvalid)
	}
	f, err := os.Open(abs)
	if err != nil {
		return bundleHeader{}, "", fmt.Errorf("read bundle: %w", err)
	}
	defer f.Close()
	h, err := readBundleHeader(f)
	if err != nil {
		return h, "", fmt.Errorf("bundle %s: %w: refused: %w", abs, err, troupe.ErrInvalid)
	}
	if len(h.refs) != 1 || h.refs[0][1] != want {
		names := make([]string, 0, min(len(h.refs), 5))
		for _, r := range h.refs[:min(len(h.refs), 5)] {
			names = append(names, strconv.Quote(r[1]))
		}
		return h, "", fmt.Errorf("bundle %s holds the refs [%s] (%d), not only %s: refused: %w", abs, strings.Join(names, " "), len(h.refs), want, troupe.ErrInvalid)
	}
	return h, abs, nil
}

// unbundle stores the objects of the bundle at path (header h, checked)
// in the repository git finds in dir with env; no ref is changed.
func unbundle(ctx context.Context, dir string, env []string, path string, h bundleHeader) error {
	out, code, stderr, err := gitCode(ctx, dir, env, "bundle", "unbundle", path)
	switch {
	case err != nil:
		return fmt.Errorf("apply bundle: %w", err)
	case strings.Contains(stderr, "lacks these prerequisite commits"):
		return fmt.Errorf("apply bundle %s: %w", path, ErrMissingPrerequisites)
	case code != 0:
		return fmt.Errorf("apply bundle %s: %s", path, strings.TrimSpace(stderr))
	case strings.TrimSpace(out) != h.refs[0][0]+" "+h.refs[0][1]:
		return fmt.Errorf("apply bundle %s: git read the ref %q from it, not the header's: %w", path, strings.TrimSpace(out), troupe.ErrInvalid)
	}
	return nil
}

// Haves lists the commits a runner's clone has at its refs (BaseRef and
// the agents' branches), newest first, at most MaxHaves: the have of the
// next Bundle. A clone not made yet has none.
func Haves(ctx context.Context, clone string) ([]string, error) {
	clone, err := absClone(clone)
	if err != nil {
		return nil, err
	}
	if _, err := os.Lstat(filepath.Join(clone, "HEAD")); err != nil {
		return nil, nil
	}
	out, err := git(ctx, clone, []string{"GIT_DIR=" + clone}, "for-each-ref", "--sort=-committerdate",
		"--count="+strconv.Itoa(MaxHaves), "--format=%(objectname)", BaseRef, "refs/heads/troupe/")
	if err != nil {
		return nil, fmt.Errorf("list the clone's commits: %w", err)
	}
	var have []string
	for _, id := range strings.Fields(out) {
		if !slices.Contains(have, id) {
			have = append(have, id)
		}
	}
	return have, nil
}

// ApplyBundle applies on a runner a project's bundle (Bundle's) to the
// runner's clone of the project: a bare repository of the runner's own,
// made at clone when missing (clone then must be missing or an empty
// folder). The bundle's commit is kept at BaseRef and returned. A bundle
// whose refs are not BaseRef alone is refused; one applied again changes
// nothing; a thin one whose commits the clone lacks is
// ErrMissingPrerequisites.
func ApplyBundle(ctx context.Context, clone, bundle string) (head string, err error) {
	h, path, err := openBundle(bundle, BaseRef)
	if err != nil {
		return "", err
	}
	if clone, err = absClone(clone); err != nil {
		return "", err
	}
	head = h.refs[0][0]
	env := []string{"GIT_DIR=" + clone}
	if err := initClone(ctx, clone, h.format); err != nil {
		return "", err
	}
	// Applied again, git finds the objects there and the ref at head.
	if err := unbundle(ctx, clone, env, path, h); err != nil {
		return "", err
	}
	if _, err := git(ctx, clone, env, "update-ref", "-m", "troupe: project bundle", BaseRef, head); err != nil {
		return "", fmt.Errorf("keep the project's commit: %w", err)
	}
	return head, nil
}

// initClone makes the runner's clone at clone, a bare repository of
// object format format, unless it is there; one there must be of that
// format.
func initClone(ctx context.Context, clone, format string) error {
	env := []string{"GIT_DIR=" + clone}
	if _, err := os.Lstat(filepath.Join(clone, "HEAD")); err == nil {
		have, err := git(ctx, clone, env, "rev-parse", "--show-object-format")
		if err != nil {
			return fmt.Errorf("read the clone %s: %w", clone, err)
		}
		if strings.TrimSpace(have) != format {
			return fmt.Errorf("the clone %s is of object format %s, the bundle of %s: remove the clone (the next bundle makes it again)", clone, strings.TrimSpace(have), format)
		}
		return nil
	}
	if err := os.MkdirAll(clone, 0o700); err != nil {
		return fmt.Errorf("make the clone's folder: %w", err)
	}
	if ents, err := os.ReadDir(clone); err != nil {
		return fmt.Errorf("read the clone's folder: %w", err)
	} else if len(ents) > 0 {
		return fmt.Errorf("the clone's folder %s holds files but no repository: remove it (the bundle makes it again)", clone)
	}
	// No template: no sample hooks, nothing but git's own files.
	if _, err := git(ctx, clone, nil, "init", "--quiet", "--bare", "--template=", "--object-format="+format, clone); err != nil {
		return fmt.Errorf("make the clone %s: %w", clone, err)
	}
	return nil
}

// absClone is the runner's clone's path made absolute: git runs in it,
// with GIT_DIR set to it.
func absClone(clone string) (string, error) {
	abs, err := filepath.Abs(clone)
	if err != nil {
		return "", fmt.Errorf("find the clone %s: %w", clone, err)
	}
	return abs, nil
}

// runnerWorktree is where agent's worktree of the runner's clone is.
func runnerWorktree(clone string, agent troupe.AgentID) string {
	return filepath.Join(clone, "troupe", "worktrees", string(agent))
}

// runnerIndex is Snapshot's own index of agent's worktree of clone.
func runnerIndex(clone string, agent troupe.AgentID) string {
	return filepath.Join(clone, "troupe", "indexes", string(agent), "index")
}

// RunnerWorktree returns agent's worktree in the runner's clone
// (<clone>/troupe/worktrees/<agent>), on its branch troupe/<agent> made
// at base (a commit id; "": BaseRef's) when new: made once, then reused
// as it is.
func RunnerWorktree(ctx context.Context, clone string, agent troupe.AgentID, base string) (dir string, err error) {
	if !agentNameRE.MatchString(string(agent)) {
		return "", fmt.Errorf("agent name %q: want lower-case letters, digits, - and _, at most 63: %w", agent, troupe.ErrInvalid)
	}
	if clone, err = absClone(clone); err != nil {
		return "", err
	}
	path := runnerWorktree(clone, agent)
	if fi, err := os.Lstat(path); err == nil && !fi.IsDir() {
		return "", fmt.Errorf("the worktree of %s, %s, is not a folder (a link?): remove it (RunnerWorktree makes it again): %w", agent, path, troupe.ErrConflict)
	}
	if _, err := os.Lstat(filepath.Join(path, ".git")); err == nil {
		return path, nil
	}
	if _, err := os.Lstat(filepath.Join(clone, "HEAD")); err != nil {
		return "", fmt.Errorf("the runner has no clone at %s yet: apply the project's bundle first: %w", clone, troupe.ErrNotFound)
	}
	env := []string{"GIT_DIR=" + clone}
	ref := BaseRef
	if base != "" {
		if !isOID(base) {
			return "", fmt.Errorf("base %q: not a commit id: %w", base, troupe.ErrInvalid)
		}
		ref = base
	}
	resolve := func() (string, error) {
		out, err := git(ctx, clone, env, "rev-parse", "--verify", "--quiet", ref+"^{commit}")
		if err != nil {
			return "", fmt.Errorf("base %s is not a commit of the clone %s: apply the bundle that brings it: %w", ref, clone, troupe.ErrNotFound)
		}
		return strings.TrimSpace(out), nil
	}
	if err := addWorktree(ctx, clone, env, path, agent, resolve); err != nil {
		return "", err
	}
	return path, nil
}

// Snapshot commits, on a runner at a turn's end, the files of an agent's
// worktree work (RunnerWorktree's) as they are (tracked and untracked,
// .gitignore respected, files over MaxCheckpointFile and git repositories
// inside it left out and named in the message), with parent as its
// parent ("": the worktree's HEAD), through troupe's own index of it: the
// agent's index, HEAD and branch do not move. The commit has no ref:
// BundleCommit sends it. One Snapshot of a worktree at a time.
func Snapshot(ctx context.Context, work, parent string) (commit string, err error) {
	if parent == "" {
		parent = "HEAD"
	} else if !isOID(parent) {
		return "", fmt.Errorf("snapshot %s: parent %q is not a commit id: %w", work, parent, troupe.ErrInvalid)
	}
	clone, agent, parent, err := runnerLayout(ctx, work, parent)
	if err != nil {
		return "", err
	}
	guard, err := repoGuard(ctx, work)
	if err != nil {
		return "", fmt.Errorf("snapshot %s: %w", agent, err)
	}
	tree, skipped, err := snapshotTree(ctx, work, runnerIndex(clone, agent), staleIndexLock, guard)
	if err != nil {
		return "", fmt.Errorf("snapshot %s: %w", agent, err)
	}
	var msg strings.Builder
	fmt.Fprintf(&msg, "troupe snapshot of %s\n\nTroupe-Agent: %s\n", agent, agent)
	writeSkipped(&msg, len(skipped), skipped[:min(len(skipped), maxSkippedNamed)])
	c, err := git(ctx, work, identity, "commit-tree", tree, "-p", parent, "-m", msg.String())
	if err != nil {
		return "", fmt.Errorf("commit the snapshot of %s: %w", agent, err)
	}
	return strings.TrimSpace(c), nil
}

// runnerLayout is the clone and agent of the runner's worktree work, as
// its path says (RunnerWorktree's layout), and the commit rev names
// there; work's .git must still name that clone (the agent can rewrite
// it).
func runnerLayout(ctx context.Context, work, rev string) (clone string, agent troupe.AgentID, commit string, err error) {
	work = filepath.Clean(work)
	wts := filepath.Dir(work)
	clone = filepath.Dir(filepath.Dir(wts))
	agent = troupe.AgentID(filepath.Base(work))
	if !agentNameRE.MatchString(string(agent)) || filepath.Base(wts) != "worktrees" || filepath.Base(filepath.Dir(wts)) != "troupe" {
		return "", "", "", fmt.Errorf("snapshot %s: not an agent's worktree of a runner's clone (RunnerWorktree makes them): %w", work, troupe.ErrInvalid)
	}
	out, code, stderr, err := gitCode(ctx, work, nil, "rev-parse", "--path-format=absolute", "--git-common-dir", rev+"^{commit}", "--")
	if err == nil && code != 0 {
		err = errors.New(strings.TrimSpace(stderr))
	}
	if err != nil {
		return "", "", "", fmt.Errorf("snapshot %s: read its repository and parent %s: %w", agent, rev, err)
	}
	f := strings.Split(out, "\n")
	if len(f) < 2 || !isOID(f[1]) {
		return "", "", "", fmt.Errorf("snapshot %s: git rev-parse said %q", agent, out)
	}
	if canonical(f[0]) != canonical(clone) {
		return "", "", "", fmt.Errorf("snapshot %s: its .git names the repository %s, not its clone %s: refused; remove the worktree (RunnerWorktree makes it again): %w", agent, f[0], clone, troupe.ErrConflict)
	}
	return clone, agent, f[1], nil
}

// ApplySnapshot applies on the daemon a snapshot's bundle (BundleCommit's
// of commit) to the agent's local worktree work (on its branch
// troupe/<agent>): the commit is kept at SnapshotRefs<agent> of the
// daemon's repository, then work is made to hold exactly its files
// (changed, added, deleted, untracked ones too; ignored files not in it
// stay), through a scratch index: work's HEAD, branch and index do not
// move. A bundle whose one ref is not SnapshotRef at commit is refused,
// as is a snapshot that would write a path git would not (".." or ".git"
// in it), a submodule, a file over MaxCheckpointFile or files over
// MaxSnapshotBytes in all. Applied again, it changes nothing.
func ApplySnapshot(ctx context.Context, work, bundle, commit string) error {
	if !isOID(commit) {
		return fmt.Errorf("apply snapshot %q: not a commit id: %w", commit, troupe.ErrInvalid)
	}
	agent, index, err := agentWorktree(ctx, work)
	if err != nil {
		return err
	}
	h, path, err := openBundle(bundle, SnapshotRef)
	if err != nil {
		return err
	}
	if h.refs[0][0] != commit {
		return fmt.Errorf("bundle %s holds the commit %s, not the snapshot %s: refused: %w", path, h.refs[0][0], commit, troupe.ErrInvalid)
	}
	// Applied again, git finds the objects there and the ref at commit.
	if err := unbundle(ctx, work, nil, path, h); err != nil {
		return err
	}
	guard, err := repoGuard(ctx, work)
	if err != nil {
		return err
	}
	// The present, through troupe's own index of the worktree, kept in
	// the worktree's folder in the repository (which only the agent's
	// git would write, and the agent runs on its runner): seeded with the
	// worktree's own, it keeps git's stat cache from one apply to the
	// next. (A copy made anew each time would keep the files checked out
	// with the worktree "racy", written in the index's second, and git
	// would read them all every time.)
	present, _, err := snapshotTree(ctx, work, index, staleIndexLock, guard)
	if err != nil {
		return fmt.Errorf("read the worktree of %s: %w", agent, err)
	}
	if err := checkSnapshot(ctx, work, present, commit); err != nil {
		return err
	}
	if _, err := git(ctx, work, nil, "update-ref", "-m", "troupe: snapshot of "+string(agent), SnapshotRefs+string(agent), commit); err != nil {
		return fmt.Errorf("keep the snapshot of %s: %w", agent, err)
	}
	// As Rewind: a two-tree merge from the present to the snapshot
	// changes the paths that differ, removing those it lacks; a link
	// stays a link whatever the repository's config says.
	cfg := append(slices.Clone(guard), "-c", "core.symlinks=true")
	if _, err := gitWith(ctx, work, []string{"GIT_INDEX_FILE=" + index}, cfg, "read-tree", "-m", "-u", present, commit+"^{tree}"); err != nil {
		return fmt.Errorf("write the snapshot of %s into %s: %w", agent, work, err)
	}
	return nil
}

// agentWorktree is the agent whose worktree work is, a linked worktree on
// the branch troupe/<agent>, never a checkout of the person's, and
// troupe's index of it, in the worktree's folder of the repository.
func agentWorktree(ctx context.Context, work string) (agent troupe.AgentID, index string, err error) {
	out, err := git(ctx, work, nil, "rev-parse", "--path-format=absolute", "--git-dir", "--git-common-dir",
		"--git-path", "troupe/index", "--symbolic-full-name", "HEAD")
	if err != nil {
		return "", "", fmt.Errorf("apply snapshot: read the repository of %s: %w", work, err)
	}
	f := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(f) != 4 {
		return "", "", fmt.Errorf("apply snapshot: %s is on a detached HEAD, not an agent's branch troupe/<agent>: refused: %w", work, troupe.ErrConflict)
	}
	name, ok := strings.CutPrefix(f[3], "refs/heads/"+Branch(""))
	if !ok || !agentNameRE.MatchString(name) {
		return "", "", fmt.Errorf("apply snapshot: %s is not an agent's worktree (its HEAD is %q, not a troupe/<agent> branch): refused: %w", work, f[3], troupe.ErrConflict)
	}
	if f[0] == f[1] {
		return "", "", fmt.Errorf("apply snapshot: %s is the repository's main checkout, not an agent's worktree: refused: %w", work, troupe.ErrConflict)
	}
	return troupe.AgentID(name), f[2], nil
}

// checkSnapshot refuses a snapshot commit that would write, over the tree
// present, what git would not write as a worktree's: a path with an
// empty, ".", ".." or ".git" component, an entry that is not a file or a
// link (a submodule), a file over MaxCheckpointFile, files over
// MaxSnapshotBytes in all. Only what changes is looked at.
func checkSnapshot(ctx context.Context, work, present, commit string) error {
	out := &capBuffer{max: MaxGitOutput}
	code, stderr, err := runGit(ctx, work, nil, nil, out, "diff-tree", "-r", "-z", "--no-renames", present, commit+"^{tree}")
	switch {
	case err != nil:
		return fmt.Errorf("read snapshot %s: %w", commit, err)
	case code != 0:
		return fmt.Errorf("read snapshot %s: %s", commit, strings.TrimSpace(stderr))
	case out.cut > 0:
		return fmt.Errorf("snapshot %s changes more than %d MB of names: refused: %w", commit, MaxGitOutput>>20, troupe.ErrInvalid)
	}
	refuse := func(name, why string) error {
		return fmt.Errorf("snapshot %s: %s %s: refused: %w", commit, strconv.Quote(name), why, troupe.ErrInvalid)
	}
	// Records: ":<old mode> <new mode> <old id> <new id> <status>", path.
	var blobs strings.Builder
	recs := strings.Split(strings.TrimSuffix(out.buf.String(), "\x00"), "\x00")
	for i := 0; i+1 < len(recs); i += 2 {
		f, name := strings.Fields(recs[i]), recs[i+1]
		if len(f) != 5 || f[4] == "D" {
			continue
		}
		if f[1] != "100644" && f[1] != "100755" && f[1] != "120000" {
			return refuse(name, "is not a file or a link (mode "+f[1]+")")
		}
		for _, c := range strings.Split(name, "/") {
			if c == "" || c == "." || c == ".." || foldName(c) == ".git" {
				return refuse(name, "is not a path troupe writes")
			}
		}
		blobs.WriteString(f[3] + "\n")
	}
	if blobs.Len() == 0 {
		return nil
	}
	sizes, err := runGitIn(ctx, work, nil, blobs.String(), "cat-file", "--batch-check=%(objectsize)")
	if err != nil {
		return fmt.Errorf("read snapshot %s: %w", commit, err)
	}
	var total int64
	for line := range strings.Lines(sizes) {
		size, err := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
		if err != nil {
			return fmt.Errorf("snapshot %s: a file of it is missing (%q): refused: %w", commit, strings.TrimSpace(line), troupe.ErrInvalid)
		}
		if size > MaxCheckpointFile {
			return fmt.Errorf("snapshot %s: a file of %d MB, over MaxCheckpointFile: refused: %w", commit, size>>20, troupe.ErrInvalid)
		}
		if total += size; total > MaxSnapshotBytes {
			return fmt.Errorf("snapshot %s: its new files are over %d MB in all (MaxSnapshotBytes): refused: %w", commit, MaxSnapshotBytes>>20, troupe.ErrInvalid)
		}
	}
	return nil
}
