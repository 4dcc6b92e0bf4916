package troupe

import "time"

// PermissionID names a permission request that waits on the person. troupe
// mints it (an engine's own ids are only unique within its session).
type PermissionID string

// PermissionState is where a permission request is.
type PermissionState string

// Permission states.
const (
	PermPending PermissionState = "pending"
	PermAllowed PermissionState = "allowed"
	PermDenied  PermissionState = "denied"
)

// Permission is an engine's request to use a tool, as the person sees it
// and decides it. Input is the tool's JSON input as text, capped in
// listings and events (Cut says it was); Size is the whole input's length,
// which the person can always read whole before deciding.
type Permission struct {
	ID        PermissionID    `json:"id"`
	Project   ProjectID       `json:"project"`
	Agent     AgentID         `json:"agent"`
	Turn      TurnID          `json:"turn"`
	Tool      string          `json:"tool"`
	Title     string          `json:"title,omitempty"`
	Input     string          `json:"input"`
	Cut       bool            `json:"cut,omitempty"`
	Size      int             `json:"size"`
	State     PermissionState `json:"state"`
	Reason    string          `json:"reason,omitempty"` // why it was denied
	CreatedAt time.Time       `json:"created_at"`
}

// Key is the RuntimeKey of the agent that asks.
func (p Permission) Key() RuntimeKey { return RuntimeKey{Project: p.Project, Agent: p.Agent} }
