package terminal

import (
	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/term"
)

// Launch starts a program on a terminal and its Session, to which a
// person can attach; its activity is what the session reads on the screen
// (Session.step: text that changes, animation aside). spec.Term and
// spec.Attach are set here. A driver with a SetPID(int) method is told
// the program's process id (its session's, and that of the sandbox's
// bubblewrap when sandboxed) before the session starts.
func Launch(o term.Options, spec SessionSpec) (*Session, error) {
	t, err := term.Start(o)
	if err != nil {
		return nil, err
	}
	spec.Term = t
	if d, ok := spec.Driver.(interface{ SetPID(int) }); ok {
		d.SetPID(t.PID())
	}
	spec.Attach = attachable{t}
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
