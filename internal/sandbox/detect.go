package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// Mechanism is how a policy is enforced.
type Mechanism string

const (
	Bubblewrap Mechanism = "bubblewrap"
	Landlock   Mechanism = "landlock"
	// None: no mechanism works on this machine: a sandboxed agent does
	// not start.
	None Mechanism = "none"
)

// MechanismEnv forces a mechanism ("bubblewrap" or "landlock") instead
// of the one Detect finds, or none ("none": sandboxed agents do not
// start); tests use it to run the Landlock mechanism, or none, on a
// machine that has bubblewrap.
const MechanismEnv = "TROUPE_SANDBOX"

// Report is what Detect found.
type Report struct {
	Mechanism Mechanism `json:"mechanism"`
	// Bwrap is bubblewrap's path, when it is the mechanism.
	Bwrap string `json:"bwrap,omitempty"`
	// LandlockABI is the kernel's Landlock ABI (0: none).
	LandlockABI int `json:"landlock_abi"`
	// Covers says in a sentence what the mechanism contains, and what not.
	Covers string `json:"covers"`
	// Why says why bubblewrap is not used (or why nothing is), and the fix.
	Why string `json:"why,omitempty"`
}

// Covers of each mechanism.
const (
	coversBwrap = "files (state dir, other projects and worktrees, credential stores hidden; tool configuration read-only), " +
		"processes (own pid namespace: the daemon and other agents unseen), TMPDIR private, /tmp read-only; network unchanged unless turned off"
	coversLandlock = "files (state dir, other projects and worktrees, credential stores hidden; tool configuration read-only), " +
		"signals outside the sandbox; not: other processes stay visible in /proc (their environ readable to root), " +
		"no new entry is made directly in a folder that holds a hidden or read-only path (the workspace's top level), " +
		"and the engines' own config under HOME stays writable but for ~/.claude.json (~/.claude/settings.json, ~/.codex/config.toml, OpenCode's plugins)"
)

var (
	detectOnce sync.Once
	detected   Report
)

// Detect reports the mechanism in force on this machine: bubblewrap when
// it is on PATH and starts a sandbox here, else Landlock when the kernel
// has it, else None. MechanismEnv overrides the choice. The probe (one
// bwrap run, a few ms) is made once per process.
func Detect() Report {
	detectOnce.Do(func() { detected = detect() })
	return detected
}

func detect() Report {
	abi, abiErr := landlockABI()
	r := Report{LandlockABI: abi}
	bwrap, bwrapErr := exec.LookPath("bwrap")
	if bwrapErr == nil {
		bwrapErr = probeBwrap(bwrap)
	}
	force := Mechanism(os.Getenv(MechanismEnv))
	switch {
	case force == None:
		r.Mechanism = None
		r.Why = MechanismEnv + "=none: no mechanism is used: unset it, or set sandbox = false for the agents in .troupe/team.toml to run them unsandboxed"
	case force == Landlock && abiErr == nil:
		r.Mechanism, r.Covers, r.Why = Landlock, coversLandlock, MechanismEnv+"=landlock"
	case bwrapErr == nil && force != Landlock:
		r.Mechanism, r.Bwrap, r.Covers = Bubblewrap, bwrap, coversBwrap
	case abiErr == nil:
		r.Mechanism, r.Covers = Landlock, coversLandlock
		r.Why = fmt.Sprintf("bubblewrap unusable (%v): install it (apt-get install bubblewrap) and allow user namespaces for the full sandbox", bwrapErr)
	default:
		r.Mechanism = None
		r.Why = fmt.Sprintf("bubblewrap unusable (%v) and no Landlock (%v): install bubblewrap (apt-get install bubblewrap), "+
			"or set sandbox = false for the agents in .troupe/team.toml to run them unsandboxed", bwrapErr, abiErr)
	}
	return r
}

// probeBwrap runs a minimal sandbox: it fails where user namespaces are
// refused.
func probeBwrap(bwrap string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
		"--unshare-pid", "--as-pid-1", "--die-with-parent", "--", "true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // nothing of it in the caller's group
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", bwrap, err, strings.TrimSpace(string(out)))
	}
	return nil
}

func landlockGetABI() (int, error) { return ll.LandlockGetABIVersion() }

// Wrap returns the command that runs argv under p: argv itself when p is
// off, else a bubblewrap or Landlock-helper command line. It fails when
// no mechanism can enforce p, saying how to fix it.
func Wrap(p Policy, argv []string) ([]string, error) {
	if !p.On {
		return argv, nil
	}
	mech := p.Mechanism
	r := Detect()
	if mech == "" {
		mech = r.Mechanism
	}
	switch mech {
	case Bubblewrap:
		bwrap := r.Bwrap
		if bwrap == "" {
			var err error
			if bwrap, err = exec.LookPath("bwrap"); err != nil {
				return nil, fmt.Errorf("sandbox: bubblewrap not found: install it (apt-get install bubblewrap): %w", err)
			}
		}
		if err := p.seed(); err != nil {
			return nil, fmt.Errorf("sandbox: %w", err)
		}
		a := BwrapArgv(bwrap, p, argv)
		// cgroup v1: a shell joins the agent's cgroup, then execs
		// bubblewrap (the Landlock helper joins by itself).
		return p.Cgroup.JoinArgv(a), nil
	case Landlock:
		if r.LandlockABI == 0 {
			return nil, fmt.Errorf("sandbox: this kernel has no Landlock: install bubblewrap (apt-get install bubblewrap), or set sandbox = false for the agent")
		}
		return helperArgv(p, argv)
	default:
		why := r.Why
		if why == "" {
			why = fmt.Sprintf("mechanism %q: install bubblewrap (apt-get install bubblewrap), or set sandbox = false for the agent in .troupe/team.toml", mech)
		}
		return nil, fmt.Errorf("sandbox: cannot be enforced on this machine: %s", why)
	}
}

// Check says whether p can be enforced on this machine: nil when it is off
// or a mechanism can, else why not and how to fix it.
func (p Policy) Check() error {
	_, err := Wrap(p, []string{"true"})
	return err
}
