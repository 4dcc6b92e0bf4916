package sandbox

import (
	"path/filepath"
)

// placeholderDirs are the read-only folders of a workspace that are
// protected even when missing: an empty read-only folder is mounted in
// their place (bubblewrap leaves the empty folder behind, which git does
// not see), so an agent cannot create .claude/settings.json or a team
// file that the person's own tools would then trust.
var placeholderDirs = map[string]bool{".troupe": true, ".claude": true, ".codex": true}

// BwrapArgv is the bubblewrap command line that runs argv under p: / read
// only, /dev and /proc of its own, a pid namespace (the daemon and other
// agents are out of sight and out of reach of signals), the writable,
// read-only and hidden paths mounted over / shallowest first, TMPDIR set
// to the private temporary folder (/tmp stays the machine's, read-only:
// the tests and tools troupe runs keep their files there), no network when p says so, and the sandbox
// killed with its parent. It does not start a new session: the caller
// puts bwrap in a session or process group of its own, so that a signal
// to the group reaches the program (bwrap forwards none) and a program on
// a terminal keeps it as its controlling terminal.
//
// p.Binds come after the policy's paths (a bind's target is usually inside
// a writable folder, the engine's state). Paths that do not exist are
// skipped, except the workspace's read-only
// folders named in placeholderDirs and .git/hooks of a git folder.
func BwrapArgv(bwrap string, p Policy, argv []string) []string {
	a := []string{bwrap,
		"--ro-bind", "/", "/",
		"--dev", "/dev",
		"--proc", "/proc",
		"--unshare-pid",
		"--unshare-ipc",
		"--unshare-uts",
		"--die-with-parent",
	}
	if p.AsInit {
		a = append(a, "--as-pid-1")
	}
	if !p.Network {
		a = append(a, "--unshare-net")
	}
	if p.Temp != "" {
		a = append(a, "--setenv", "TMPDIR", p.Temp)
	}
	// Folders mounted read-only are remounted so at the end: a deeper
	// path may need a mount point made inside one first.
	var remount []string
	for _, m := range p.mounts() {
		isDir, ok := exists(m.path)
		switch m.kind {
		case kindHidden:
			switch {
			case !ok:
			case isDir:
				a = append(a, "--tmpfs", m.path)
				remount = append(remount, m.path)
			default:
				a = append(a, "--ro-bind", "/dev/null", m.path)
			}
		case kindWritable:
			if ok {
				a = append(a, "--bind", m.path, m.path)
			}
		case kindReadOnly:
			switch {
			case ok:
				a = append(a, "--ro-bind", m.path, m.path)
			case needsPlaceholder(m.path):
				a = append(a, "--tmpfs", m.path)
				remount = append(remount, m.path)
			}
		}
	}
	for _, b := range p.Binds {
		src, dst := clean(b.Source), resolve(clean(b.Target))
		if isDir, ok := exists(src); src != "" && dst != "" && ok && isDir {
			a = append(a, "--bind", src, dst)
		}
	}
	for _, r := range remount {
		a = append(a, "--remount-ro", r)
	}
	a = append(a, "--")
	return append(a, argv...)
}

// needsPlaceholder reports whether a missing read-only path gets an empty
// read-only folder in its place.
func needsPlaceholder(p string) bool {
	base := filepath.Base(p)
	if placeholderDirs[base] {
		return true
	}
	if base == "hooks" && filepath.Base(filepath.Dir(p)) == ".git" {
		isDir, ok := exists(filepath.Dir(p))
		return ok && isDir
	}
	return false
}
