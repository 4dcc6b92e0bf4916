package openai

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/proc"
	"github.com/troupe-dev/troupe/internal/sandbox"
	"github.com/troupe-dev/troupe/internal/troupe"
)

var (
	_ engine.Engine       = (*Engine)(nil)
	_ engine.InputLimiter = (*Engine)(nil)
)

// Defaults of Options.
const (
	DefaultRetries   = 5
	DefaultRetryBase = 500 * time.Millisecond
	// maxBackoff bounds one wait between two tries.
	maxBackoff = 10 * time.Second
)

// Options configures an Engine. Zero values mean defaults.
type Options struct {
	// Logger gets the engine's logs; nil discards them. A StartSpec's
	// Logger, when set, is used for that session instead.
	Logger *slog.Logger
	// Store keeps the conversations; nil keeps them in memory (a
	// MemStore: a restart forgets them).
	Store Store
	// Environ is the daemon's environment, where api_key_env is looked up
	// after the agent's env and the commands' environment is built from
	// (C11). Nil means os.Environ.
	Environ func() []string
	// HTTPClient talks to the model servers; nil means one of the
	// engine's own (no overall timeout: a stream lasts as long as the
	// model speaks; troupe's inactivity window cuts a silent one).
	HTTPClient *http.Client
	// Retries is how many times a request the server refused with 429 or
	// 5xx (or that found no server) is tried again; 0 means
	// DefaultRetries, a negative value none.
	Retries int
	// RetryBase is the first wait between two tries, doubled at each one
	// up to 10 s (a server's Retry-After, up to 30 s, wins when longer).
	// Zero means DefaultRetryBase.
	RetryBase time.Duration
}

// Engine starts sessions of openai agents. It holds no state of its own
// besides its options and is safe for concurrent use.
type Engine struct {
	log       *slog.Logger
	store     Store
	environ   func() []string
	http      *http.Client
	retries   int
	retryBase time.Duration
	backstop  string // coreutils timeout on the daemon's PATH, "" when none
}

// New returns an Engine with the given options.
func New(o Options) *Engine {
	e := &Engine{log: o.Logger, store: o.Store, environ: o.Environ, http: o.HTTPClient, retries: o.Retries, retryBase: o.RetryBase}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if e.store == nil {
		e.store = NewMemStore()
	}
	if e.environ == nil {
		e.environ = os.Environ
	}
	if e.http == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.DialContext = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
		e.http = &http.Client{Transport: t}
	}
	switch {
	case e.retries == 0:
		e.retries = DefaultRetries
	case e.retries < 0:
		e.retries = 0
	}
	if e.retryBase <= 0 {
		e.retryBase = DefaultRetryBase
	}
	e.backstop = findBackstop()
	return e
}

// InputBytes is the most text troupe gives one turn of an openai agent:
// 64 KB, about 20k tokens, under the default context budget.
const InputBytes = 64 << 10

// InputLimit implements engine.InputLimiter: no count of its own; a
// quarter of the agent's context budget (3 bytes a token), at most
// InputBytes, at least 4 KB.
func (e *Engine) InputLimit(agent troupe.AgentSpec) (messages, bytes int) {
	o, err := parseOptions(agent.Options)
	if err != nil {
		return 0, InputBytes
	}
	return 0, max(min(o.maxContextTokens*bytesPerToken/4, InputBytes), 4<<10)
}

// BaseURL is the agent's base_url ("" when its options are bad): for
// `troupe doctor`.
func BaseURL(agent troupe.AgentSpec) string {
	o, err := parseOptions(agent.Options)
	if err != nil {
		return ""
	}
	return o.baseURL
}

// newConversationID mints a conversation's id.
func newConversationID() string {
	var b [12]byte
	rand.Read(b[:])
	return "oai-" + hex.EncodeToString(b[:])
}

// Start opens the agent's working folder, finds its key, loads the
// conversation spec.Resume names (or mints a new one, and forgets the
// agent's older ones) and reports its id as an EventSession. No request
// goes to the model before the first Send. The returned session is a
// *Session.
func (e *Engine) Start(ctx context.Context, spec engine.StartSpec) (engine.Session, error) {
	name := spec.Agent.Name
	if name == "" {
		name = spec.Key.Agent
	}
	fail := func(err error) (engine.Session, error) {
		return nil, fmt.Errorf("start openai agent %s: %w", name, err)
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	if err := e.Check(spec.Agent); err != nil {
		return fail(err)
	}
	o, _ := parseOptions(spec.Agent.Options)
	if err := proc.CheckDir(spec.Dir); err != nil {
		return fail(fmt.Errorf("working directory: %w", err))
	}
	environ := e.environ()
	key, err := apiKey(o.apiKeyEnv, spec.Agent.Env, environ)
	if err != nil {
		return fail(err)
	}
	log := spec.Logger
	if log == nil {
		log = e.log
	}
	log = log.With("project", spec.Key.Project, "agent", spec.Key.Agent)

	conv := spec.Resume
	var entries []troupe.ConversationEntry
	if conv != "" {
		if entries, err = e.store.ChatHistory(ctx, spec.Key, conv); err != nil {
			return fail(fmt.Errorf("load conversation %s: %w", conv, err))
		}
	} else {
		conv = newConversationID()
	}
	if err := e.store.KeepChat(ctx, spec.Key, conv); err != nil {
		return fail(fmt.Errorf("forget older conversations: %w", err))
	}
	hist, next, err := loadHistory(entries)
	if err != nil {
		return fail(fmt.Errorf("load conversation %s: %w", conv, err))
	}
	if err := spec.Sandbox.Check(); err != nil {
		return fail(err)
	}
	ws, err := openWorkspace(spec.Dir)
	if err != nil {
		return fail(err)
	}
	ws.policy = spec.Sandbox
	s := &Session{
		SessionCore: engine.NewSessionCore(eventBuffer),
		log:         log.With("session", conv),
		key:         spec.Key,
		opts:        o,
		tools:       spec.Tools,
		approver:    spec.Approver,
		store:       e.store,
		conv:        conv,
		ws:          ws,
		env:         commandEnv(environ, spec.Agent.Env, o.apiKeyEnv),
		backstop:    e.backstop,
		sandbox:     commandSandbox(spec.Sandbox),
		hist:        hist,
		nextTurn:    next,
		dead:        make(chan struct{}),
		client: &client{http: e.http, url: o.baseURL + "/chat/completions", key: key, retries: e.retries,
			backoff: func(attempt int) time.Duration { return min(e.retryBase<<min(attempt, 20), maxBackoff) }},
	}
	s.offer(spec.Agent)
	s.sysBytes, _ = json.Marshal(chatMessage{Role: "system", Content: spec.Instructions})
	if spec.Instructions == "" {
		s.sysBytes = nil
	}
	s.prefix, _ = json.Marshal(spec.Agent.Model)
	go s.run()
	s.Emit(engine.Event{Kind: engine.EventSession, SessionID: conv}) // the buffer is empty
	s.log.Info("openai session started", "model", spec.Agent.Model, "resumed_messages", len(hist))
	return s, nil
}

// commandSandbox is the sandbox of the agent's commands: nil when off.
func commandSandbox(p sandbox.Policy) *sandbox.Policy {
	if !p.On {
		return nil
	}
	return &p
}

// apiKey finds the key: the variable api_key_env names, in the agent's env
// then the daemon's environment. No api_key_env: no key.
func apiKey(name string, agentEnv map[string]string, environ []string) (string, error) {
	if name == "" {
		return "", nil
	}
	if v, ok := agentEnv[name]; ok && v != "" {
		return v, nil
	}
	for _, kv := range slices.Backward(environ) {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name && v != "" {
			return v, nil
		}
	}
	return "", errors.New("api_key_env names " + name + ", but neither the agent's env nor the daemon's environment sets it: export " + name + " before `troupe serve` (or set it in the agent's env), or remove api_key_env for a server that takes no key")
}

// offer decides the tools the model gets: troupe's own (Tools.Specs), then
// the workspace tools allowed_tools names (all six when it names none).
func (s *Session) offer(agent troupe.AgentSpec) {
	s.offered = map[string]toolKind{}
	var defs []map[string]any
	add := func(name, desc string, schema json.RawMessage, kind toolKind) {
		if _, dup := s.offered[name]; dup || name == "" {
			return
		}
		if len(schema) == 0 || !json.Valid(schema) {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		s.offered[name] = kind
		s.names = append(s.names, name)
		defs = append(defs, map[string]any{"type": "function", "function": map[string]any{
			"name": name, "description": desc, "parameters": schema}})
	}
	if s.tools != nil {
		for _, sp := range s.tools.Specs() {
			add(sp.Name, sp.Description, sp.Schema, kindTroupe)
		}
	}
	some := slices.ContainsFunc(agent.AllowedTools, func(t string) bool { return slices.Contains(workspaceToolNames, t) })
	for _, n := range workspaceToolNames {
		if !some || slices.Contains(agent.AllowedTools, n) {
			sp := workspaceSpecs[n]
			add(sp.Name, sp.Description, sp.Schema, kindWorkspace)
		}
	}
	if len(defs) > 0 {
		s.toolDefs, _ = json.Marshal(defs)
	}
}
