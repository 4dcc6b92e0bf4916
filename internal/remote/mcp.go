package remote

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
)

// MaxMCPBody bounds one request of an agent's CLI to the runner's local
// MCP endpoint (troupe's endpoint takes up to 8 MB).
const MaxMCPBody = 8 << 20

// forwardMCP is the runner's local MCP endpoint: the agents' CLIs on this
// machine call it with their session's token, and it carries each request
// whole to the daemon's endpoint and its answer back. A token of no
// session of this runner is refused here.
func (r *Runner) forwardMCP(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path != "/mcp" {
		http.NotFound(w, req)
		return
	}
	if req.Method != http.MethodPost {
		// troupe's endpoint is stateless: no stream to open, no session
		// to delete.
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	token, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
	r.mu.Lock()
	id := r.tokens[token]
	r.mu.Unlock()
	if !ok || token == "" || id == "" {
		http.Error(w, "unknown token", http.StatusUnauthorized)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, MaxMCPBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			http.Error(w, "request too big", http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "read request", http.StatusBadRequest)
		return
	}
	data, err := r.request(req.Context(), opMCP, mcpReq{Session: id, Method: req.Method, Header: req.Header, Body: body})
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	var rep mcpReply
	if err := json.Unmarshal(data, &rep); err != nil {
		http.Error(w, "decode the daemon's answer", http.StatusBadGateway)
		return
	}
	for k, vs := range rep.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(rep.Status)
	_, _ = w.Write(rep.Body)
}
