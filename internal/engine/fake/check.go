package fake

import (
	"errors"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// Check implements engine.Engine: the [agent.fake] options parse (every
// directive of respond included), and the mode is structured — the fake
// agent has no terminal UI.
func (e *Engine) Check(agent troupe.AgentSpec) error {
	if agent.Mode == troupe.ModeTerminal {
		return &troupe.FieldError{Field: "mode", Msg: `the fake engine has no terminal mode: remove mode, or set it to "structured"`}
	}
	if _, err := parseOptions(agent.Name, agent.Options); err != nil {
		if oe, ok := errors.AsType[*optionError](err); ok {
			return oe.field()
		}
		return err
	}
	return nil
}
