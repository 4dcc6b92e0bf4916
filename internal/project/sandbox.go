package project

import (
	"fmt"

	"github.com/troupe-dev/troupe/internal/cgroup"
	"github.com/troupe-dev/troupe/internal/troupe"
	"path/filepath"
	"slices"
	"strings"
)

// sandboxKeys are the keys of an [agent.sandbox] table.
var sandboxKeys = []string{"enabled", "readable", "writable", "hidden", "network", "memory", "processes"}

// sandbox reads an agent's sandbox = false or [agent.sandbox] table
// (field names it in errors) into the current agent.
func (p *teamParser) sandbox(i int, field string, v any) error {
	a := p.cur
	if b, ok := v.(bool); ok {
		a.Sandbox.Enabled = &b
		return nil
	}
	t, ok := v.(map[string]any)
	if !ok {
		return p.errorf(i, field, fmt.Sprintf("must be true, false (no sandbox) or an [agent.sandbox] table, not %s", typeName(v)))
	}
	keys := make([]string, 0, len(t))
	for k := range t {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		f := field + "." + k
		switch k {
		case "enabled", "network":
			b, ok := t[k].(bool)
			if !ok {
				return p.errorf(i, f, fmt.Sprintf("must be true or false, not %s: write it like %s = false", typeName(t[k]), k))
			}
			if k == "enabled" {
				a.Sandbox.Enabled = &b
			} else {
				a.Sandbox.Network = &b
			}
		case "readable", "writable", "hidden":
			list, err := p.strings(i, f, t[k], k+` = ["~/.config/tool", "build/out"]`)
			if err != nil {
				return err
			}
			for _, path := range list {
				if err := checkSandboxPath(path); err != nil {
					return p.errorf(i, f, err.Error())
				}
			}
			switch k {
			case "readable":
				a.Sandbox.Readable = list
			case "writable":
				a.Sandbox.Writable = list
			default:
				a.Sandbox.Hidden = list
			}
		case "memory":
			str, ok := t[k].(string)
			if !ok {
				return p.errorf(i, f, fmt.Sprintf("must be a size like \"4GiB\" or \"none\", not %s", typeName(t[k])))
			}
			if str == "none" {
				a.Sandbox.Memory = troupe.NoCap
				break
			}
			n, err := cgroup.ParseSize(str)
			if err != nil {
				return p.errorf(i, f, fmt.Sprintf("%q: want a size like \"4GiB\" (or \"none\": no cap)", str))
			}
			if n < MinMemoryCap {
				return p.errorf(i, f, fmt.Sprintf("%q is too small for an agent: give at least %s", str, cgroup.FormatSize(MinMemoryCap)))
			}
			a.Sandbox.Memory = n
		case "processes":
			if str, ok := t[k].(string); ok && str == "none" {
				a.Sandbox.Processes = troupe.NoCap
				break
			}
			n, ok := t[k].(int64)
			if !ok || n < MinProcessCap {
				return p.errorf(i, f, fmt.Sprintf("must be a whole number of at least %d (processes and threads), or \"none\": write it like processes = 512", MinProcessCap))
			}
			a.Sandbox.Processes = n
		default:
			return p.errorf(i, f, fmt.Sprintf("unknown key %q: an [agent.sandbox] table holds %s", k, strings.Join(sandboxKeys, ", ")))
		}
	}
	return nil
}

// The least caps a team may set: an engine's CLI with its sandbox and a
// shell need some room.
const (
	MinMemoryCap  = 64 << 20
	MinProcessCap = 16
)

// checkSandboxPath refuses paths a sandbox cannot use: empty, "/", a NUL,
// or one that climbs out of the workspace ("../x": name it absolutely).
func checkSandboxPath(path string) error {
	switch {
	case strings.TrimSpace(path) == "":
		return fmt.Errorf("an empty path: name a folder or file, like \"~/.config/tool\"")
	case strings.ContainsRune(path, 0):
		return fmt.Errorf("a path holds a NUL byte")
	case filepath.Clean(path) == "/":
		return fmt.Errorf("%q is the whole machine: name a folder or file in it", path)
	case !filepath.IsAbs(path) && !strings.HasPrefix(path, "~/") && !filepath.IsLocal(path):
		return fmt.Errorf("%q leads out of the workspace: give an absolute path or one starting with ~/", path)
	}
	return nil
}
