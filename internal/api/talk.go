package api

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/troupe-dev/troupe/internal/inbox"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// AskRequest is the body of POST .../agents/{agent}/ask. The person asks.
type AskRequest struct {
	Text string `json:"text"`
	// WaitSeconds bounds the wait; 0 waits for the outcome. When it ends
	// first, the answer is pending: GET the request later.
	WaitSeconds float64 `json:"wait_seconds,omitempty"`
}

// DelegateRequest is the body of POST .../agents/{agent}/delegate: the
// person delegates a task, answered at once with the pending request;
// its result comes later (GET .../requests/{req}). Verify names one of
// the project's checks: troupe runs it on the agent's workspace when its
// turn ends, and the result carries troupe's verdict; Tries (with Verify:
// 1 to 5, default 2) is how many of its turns the check may judge.
type DelegateRequest struct {
	Text   string           `json:"text"`
	Verify troupe.CheckName `json:"verify,omitempty"`
	Tries  int              `json:"tries,omitempty"`
}

// SendRequest is the body of POST .../agents/{agent}/send.
type SendRequest struct {
	Text string `json:"text"`
}

// target resolves {id} and {agent}; it answers the error itself.
func (s *Server) target(w http.ResponseWriter, r *http.Request) (troupe.RuntimeKey, bool) {
	id := troupe.ProjectID(r.PathValue("id"))
	if _, ok := s.o.Registry.Get(id); !ok {
		writeError(w, http.StatusNotFound, "not_found", "project "+string(id)+" is not registered: see `troupe project list`")
		return troupe.RuntimeKey{}, false
	}
	if _, ok := s.runtime(w); !ok {
		return troupe.RuntimeKey{}, false
	}
	return troupe.RuntimeKey{Project: id, Agent: troupe.AgentID(r.PathValue("agent"))}, true
}

func seconds(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }

func (s *Server) ask(w http.ResponseWriter, r *http.Request) {
	var in AskRequest
	if !decode(w, r, &in) {
		return
	}
	k, ok := s.target(w, r)
	if !ok {
		return
	}
	if in.WaitSeconds < 0 {
		writeError(w, http.StatusBadRequest, "invalid", "wait_seconds: must be 0 (wait for the answer) or more")
		return
	}
	req, err := s.o.Runtime.Ask(r.Context(), k, troupe.Person, in.Text, seconds(in.WaitSeconds))
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, req)
}

func (s *Server) delegate(w http.ResponseWriter, r *http.Request) {
	var in DelegateRequest
	if !decode(w, r, &in) {
		return
	}
	k, ok := s.target(w, r)
	if !ok {
		return
	}
	req, err := s.o.Runtime.Delegate(r.Context(), k, troupe.Person, in.Text, in.Verify, in.Tries)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, req)
}

func (s *Server) send(w http.ResponseWriter, r *http.Request) {
	var in SendRequest
	if !decode(w, r, &in) {
		return
	}
	k, ok := s.target(w, r)
	if !ok {
		return
	}
	m, err := s.o.Runtime.Send(r.Context(), k, troupe.Person, troupe.KindMessage, in.Text)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, m)
}

func (s *Server) request(w http.ResponseWriter, r *http.Request) {
	k, ok := s.target(w, r)
	if !ok {
		return
	}
	wait := 1e-9 // a bare GET does not wait
	if q := r.URL.Query().Get("wait_seconds"); q != "" {
		v, err := strconv.ParseFloat(q, 64)
		if err != nil || v < 0 {
			writeError(w, http.StatusBadRequest, "invalid", "wait_seconds: give a number of seconds, 0 for no wait")
			return
		}
		if v > 0 {
			wait = v
		}
	}
	req, err := s.o.Runtime.Await(r.Context(), k.Project, troupe.RequestID(r.PathValue("req")), seconds(wait))
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, req)
}

// DefaultMessages is how many messages GET .../messages returns without
// limit; MaxMessages is the most it returns.
const (
	DefaultMessages = 50
	MaxMessages     = inbox.MaxPage
)

// Messages is the answer of GET /api/projects/{id}/messages: a page of the
// conversation, oldest first. Before, when set, is the cursor for the
// older messages of the window (?before=); After, when set, for the newer
// ones (?after=). Each is set only when such messages exist.
type Messages struct {
	Messages []troupe.Message `json:"messages"`
	Before   int64            `json:"before,omitempty"`
	After    int64            `json:"after,omitempty"`
}

// messages serves GET /api/projects/{id}/messages?agent=&before=&after=&limit=:
// the newest limit messages below before (default: the newest of all),
// unless after is given without before: then the oldest limit above after,
// to follow the conversation.
func (s *Server) messages(w http.ResponseWriter, r *http.Request) {
	k, ok := s.target(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	after, err1 := parseInt(q.Get("after"))
	before, err2 := parseInt(q.Get("before"))
	limit, err3 := parseInt(q.Get("limit"))
	if err1 != nil || err2 != nil || err3 != nil || after < 0 || before < 0 || limit < 0 || limit > MaxMessages {
		writeError(w, http.StatusBadRequest, "invalid", fmt.Sprintf("after, before and limit: give whole numbers ≥ 0, limit at most %d", MaxMessages))
		return
	}
	if limit == 0 {
		limit = DefaultMessages
	}
	page := inbox.Page{Agent: troupe.AgentID(q.Get("agent")), After: after, Before: before, Limit: int(limit),
		Newest: !q.Has("after") || q.Has("before")}
	out, err := s.page(r.Context(), k.Project, page)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// page reads q and sets the cursor on the side it was read toward when
// the window holds more there: one more index probe of one message.
func (s *Server) page(ctx context.Context, p troupe.ProjectID, q inbox.Page) (Messages, error) {
	ms, err := s.o.Runtime.Conversation(ctx, p, q)
	if err != nil {
		return Messages{}, err
	}
	out := Messages{Messages: ms}
	if out.Messages == nil {
		out.Messages = []troupe.Message{}
	}
	if len(ms) == 0 {
		return out, nil
	}
	// Probed even when the page is short of q.Size(): it may be full in
	// bytes (inbox.MaxPageBytes).
	probe := q
	probe.Limit = 1
	if q.Newest {
		probe.Before = ms[0].ID
	} else {
		probe.After = ms[len(ms)-1].ID
	}
	more, err := s.o.Runtime.Conversation(ctx, p, probe)
	if err != nil || len(more) == 0 {
		return out, err
	}
	if q.Newest {
		out.Before = probe.Before
	} else {
		out.After = probe.After
	}
	return out, nil
}

// MessageText is the answer of GET /api/projects/{id}/messages/{msg}:
// the message with the part of its text that starts at byte Offset (at
// most inbox.MaxTextBytes, whole characters; Message.Size is the whole
// text's length). Next, when set, is the offset of the part that follows.
type MessageText struct {
	Message troupe.Message `json:"message"`
	Offset  int            `json:"offset"`
	Next    int            `json:"next,omitempty"`
}

// messageText serves GET /api/projects/{id}/messages/{msg}?offset=: a
// message of the conversation read whole, a part at a time (a page clips
// long texts at inbox.ClipBytes).
func (s *Server) messageText(w http.ResponseWriter, r *http.Request) {
	id := troupe.ProjectID(r.PathValue("id"))
	if _, ok := s.o.Registry.Get(id); !ok {
		writeError(w, http.StatusNotFound, "not_found", "project "+string(id)+" is not registered: see `troupe project list`")
		return
	}
	rt, ok := s.runtime(w)
	if !ok {
		return
	}
	msg, err1 := strconv.ParseInt(r.PathValue("msg"), 10, 64)
	off, err2 := parseInt(r.URL.Query().Get("offset"))
	if err1 != nil || err2 != nil || off < 0 || off > math.MaxInt32 {
		writeError(w, http.StatusBadRequest, "invalid", "message id and offset: give whole numbers, offset ≥ 0 (0, or the next a part named)")
		return
	}
	m, err := rt.MessageText(r.Context(), id, msg, int(off))
	if err != nil {
		s.fail(w, err)
		return
	}
	out := MessageText{Message: m, Offset: int(off)}
	if end := int(off) + len(m.Text); end < m.Size {
		out.Next = end
	}
	writeJSON(w, http.StatusOK, out)
}

func parseInt(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	return strconv.ParseInt(s, 10, 64)
}
