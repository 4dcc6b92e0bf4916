package fake

import (
	"errors"
	"testing"

	"github.com/troupe-dev/troupe/internal/troupe"
)

func TestCheckReportsTheBadKey(t *testing.T) {
	e := New(Options{Command: TestCommand()})
	for _, tc := range []struct {
		mode  troupe.Mode
		opts  map[string]any
		field string // "" when good
	}{
		{troupe.ModeStructured, map[string]any{"respond": "!say hi", "tool_timeout": "2s"}, ""},
		{troupe.ModeStructured, nil, ""},
		{troupe.ModeStructured, map[string]any{"respnd": "!say hi"}, "fake.respnd"},
		{troupe.ModeStructured, map[string]any{"respond": "!say ok\n!xyz"}, "fake.respond"},
		{troupe.ModeStructured, map[string]any{"tool_timeout": "soon"}, "fake.tool_timeout"},
		{troupe.ModeStructured, map[string]any{"journal": "../out"}, "fake.journal"},
		{troupe.ModeTerminal, nil, "mode"},
	} {
		err := e.Check(troupe.AgentSpec{Name: "x", Engine: troupe.EngineFake, Mode: tc.mode, Options: tc.opts})
		if tc.field == "" {
			if err != nil {
				t.Errorf("%v %v: %v, want nil", tc.mode, tc.opts, err)
			}
			continue
		}
		fe, ok := errors.AsType[*troupe.FieldError](err)
		if !ok || fe.Field != tc.field || fe.Msg == "" {
			t.Errorf("%v %v: %#v, want a FieldError at %s", tc.mode, tc.opts, err, tc.field)
		}
	}
}
