package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/engine/fake"
	"github.com/troupe-dev/troupe/internal/inbox"
	"github.com/troupe-dev/troupe/internal/permission"
	"github.com/troupe-dev/troupe/internal/runtime"
	"github.com/troupe-dev/troupe/internal/store/sqlite"
	"github.com/troupe-dev/troupe/internal/tool"
	"github.com/troupe-dev/troupe/internal/troupe"
)

func TestMain(m *testing.M) {
	fake.MaybeRunChild()
	os.Exit(m.Run())
}

type teams map[troupe.ProjectID][]troupe.AgentSpec

func (t teams) Agent(k troupe.RuntimeKey) (troupe.AgentSpec, string, bool) {
	for _, a := range t[k.Project] {
		if a.Name == k.Agent {
			return a, os.TempDir(), true
		}
	}
	return troupe.AgentSpec{}, "", false
}
func (t teams) Agents(p troupe.ProjectID) []troupe.AgentSpec { return t[p] }

type env struct {
	rt     *runtime.Runtime
	store  *inbox.MemStore
	tokens *Tokens
	url    string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	spec := func(n string) troupe.AgentSpec {
		return troupe.AgentSpec{Name: troupe.AgentID(n), Engine: troupe.EngineFake, Mode: troupe.ModeStructured, TurnTimeout: time.Minute}
	}
	tm := teams{"pa": {spec("lead"), spec("researcher")}, "pb": {spec("lead"), spec("researcher")}}
	e := &env{store: inbox.NewMemStore(), tokens: NewTokens()}
	whoami := tool.Tool{Spec: tool.Spec{Name: "whoami", Description: "say who calls",
		Schema: json.RawMessage(`{"type":"object","additionalProperties":false}`)},
		Handle: func(_ context.Context, c tool.Caller, _ json.RawMessage) (string, error) {
			return fmt.Sprintf("%s in %s", c.Key, c.Dir), nil
		}, Class: permission.Talk}
	e.rt = runtime.New(runtime.Options{Store: e.store, Teams: tm, Tools: []tool.Tool{whoami},
		Engines: map[troupe.Engine]engine.Engine{troupe.EngineFake: fake.New(fake.Options{Command: fake.TestCommand()})}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.rt.Run(ctx); close(done) }()
	ts := httptest.NewServer(Handler(Options{Tokens: e.tokens, Tools: e.rt, Version: "test"}))
	e.url = ts.URL
	t.Cleanup(func() { ts.Close(); cancel(); <-done })
	return e
}

type bearer struct{ tok string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.tok)
	return http.DefaultTransport.RoundTrip(r)
}

func (e *env) connect(t *testing.T, tok string) (*sdk.ClientSession, error) {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil)
	return c.Connect(t.Context(), &sdk.StreamableClientTransport{Endpoint: e.url,
		HTTPClient: &http.Client{Transport: bearer{tok}}, MaxRetries: -1}, nil)
}

func callText(t *testing.T, cs *sdk.ClientSession, tool string, args any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: protocol error %v (tool errors must be results)", tool, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError
}

func TestMCPListsAndCallsEveryTool(t *testing.T) {
	e := newEnv(t)
	cs, err := e.connect(t, e.tokens.Mint(troupe.RuntimeKey{Project: "pa", Agent: "lead"}, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
		if tl.Description == "" || tl.InputSchema == nil {
			t.Errorf("tool %s lacks a description or schema", tl.Name)
		}
	}
	if len(names) != len(e.rt.Specs()) {
		t.Fatalf("tools = %v, want the %d of the catalog", names, len(e.rt.Specs()))
	}
	cases := []struct {
		tool    string
		args    any
		want    string
		isError bool
	}{
		{"list_agents", map[string]any{}, `"name":"researcher"`, false},
		{"ask_agent", map[string]any{"to": "researcher", "question": "hi"}, "echo: hi", false},
		{"send_message", map[string]any{"to": "researcher", "text": "fyi"}, "sent to researcher", false},
		{"delegate", map[string]any{"to": "researcher", "task": "do it"}, "delegated to researcher", false},
		{"reply", map[string]any{"text": "x"}, "no question to answer", true},
		// A tool of another domain, composed into the catalogue, acts as the token's key.
		{"whoami", map[string]any{}, "pa/lead in " + os.TempDir(), false},
	}
	for _, c := range cases {
		out, isErr := callText(t, cs, c.tool, c.args)
		if isErr != c.isError || !strings.Contains(out, c.want) {
			t.Errorf("%s: %q (error %v), want %q (error %v)", c.tool, out, isErr, c.want, c.isError)
		}
	}
}

func TestMCPMalformedArgumentsAreToolErrors(t *testing.T) {
	e := newEnv(t)
	cs, err := e.connect(t, e.tokens.Mint(troupe.RuntimeKey{Project: "pa", Agent: "lead"}, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for _, c := range []struct {
		tool string
		args any
		want string
	}{
		{"ask_agent", map[string]any{"to": 5, "question": "q"}, "bad arguments"},
		{"ask_agent", map[string]any{"to": "researcher"}, `missing argument "question"`},
		{"ask_agent", map[string]any{"to": "ghost", "question": "q"}, "the agents are lead, researcher"},
		{"ask_agent", map[string]any{"to": "lead", "question": "q"}, "cannot message itself"},
		{"ask_agent", map[string]any{"to": "researcher", "question": "q", "wait_seconds": -1}, "negative"},
		{"send_message", map[string]any{"to": "researcher", "text": "x", "extra": true}, "unknown field"},
	} {
		out, isErr := callText(t, cs, c.tool, c.args)
		if !isErr || !strings.Contains(out, c.want) {
			t.Errorf("%s %v: %q (error %v), want a tool error saying %q", c.tool, c.args, out, isErr, c.want)
		}
	}
}

// TestC2_TokenActsAsExactlyOneKey: a token of project A names agents of A
// only; there is no way to reach B's agents with it, even though they have
// the same names. Unknown and revoked tokens are refused.
func TestC2_TokenActsAsExactlyOneKey(t *testing.T) {
	e := newEnv(t)
	tokA := e.tokens.Mint(troupe.RuntimeKey{Project: "pa", Agent: "lead"}, 0)
	cs, err := e.connect(t, tokA)
	if err != nil {
		t.Fatal(err)
	}
	if out, isErr := callText(t, cs, "ask_agent", map[string]any{"to": "researcher", "question": "where am I"}); isErr || out != "echo: where am I" {
		t.Fatalf("ask = %q %v", out, isErr)
	}
	convA, _ := e.store.Conversation(t.Context(), "pa", inbox.Page{})
	convB, _ := e.store.Conversation(t.Context(), "pb", inbox.Page{})
	if len(convA) == 0 || len(convB) != 0 {
		t.Fatalf("project A has %d messages, B has %d; want everything in A", len(convA), len(convB))
	}
	for _, m := range convA {
		if m.From != "lead" && m.From != "researcher" {
			t.Errorf("message from %q: the token's identity is lead", m.From)
		}
	}
	cs.Close()

	e.tokens.Revoke(tokA)
	if _, err := e.connect(t, tokA); err == nil {
		t.Fatal("a revoked token still connects")
	}
	if _, err := e.connect(t, "trp_forged"); err == nil {
		t.Fatal("an unknown token connects")
	}
	resp, err := http.Post(e.url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: status %d, want 401", resp.StatusCode)
	}
}

func TestMCPAskReturnsARequestIDBeforeTheClientsLimit(t *testing.T) {
	e := newEnv(t)
	cs, err := e.connect(t, e.tokens.Mint(troupe.RuntimeKey{Project: "pa", Agent: "lead"}, 200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	out, isErr := callText(t, cs, "ask_agent", map[string]any{"to": "researcher", "question": "!sleep 2s\n!say late"})
	if isErr || !strings.Contains(out, "has not answered yet (request r") || !strings.Contains(out, "inbox") {
		t.Fatalf("ask longer than the client's limit = %q (error %v); want a request id and the inbox promise", out, isErr)
	}
}

func FuzzToolArguments(f *testing.F) {
	for _, s := range []string{`{}`, `{"to":"researcher","question":"q"}`, `[]`, `null`, `"x"`, `{"to":{"a":1}}`, `{"wait_seconds":1e308,"to":"x","question":"y"}`, ``} {
		f.Add("ask_agent", s)
		f.Add("send_message", s)
		f.Add("memory_write", s)
	}
	rt := runtime.New(runtime.Options{Store: inbox.NewMemStore(), Teams: teams{"pa": nil}})
	o := Options{Tokens: NewTokens(), Tools: rt}
	f.Fuzz(func(t *testing.T, tool, args string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		req := &sdk.CallToolRequest{Params: &sdk.CallToolParamsRaw{Name: tool, Arguments: json.RawMessage(args)},
			Extra: &sdk.RequestExtra{}}
		res := call(ctx, o, tool, req) // no identity
		if !res.IsError {
			t.Fatalf("a call without identity succeeded: %+v", res)
		}
		res = callAs(ctx, o, troupe.RuntimeKey{Project: "pa", Agent: "lead"}, tool, json.RawMessage(args))
		if res == nil {
			t.Fatal("nil result")
		}
	})
}

// TestBridgeRelaysAStdioClient runs the go-sdk client over pipes through
// Bridge to the HTTP endpoint.
func TestBridgeRelaysAStdioClient(t *testing.T) {
	e := newEnv(t)
	tok := e.tokens.Mint(troupe.RuntimeKey{Project: "pb", Agent: "lead"}, 0)
	toBridge, fromClient := io.Pipe() // the client writes, the bridge reads
	toClient, fromBridge := io.Pipe() // the bridge writes, the client reads
	done := make(chan error, 1)
	go func() { done <- Bridge(t.Context(), e.url, tok, toBridge, fromBridge); fromBridge.Close() }()
	c := sdk.NewClient(&sdk.Implementation{Name: "stdio-test", Version: "1"}, nil)
	cs, err := c.Connect(t.Context(), &sdk.IOTransport{Reader: toClient, Writer: fromClient}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, isErr := callText(t, cs, "ask_agent", map[string]any{"to": "researcher", "question": "via stdio"})
	if isErr || out != "echo: via stdio" {
		t.Fatalf("ask through the bridge = %q (error %v)", out, isErr)
	}
	cs.Close()
	fromClient.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if conv, _ := e.store.Conversation(t.Context(), "pa", inbox.Page{}); len(conv) != 0 {
		t.Fatalf("the bridge's token is of project pb, but pa got %d messages", len(conv))
	}
}

// BenchmarkMCPListAgents: one list_agents tool call over loopback HTTP with
// the go-sdk client, on a warm connection.
func BenchmarkMCPListAgents(b *testing.B) {
	spec := func(n string) troupe.AgentSpec {
		return troupe.AgentSpec{Name: troupe.AgentID(n), Engine: troupe.EngineFake, Mode: troupe.ModeStructured, TurnTimeout: time.Minute}
	}
	rt := runtime.New(runtime.Options{Store: inbox.NewMemStore(), Teams: teams{"pa": {spec("lead"), spec("researcher")}}})
	tokens := NewTokens()
	ts := httptest.NewServer(Handler(Options{Tokens: tokens, Tools: rt}))
	defer ts.Close()
	c := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil)
	ctx := context.Background()
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: ts.URL, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearer{tokens.Mint(troupe.RuntimeKey{Project: "pa", Agent: "lead"}, 0)}}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	var ds []time.Duration
	for b.Loop() {
		start := time.Now()
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "list_agents", Arguments: map[string]any{}})
		ds = append(ds, time.Since(start))
		if err != nil || res.IsError {
			b.Fatal(err, res)
		}
	}
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(ds[len(ds)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchmarkMCPAskRoundTrip: the target orchestration overhead of an ask
// through MCP (docs/TARGETS.md): the go-sdk client, holding the lead's token,
// calls ask_agent; the researcher (a warm fake agent that answers at once)
// answers; SQLite with fsync on, as in the daemon.
func BenchmarkMCPAskRoundTrip(b *testing.B) {
	dir := b.TempDir()
	db, err := sqlite.Open(context.Background(), filepath.Join(dir, "troupe.db"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	spec := func(n string) troupe.AgentSpec {
		return troupe.AgentSpec{Name: troupe.AgentID(n), Engine: troupe.EngineFake, Mode: troupe.ModeStructured, TurnTimeout: time.Minute}
	}
	rt := runtime.New(runtime.Options{Store: db.Inbox(), Teams: teams{"pa": {spec("lead"), spec("researcher")}},
		Engines: map[troupe.Engine]engine.Engine{troupe.EngineFake: fake.New(fake.Options{Command: fake.TestCommand()})}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { rt.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	tokens := NewTokens()
	ts := httptest.NewServer(Handler(Options{Tokens: tokens, Tools: rt}))
	defer ts.Close()
	c := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: ts.URL, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearer{tokens.Mint(troupe.RuntimeKey{Project: "pa", Agent: "lead"}, 0)}}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	ask := func() {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "ask_agent", Arguments: map[string]any{"to": "researcher", "question": "ping"}})
		if err != nil || res.IsError {
			b.Fatal(err, res)
		}
	}
	ask() // warm: the researcher's session starts
	var ds []time.Duration
	for b.Loop() {
		start := time.Now()
		ask()
		ds = append(ds, time.Since(start))
	}
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(ds[len(ds)*99/100].Microseconds())/1000, "p99-ms")
}

// A request body over MaxRequestBytes is refused before it is read whole,
// whoever sends it; one just under goes to its tool, which applies its own
// cap (a message of more than 1 MB is a tool error naming it).
func TestMCPBodyIsBounded(t *testing.T) {
	e := newEnv(t)
	tok := e.tokens.Mint(troupe.RuntimeKey{Project: "pa", Agent: "lead"}, 0)
	post := func(text string) *http.Response {
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"send_message","arguments":{"to":"researcher","text":"` + text + `"}}}`
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, e.url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	if resp := post(strings.Repeat("x", MaxRequestBytes)); resp.StatusCode < 400 {
		t.Errorf("a body over %d bytes: status %d, want it refused", MaxRequestBytes, resp.StatusCode)
	}
	cs, err := e.connect(t, tok)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	out, isErr := callText(t, cs, "send_message", map[string]any{"to": "researcher", "text": strings.Repeat("\x01", 1<<20+1)})
	if !isErr || !strings.Contains(out, "1 MB") {
		t.Errorf("send_message of 1 MB and a byte : %q (error %v), want a tool error naming the 1 MB cap", out, isErr)
	}
	if ms, _ := e.store.Conversation(t.Context(), "pa", inbox.Page{}); len(ms) != 0 {
		t.Errorf("the conversation holds %d messages, want none", len(ms))
	}
}

// fixedTools is a catalogue of one tool that is never called.
type fixedTools struct{}

func (fixedTools) Specs() []tool.Spec {
	return []tool.Spec{{Name: "whoami", Description: "say who calls", Schema: json.RawMessage(`{"type":"object","additionalProperties":false}`)}}
}
func (fixedTools) ToolsWithLimit(troupe.RuntimeKey, time.Duration) engine.Tools { return nil }

// A client's subscriptions/listen (SEP-2575; Claude Code 2.1.328 opens one
// when the server offers tool-list notifications) is answered at once:
// troupe's tools never change, and an answer held open for the session
// cannot cross a runner's request-reply link (internal/remote), where it
// held every Claude agent's first turn for 25 s. The request's context is
// never cancelled: the handler must return by itself.
func TestMCPListenIsAnsweredAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tokens := NewTokens()
		tok := tokens.Mint(troupe.RuntimeKey{Project: "pa", Agent: "lead"}, 0)
		h := Handler(Options{Tokens: tokens, Tools: fixedTools{}, Version: "test"})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"claude-code","version":"2.1.328"},"io.modelcontextprotocol/clientCapabilities":{}}`
		post := func(method, body string) (*httptest.ResponseRecorder, chan struct{}) {
			req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/mcp", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
			req.Header.Set("Mcp-Method", method)
			w, done := httptest.NewRecorder(), make(chan struct{})
			go func() { h.ServeHTTP(w, req); close(done) }()
			return w, done
		}
		w, done := post("server/discover", `{"jsonrpc":"2.0","id":"probe","method":"server/discover","params":{`+meta+`}}`)
		synctest.Wait()
		<-done
		if strings.Contains(w.Body.String(), "listChanged") {
			t.Errorf("server/discover offers list-changed notifications: %s", w.Body.String())
		}
		w, done = post("subscriptions/listen", `{"jsonrpc":"2.0","id":"listen:0","method":"subscriptions/listen","params":{`+meta+`,"notifications":{"toolsListChanged":true}}}`)
		synctest.Wait()
		select {
		case <-done:
		default:
			cancel()
			<-done
			t.Fatalf("subscriptions/listen is held open (answer so far: %q)", w.Body.String())
		}
		if b := w.Body.String(); !strings.Contains(b, `"result"`) || !strings.Contains(b, `listen:0`) {
			t.Errorf("subscriptions/listen answered %d %q, want its result", w.Code, b)
		}
	})
}
