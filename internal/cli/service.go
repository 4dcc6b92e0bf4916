package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/troupe-dev/troupe/internal/atomicfile"
)

// serviceName is the systemd user unit troupe service manages.
const serviceName = "troupe.service"

// serviceResult is troupe service's answer (--json).
type serviceResult struct {
	Unit string `json:"unit"` // the unit file's path
	// Installed: the unit file exists (after the command).
	Installed bool `json:"installed"`
	// Changed: the command wrote or removed the unit file.
	Changed bool `json:"changed"`
	// Systemd says whether systemd's user instance runs here; Why says
	// why not (the user manager's answer, or no systemctl on PATH).
	Systemd bool   `json:"systemd"`
	Why     string `json:"why,omitempty"`
	// Enabled and Active are systemctl's is-enabled and is-active
	// answers ("" without systemd); Linger whether the user's manager
	// outlives their logins ("yes", "no", or "" when unknown).
	Enabled string `json:"enabled,omitempty"`
	Active  string `json:"active,omitempty"`
	Linger  string `json:"linger,omitempty"`
	// ExecStart is the unit's command line.
	ExecStart string `json:"exec_start,omitempty"`
	// Steps are the commands run, and their outcome; Todo what the
	// person still has to do (one line each).
	Steps []string `json:"steps,omitempty"`
	Todo  []string `json:"todo,omitempty"`
}

func serviceCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "service",
		Short: "Run the daemon as a systemd user service that survives logout and reboot: install, uninstall, status",
		Long: "troupe service install writes the systemd user unit ~/.config/systemd/user/troupe.service\n" +
			"($XDG_CONFIG_HOME/systemd/user): ExecStart is this troupe binary's absolute path with serve,\n" +
			"Restart=on-failure, and the PATH and XDG folders of this shell, so that the engines' CLIs,\n" +
			"the state dir and your profiles are the same as here. API keys are not written into it.\n" +
			"Where systemd's user instance runs, it then runs systemctl --user daemon-reload and\n" +
			"enable --now, and loginctl enable-linger (so the daemon outlives your logins) where you may.\n" +
			"Where it does not, the unit is written and troupe says what to run instead.",
	}
	install := &cobra.Command{
		Use:   "install",
		Short: "Write the user unit and enable it (where systemd runs)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := installService(cmd.Context(), g)
			if err != nil {
				return err
			}
			return printService(g, res)
		},
	}
	uninstall := &cobra.Command{
		Use:   "uninstall",
		Short: "Disable and stop the service (where systemd runs) and remove its unit",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := uninstallService(cmd.Context())
			if err != nil {
				return err
			}
			return printService(g, res)
		},
	}
	status := &cobra.Command{
		Use:   "status",
		Short: "Say whether the unit is installed, enabled and active, and whether lingering is on",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := serviceStatus(cmd.Context())
			if err != nil {
				return err
			}
			return printService(g, res)
		},
	}
	for _, s := range []*cobra.Command{install, uninstall, status} {
		s.Flags().BoolVar(&g.json, "json", false, "print JSON")
	}
	c.AddCommand(install, uninstall, status)
	return c
}

// unitPath is the user unit's path: $XDG_CONFIG_HOME/systemd/user, else
// ~/.config/systemd/user, where systemd's user instance looks.
func unitPath() (string, error) {
	if d := os.Getenv("XDG_CONFIG_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "systemd", "user", serviceName), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find the user unit folder: %w: set HOME", err)
	}
	return filepath.Join(home, ".config", "systemd", "user", serviceName), nil
}

// serviceEnv are the variables the unit carries from this shell when set:
// where the engines' CLIs are, and the folders troupe and the engines
// keep their state and configuration in. Never a key.
var serviceEnv = []string{"PATH", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME",
	"CLAUDE_CONFIG_DIR", "CODEX_HOME"}

// unitSource is the unit running exe serve (with args).
func unitSource(exe string, args []string) string {
	var b strings.Builder
	b.WriteString("# Written by troupe service install; troupe service uninstall removes it.\n")
	b.WriteString("[Unit]\nDescription=troupe daemon: a team of AI coding agents\nAfter=network.target\n\n")
	b.WriteString("[Service]\nType=simple\n")
	b.WriteString("ExecStart=" + systemdWord(exe, true) + " serve")
	for _, a := range args {
		b.WriteString(" " + systemdWord(a, true))
	}
	b.WriteString("\n")
	b.WriteString("# Restarted when it fails, not after troupe stop (a clean exit).\nRestart=on-failure\nRestartSec=5\n")
	b.WriteString("# Background tasks' supervisors outlive the daemon (the next one adopts\n# them): a stop signals the daemon alone, which stops its agents itself.\nKillMode=process\n")
	b.WriteString("# troupe puts each agent in a cgroup of its own (memory and process caps).\nDelegate=yes\n")
	for _, k := range serviceEnv {
		if v, ok := os.LookupEnv(k); ok && v != "" {
			b.WriteString("Environment=" + systemdWord(k+"="+v, false) + "\n")
		}
	}
	b.WriteString("\n[Install]\nWantedBy=default.target\n")
	return b.String()
}

// systemdWord quotes s as one word of a unit file's command line
// (command: its $ doubled, as systemd expands variables there) or of
// Environment=; specifiers' % doubled in both.
func systemdWord(s string, command bool) string {
	s = strings.ReplaceAll(s, "%", "%%")
	if command {
		s = strings.ReplaceAll(s, "$", "$$")
	}
	if s != "" && !strings.ContainsAny(s, " \t\"'\\;") {
		return s
	}
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	return `"` + r.Replace(s) + `"`
}

// systemd says whether systemd's user instance runs here, or why not.
func systemd(ctx context.Context) (bool, string) {
	if _, err := exec.LookPath("systemctl"); err != nil {
		return false, "no systemctl on PATH: this machine does not run systemd"
	}
	out, _ := systemctl(ctx, "is-system-running")
	switch out {
	case "running", "degraded", "starting", "initializing", "maintenance":
		return true, ""
	case "":
		out = "no answer"
	}
	return false, "systemd's user instance is not running here (systemctl --user is-system-running: " + out + ")"
}

// systemctl runs systemctl --user args, bounded, and returns its output's
// first line.
func systemctl(ctx context.Context, args ...string) (string, error) {
	return runTool(ctx, "systemctl", append([]string{"--user"}, args...)...)
}

func runTool(ctx context.Context, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	line, _, _ := strings.Cut(strings.TrimSpace(out.String()), "\n")
	return line, err
}

// step runs a command and records it in res.Steps.
func step(ctx context.Context, res *serviceResult, name string, args ...string) error {
	line, err := runTool(ctx, name, args...)
	s := name + " " + strings.Join(args, " ")
	if err != nil {
		s += ": failed: " + err.Error()
		if line != "" {
			s += ": " + line
		}
	} else {
		s += ": done"
	}
	res.Steps = append(res.Steps, s)
	return err
}

func installService(ctx context.Context, g *globals) (serviceResult, error) {
	path, err := unitPath()
	if err != nil {
		return serviceResult{}, err
	}
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		return serviceResult{}, fmt.Errorf("service install: find this program: %w", err)
	}
	var args []string
	if g.stateDir != "" {
		dir, err := g.dir()
		if err != nil {
			return serviceResult{}, err
		}
		args = append(args, "--state-dir", dir)
	}
	src := unitSource(exe, args)
	res := serviceResult{Unit: path, Installed: true, ExecStart: exe + " serve " + strings.Join(args, " ")}
	res.ExecStart = strings.TrimSpace(res.ExecStart)
	if old, err := os.ReadFile(path); err != nil || string(old) != src {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return serviceResult{}, fmt.Errorf("service install: %w", err)
		}
		if err := atomicfile.Write(path, []byte(src), 0o644); err != nil {
			return serviceResult{}, fmt.Errorf("service install: write %s: %w", path, err)
		}
		res.Changed = true
	}
	if tmp, err := filepath.EvalSymlinks(os.TempDir()); err == nil && strings.HasPrefix(exe, tmp+string(filepath.Separator)) {
		res.Todo = append(res.Todo, "this troupe runs from a temporary folder ("+exe+"), which may be gone after a reboot: install it (make install), then run troupe service install with that one")
	}
	res.Systemd, res.Why = systemd(ctx)
	if !res.Systemd {
		res.Todo = append(res.Todo,
			res.Why+": the unit is written but not enabled; where systemd runs, troupe service install again enables it",
			"instead, keep the daemon running after you log out: nohup "+shellQuote(exe)+" serve >>~/troupe-serve.log 2>&1 &   (or run troupe serve in tmux or screen)",
			"and start it at boot: crontab -e, then add the line: @reboot "+shellQuote(exe)+" serve >>~/troupe-serve.log 2>&1")
		return res, nil
	}
	if err := step(ctx, &res, "systemctl", "--user", "daemon-reload"); err != nil {
		return res, fmt.Errorf("service install: systemctl --user daemon-reload: %w", err)
	}
	now := []string{"--user", "enable", "--now", serviceName}
	if cl, err := g.client(); err == nil {
		if st, err := cl.Status(ctx); err == nil {
			// A daemon of this state dir runs already: the service
			// would fail on its lock.
			now = []string{"--user", "enable", serviceName}
			res.Todo = append(res.Todo, fmt.Sprintf("a troupe daemon runs already (pid %d): to run it as the service now, troupe stop, then systemctl --user start troupe", st.PID))
		}
	}
	if err := step(ctx, &res, "systemctl", now...); err != nil {
		return res, fmt.Errorf("service install: systemctl %s: %w (journalctl --user -u troupe says why)", strings.Join(now, " "), err)
	}
	if err := step(ctx, &res, "loginctl", "enable-linger"); err != nil {
		res.Todo = append(res.Todo, "lingering is not allowed for you: without it the daemon stops when you log out; ask an administrator to run: loginctl enable-linger "+os.Getenv("USER"))
	}
	fillStatus(ctx, &res)
	return res, nil
}

func uninstallService(ctx context.Context) (serviceResult, error) {
	path, err := unitPath()
	if err != nil {
		return serviceResult{}, err
	}
	res := serviceResult{Unit: path}
	res.Systemd, res.Why = systemd(ctx)
	_, statErr := os.Stat(path)
	if errors.Is(statErr, fs.ErrNotExist) {
		res.Todo = append(res.Todo, "not installed: nothing to remove")
		return res, nil
	}
	if res.Systemd {
		_ = step(ctx, &res, "systemctl", "--user", "disable", "--now", serviceName)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return res, fmt.Errorf("service uninstall: remove %s: %w", path, err)
	}
	res.Changed = true
	if res.Systemd {
		_ = step(ctx, &res, "systemctl", "--user", "daemon-reload")
	}
	return res, nil
}

func serviceStatus(ctx context.Context) (serviceResult, error) {
	path, err := unitPath()
	if err != nil {
		return serviceResult{}, err
	}
	res := serviceResult{Unit: path}
	if data, err := os.ReadFile(path); err == nil {
		res.Installed = true
		for _, l := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(l, "ExecStart="); ok {
				res.ExecStart = v
			}
		}
	}
	res.Systemd, res.Why = systemd(ctx)
	if res.Systemd {
		fillStatus(ctx, &res)
	}
	if !res.Installed {
		res.Todo = append(res.Todo, "not installed: troupe service install")
	}
	return res, nil
}

// fillStatus asks systemd whether the unit is enabled and active, and
// logind whether the user lingers.
func fillStatus(ctx context.Context, res *serviceResult) {
	res.Enabled, _ = systemctl(ctx, "is-enabled", serviceName)
	res.Active, _ = systemctl(ctx, "is-active", serviceName)
	if l, err := runTool(ctx, "loginctl", "show-user", os.Getenv("USER"), "--property=Linger", "--value"); err == nil {
		res.Linger = l
	}
}

func printService(g *globals, res serviceResult) error {
	if g.json {
		return g.printJSON(res)
	}
	switch {
	case res.Installed && res.Changed:
		fmt.Fprintf(g.out, "wrote %s (ExecStart=%s)\n", res.Unit, res.ExecStart)
	case res.Installed:
		fmt.Fprintf(g.out, "unit %s is installed (ExecStart=%s)\n", res.Unit, res.ExecStart)
	case res.Changed:
		fmt.Fprintf(g.out, "removed %s\n", res.Unit)
	}
	for _, s := range res.Steps {
		fmt.Fprintln(g.out, s)
	}
	if res.Systemd && res.Installed {
		fmt.Fprintf(g.out, "enabled: %s, active: %s, linger: %s\n", dash(res.Enabled), dash(res.Active), dash(res.Linger))
	} else if !res.Systemd {
		fmt.Fprintln(g.out, "systemd: "+res.Why)
	}
	for _, t := range res.Todo {
		fmt.Fprintln(g.out, t)
	}
	return nil
}
