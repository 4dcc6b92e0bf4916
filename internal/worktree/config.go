package worktree

import (
	"slices"
	"strings"
)

// Tool configuration is what a merge does not bring into the person's
// checkout unless the person names it (Merge's MergeOptions.IncludeConfig)
// and what Diff shows first, always as text: files that tell troupe, the
// engines it runs, git or the person's editor what an agent may do or what
// to run. A path (slash-separated, relative to the repository's top, as git
// names it) is tool configuration when any of its components is
//
//   - .troupe                    troupe's team file, prompt files, notes
//   - .claude                    Claude Code: settings, permissions, hooks, commands, agents
//   - .codex                     Codex: config, profiles
//   - .opencode                  OpenCode: agents, commands, plugins
//   - .vscode                    editor settings and tasks (they run commands)
//   - a name starting with .git  git and its forges: .git, .gitattributes (filters,
//     diff and merge drivers), .gitmodules, .gitignore, .github, .gitlab-ci.yml
//
// or its last component is
//
//   - opencode.json, opencode.jsonc  OpenCode's config
//   - .mcp.json                      MCP servers of the project (Claude Code and others)
//   - .envrc                         direnv runs it when a shell enters the folder
//
// at any depth (a nested .gitattributes applies below it; engines read
// nested folders too). Names are compared as a case-insensitive file system
// (macOS) would: letter case, trailing dots and spaces and the code points
// HFS+ ignores do not matter. Instruction files (AGENTS.md, CLAUDE.md) are
// not tool configuration: they are prompt text, which grants nothing.
func IsToolConfig(path string) bool {
	parts := strings.Split(path, "/")
	for i, p := range parts {
		p = foldName(p)
		switch {
		case p == ".troupe", p == ".claude", p == ".codex", p == ".opencode", p == ".vscode":
			return true
		case strings.HasPrefix(p, ".git"):
			return true
		case i == len(parts)-1 && (p == "opencode.json" || p == "opencode.jsonc" || p == ".mcp.json" || p == ".envrc"):
			return true
		}
	}
	return false
}

// foldName is a path component as a case-insensitive file system sees it:
// lower case, without the code points HFS+ ignores, without trailing dots
// and spaces (which Windows drops).
func foldName(s string) string {
	s = strings.Map(func(r rune) rune {
		if hfsIgnored(r) {
			return -1
		}
		return r
	}, s)
	return strings.ToLower(strings.TrimRight(s, ". "))
}

// hfsIgnored reports the code points HFS+ leaves out of a name when it
// compares names (zero-width and direction marks), so ".tr\u200coupe" is
// ".troupe" there.
func hfsIgnored(r rune) bool {
	switch {
	case r >= 0x200c && r <= 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x206a && r <= 0x206f, r == 0xfeff:
		return true
	}
	return false
}

// ToolConfig returns the paths of paths that are tool configuration
// (IsToolConfig), sorted, without repeats; empty, not nil, when none.
func ToolConfig(paths []string) []string {
	out := []string{}
	for _, p := range paths {
		if IsToolConfig(p) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
