// Package mcp is the MCP endpoint agents call (server name "troupe",
// streamable HTTP at /mcp) and the stdio bridge for clients that only speak
// stdio. It is the only package that imports the MCP SDK.
//
// Identity comes from credentials only (contract C2): each agent session gets
// its own bearer token, minted at launch by Tokens.Mint and mapped to exactly
// one RuntimeKey; Revoke kills it when the session ends. A tool call acts as
// that key, and names resolve inside its project only. The server is
// stateless (no Mcp-Session-Id is ever trusted) and one instance serves every
// request. Tokens is safe for concurrent use (one mutex guards its table);
// the handler holds no goroutines of its own beyond the request's.
package mcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/tool"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// Tokens maps agent session tokens to the RuntimeKey they act as.
type Tokens struct {
	// mu guards byToken.
	mu      sync.Mutex
	byToken map[string]grant
}

type grant struct {
	key   troupe.RuntimeKey
	limit time.Duration // the client's tool-call limit; 0: none
}

// NewTokens returns an empty token table.
func NewTokens() *Tokens { return &Tokens{byToken: map[string]grant{}} }

// Mint returns a new token acting as k. limit is how long the agent's MCP
// client lets one tool call run (0: no limit): an ask returns a request id
// before it (C4).
func (t *Tokens) Mint(k troupe.RuntimeKey, limit time.Duration) string {
	b := make([]byte, 32)
	rand.Read(b)
	tok := "trp_" + hex.EncodeToString(b)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.byToken[tok] = grant{key: k, limit: limit}
	return tok
}

// Revoke invalidates a token. Revoking an unknown token does nothing.
func (t *Tokens) Revoke(tok string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.byToken, tok)
}

// RevokeProject invalidates every token of project p.
func (t *Tokens) RevokeProject(p troupe.ProjectID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for tok, g := range t.byToken {
		if g.key.Project == p {
			delete(t.byToken, tok)
		}
	}
}

func (t *Tokens) lookup(tok string) (grant, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	g, ok := t.byToken[tok]
	return g, ok
}

// ToolSource is the tool catalogue: its specs, and its tools bound to a
// key with a tool-call limit.
type ToolSource interface {
	Specs() []tool.Spec
	ToolsWithLimit(k troupe.RuntimeKey, limit time.Duration) engine.Tools
}

// Options configures the endpoint.
type Options struct {
	Tokens  *Tokens
	Tools   ToolSource
	Version string
	Logger  *slog.Logger
}

// Handler returns the /mcp endpoint: bearer token → RuntimeKey, then
// whatever tools the catalogue (o.Tools) holds.
func Handler(o Options) http.Handler {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	sdkLog := slog.New(atLeast{o.Logger.Handler(), slog.LevelWarn}) // the SDK logs every stateless request at info
	// The tools are fixed for the handler's life: no list-changed
	// notifications, so a client's subscriptions/listen (SEP-2575) is
	// answered at once instead of held open for the session (a held
	// answer could not cross a runner's request-reply link).
	srv := sdk.NewServer(&sdk.Implementation{Name: "troupe", Version: o.Version}, &sdk.ServerOptions{Logger: sdkLog,
		Capabilities: &sdk.ServerCapabilities{Tools: &sdk.ToolCapabilities{}}})
	for _, spec := range o.Tools.Specs() {
		srv.AddTool(&sdk.Tool{Name: spec.Name, Description: spec.Description, InputSchema: spec.Schema},
			func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				return call(ctx, o, spec.Name, req), nil
			})
	}
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv },
		&sdk.StreamableHTTPOptions{Stateless: true, JSONResponse: true, Logger: sdkLog, MaxRequestBodyBytes: MaxRequestBytes})
	verify := func(_ context.Context, tok string, _ *http.Request) (*auth.TokenInfo, error) {
		g, ok := o.Tokens.lookup(tok)
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: g.key.String(), Extra: map[string]any{"grant": g}}, nil
	}
	return auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h)
}

// MaxRequestBytes bounds the body of one MCP request (the SDK answers 413
// past it, before any tool sees it): room for a tool argument of 1 MB
// (the cap of a message, runtime.MaxMessageBytes, and of a note) even
// were every byte written as a six-byte JSON escape, so that such a
// message gets the tool's own error, which says what to do.
const MaxRequestBytes = 8 << 20

// call runs one tool call as the token's key. Every failure is a tool
// error (IsError) with a sentence the agent can act on, never a crash.
func call(ctx context.Context, o Options, tool string, req *sdk.CallToolRequest) (res *sdk.CallToolResult) {
	defer func() {
		if p := recover(); p != nil {
			o.Logger.Error("tool call panicked", "tool", tool, "panic", p)
			res = toolError("troupe hit an internal error running " + tool + "; try again, or tell the person")
		}
	}()
	var g grant
	if req.Extra != nil && req.Extra.TokenInfo != nil {
		g, _ = req.Extra.TokenInfo.Extra["grant"].(grant)
	}
	if !g.key.Valid() {
		return toolError("this connection has no agent identity: use the token troupe gave your session")
	}
	var args json.RawMessage
	if req.Params != nil {
		args = req.Params.Arguments
	}
	out, err := o.Tools.ToolsWithLimit(g.key, g.limit).Call(ctx, tool, args)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return toolError("the call was canceled")
		}
		return toolError(err.Error())
	}
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: out}}}
}

func toolError(msg string) *sdk.CallToolResult {
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: msg}}}
}

// callAs is call for a known key, for tests and fuzzing of argument decoding.
func callAs(ctx context.Context, o Options, k troupe.RuntimeKey, tool string, args json.RawMessage) *sdk.CallToolResult {
	tok := o.Tokens.Mint(k, 0)
	defer o.Tokens.Revoke(tok)
	g, _ := o.Tokens.lookup(tok)
	req := &sdk.CallToolRequest{Params: &sdk.CallToolParamsRaw{Name: tool, Arguments: args},
		Extra: &sdk.RequestExtra{TokenInfo: &auth.TokenInfo{Extra: map[string]any{"grant": g}}}}
	return call(ctx, o, tool, req)
}

// atLeast drops records below a level.
type atLeast struct {
	slog.Handler
	min slog.Level
}

func (h atLeast) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h atLeast) WithAttrs(as []slog.Attr) slog.Handler {
	return atLeast{h.Handler.WithAttrs(as), h.min}
}

func (h atLeast) WithGroup(name string) slog.Handler {
	return atLeast{h.Handler.WithGroup(name), h.min}
}
