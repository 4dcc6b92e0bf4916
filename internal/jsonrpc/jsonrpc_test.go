package jsonrpc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
)

// peer is the other end: what the Conn writes arrives on lines (read as
// it comes, so that the Conn's writes never wait), what the test writes to
// out the Conn reads.
type peer struct {
	lines chan string
	out   *io.PipeWriter
}

func pair(t *testing.T, o Options) (*Conn, *peer, chan error) {
	t.Helper()
	inR, inW := io.Pipe()   // Conn → peer
	outR, outW := io.Pipe() // peer → Conn
	c := New(outR, inW, o)
	ran := make(chan error, 1)
	go func() { ran <- c.Run() }()
	p := &peer{lines: make(chan string, 100), out: outW}
	go func() {
		sc := bufio.NewScanner(inR)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	t.Cleanup(func() { outW.Close(); inR.Close(); <-c.Done() })
	return c, p, ran
}

func (p *peer) read(t *testing.T) Message {
	t.Helper()
	line, ok := <-p.lines
	if !ok {
		t.Fatal("no line from the conn")
	}
	m, err := Parse([]byte(line))
	if err != nil || !strings.Contains(line, `"jsonrpc":"2.0"`) {
		t.Fatalf("conn wrote %q: %v", line, err)
	}
	return m
}

func (p *peer) write(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(p.out, line+"\n"); err != nil {
		t.Fatal(err)
	}
}

func TestCallsAreMatchedByID(t *testing.T) {
	c, p, _ := pair(t, Options{Name: "fake"})
	type answer struct {
		res json.RawMessage
		err error
	}
	got := make(chan answer, 2)
	for range 2 {
		go func() {
			res, err := c.Call(t.Context(), "m", map[string]int{"x": 1})
			got <- answer{res, err}
		}()
	}
	a, b := p.read(t), p.read(t)
	if a.Method != "m" || string(a.Params) != `{"x":1}` || !a.IsRequest() {
		t.Fatalf("request %+v", a)
	}
	// Answered out of order, one with an error.
	p.write(t, `{"id":`+string(b.ID)+`,"error":{"code":-1,"message":"no","data":"why"}}`)
	p.write(t, `{"jsonrpc":"2.0","id":`+string(a.ID)+`,"result":{"ok":true}}`)
	var errs, oks int
	for range 2 {
		ans := <-got
		var rerr *Error
		switch {
		case errors.As(ans.err, &rerr) && rerr.Code == -1 && ans.err.Error() == "no: why":
			errs++
		case ans.err == nil && string(ans.res) == `{"ok":true}`:
			oks++
		default:
			t.Errorf("answer %s, %v", ans.res, ans.err)
		}
	}
	if errs != 1 || oks != 1 {
		t.Errorf("%d errors, %d results; want one each", errs, oks)
	}
}

// TestPeerMessagesInOrder: notifications, requests and the answers of Go
// reach their callbacks in the order of the peer's lines; a request no one
// serves is refused.
func TestPeerMessagesInOrder(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	note := func(s string) { mu.Lock(); seen = append(seen, s); mu.Unlock() }
	var lines int
	c, p, _ := pair(t, Options{
		OnLine:         func() { lines++ },
		OnNotification: func(method string, _ json.RawMessage) { note("note " + method) },
		OnRequest: func(id json.RawMessage, method string, _ json.RawMessage) bool {
			if method != "ask" {
				return false
			}
			note("request " + method)
			return true
		},
	})
	if _, err := c.Go("start", nil, func(m Message) { note("answer " + string(m.Result)) }); err != nil {
		t.Fatal(err)
	}
	req := p.read(t)
	p.write(t, `{"method":"one","params":{}}`)
	p.write(t, `not json`)
	p.write(t, `{"id":null}`)
	p.write(t, `{"id":9,"method":"ask"}`)
	p.write(t, `{"id":`+string(req.ID)+`,"result":1}`)
	p.write(t, `{"id":10,"method":"fs/read"}`)
	refusal := p.read(t)
	if string(refusal.ID) != "10" || refusal.Error == nil || refusal.Error.Code != CodeMethodNotFound || refusal.Error.Message != "troupe does not serve fs/read" {
		t.Errorf("refusal %+v", refusal)
	}
	if err := c.Reply(json.RawMessage("9"), map[string]string{"a": "b"}); err != nil {
		t.Fatal(err)
	}
	if r := p.read(t); string(r.ID) != "9" || string(r.Result) != `{"a":"b"}` {
		t.Errorf("reply %+v", r)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"note one", "request ask", "answer 1"}; strings.Join(seen, "|") != strings.Join(want, "|") {
		t.Errorf("seen %q, want %q", seen, want)
	}
	if lines != 6 {
		t.Errorf("OnLine ran %d times, want 6", lines)
	}
}

// TestLineTooLong: the peer is killed, its output drained, and a call
// waiting gets ErrClosed.
func TestLineTooLong(t *testing.T) {
	killed := make(chan struct{})
	var c *Conn
	var p *peer
	var ran chan error
	c, p, ran = pair(t, Options{MaxLine: 100, Kill: func() error {
		close(killed)
		return nil
	}})
	called := make(chan error, 1)
	go func() {
		_, err := c.Call(context.Background(), "m", nil)
		called <- err
	}()
	p.read(t)
	go func() {
		io.WriteString(p.out, strings.Repeat("x", 200)+"\n")
		<-killed
		io.WriteString(p.out, "more output after the kill\n") // drained
		p.out.Close()
	}()
	if err := <-ran; !errors.Is(err, ErrLineTooLong) {
		t.Errorf("Run = %v, want ErrLineTooLong", err)
	}
	if err := <-called; !errors.Is(err, ErrClosed) {
		t.Errorf("call = %v, want ErrClosed", err)
	}
	if _, err := c.Call(context.Background(), "m", nil); !errors.Is(err, ErrClosed) {
		t.Errorf("call after the end = %v, want ErrClosed", err)
	}
}

// TestCallGivesUp: a call ends with its context; its late answer is
// dropped, and the next call is answered.
func TestCallGivesUp(t *testing.T) {
	c, p, ran := pair(t, Options{})
	ctx, cancel := context.WithCancelCause(context.Background())
	called := make(chan error, 1)
	go func() {
		_, err := c.Call(ctx, "slow", nil)
		called <- err
	}()
	first := p.read(t)
	boom := errors.New("boom")
	cancel(boom)
	if err := <-called; !errors.Is(err, boom) {
		t.Errorf("call = %v, want the context's cause", err)
	}
	p.write(t, `{"id":`+string(first.ID)+`,"result":"late"}`)
	go func() {
		m := p.read(t)
		p.write(t, `{"id":`+string(m.ID)+`,"result":"second"}`)
	}()
	if res, err := c.Call(context.Background(), "fast", nil); err != nil || string(res) != `"second"` {
		t.Errorf("second call = %s, %v", res, err)
	}
	p.out.Close()
	if err := <-ran; err != nil {
		t.Errorf("Run at end of file = %v, want nil", err)
	}
}

func TestParse(t *testing.T) {
	for _, bad := range []string{``, `{`, `{}`, `{"jsonrpc":"2.0"}`, `{"id":null}`, `[]`, `[1]`, `{"id":1`} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	m, err := Parse([]byte(`{"jsonrpc":"2.0","id":7,"method":"fs/read_text_file","params":{}}`))
	if err != nil || !m.IsRequest() || m.IsResponse() || m.IsNotification() || string(m.ID) != "7" {
		t.Errorf("request %+v %v", m, err)
	}
	m, _ = Parse([]byte(`{"jsonrpc":"2.0","id":"x","error":{"code":-1,"message":"no","data":"why"}}`))
	if _, ok := m.IntID(); ok || !m.IsResponse() || m.Error.Error() != "no: why" {
		t.Errorf("error response %+v", m)
	}
	m, _ = Parse([]byte(`{"id":3,"error":{"code":-32603,"message":"x","data":{"a":1}}}`))
	if m.Error.Error() != `x: {"a":1}` {
		t.Errorf("error with object data: %q", m.Error.Error())
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}`))
	f.Add([]byte(`{"id":"a","method":"item/fileChange/requestApproval","params":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Parse(b)
		if err != nil {
			return
		}
		if !m.IsRequest() && !m.IsNotification() && !m.IsResponse() && m.Error == nil {
			// A message with both a method and a result is a request or a
			// notification; one with neither method nor id is refused.
			t.Fatalf("unclassified %+v from %q", m, b)
		}
	})
}
