package fake

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// mcpCall runs one tools/call against troupe's MCP endpoint, as a real agent
// CLI does: JSON-RPC over streamable HTTP with the session's bearer token.
// It returns the text of the result, or the error text of a tool error or
// of a failed call.
//
// A timeout > 0 is the client's tool-call limit, as real CLIs have one: the
// call is abandoned after it.
func mcpCall(url, token, tool string, args json.RawMessage, timeout time.Duration) (result, errText string) {
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
		"params": map[string]any{"name": tool, "arguments": args}})
	if err != nil {
		return "", "encode call: " + err.Error()
	}
	req, err := http.NewRequest("POST", url, bytes.NewReader(body))
	if err != nil {
		return "", "build call: " + err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := (&http.Client{Timeout: timeout}).Do(req)
	if err != nil {
		return "", "call troupe over MCP: " + err.Error()
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxLine))
	if err != nil {
		return "", "read MCP answer: " + err.Error()
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Sprintf("MCP call refused: %s: %s", resp.Status, strings.TrimSpace(string(raw)))
	}
	if ct := resp.Header.Get("Content-Type"); strings.HasPrefix(ct, "text/event-stream") {
		for line := range strings.SplitSeq(string(raw), "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				raw = []byte(d)
			}
		}
	}
	var rpc struct {
		Result *struct {
			IsError bool `json:"isError"`
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &rpc); err != nil {
		return "", "decode MCP answer: " + err.Error()
	}
	if rpc.Error != nil {
		return "", "MCP error: " + rpc.Error.Message
	}
	if rpc.Result == nil {
		return "", "MCP answer without a result"
	}
	var b strings.Builder
	for _, c := range rpc.Result.Content {
		b.WriteString(c.Text)
	}
	if rpc.Result.IsError {
		return "", b.String()
	}
	return b.String(), ""
}
