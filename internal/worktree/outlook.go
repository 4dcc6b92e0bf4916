package worktree

// Where an agent's branch stands against its base, and what a merge of
// its work would do now: what the Changes view and troupe diff show beside
// the diff, so that neither names a base the diff is not against nor hides
// that the base moved.

import (
	"context"
	"strconv"
	"strings"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// Outlook is an agent's branch against its base, and a merge foreseen.
type Outlook struct {
	// Base is the ref the branch is counted from (the agent's base, or
	// HEAD); BaseCommit what it names now; ForkPoint the commit the branch
	// forked from it, which the diff is against.
	Base       string `json:"base"`
	BaseCommit string `json:"base_commit"`
	ForkPoint  string `json:"fork_point"`
	// Ahead counts the branch's commits not in the base; Behind the base's
	// commits since the fork that the branch does not have (the base
	// moved: a merge brings the agent's work onto a newer tree).
	Ahead  int `json:"ahead"`
	Behind int `json:"behind"`
	// Into is the branch of the project's checkout a merge goes into.
	Into string `json:"into,omitempty"`
	// Brings lists the files a merge of the work shown (committed or not)
	// would change in the checkout, at most maxNamed (BringsCount counts
	// them all); Conflicts the files it would conflict in (troupe merge
	// refuses it then). Merged: the work is in the checkout already.
	Brings      []string `json:"brings,omitempty"`
	BringsCount int      `json:"brings_count"`
	Conflicts   []string `json:"conflicts,omitempty"`
	Merged      bool     `json:"merged,omitempty"`
	// Unknown says why the merge could not be foreseen.
	Unknown string `json:"unknown,omitempty"`
}

// previewEnv names the author of the preview commit: an object no ref
// holds (git's gc removes it), never the person's.
var previewEnv = []string{"GIT_COMMITTER_NAME=troupe", "GIT_COMMITTER_EMAIL=troupe@troupe.invalid",
	"GIT_AUTHOR_NAME=troupe", "GIT_AUTHOR_EMAIL=troupe@troupe.invalid"}

// outlook reads where agent k's branch stands (fork, its fork point with
// the base) and foresees a merge of tree, the work a diff showed, into
// the project's checkout at dir, as Merge would do it: the tree committed
// on the branch, then merge-tree with the checkout's HEAD. It changes no
// ref: the preview commit is an object no ref holds.
func (m *Manager) outlook(ctx context.Context, k troupe.RuntimeKey, spec troupe.AgentSpec, dir, fork, tree string) Outlook {
	o := Outlook{Base: spec.Base, ForkPoint: fork}
	if o.Base == "" {
		o.Base = "HEAD"
	}
	branch := "refs/heads/" + Branch(k.Agent)
	base, err := m.baseRef(ctx, spec, dir)
	if err != nil {
		o.Unknown = err.Error()
		return o
	}
	o.BaseCommit = base
	o.Ahead = count(ctx, dir, fork+".."+branch)
	o.Behind = count(ctx, dir, fork+".."+base)
	into, code, _, err := gitCode(ctx, dir, nil, "symbolic-ref", "--quiet", "--short", "HEAD")
	if err != nil || code != 0 {
		o.Unknown = "the project is on a detached HEAD: a merge needs a branch checked out"
		return o
	}
	o.Into = strings.TrimSpace(into)
	guard, err := repoGuard(ctx, dir)
	if err != nil {
		o.Unknown = err.Error()
		return o
	}
	commit, err := git(ctx, dir, previewEnv, "commit-tree", tree, "-p", branch, "-m", "troupe: work of "+string(k.Agent)+" (merge preview)")
	if err != nil {
		o.Unknown = "commit the work for a preview: " + err.Error()
		return o
	}
	commit = strings.TrimSpace(commit)
	if _, code, _, err := gitCode(ctx, dir, nil, "merge-base", "--is-ancestor", commit, "HEAD"); err == nil && code == 0 {
		o.Merged = true
		return o
	}
	out, code, stderr, err := gitCodeWith(ctx, dir, nil, guard, "merge-tree", "--write-tree", "--name-only", "--no-messages", "HEAD", commit)
	switch {
	case err != nil:
		o.Unknown = err.Error()
		return o
	case code == 1:
		o.Conflicts = strings.Split(strings.TrimSpace(out), "\n")[1:]
		return o
	case code != 0:
		o.Unknown = strings.TrimSpace(stderr)
		return o
	}
	merged, _, _ := strings.Cut(out, "\n")
	names, err := gitWith(ctx, dir, nil, guard, "diff-tree", "-r", "-z", "--name-only", "--no-renames", "HEAD", strings.TrimSpace(merged))
	if err != nil {
		o.Unknown = err.Error()
		return o
	}
	if s := strings.TrimSuffix(names, "\x00"); s != "" {
		all := strings.Split(s, "\x00")
		o.BringsCount = len(all)
		o.Brings = all[:min(len(all), maxNamed)]
	}
	o.Merged = o.BringsCount == 0 // a merge would change nothing: the work is in already
	return o
}

// count is git rev-list --count of rng in dir, 0 when it cannot be read.
func count(ctx context.Context, dir, rng string) int {
	out, err := git(ctx, dir, nil, "rev-list", "--count", rng)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(out))
	return n
}
