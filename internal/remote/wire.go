package remote

import (
	"encoding/json"
	"time"

	"github.com/troupe-dev/troupe/internal/bus"
	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/task"
	"github.com/troupe-dev/troupe/internal/tool"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// Version is the protocol's version: a runner and a daemon of different
// versions refuse each other at hello, saying both.
const Version = 1

// The operations, appended to bus.ToRunner(name) (daemon → runner
// requests) or bus.FromRunner(name) (runner → daemon).
const (
	opStart     = "start"     // → runner: start a session
	opSend      = "send"      // → runner: a turn
	opInterrupt = "interrupt" // → runner
	opClose     = "close"     // → runner: close a session; the answer waits for it
	opHello     = "hello"     // → daemon: a runner (re)connects
	opBeat      = "beat"      // → daemon: heartbeat, published
	opTool      = "tool"      // → daemon: a troupe tool call of an in-process engine
	opApprove   = "approve"   // → daemon: a permission request
	opMCP       = "mcp"       // → daemon: one HTTP request of an agent's CLI to troupe's MCP endpoint
	opBundle    = "bundle"    // → daemon: a chunk of a project's bundle
	opDurable   = "durable"   // → daemon's stream: a session's events, in order
	opSnapshot  = "snapshot"  // → runner: a chunk of the bundle of a turn's files
	opRehello   = "rehello"   // → runner, published: say hello again (the daemon lost it)
	// Background tasks of the runner's agents (tasks.go).
	opTaskStart  = "taskstart"  // → runner: run a task the daemon recorded
	opTaskKill   = "taskkill"   // → runner
	opTaskOutput = "taskoutput" // → runner: the end of a task's output
	opAttach     = "attach"     // → runner: attach a viewer to a session's terminal (terminal.go)
	opType       = "type"       // → runner: a viewer's keys
	opResize     = "resize"     // → runner: a viewer resizes the terminal
	opDetach     = "detach"     // → runner: a viewer detaches
	opTermSize   = "termsize"   // → runner: a session's terminal's size
	opCredit     = "credit"     // → runner, published: a viewer's credit, and that it lives
	opTerm       = "term"       // → daemon, published: a viewer's output, on term.<viewer>
)

// MaxPayload bounds one message on the link (the bus's); bigger data
// (bundles) goes in chunks of ChunkBytes.
const (
	MaxPayload = bus.MaxPayload
	ChunkBytes = 4 << 20
)

// reply is every request's answer: an error string, or the data.
type reply struct {
	Error string          `json:"error,omitempty"`
	Data  json.RawMessage `json:"data,omitempty"`
}

// startReq starts a session of an agent on a runner.
type startReq struct {
	Session      string            `json:"session"`
	Key          troupe.RuntimeKey `json:"key"`
	Agent        troupe.AgentSpec  `json:"agent"`
	Instructions string            `json:"instructions"`
	Resume       string            `json:"resume,omitempty"`
	MCPToken     string            `json:"mcp_token,omitempty"`
	Tools        []tool.Spec       `json:"tools,omitempty"`
	// Head is the commit the agent's branch is at on the daemon: the
	// runner brings its clone up to it (opBundle) before it starts.
	Head string `json:"head"`
}

type sessionReq struct {
	Session string        `json:"session"`
	Input   *engine.Input `json:"input,omitempty"`
}

// hello is a runner's (re)connection: who it is and the sessions it runs.
// The answer lists those of them the daemon still knows; the runner
// closes the others (the daemon restarted: their turns run again from
// its inbox).
type hello struct {
	Version   int       `json:"version"`
	Name      string    `json:"name"`
	Labels    []string  `json:"labels,omitempty"`
	MaxAgents int       `json:"max_agents"`
	Sessions  []string  `json:"sessions,omitempty"`
	Started   time.Time `json:"started"`
}

type helloReply struct {
	Sessions []string `json:"sessions,omitempty"`
	// Beat is how often the runner says it is alive.
	Beat time.Duration `json:"beat"`
	// Tasks are the tasks the daemon records as running on the runner
	// (ids and owners): the runner reports those it has no record of as
	// lost (tasks.go).
	Tasks []task.Task `json:"tasks,omitempty"`
}

// beat is a runner's heartbeat, with each session's activity (C3: stderr
// output advances it without an event).
type beat struct {
	Name     string            `json:"name"`
	Agents   int               `json:"agents"`
	Activity map[string]uint64 `json:"activity,omitempty"` // by session
}

type toolReq struct {
	Session string          `json:"session"`
	Name    string          `json:"name"`
	Args    json.RawMessage `json:"args"`
}

type approveReq struct {
	Session    string            `json:"session"`
	Permission engine.Permission `json:"permission"`
}

// mcpReq is one HTTP request of an agent's CLI to the runner's local MCP
// endpoint, carried whole (the endpoint is stateless and answers JSON).
type mcpReq struct {
	Session string              `json:"session"`
	Method  string              `json:"method"`
	Header  map[string][]string `json:"header"`
	Body    []byte              `json:"body"`
}

type mcpReply struct {
	Status int                 `json:"status"`
	Header map[string][]string `json:"header"`
	Body   []byte              `json:"body"`
}

// bundleReq asks for a chunk of the bundle that brings a runner's clone of
// a project from the commits it has to Head.
type bundleReq struct {
	Session string   `json:"session"`
	Have    []string `json:"have,omitempty"`
	Offset  int64    `json:"offset"`
}

type bundleChunk struct {
	Head  string `json:"head"`
	Size  int64  `json:"size"`
	Bytes []byte `json:"bytes"`
}

// durable is one thing a session tells the daemon, in the runner's stream:
// an engine event, or the session's end (Ended, with its error). Seq
// counts from 1 per session; the daemon drops what it has seen.
type durable struct {
	Session string        `json:"session"`
	Seq     uint64        `json:"seq"`
	Event   *engine.Event `json:"event,omitempty"`
	Ended   bool          `json:"ended,omitempty"`
	Err     string        `json:"err,omitempty"`
	// Snapshot, on a turn's end, is the commit of the agent's files as
	// the turn left them on the runner (worktree.Snapshot); the daemon
	// fetches it (opSnapshot) into its own worktree of the agent before
	// it hands on the turn's end, so checkpoints and diffs see the turn.
	Snapshot string `json:"snapshot,omitempty"`
	// TaskEnd, alone in its record (subject Durable(name).task, id the
	// task's completion key), is a background task's end (tasks.go).
	TaskEnd *task.Ended `json:"task_end,omitempty"`
}

// snapshotReq asks a runner for a chunk of the bundle of a snapshot,
// thin against the commits the daemon has.
type snapshotReq struct {
	Session string   `json:"session"`
	Commit  string   `json:"commit"`
	Have    []string `json:"have,omitempty"`
	Offset  int64    `json:"offset"`
}
