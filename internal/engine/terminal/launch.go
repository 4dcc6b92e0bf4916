package terminal

import (
	"sync/atomic"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/term"
)

// Launch starts a program on a terminal and its Session: the PTY's output
// is the session's activity, and a person can attach to it. spec.Term,
// spec.Attach and spec.Bump are set here. A driver with a SetPID(int)
// method is told the program's process id (its session's, and that of
// the sandbox's bubblewrap when sandboxed) before the session starts.
func Launch(o term.Options, spec SessionSpec) (*Session, error) {
	var bump atomic.Pointer[func()]
	o.OnOutput = func(int) {
		if f := bump.Load(); f != nil {
			(*f)()
		}
	}
	t, err := term.Start(o)
	if err != nil {
		return nil, err
	}
	spec.Term = t
	if d, ok := spec.Driver.(interface{ SetPID(int) }); ok {
		d.SetPID(t.PID())
	}
	spec.Attach = attachable{t}
	spec.Bump = func(b func()) { bump.Store(&b) }
	return NewSession(spec), nil
}

// attachable is a *term.Terminal as an engine.Terminal.
type attachable struct{ t *term.Terminal }

func (a attachable) Attach() (engine.TerminalViewer, error) {
	v, err := a.t.Attach()
	if err != nil {
		return nil, err
	}
	return v, nil
}

func (a attachable) Size() (cols, rows int) { return a.t.Size() }

func (a attachable) InUse() bool { return a.t.Viewers() > 0 }
