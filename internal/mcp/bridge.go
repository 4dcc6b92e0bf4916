package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
)

// Bridge relays MCP JSON-RPC between a stdio client (one message per line
// on in, answers on out) and the daemon's /mcp endpoint, authenticating
// with token. Requests are relayed concurrently (an ask may wait for hours
// while other calls go on); answers are written whole, one per line. It
// returns when in ends (after every relayed request finished) or ctx ends.
func Bridge(ctx context.Context, url, token string, in io.Reader, out io.Writer) error {
	var mu sync.Mutex // guards out
	write := func(b []byte) {
		mu.Lock()
		defer mu.Unlock()
		out.Write(append(bytes.TrimSpace(b), '\n'))
	}
	hc := &http.Client{}
	var version protoVersion
	var wg sync.WaitGroup
	defer wg.Wait()
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		msg := append([]byte(nil), line...)

		wg.Go(func() {
			if err := relay(ctx, hc, url, token, msg, &version, write); err != nil {
				if id := requestID(msg); id != nil {
					b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id,
						"error": map[string]any{"code": -32000, "message": "troupe bridge: " + err.Error()}})
					write(b)
				}
			}
		})
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read stdin: %w", err)
	}
	return nil
}

// protoVersion is the protocol version the client negotiated, sent as the
// MCP-Protocol-Version header (HTTP clients must; stdio clients do not).
type protoVersion struct {
	mu sync.Mutex // guards v
	v  string
}

func (p *protoVersion) get() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.v
}

func (p *protoVersion) set(v string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.v = v
}

// headerVersion is the version a message declares in its _meta (protocol
// 2026-07-28 and later), or the negotiated one.
func headerVersion(msg []byte, negotiated string) string {
	var m struct {
		Params struct {
			Meta map[string]any `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(msg, &m) == nil {
		if v, ok := m.Params.Meta["io.modelcontextprotocol/protocolVersion"].(string); ok && v != "" {
			return v
		}
	}
	return negotiated
}

// noteVersion remembers the version of an initialize result.
func noteVersion(answer []byte, p *protoVersion) {
	var m struct {
		Result struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
	}
	if json.Unmarshal(answer, &m) == nil && m.Result.ProtocolVersion != "" {
		p.set(m.Result.ProtocolVersion)
	}
}

func requestID(msg []byte) json.RawMessage {
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(msg, &m) != nil || len(m.ID) == 0 || string(m.ID) == "null" {
		return nil
	}
	return m.ID
}

// relay posts one message and writes back whatever JSON-RPC messages the
// answer holds (a JSON body, or the data lines of an event stream).
func relay(ctx context.Context, hc *http.Client, url, token string, msg []byte, version *protoVersion, write func([]byte)) error {
	req, err := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(msg))
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if v := headerVersion(msg, version.get()); v != "" {
		req.Header.Set("MCP-Protocol-Version", v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("reach the daemon: %w", err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusAccepted:
		return nil // a notification or a response: nothing comes back
	case resp.StatusCode == http.StatusUnauthorized:
		return fmt.Errorf("the daemon refused the token (revoked, or from another daemon run): restart the agent's session")
	case resp.StatusCode >= 300:
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("daemon answered %s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 64<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				noteVersion([]byte(d), version)
				write([]byte(d))
			}
		}
		return sc.Err()
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("read answer: %w", err)
	}
	if len(bytes.TrimSpace(b)) > 0 {
		noteVersion(b, version)
		write(b)
	}
	return nil
}
