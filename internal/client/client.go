// Package client is the Go client of the daemon's HTTP API. The CLI, the
// tests and any tool use it; nothing else speaks the wire format.
//
// A Client is safe for concurrent use and holds no goroutines; an event
// stream (Events) is owned by its caller and ends with the caller's context.
// It imports internal/api for the wire types only.
package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/events"
	"github.com/troupe-dev/troupe/internal/statedir"
	"github.com/troupe-dev/troupe/internal/task"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// ErrNotRunning is returned when no daemon answers at the state dir.
var ErrNotRunning = errors.New("the daemon is not running")

// Error is an error answer of the API.
type Error struct {
	Status int
	Code   string
	Msg    string
}

func (e *Error) Error() string { return e.Msg }

// Is maps API codes to troupe's sentinel errors.
func (e *Error) Is(target error) bool {
	switch e.Code {
	case "not_found":
		return target == troupe.ErrNotFound
	case "already_exists":
		return target == troupe.ErrAlreadyExists
	case "invalid":
		return target == troupe.ErrInvalid
	case "conflict":
		return target == troupe.ErrConflict
	}
	return false
}

// Client talks to one daemon.
type Client struct {
	base  string
	token string
	hc    *http.Client
	dir   string // state dir, for error messages; may be empty

	version atomic.Pointer[string] // the daemon's, from its last answer (api.VersionHeader)
}

// DaemonVersion is the version of troupe the daemon said it runs in its
// last answer; "" before any.
func (c *Client) DaemonVersion() string {
	if v := c.version.Load(); v != nil {
		return *v
	}
	return ""
}

// noteVersion keeps the version resp names.
func (c *Client) noteVersion(resp *http.Response) {
	if v := resp.Header.Get(api.VersionHeader); v != "" {
		c.version.Store(&v)
	}
}

// New returns a client of the daemon at base ("http://127.0.0.1:7433").
func New(base, token string) *Client {
	return &Client{base: strings.TrimSuffix(base, "/"), token: token, hc: &http.Client{}}
}

// FromStateDir finds the daemon running on the state dir through its addr
// and token files. It trusts them only in a state dir that is the user's
// own and not writable by others (statedir.Dir.Check), and an addr file
// that is a regular file of the user's: anyone who could write them could
// send the CLI, with the token, to a server of theirs.
func FromStateDir(dir string) (*Client, error) {
	d := statedir.Dir(dir)
	if err := d.Check(); errors.Is(err, fs.ErrNotExist) {
		return nil, notRunning(dir)
	} else if err != nil {
		return nil, fmt.Errorf("find daemon: %w (troupe trusts its addr and token files only then)", err)
	}
	addr, err := readAddr(d.AddrFile())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, notRunning(dir)
	}
	if err != nil {
		return nil, fmt.Errorf("find daemon: %w", err)
	}
	tok, err := d.ReadToken()
	if err != nil {
		return nil, err
	}
	c := New("http://"+strings.TrimSpace(addr), tok)
	c.dir = dir
	return c, nil
}

// readAddr reads the addr file: a regular file (not a link) owned by the
// user, not writable by others.
func readAddr(path string) (string, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return "", fmt.Errorf("%s is a symbolic link, which troupe does not follow: remove it and restart the daemon", path)
		}
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.Mode().IsRegular():
		return "", fmt.Errorf("%s is not a regular file: remove it and restart the daemon", path)
	case ok && int(st.Uid) != os.Getuid():
		return "", fmt.Errorf("%s is owned by uid %d, not by you: remove it and restart the daemon", path, st.Uid)
	case fi.Mode().Perm()&0o022 != 0:
		return "", fmt.Errorf("%s is writable by others (mode %04o): remove it and restart the daemon", path, fi.Mode().Perm())
	}
	b, err := io.ReadAll(io.LimitReader(f, 256))
	if err != nil {
		return "", err
	}
	return string(b), nil
}

func notRunning(dir string) error {
	return fmt.Errorf("%w (state dir %s): start it with `troupe serve`", ErrNotRunning, dir)
}

// Base returns the daemon's base URL.
func (c *Client) Base() string { return c.base }

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.hc.Do(req)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return notRunning(c.dir)
		}
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	c.noteVersion(resp)
	if resp.StatusCode >= 300 {
		var e api.Error
		if json.NewDecoder(resp.Body).Decode(&e) != nil || e.Error == "" {
			e.Error = resp.Status
		}
		return &Error{Status: resp.StatusCode, Code: e.Code, Msg: e.Error}
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decode answer of %s %s: %w", method, path, err)
	}
	return nil
}

// Status returns the daemon's status.
func (c *Client) Status(ctx context.Context) (api.Status, error) {
	var s api.Status
	err := c.do(ctx, "GET", "/api/status", nil, &s)
	return s, err
}

// Shutdown asks the daemon to stop cleanly; it returns the pid that is
// stopping, at once (the caller waits for it).
func (c *Client) Shutdown(ctx context.Context) (api.ShutdownResponse, error) {
	var r api.ShutdownResponse
	err := c.do(ctx, "POST", "/api/shutdown", nil, &r)
	return r, err
}

// Projects lists registered projects.
func (c *Client) Projects(ctx context.Context) ([]api.Project, error) {
	var ps []api.Project
	err := c.do(ctx, "GET", "/api/projects", nil, &ps)
	return ps, err
}

// AddProject registers the folder at path (made absolute by the caller).
func (c *Client) AddProject(ctx context.Context, path string) (api.Project, error) {
	var p api.Project
	err := c.do(ctx, "POST", "/api/projects", api.AddProjectRequest{Path: path}, &p)
	return p, err
}

// ResolveProject finds a project by id or by a path inside it.
func (c *Client) ResolveProject(ctx context.Context, ref string) (api.Project, error) {
	var p api.Project
	err := c.do(ctx, "GET", "/api/projects/resolve?ref="+url.QueryEscape(ref), nil, &p)
	return p, err
}

// RemoveProject unregisters a project.
func (c *Client) RemoveProject(ctx context.Context, id troupe.ProjectID) error {
	return c.do(ctx, "DELETE", "/api/projects/"+url.PathEscape(string(id)), nil, nil)
}

// Agents lists a project's team with each agent's state.
func (c *Client) Agents(ctx context.Context, id troupe.ProjectID) ([]api.Agent, error) {
	var as []api.Agent
	err := c.do(ctx, "GET", "/api/projects/"+url.PathEscape(string(id))+"/agents", nil, &as)
	return as, err
}

// Events streams events after since, calling fn for each, until ctx ends,
// the stream breaks or fn returns an error. reset is called (when not nil)
// if the daemon no longer has the events after since; the caller should
// re-read state. It returns the last sequence number seen, so the caller can
// resume with it.
func (c *Client) Events(ctx context.Context, since uint64, reset func(), fn func(events.Event) error) (uint64, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", c.base+"/api/events?since="+strconv.FormatUint(since, 10), nil)
	if err != nil {
		return since, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.hc.Do(req)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return since, notRunning(c.dir)
		}
		return since, fmt.Errorf("open event stream: %w", err)
	}
	defer resp.Body.Close()
	c.noteVersion(resp)
	if resp.StatusCode != http.StatusOK {
		var e api.Error
		_ = json.NewDecoder(resp.Body).Decode(&e)
		return since, &Error{Status: resp.StatusCode, Code: e.Code, Msg: e.Error}
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var typ, data string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if typ == "reset" && reset != nil {
				reset()
			} else if data != "" && typ != "reset" {
				var ev events.Event
				if err := json.Unmarshal([]byte(data), &ev); err != nil {
					return since, fmt.Errorf("decode event: %w", err)
				}
				since = ev.Seq
				if err := fn(ev); err != nil {
					return since, err
				}
			}
			typ, data = "", ""
		case strings.HasPrefix(line, "event: "):
			typ = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			data = line[len("data: "):]
		}
	}
	if ctx.Err() != nil {
		return since, ctx.Err()
	}
	if err := sc.Err(); err != nil {
		return since, fmt.Errorf("read event stream: %w", err)
	}
	return since, io.ErrUnexpectedEOF
}

// Ask asks agent a question as the person and waits up to wait (0: until
// the outcome). A pending answer can be fetched later with Request.
func (c *Client) Ask(ctx context.Context, p troupe.ProjectID, agent troupe.AgentID, text string, wait float64) (troupe.Request, error) {
	var r troupe.Request
	err := c.do(ctx, "POST", agentPath(p, agent)+"/ask", api.AskRequest{Text: text, WaitSeconds: wait}, &r)
	return r, err
}

// Delegate gives agent a task from the person and returns the pending
// request (see api.DelegateRequest): follow it with Request.
func (c *Client) Delegate(ctx context.Context, p troupe.ProjectID, agent troupe.AgentID, in api.DelegateRequest) (troupe.Request, error) {
	var r troupe.Request
	err := c.do(ctx, "POST", agentPath(p, agent)+"/delegate", in, &r)
	return r, err
}

// Send puts a message from the person into agent's inbox.
func (c *Client) Send(ctx context.Context, p troupe.ProjectID, agent troupe.AgentID, text string) (troupe.Message, error) {
	var m troupe.Message
	err := c.do(ctx, "POST", agentPath(p, agent)+"/send", api.SendRequest{Text: text}, &m)
	return m, err
}

// Request returns a request, waiting up to wait seconds for its outcome.
func (c *Client) Request(ctx context.Context, p troupe.ProjectID, id troupe.RequestID, wait float64) (troupe.Request, error) {
	var r troupe.Request
	err := c.do(ctx, "GET", "/api/projects/"+url.PathEscape(string(p))+"/requests/"+url.PathEscape(string(id))+
		"?wait_seconds="+strconv.FormatFloat(wait, 'f', -1, 64), nil, &r)
	return r, err
}

// Conversation pages back through project p's conversation (agent: only
// messages from or to it): the newest limit messages (0: the daemon's
// default, api.DefaultMessages; at most api.MaxMessages) below the message
// id before (0: the newest of all), oldest first. The answer's Before,
// when set, continues back.
func (c *Client) Conversation(ctx context.Context, p troupe.ProjectID, agent troupe.AgentID, before int64, limit int) (api.Messages, error) {
	q := url.Values{}
	if before > 0 {
		q.Set("before", strconv.FormatInt(before, 10))
	}
	return c.messages(ctx, p, agent, limit, q)
}

// Messages follows project p's conversation (agent: only messages from or
// to it): the oldest limit messages (0: the daemon's default,
// api.DefaultMessages; at most api.MaxMessages) after the message id after,
// oldest first. Ask again after the last one for more.
func (c *Client) Messages(ctx context.Context, p troupe.ProjectID, agent troupe.AgentID, after int64, limit int) ([]troupe.Message, error) {
	ms, err := c.messages(ctx, p, agent, limit, url.Values{"after": {strconv.FormatInt(after, 10)}})
	return ms.Messages, err
}

// MessageText reads a part of message id's text: at most
// inbox.MaxTextBytes from byte offset; the answer's Next, when set, is the
// offset of the rest.
func (c *Client) MessageText(ctx context.Context, p troupe.ProjectID, id int64, offset int) (api.MessageText, error) {
	var t api.MessageText
	err := c.do(ctx, "GET", "/api/projects/"+url.PathEscape(string(p))+"/messages/"+strconv.FormatInt(id, 10)+
		"?offset="+strconv.Itoa(offset), nil, &t)
	return t, err
}

// WholeMessage reads message id with its whole text, part after part (a
// conversation page clips long texts).
func (c *Client) WholeMessage(ctx context.Context, p troupe.ProjectID, id int64) (troupe.Message, error) {
	var b strings.Builder
	for off := 0; ; {
		t, err := c.MessageText(ctx, p, id, off)
		if err != nil {
			return troupe.Message{}, err
		}
		b.WriteString(t.Message.Text)
		if t.Next <= off {
			m := t.Message
			m.Text, m.Clipped, m.Size = b.String(), false, 0
			return m, nil
		}
		off = t.Next
	}
}

// messages GETs the conversation with q, agent and limit added.
func (c *Client) messages(ctx context.Context, p troupe.ProjectID, agent troupe.AgentID, limit int, q url.Values) (api.Messages, error) {
	if agent != "" {
		q.Set("agent", string(agent))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var ms api.Messages
	err := c.do(ctx, "GET", "/api/projects/"+url.PathEscape(string(p))+"/messages?"+q.Encode(), nil, &ms)
	return ms, err
}

// LoginLink mints a one-time login URL for the web UI.
func (c *Client) LoginLink(ctx context.Context) (string, error) {
	var l api.LoginLink
	err := c.do(ctx, "POST", "/api/login-links", nil, &l)
	return l.URL, err
}

func agentPath(p troupe.ProjectID, agent troupe.AgentID) string {
	return "/api/projects/" + url.PathEscape(string(p)) + "/agents/" + url.PathEscape(string(agent))
}

// Tasks lists a project's background tasks.
func (c *Client) Tasks(ctx context.Context, p troupe.ProjectID) ([]api.Task, error) {
	var ts []api.Task
	err := c.do(ctx, "GET", "/api/projects/"+url.PathEscape(string(p))+"/tasks", nil, &ts)
	return ts, err
}

// RunTask starts a background task in project p.
func (c *Client) RunTask(ctx context.Context, p troupe.ProjectID, req api.RunTaskRequest) (api.Task, error) {
	var t api.Task
	err := c.do(ctx, "POST", "/api/projects/"+url.PathEscape(string(p))+"/tasks", req, &t)
	return t, err
}

// Task returns one task.
func (c *Client) Task(ctx context.Context, p troupe.ProjectID, id task.ID) (api.Task, error) {
	return c.task(ctx, taskPath(p, id))
}

// TaskDebug returns one task with its Debug part: the supervisor's pid.
func (c *Client) TaskDebug(ctx context.Context, p troupe.ProjectID, id task.ID) (api.Task, error) {
	return c.task(ctx, taskPath(p, id)+"?debug=1")
}

func (c *Client) task(ctx context.Context, path string) (api.Task, error) {
	var t api.Task
	err := c.do(ctx, "GET", path, nil, &t)
	return t, err
}

// TaskOutput returns the end of a task's output, at most maxBytes.
func (c *Client) TaskOutput(ctx context.Context, p troupe.ProjectID, id task.ID, maxBytes int) (string, error) {
	var o api.TaskOutput
	err := c.do(ctx, "GET", taskPath(p, id)+"/output?max_bytes="+strconv.Itoa(maxBytes), nil, &o)
	return o.Output, err
}

// KillTask stops a running task.
func (c *Client) KillTask(ctx context.Context, p troupe.ProjectID, id task.ID) error {
	return c.do(ctx, "POST", taskPath(p, id)+"/kill", nil, nil)
}

func taskPath(p troupe.ProjectID, id task.ID) string {
	return "/api/projects/" + url.PathEscape(string(p)) + "/tasks/" + url.PathEscape(string(id))
}

// Team returns a project's approved team and the change waiting, if any.
func (c *Client) Team(ctx context.Context, id troupe.ProjectID) (api.Team, error) {
	var t api.Team
	err := c.do(ctx, "GET", "/api/projects/"+url.PathEscape(string(id))+"/team", nil, &t)
	return t, err
}

// TeamChanges lists the held team changes the person has not rejected.
func (c *Client) TeamChanges(ctx context.Context) ([]api.PendingTeam, error) {
	var out []api.PendingTeam
	err := c.do(ctx, "GET", "/api/team-changes", nil, &out)
	return out, err
}

// DecideTeam approves (or rejects) the held team change of digest d.
func (c *Client) DecideTeam(ctx context.Context, id troupe.ProjectID, d string, approve bool) error {
	verb := "reject"
	if approve {
		verb = "approve"
	}
	return c.do(ctx, "POST", "/api/projects/"+url.PathEscape(string(id))+"/team/"+verb, api.TeamDecision{Digest: d}, nil)
}

// RunCheck runs check name of project p on agent's workspace and returns
// its result once recorded (it waits for the command's end).
func (c *Client) RunCheck(ctx context.Context, p troupe.ProjectID, agent troupe.AgentID, name troupe.CheckName) (api.CheckResult, error) {
	var r api.CheckResult
	err := c.do(ctx, "POST", "/api/projects/"+url.PathEscape(string(p))+"/agents/"+url.PathEscape(string(agent))+
		"/checks/"+url.PathEscape(string(name))+"/run", nil, &r)
	return r, err
}

// CheckResults lists the check results of project p, newest first: of one
// agent when agent is not "".
func (c *Client) CheckResults(ctx context.Context, p troupe.ProjectID, agent troupe.AgentID, limit int) ([]api.CheckResult, error) {
	q := url.Values{}
	if agent != "" {
		q.Set("agent", string(agent))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	path := "/api/projects/" + url.PathEscape(string(p)) + "/checks"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var rs []api.CheckResult
	err := c.do(ctx, "GET", path, nil, &rs)
	return rs, err
}

// memoryPath is the path of project p's notes, or of note name in them.
func memoryPath(p troupe.ProjectID, name string) string {
	path := "/api/projects/" + url.PathEscape(string(p)) + "/memory"
	if name != "" {
		path += "/" + url.PathEscape(name)
	}
	return path
}

// MemoryNotes lists project p's memory notes in name order, or with query
// the notes matching it, best first (at most limit; 0: the daemon's
// default).
func (c *Client) MemoryNotes(ctx context.Context, p troupe.ProjectID, query string, limit int) (api.MemoryList, error) {
	q := url.Values{}
	if query != "" {
		q.Set("q", query)
		if limit > 0 {
			q.Set("limit", strconv.Itoa(limit))
		}
	}
	path := memoryPath(p, "")
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out api.MemoryList
	err := c.do(ctx, "GET", path, nil, &out)
	return out, err
}

// MemoryNote reads note name of project p, its body included.
func (c *Client) MemoryNote(ctx context.Context, p troupe.ProjectID, name string) (api.MemoryNote, error) {
	var out api.MemoryNote
	err := c.do(ctx, "GET", memoryPath(p, name), nil, &out)
	return out, err
}

// WriteMemoryNote creates or replaces note name of project p.
func (c *Client) WriteMemoryNote(ctx context.Context, p troupe.ProjectID, name string, in api.WriteNoteRequest) (api.MemoryNote, error) {
	var out api.MemoryNote
	err := c.do(ctx, "PUT", memoryPath(p, name), in, &out)
	return out, err
}

// RemoveMemoryNote deletes note name of project p and returns it as it was.
func (c *Client) RemoveMemoryNote(ctx context.Context, p troupe.ProjectID, name string) (api.MemoryNote, error) {
	var out api.MemoryNote
	err := c.do(ctx, "DELETE", memoryPath(p, name), nil, &out)
	return out, err
}
