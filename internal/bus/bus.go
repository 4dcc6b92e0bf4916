// Package bus is troupe's one home for NATS: the embedded server the daemon
// runs for its runners (JetStream on, every write fsync'd, auth on, TLS
// outside loopback), the runners' accounts, their credentials files, the
// runner side's connection, the subjects and the durable stream of each
// runner; and, instead of the embedded server, the daemon's link to an
// existing NATS cluster (External: serve --nats).
//
// Security boundary, embedded server: each runner has a NATS account of
// its own, joined to the daemon's (global) account by two services:
// FromRunner(name)".>" into the daemon's, ToRunner(name)".>" into the
// runner's. In its account, a runner's user may publish only on
// FromRunner(name)".>", subscribe only to ToRunner(name)".>" and its own
// inbox prefix Inbox(name)".>", and answer each request it receives once.
// It has no JetStream API rights: it publishes durably by a request to
// Durable(name)".<...>", which the stream of EnsureStream captures and
// acknowledges on the runner's own inbox. Accounts, not permissions alone,
// are what stop a forged reply subject: the server lets a client name any
// subject as the reply of what it publishes, and the answer (the daemon's,
// or the stream's acknowledgement) goes back through the service into the
// runner's own account, where nobody else listens; the daemon sees the
// server's "_R_." reply subjects only. The daemon's own connection
// (Server.Conn) is in-process only and has every right.
//
// Security boundary, existing cluster (External): the daemon and its
// runners share one account, which the cluster's admin gives troupe; each
// runner's user (AddRunner mints it with the account's signing key) has
// the same permissions as above (RunnerPermissions), so a runner can only
// speak on its own subjects and hear its own. A reply subject is no
// longer kept in the runner's account, so the daemon answers a request
// only when its reply subject is under the runner's own Inbox(name)
// (internal/remote checks it where every request enters). The stream's
// acknowledgement of a durable publish also goes to the reply subject the
// runner names, and that one nobody checks: a runner can make the stream
// send an acknowledgement of its own message ({"stream","seq"}, nothing
// else) to another runner's inbox. It is harmless: an inbox's subjects
// carry a random token per connection that only its subscriber sees, a
// message on an unknown one is dropped by nats.go, and the forger chooses
// neither the acknowledgement's stream nor its content. Revocation: the
// daemon cannot revoke a user on a cluster it does not run, so it keeps a
// registry (<state>/nats/external-runners.json) and ignores every message
// of a revoked runner; the users it mints expire after RunnerExpiry.
//
// Concurrency: a Server is safe for concurrent use; AddRunner and
// RevokeRunner are serialized by its mutex. Dial's connection is nats.go's,
// safe for concurrent use; its reconnect loop belongs to that connection and
// ends when it is closed.
//
// External's connection and registry are safe for concurrent use too.
//
// Who may import: the daemon's wiring and internal/remote (the protocol on
// top). Only this package imports nats-server; only it and internal/remote
// import nats.go.
package bus

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// namePattern is what a runner's name may be: it is a subject token, a user
// name and part of a stream name, so nothing else is allowed.
var namePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)

// MaxPayload bounds one message on the bus (the server's max_payload):
// an MCP request of 8 MB with its envelope fits.
const MaxPayload = 16 << 20

// CheckName says whether name can name a runner.
func CheckName(name string) error {
	if !namePattern.MatchString(name) {
		return fmt.Errorf("runner name %q: use 1 to 32 characters, lower-case letters, digits and '-', starting with a letter or digit", name)
	}
	return nil
}

// ToRunner is the subject prefix of what the daemon sends runner name; the
// runner subscribes ToRunner(name)+".>".
func ToRunner(name string) string { return "troupe.r." + name }

// FromRunner is the subject prefix of what runner name sends the daemon; it
// may publish on FromRunner(name)+".>" and nowhere else.
func FromRunner(name string) string { return "troupe.d." + name }

// Inbox is runner name's own inbox prefix (its replies arrive on
// Inbox(name)+".<random>"); Dial sets it.
func Inbox(name string) string { return "_INBOX_R." + name }

// Durable is the subject prefix runner name publishes on durably: what it
// sends there lands in the stream of EnsureStream, and the publish, sent as
// a request, is answered with the stream's acknowledgement.
func Durable(name string) string { return FromRunner(name) + ".durable" }

// StreamName is the name of runner name's durable stream.
func StreamName(name string) string { return "troupe-d-" + name }

// DuplicateWindow is how long the stream of EnsureStream remembers a
// Nats-Msg-Id (a runner's idempotency key): a message published again with
// the same id within it is acknowledged as a duplicate and not stored again.
// A runner that retries later than that is caught by the daemon's own
// idempotency keys (the inbox's), not by the stream.
const DuplicateWindow = 24 * time.Hour

// EnsureStream creates, or updates to this configuration, the daemon's
// durable stream of runner name: subjects Durable(name)+".>", file storage,
// replicas copies (1 on the embedded server; 3 on a cluster of three
// servers or more, so that the stream outlives one server's loss; 0 is 1),
// work-queue retention (a message is gone once the daemon's
// consumer acknowledges it), at most maxBytes kept (JetStream reserves
// that much of the account's storage per replica). A full stream refuses
// new messages (DiscardNew): the runner's publish fails and it retries
// later; nothing it had is dropped.
func EnsureStream(ctx context.Context, js jetstream.JetStream, name string, maxBytes int64, replicas int) (jetstream.Stream, error) {
	if err := CheckName(name); err != nil {
		return nil, fmt.Errorf("ensure stream: %w", err)
	}
	if maxBytes <= 0 {
		return nil, fmt.Errorf("ensure stream of runner %s: maxBytes %d: give a positive bound", name, maxBytes)
	}
	cfg := jetstream.StreamConfig{
		Name:        StreamName(name),
		Description: "troupe: durable messages of runner " + name,
		Subjects:    []string{Durable(name) + ".>"},
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    max(replicas, 1),
		MaxBytes:    maxBytes,
		Discard:     jetstream.DiscardNew,
		Duplicates:  DuplicateWindow,
	}
	st, err := js.CreateOrUpdateStream(ctx, cfg)
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == 10047 {
		return nil, fmt.Errorf("ensure stream of runner %s: %w: each runner's stream reserves %d bytes per replica (%d): raise the JetStream disk storage of the account (or of the servers)", name, err, maxBytes, cfg.Replicas)
	}
	if err != nil {
		return nil, fmt.Errorf("ensure stream of runner %s: %w", name, err)
	}
	return st, nil
}

// TooFewPeers reports whether err is JetStream refusing a stream's
// replicas for want of servers (no suitable peers, insufficient
// resources, or no cluster at all): the stream can be made with fewer.
func TooFewPeers(err error) bool {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	switch apiErr.ErrorCode {
	case 10005, 10023, 10074: // JSClusterNoPeersErrF, JSInsufficientResourcesErr, JSStreamReplicasNotSupportedErr
		return true
	}
	return false
}
