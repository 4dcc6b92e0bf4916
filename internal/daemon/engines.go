package daemon

import (
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/engine/acp"
	"github.com/troupe-dev/troupe/internal/engine/claude"
	"github.com/troupe-dev/troupe/internal/engine/codex"
	"github.com/troupe-dev/troupe/internal/engine/fake"
	"github.com/troupe-dev/troupe/internal/engine/openai"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// newEngines builds the engines agents run on, by name, from cfg; conv
// keeps the openai agents' conversations (nil: in memory). A team naming
// an engine that is not here does not load (checkAgent).
func newEngines(cfg Config, conv openai.Store, log *slog.Logger) (map[troupe.Engine]engine.Engine, error) {
	fakeCmd := cfg.FakeAgent
	if len(fakeCmd) == 0 {
		self, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("find own executable: %w", err)
		}
		fakeCmd = []string{self, "fake-agent"}
	}
	return map[troupe.Engine]engine.Engine{
		troupe.EngineFake:     fake.New(fake.Options{Command: fakeCmd, Logger: log}),
		troupe.EngineClaude:   claude.New(claude.Options{Logger: log}),
		troupe.EngineCodex:    codex.New(codex.Options{Logger: log}),
		troupe.EngineACP:      acp.New(acp.Options{Logger: log}),
		troupe.EngineOpenCode: acp.NewOpenCode(acp.Options{Logger: log}),
		troupe.EngineOpenAI:   openai.New(openai.Options{Logger: log, Store: conv}),
	}, nil
}

// checkAgent returns the check the registry runs on every agent of a team
// it loads: an engine not built into this troupe is a team error naming the
// engines it has; otherwise the agent's engine validates its options and
// mode.
func checkAgent(engines map[troupe.Engine]engine.Engine) func(troupe.AgentSpec) error {
	var built []string
	for _, e := range troupe.Engines { // in the order shown to users
		if _, ok := engines[e]; ok {
			built = append(built, string(e))
		}
	}
	have := strings.Join(built, ", ")
	return func(a troupe.AgentSpec) error {
		eng, ok := engines[a.Engine]
		if !ok {
			return &troupe.FieldError{Field: "engine", Msg: fmt.Sprintf("%q is not built into this troupe (this build has: %s): use one of these", a.Engine, have)}
		}
		return eng.Check(a)
	}
}
