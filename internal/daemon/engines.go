package daemon

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/engine/claude"
	"github.com/troupe-dev/troupe/internal/engine/fake"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// newEngines builds the engines agents run on, by name, from cfg. An agent
// whose engine is not here fails to start with a clear error.
func newEngines(cfg Config, log *slog.Logger) (map[troupe.Engine]engine.Engine, error) {
	fakeCmd := cfg.FakeAgent
	if len(fakeCmd) == 0 {
		self, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("find own executable: %w", err)
		}
		fakeCmd = []string{self, "fake-agent"}
	}
	return map[troupe.Engine]engine.Engine{
		troupe.EngineFake:   fake.New(fake.Options{Command: fakeCmd, Logger: log}),
		troupe.EngineClaude: claude.New(claude.Options{Logger: log}),
	}, nil
}

// checkAgent returns the check the registry runs on every agent of a team
// it loads: the agent's engine validates its options and mode. An engine
// this daemon does not run accepts every agent: starting it fails with a
// clear error instead.
func checkAgent(engines map[troupe.Engine]engine.Engine) func(troupe.AgentSpec) error {
	return func(a troupe.AgentSpec) error {
		eng, ok := engines[a.Engine]
		if !ok {
			return nil
		}
		return eng.Check(a)
	}
}
