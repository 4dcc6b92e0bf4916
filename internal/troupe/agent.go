package troupe

import "time"

// AgentSpec is one [[agent]] table of a team file, with defaults applied.
type AgentSpec struct {
	Name         AgentID           `json:"name"`
	Engine       Engine            `json:"engine"`
	Model        string            `json:"model,omitempty"`
	Mode         Mode              `json:"mode"`
	TurnTimeout  time.Duration     `json:"turn_timeout"`
	Prompt       string            `json:"prompt,omitempty"`
	PromptFile   string            `json:"prompt_file,omitempty"`
	AllowedTools []string          `json:"allowed_tools,omitempty"`
	Env          map[string]string `json:"env,omitempty"`
	// Options holds the engine-specific table ([agent.<engine>]), checked by
	// the engine when it starts the agent.
	Options map[string]any `json:"options,omitempty"`
	// Line is the line of the [[agent]] header in the file, for errors.
	Line int `json:"-"`
}
