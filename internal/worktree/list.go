package worktree

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// MinGit is the oldest git troupe's worktrees work with: Merge checks a
// merge with `git merge-tree --write-tree`, new in git 2.38.
const MinGit = "2.38"

var gitVersionRE = regexp.MustCompile(`(\d+)\.(\d+)(?:\.(\d+))?`)

// CheckGit reports an error naming the git found and the one needed when
// the git on PATH is older than MinGit (or cannot run).
func CheckGit(ctx context.Context) error {
	out, err := git(ctx, "", nil, "version")
	if err != nil {
		return err
	}
	v, ok := parseGitVersion(out)
	if !ok {
		return fmt.Errorf("git version said %q, not a version number: install git %s or newer", strings.TrimSpace(out), MinGit)
	}
	if !atLeast(v, MinGit) {
		return fmt.Errorf("git %s is too old: workspace = \"worktree\" needs git %s or newer (for git merge-tree --write-tree): install a newer git", v, MinGit)
	}
	return nil
}

// parseGitVersion finds the version in `git version` output ("git version
// 2.39.5", "git version 2.37.1 (Apple Git-137.1)").
func parseGitVersion(out string) (string, bool) {
	v := gitVersionRE.FindString(out)
	return v, v != ""
}

// atLeast reports whether version v (major.minor[.patch]) is min or newer.
func atLeast(v, min string) bool {
	a, b := gitVersionRE.FindStringSubmatch(v), gitVersionRE.FindStringSubmatch(min)
	if a == nil || b == nil {
		return false
	}
	for i := 1; i <= 3; i++ {
		x, _ := strconv.Atoi(a[i]) // "" → 0
		y, _ := strconv.Atoi(b[i])
		if x != y {
			return x > y
		}
	}
	return true
}

// MaxListed bounds the worktree folders List and RemoveProject look at in
// one project; the rest are left alone and the answer says so.
const MaxListed = 512

var agentNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// Info is one agent's worktree as List sees it.
type Info struct {
	Agent  troupe.AgentID `json:"agent"`
	Path   string         `json:"path"`
	Branch string         `json:"branch"`
	// Base is the ref the branch is counted from: the agent's base, or
	// HEAD (the project's current commit); BaseCommit is what it names;
	// ForkPoint the commit the branch forked from it (what troupe diff is
	// against).
	Base       string `json:"base"`
	BaseCommit string `json:"base_commit,omitempty"`
	ForkPoint  string `json:"fork_point,omitempty"`
	// Exists: the folder is there (an agent gets it at its first start).
	Exists bool `json:"exists"`
	// Orphan: the agent is no longer in the team; the worktree and its
	// branch were kept.
	Orphan bool `json:"orphan,omitempty"`
	// Dirty: uncommitted changes in the worktree; Changed counts the paths.
	Dirty   bool `json:"dirty"`
	Changed int  `json:"changed"`
	// Ahead counts the branch's commits not in Base; Behind Base's
	// commits the branch does not have (the base moved since the fork).
	Ahead  int `json:"ahead"`
	Behind int `json:"behind"`
	// Error says what could not be read, if anything.
	Error string `json:"error,omitempty"`
}

// ListResult is the worktrees of one project.
type ListResult struct {
	Worktrees []Info `json:"worktrees"`
	// Cut says how many worktree folders were not looked at (MaxListed).
	Cut int `json:"cut,omitempty"`
}

// folders lists the agent worktree folders of project p, sorted, at most
// MaxListed; cut counts the others. Names that are not agent names
// (scratch files) are skipped.
func (m *Manager) folders(p troupe.ProjectID) (names []troupe.AgentID, cut int, err error) {
	ents, err := os.ReadDir(filepath.Join(m.root, string(p)))
	if os.IsNotExist(err) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read worktrees folder: %w", err)
	}
	for _, e := range ents {
		if !e.IsDir() || !agentNameRE.MatchString(e.Name()) {
			continue
		}
		if len(names) == MaxListed {
			cut++
			continue
		}
		names = append(names, troupe.AgentID(e.Name()))
	}
	return names, cut, nil
}

// Kept reports agent k's worktree folder when it has one: for a caller
// telling that an agent left its team and its worktree stays.
// A name that is not an agent's (from a URL) has none.
func (m *Manager) Kept(k troupe.RuntimeKey) (string, bool) {
	if !agentNameRE.MatchString(string(k.Agent)) || !agentNameRE.MatchString(string(k.Project)) {
		return "", false
	}
	path := m.Path(k)
	if _, err := os.Lstat(filepath.Join(path, ".git")); err != nil {
		return "", false
	}
	return path, true
}

// List reports the worktrees of project p (folder dir): one per agent of
// team with workspace = "worktree" (made or not yet), then those of agents
// no longer in the team (orphans), by name.
func (m *Manager) List(ctx context.Context, p troupe.ProjectID, dir string, team []troupe.AgentSpec) (ListResult, error) {
	names, cut, err := m.folders(p)
	if err != nil {
		return ListResult{}, err
	}
	// Keyed by RuntimeKey (C1), though all are of project p.
	specs := make(map[troupe.RuntimeKey]troupe.AgentSpec)
	for _, a := range team {
		if a.Workspace == Worktree {
			specs[troupe.RuntimeKey{Project: p, Agent: a.Name}] = a
		}
	}
	all := make(map[troupe.RuntimeKey]bool, len(names)+len(specs))
	for _, n := range names {
		all[troupe.RuntimeKey{Project: p, Agent: n}] = true
	}
	for k := range specs {
		all[k] = true
	}
	order := make([]troupe.RuntimeKey, 0, len(all))
	for k := range all {
		order = append(order, k)
	}
	sort.Slice(order, func(i, j int) bool { return order[i].Agent < order[j].Agent })
	res := ListResult{Worktrees: make([]Info, 0, len(order)), Cut: cut}
	for _, k := range order {
		spec, inTeam := specs[k]
		if !inTeam {
			spec = troupe.AgentSpec{Name: k.Agent, Workspace: Worktree}
		}
		res.Worktrees = append(res.Worktrees, m.info(ctx, k, spec, dir, !inTeam))
	}
	return res, nil
}

// info reads one worktree's state; what cannot be read goes to Error.
func (m *Manager) info(ctx context.Context, k troupe.RuntimeKey, spec troupe.AgentSpec, dir string, orphan bool) Info {
	defer m.lock(k)()
	in := Info{Agent: k.Agent, Path: m.Path(k), Branch: Branch(k.Agent), Base: spec.Base, Orphan: orphan}
	if in.Base == "" {
		in.Base = "HEAD"
	}
	var errs []string
	if _, err := os.Stat(filepath.Join(in.Path, ".git")); err == nil {
		in.Exists = true
		st, err := statusPorcelain(ctx, in.Path)
		if err != nil {
			errs = append(errs, "status: "+err.Error())
		} else if st = strings.TrimRight(st, "\n"); st != "" {
			in.Dirty, in.Changed = true, strings.Count(st, "\n")+1
		}
	}
	if base, err := m.baseRef(ctx, spec, dir); err != nil {
		errs = append(errs, err.Error())
	} else {
		in.BaseCommit = base
		branch := "refs/heads/" + in.Branch
		if _, err := git(ctx, dir, nil, "rev-parse", "--verify", "--quiet", branch); err == nil {
			out, err := git(ctx, dir, nil, "rev-list", "--left-right", "--count", base+"..."+branch)
			if err != nil {
				errs = append(errs, err.Error())
			} else if l, r, ok := strings.Cut(strings.TrimSpace(out), "\t"); ok {
				in.Behind, _ = strconv.Atoi(l)
				in.Ahead, _ = strconv.Atoi(r)
			}
			if fork, err := git(ctx, dir, nil, "merge-base", base, branch); err == nil {
				in.ForkPoint = strings.TrimSpace(fork)
			}
		}
	}
	in.Error = strings.Join(errs, "; ")
	return in
}

// Removal is what RemoveProject did with one worktree.
type Removal struct {
	Agent   troupe.AgentID `json:"agent"`
	Path    string         `json:"path"`
	Branch  string         `json:"branch"` // always kept
	Removed bool           `json:"removed"`
	// Reason says why a worktree was kept, and what to do.
	Reason string `json:"reason,omitempty"`
}

// RemoveResult is what RemoveProject did.
type RemoveResult struct {
	Worktrees []Removal `json:"worktrees"`
	// Cut counts worktree folders not looked at (MaxListed): kept.
	Cut int `json:"cut,omitempty"`
}

// RemoveProject deletes the worktrees of project p (folder dir, its
// repository), for a project being unregistered: each clean one is
// removed, each with uncommitted work (or whose state cannot be read) is
// kept and says why. Branches are always kept; the project folder is not
// touched (git only updates its worktree records).
func (m *Manager) RemoveProject(ctx context.Context, p troupe.ProjectID, dir string) (RemoveResult, error) {
	names, cut, err := m.folders(p)
	if err != nil {
		return RemoveResult{}, err
	}
	res := RemoveResult{Worktrees: make([]Removal, 0, len(names)), Cut: cut}
	for _, n := range names {
		res.Worktrees = append(res.Worktrees, m.removeKept(ctx, troupe.RuntimeKey{Project: p, Agent: n}, dir))
	}
	if cut == 0 {
		_ = os.Remove(filepath.Join(m.root, string(p))) // only when empty
	}
	return res, nil
}

func (m *Manager) removeKept(ctx context.Context, k troupe.RuntimeKey, dir string) Removal {
	defer m.lock(k)()
	r := Removal{Agent: k.Agent, Path: m.Path(k), Branch: Branch(k.Agent)}
	if _, err := os.Stat(filepath.Join(r.Path, ".git")); err != nil {
		r.Reason = "it is not a git worktree (no .git): left as it is; delete the folder by hand if you do not need it"
		return r
	}
	st, err := statusPorcelain(ctx, r.Path)
	if err != nil {
		r.Reason = fmt.Sprintf("its state could not be read (%v): kept; save what you need, then delete the folder", err)
		return r
	}
	if st != "" {
		r.Reason = fmt.Sprintf("it has uncommitted changes (%s): kept; save them, then run: git -C %s worktree remove --force %s", firstPaths(st), dir, r.Path)
		return r
	}
	if _, err := git(ctx, dir, nil, "worktree", "remove", r.Path); err != nil {
		r.Reason = fmt.Sprintf("git could not remove it (%v): kept", err)
		return r
	}
	r.Removed = true
	return r
}

// statusPorcelain is git status --porcelain of the worktree at path, with
// the repository's programs turned off (repoGuard).
func statusPorcelain(ctx context.Context, path string) (string, error) {
	guard, err := repoGuard(ctx, path)
	if err != nil {
		return "", err
	}
	return gitWith(ctx, path, nil, guard, "status", "--porcelain")
}
