package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsyscall "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// HelperCommand is the hidden command of troupe's binary that runs
// HelperMain; MaybeRunHelper recognises it in a test binary's arguments.
const HelperCommand = "sandbox-exec"

// landlockConfig is the ABI troupe asks for: 7 (this kernel's), degraded
// on older kernels to what they offer (Detect says which).
var landlockConfig = landlock.V7.BestEffort()

// helperArgv is the command that runs argv under p with Landlock.
func helperArgv(p Policy, argv []string) ([]string, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encode sandbox policy: %w", err)
	}
	helper := p.Helper
	if len(helper) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("find troupe's binary for the sandbox helper: %w", err)
		}
		helper = []string{exe}
	}
	a := slices.Concat(helper, []string{HelperCommand, string(b), "--"}, argv)
	return a, nil
}

// MaybeRunHelper runs HelperMain and never returns when this process was
// started as the Landlock helper (HelperCommand among its first three
// arguments, as a test binary's Helper puts it); otherwise it returns at
// once. Test binaries whose processes are sandboxed with Landlock call it
// first thing in TestMain.
func MaybeRunHelper() {
	for i := 1; i < len(os.Args) && i <= 2; i++ {
		if os.Args[i] == HelperCommand {
			os.Exit(HelperMain(os.Args[i+1:]))
		}
	}
}

// HelperMain is the program of `troupe sandbox-exec POLICY -- ARGV...`:
// it joins the policy's cgroup when it is a v1 one, restricts itself with
// Landlock to the JSON policy POLICY, then execs ARGV in its place. It returns only on failure (the exit status).
func HelperMain(args []string) int {
	if len(args) < 3 || args[1] != "--" {
		fmt.Fprintf(os.Stderr, "usage: troupe %s POLICY -- COMMAND [ARG...]\n", HelperCommand)
		return 2
	}
	var p Policy
	if err := json.Unmarshal([]byte(args[0]), &p); err != nil {
		fmt.Fprintf(os.Stderr, "troupe %s: read policy: %v\n", HelperCommand, err)
		return 2
	}
	argv := args[2:]
	prog, err := exec.LookPath(argv[0])
	if err != nil {
		fmt.Fprintf(os.Stderr, "troupe %s: %v\n", HelperCommand, err)
		return 127
	}
	// The agent's cgroup first (v1: no clone puts a child into one), so
	// nothing the program runs is ever outside it.
	if p.Cgroup.NeedsJoin() {
		if err := p.Cgroup.Join(); err != nil {
			fmt.Fprintf(os.Stderr, "troupe %s: %v\n", HelperCommand, err)
			return 1
		}
	}
	if err := restrictLandlock(p); err != nil {
		fmt.Fprintf(os.Stderr, "troupe %s: %v\n", HelperCommand, err)
		return 1
	}
	env := os.Environ()
	if p.Temp != "" {
		env = append(env, "TMPDIR="+p.Temp)
	}
	err = syscall.Exec(prog, argv, env)
	fmt.Fprintf(os.Stderr, "troupe %s: run %s: %v\n", HelperCommand, argv[0], err)
	return 126
}

// restrictLandlock restricts this process (every thread) to p.
func restrictLandlock(p Policy) error {
	rules := LandlockRules(p)
	if err := landlockConfig.RestrictPaths(rules...); err != nil {
		return fmt.Errorf("restrict paths with landlock: %w", err)
	}
	// Signals and abstract unix sockets: only within the sandbox (ABI 6).
	if err := landlockConfig.RestrictScoped(); err != nil {
		return fmt.Errorf("restrict signals with landlock: %w", err)
	}
	if !p.Network {
		if err := landlockConfig.RestrictNet(); err != nil {
			return fmt.Errorf("restrict network with landlock: %w", err)
		}
	}
	return nil
}

// devices are the files of /dev a program may use under Landlock (the
// rest of /dev, disks included, is read-only for root as for anyone).
var devices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/ptmx", "/dev/pts", "/dev/shm"}

// LandlockRules are the Landlock rules of p. Landlock only grants, and a
// grant covers everything below a folder, so a folder that holds a
// hidden path is never granted itself: its entries are (Complement), all
// but the hidden ones. The same for a writable folder holding read-only
// or hidden paths. A folder so split gets read access only (no new
// entries made or removed in it directly), which is what the Landlock
// mechanism cannot give that bubblewrap does: a folder of p.Whole is
// never split for its read-only paths (they stay writable under
// Landlock), only for its hidden ones.
func LandlockRules(p Policy) []landlock.Rule {
	var rules []landlock.Rule
	// A path may go between the listing here and the helper's use of the
	// rule (a file in /tmp or HOME removed meanwhile): its rule is then
	// skipped (IgnoreIfMissing), not a failed start. What is gone needs
	// no access.
	ro := func(paths []string) {
		for _, x := range paths {
			if isDir, ok := exists(x); ok && isDir {
				rules = append(rules, landlock.RODirs(x).IgnoreIfMissing())
			} else if ok {
				rules = append(rules, landlock.ROFiles(x).IgnoreIfMissing())
			}
		}
	}
	rw := func(paths []string) {
		for _, x := range paths {
			if isDir, ok := exists(x); ok && isDir {
				rules = append(rules, landlock.RWDirs(x).WithRefer().IgnoreIfMissing())
			} else if ok {
				rules = append(rules, landlock.RWFiles(x).IgnoreIfMissing())
			}
		}
	}
	// Readable: / less the hidden paths; read-only paths inside hidden
	// ones are granted back.
	ro(Complement("/", p.Hidden))
	for _, r := range p.ReadOnly {
		ro(Complement(r, below(r, p.Hidden)))
	}
	// Writable: each writable path less what is read-only or hidden in it.
	holes := slices.Concat(p.ReadOnly, p.Hidden)
	for _, w := range p.Writable {
		in := holes
		if slices.Contains(p.Whole, w) {
			in = p.Hidden // granted whole, but for what is hidden
		}
		parts := Complement(w, below(w, in))
		rw(parts)
		if len(parts) != 1 || parts[0] != w {
			// A split folder's own entries can be listed (inside the
			// hidden state dir, nothing else grants it: a worktree).
			// Listing reaches below: the names in a hidden folder in it
			// show, not their contents.
			if isDir, ok := exists(w); ok && isDir {
				rules = append(rules, landlock.PathAccess(llsyscall.AccessFSReadDir, w))
			}
		}
	}
	for _, d := range devices {
		if isDir, ok := exists(d); ok && isDir {
			rules = append(rules, landlock.RWDirs(d).WithIoctlDev())
		} else if ok {
			rules = append(rules, landlock.RWFiles(d).WithIoctlDev())
		}
	}
	return rules
}

// below lists the paths strictly inside root.
func below(root string, paths []string) []string {
	var out []string
	for _, p := range paths {
		if p != root && within(p, root) {
			out = append(out, p)
		}
	}
	return out
}

// Complement lists the paths that cover root less holes: root itself when
// no hole is in it, nothing when it is a hole, else the Complement of
// each of its entries. Symbolic links among the entries are left out (a
// grant follows a link: one in the workspace could name a hidden folder).
func Complement(root string, holes []string) []string {
	inside := false
	for _, h := range holes {
		if h == root {
			return nil
		}
		if within(h, root) {
			inside = true
		}
	}
	if !inside {
		return []string{root}
	}
	if isDir, ok := exists(root); ok && !isDir {
		return []string{root} // a file holds nothing: a hole "in" it names nothing there
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil // unreadable: nothing granted below it
	}
	var out []string
	for _, e := range entries {
		if e.Type()&os.ModeSymlink != 0 {
			continue
		}
		out = append(out, Complement(filepath.Join(root, e.Name()), holes)...)
	}
	return out
}

// landlockABI is the kernel's Landlock ABI version, 0 without Landlock.
func landlockABI() (int, error) {
	v, err := landlockGetABI()
	if err != nil {
		return 0, err
	}
	if v < 1 {
		return 0, errors.New("landlock is not enabled in this kernel")
	}
	return v, nil
}
