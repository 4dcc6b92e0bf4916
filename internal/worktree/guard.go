package worktree

import (
	"context"
	"fmt"
	"regexp"
	"strings"
)

// An agent's worktree shares the repository's .git with the person's
// checkout: its config (.git/config and what it includes, a worktree's
// config.worktree), its hooks, its info/attributes. An agent whose command
// reached them could name programs there for the next git troupe runs to
// start in the daemon, in the person's checkout. So:
//
//   - every git troupe runs has no hooks (core.hooksPath=/dev/null) and no
//     fsmonitor (alwaysConfig);
//   - its commands in the repository (worktree creation, Diff, Merge,
//     Reset, Remove, status) turn off each filter (clean, smudge,
//     process), diff driver (textconv, command, binary) and merge driver
//     that the repository's own config defines (local or worktree scope):
//     a filter is then no filter, a merge needing such a driver fails
//     (Merge says so); drivers of the person's own ~/.gitconfig and of
//     the system (git-lfs) still run;
//   - Diff runs with --no-textconv --no-ext-diff, no global attributes
//     file, and shows tool configuration with --text (diffConfig);
//   - troupe's commit of the agent's work is not signed, and a merge is
//     not signed when the repository's own config sets a gpg key.
//
// What remains, for the sandbox (the next issue): programs named in the
// person's own config or the system's, which an agent's command can still
// write while agents run as the person; .git/info/attributes, which can
// still mark a file that is not tool configuration -diff (shown as
// "Binary files differ", the file named); the merged files themselves,
// which the person's tools read after the merge (only tool configuration
// is held back, and the guard checks which files change, not what they
// hold).

// guardedKey matches the config keys that name a program git would run
// from the repository's own config, or sign with one.
var guardedKey = regexp.MustCompile(`^(filter\.(.+)\.(clean|smudge|process)|diff\.(.+)\.(textconv|command|binary)|merge\.(.+)\.driver|diff\.external|gpg\..*)$`)

// repoGuard returns the -c options that turn off, for a git run in dir,
// the programs the repository's own config (local and worktree scope)
// names: its filters, diff and merge drivers (set to nothing), and
// signing (commit.gpgSign=false) when it sets any gpg key.
func repoGuard(ctx context.Context, dir string) ([]string, error) {
	return repoGuardEnv(ctx, dir, nil)
}

// repoGuardEnv is repoGuard of the repository git finds in dir with env.
func repoGuardEnv(ctx context.Context, dir string, env []string) ([]string, error) {
	out, code, stderr, err := gitCode(ctx, dir, env, "config", "--show-scope", "--null", "--get-regexp", `^(filter|diff|merge|gpg)\.`)
	if err != nil {
		return nil, err
	}
	if code == 1 && out == "" {
		return nil, nil // none
	}
	if code != 0 {
		return nil, fmt.Errorf("read the repository's config: %s", strings.TrimSpace(stderr))
	}
	var cfg []string
	seen := map[string]bool{}
	add := func(kv string) {
		if !seen[kv] {
			seen[kv] = true
			cfg = append(cfg, "-c", kv)
		}
	}
	toks := strings.Split(strings.TrimSuffix(out, "\x00"), "\x00")
	for i := 0; i+1 < len(toks); i += 2 {
		scope, entry := toks[i], toks[i+1]
		if scope != "local" && scope != "worktree" {
			continue
		}
		key, _, _ := strings.Cut(entry, "\n")
		m := guardedKey.FindStringSubmatch(key)
		if m == nil {
			continue
		}
		if strings.ContainsAny(key, "=\n") {
			return nil, fmt.Errorf("the repository's config (%s scope) defines %q, a driver troupe cannot turn off: remove it from .git/config", scope, key)
		}
		switch {
		case m[2] != "": // a filter: no command, and not required
			add(key + "=")
			add("filter." + m[2] + ".required=false")
		case strings.HasPrefix(key, "gpg."):
			add("commit.gpgSign=false")
		case m[5] == "binary": // a driver that calls text binary
			add(key + "=false")
		default:
			add(key + "=")
		}
	}
	return cfg, nil
}
