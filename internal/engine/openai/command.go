package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/troupe-dev/troupe/internal/proc"
	"github.com/troupe-dev/troupe/internal/sandbox"
	"github.com/troupe-dev/troupe/internal/tool"
)

// passedVars are the daemon's variables a command of the agent gets by
// name (C11): the person's session, locale, proxies and certificates, and
// the toolchains' homes. Never a model key: api_key_env's variable is
// taken out whatever its source.
var passedVars = []string{
	"HOME", "USER", "LOGNAME", "SHELL", "PATH", "LANG", "TERM", "TMPDIR", "TZ",
	"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "no_proxy", "all_proxy",
	"SSL_CERT_FILE", "SSL_CERT_DIR",
	"GOPATH", "GOCACHE", "GOMODCACHE", "GOROOT", "GOFLAGS", "GOPROXY", "GONOSUMDB", "GOPRIVATE", "GOTOOLCHAIN", "GOENV",
	"CARGO_HOME", "RUSTUP_HOME", "NODE_PATH", "VIRTUAL_ENV",
}

// passedPrefixes: locale and XDG folders.
var passedPrefixes = []string{"LC_", "XDG_"}

// commandEnv builds a command's environment from environ (the daemon's)
// and the agent's env table, without the variable named by keyEnv.
func commandEnv(environ []string, agentEnv map[string]string, keyEnv string) []string {
	var extra []string
	for _, kv := range environ {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == keyEnv {
			continue
		}
		if slices.Contains(passedVars, k) || slices.ContainsFunc(passedPrefixes, func(p string) bool { return strings.HasPrefix(k, p) }) {
			extra = append(extra, kv)
		}
	}
	for k, v := range agentEnv {
		if k != keyEnv {
			extra = append(extra, k+"="+v)
		}
	}
	return proc.Env(nil, nil, extra...)
}

type commandArgs struct {
	Command        string `json:"command"`
	TimeoutSeconds int    `json:"timeout_seconds"`
}

// commandLimit is a command's limit in seconds: what the model asked for,
// else defaultCmdLimit, at most maxCmdLimit.
func commandLimit(asked int) int {
	if asked <= 0 {
		asked = defaultCmdLimit
	}
	return min(asked, maxCmdLimit)
}

// commandStopTimeout bounds each wait of a command's stop.
const commandStopTimeout = time.Second

// outputGrace is how long the output of a command that ended is read on
// (what a process it left behind still writes).
const outputGrace = 2 * time.Second

// runCommand runs a shell command in dir in its own process group (through
// proc: one reaper, stop by escalation, nothing of its group left), its
// stdin closed, its output kept as head and tail, until it exits, its
// timeout passes or ctx ends (an interrupt, the session's close): then it
// is stopped (SIGTERM to its group, then proc's escalation). Every chunk
// of output bumps the activity token (bump).
//
// backstop, when set, is the coreutils timeout program: the command runs
// under it with a limit 2 s past its own, so that it cannot outlive its
// limit by much even when the daemon that times it is killed (SIGKILL)
// mid-command.
//
// sbx, when set, is the agent's sandbox: the command runs in it, network
// as the policy says.
func runCommand(ctx context.Context, args json.RawMessage, dir string, env []string, backstop string, sbx *sandbox.Policy, bump func()) (string, error) {
	var a commandArgs
	if err := tool.DecodeArgs(args, &a, "command"); err != nil {
		return "", err
	}
	limit := commandLimit(a.TimeoutSeconds)
	out := &headTail{max: maxToolOutput}
	var ooms uint64
	if sbx != nil {
		ooms = sbx.Cgroup.OOMKills()
	}
	start := time.Now()
	p, err := proc.Start(proc.Spec{
		Argv:        commandArgv(backstop, limit, a.Command),
		Dir:         dir,
		Env:         env,
		StopTimeout: commandStopTimeout,
		StderrTail:  1, // the output is kept here
		Sandbox:     sbx,
		OnStderr:    func(b []byte) { out.Write(b); bump() },
	})
	if err != nil {
		return "", fmt.Errorf("start command: %w", err)
	}
	p.Stdin().Close()
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		r := p.Stdout()
		defer r.Close()
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				out.Write(buf[:n])
				bump()
			}
			if err != nil {
				return
			}
		}
	}()
	timer := time.NewTimer(time.Duration(limit) * time.Second)
	defer timer.Stop()
	why := ""
	select {
	case <-p.Done():
	case <-timer.C:
		why = fmt.Sprintf("stopped after its timeout of %ds", limit)
	case <-ctx.Done():
		why = "stopped: the turn was interrupted"
	}
	if why != "" {
		p.Signal(syscall.SIGTERM)
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 4*commandStopTimeout)
		p.Stop(sctx)
		cancel()
		<-p.Done()
	}
	// Its group is gone (proc kills what is left of it); a process that
	// left the group (setsid) may still hold the output pipe: it is not
	// waited for beyond a grace.
	note := ""
	select {
	case <-readerDone:
	case <-time.After(outputGrace):
		p.Stdout().Close()
		<-readerDone
		note = "; output closed after it ended: a process it started outside its group (setsid) still holds it and runs on"
	}
	status := "exit status 0"
	if err := p.ExitErr(); err != nil {
		status = err.Error()
	}
	took := time.Since(start).Round(time.Millisecond)
	head := fmt.Sprintf("$ %s\n[%s after %s", clipText(a.Command, 200), status, took)
	if why != "" {
		head += "; " + why
	}
	if sbx != nil {
		if n := sbx.Cgroup.OOMKills() - ooms; n > 0 {
			why = fmt.Sprintf("out of memory: the OOM killer killed %d of the agent's processes meanwhile, at its memory cap (sandbox.memory in .troupe/team.toml)", n)
			head += "; " + why
		}
	}
	head += note + "]\n"
	res := head + out.String()
	if why != "" || p.ExitErr() != nil {
		return "", fmt.Errorf("%s", res)
	}
	return res, nil
}

// commandArgv runs command with /bin/sh, under backstop (timeout) when
// there is one: it signals the command's group at limit+2 s, SIGKILLs it 2 s
// later.
func commandArgv(backstop string, limit int, command string) []string {
	sh := []string{"/bin/sh", "-c", command}
	if backstop == "" {
		return sh
	}
	return append([]string{backstop, "--kill-after=2", strconv.Itoa(limit + 2)}, sh...)
}

// findBackstop finds the coreutils timeout program on the daemon's PATH;
// "" when there is none (commands then depend on the daemon alone to stop
// them at their limit).
func findBackstop() string {
	p, err := exec.LookPath("timeout")
	if err != nil {
		return ""
	}
	return p
}

// headTail keeps the first and the last max/2 bytes written, and how many
// were cut between. Safe for concurrent use (stdout and stderr).
type headTail struct {
	max int

	mu   sync.Mutex // guards the fields below
	head []byte
	tail []byte // a ring, its oldest byte at pos once full
	pos  int
	cut  int64
}

func (h *headTail) Write(b []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := len(b)
	half := h.max / 2
	if room := half - len(h.head); room > 0 {
		k := min(room, len(b))
		h.head = append(h.head, b[:k]...)
		b = b[k:]
	}
	for _, c := range b {
		if len(h.tail) < half {
			h.tail = append(h.tail, c)
			continue
		}
		h.tail[h.pos] = c
		h.pos = (h.pos + 1) % half
		h.cut++
	}
	return n, nil
}

func (h *headTail) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	tail := append(append([]byte{}, h.tail[h.pos:]...), h.tail[:h.pos]...)
	if h.cut == 0 {
		return string(h.head) + string(tail)
	}
	return strings.ToValidUTF8(string(h.head), "") +
		fmt.Sprintf("\n[cut: %d bytes of output left out here]\n", h.cut) + strings.ToValidUTF8(string(tail), "")
}
