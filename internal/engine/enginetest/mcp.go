package enginetest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// FakeMCP is a tiny MCP endpoint (streamable HTTP, JSON answers) standing
// in for troupe's in the real-CLI tests of the engines: two tools,
// list_agents (answers "agents: alice, bob") and slow_tool (answers after
// 30 s, so a client's tool timeout cuts it), enough for a CLI to connect
// and call them. It records the Authorization header it gets. Its HTTP
// server is closed at the end of the test.
type FakeMCP struct {
	// URL is the endpoint, like http://127.0.0.1:PORT/mcp.
	URL string

	mu       sync.Mutex // guards lastAuth
	lastAuth string
}

// NewFakeMCP starts a FakeMCP.
func NewFakeMCP(t testing.TB) *FakeMCP {
	m := &FakeMCP{}
	srv := httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(srv.Close)
	m.URL = srv.URL + "/mcp"
	return m
}

// Auth is the Authorization header of the last request.
func (m *FakeMCP) Auth() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lastAuth
}

func (m *FakeMCP) serve(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	m.lastAuth = r.Header.Get("Authorization")
	m.mu.Unlock()
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"params"`
	}
	var raw json.RawMessage
	if err := json.NewDecoder(r.Body).Decode(&raw); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if err := json.Unmarshal(raw, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if len(req.ID) == 0 { // a notification
		w.WriteHeader(http.StatusAccepted)
		return
	}
	resp := map[string]any{"jsonrpc": "2.0", "id": req.ID}
	if req.Method == "tools/call" && strings.Contains(string(raw), `"slow_tool"`) {
		req.Method = "tools/call_slow"
	}
	switch req.Method {
	case "initialize":
		resp["result"] = map[string]any{
			"protocolVersion": req.Params.ProtocolVersion,
			"capabilities":    map[string]any{"tools": map[string]any{}},
			"serverInfo":      map[string]any{"name": "troupe", "version": "test"},
		}
	case "tools/list":
		schema := map[string]any{"type": "object", "properties": map[string]any{}}
		resp["result"] = map[string]any{"tools": []any{
			map[string]any{"name": "list_agents", "description": "List the agents of your team.", "inputSchema": schema},
			map[string]any{"name": "slow_tool", "description": "Takes 30 s.", "inputSchema": schema},
		}}
	case "tools/call_slow":
		select { // the client gives up first
		case <-r.Context().Done():
			return
		case <-time.After(30 * time.Second):
		}
		resp["result"] = map[string]any{"content": []any{map[string]any{"type": "text", "text": "too late"}}}
	case "tools/call":
		resp["result"] = map[string]any{"content": []any{map[string]any{"type": "text", "text": "agents: alice, bob"}}, "isError": false}
	case "ping":
		resp["result"] = map[string]any{}
	default:
		resp["error"] = map[string]any{"code": -32601, "message": "method not found"}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(resp)
}
