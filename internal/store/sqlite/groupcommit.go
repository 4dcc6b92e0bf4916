package sqlite

import (
	"context"
	"database/sql"
	"sync"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// appendQueue batches concurrent Appends into one transaction (group
// commit): one fsync for all the messages queued while the previous batch
// committed. It owns no goroutine: the first caller to find no batch in
// flight commits (the leader); when its batch is durable it hands the lead
// to the first caller queued meanwhile. Every caller returns only once its
// own message is durable, or with the error that failed its batch.
type appendQueue struct {
	// mu guards queue and busy.
	mu    sync.Mutex
	queue []*appendReq
	busy  bool // a leader is committing
}

type appendReq struct {
	m     troupe.Message
	key   string        // idempotency key; "" for none
	added bool          // set before done is closed: false when key was taken
	done  chan struct{} // closed when m's batch committed or failed
	lead  chan struct{} // closed when this caller must commit the next batch
	err   error         // set before done is closed
}

// appendDurably stores m with the next batch, under idempotency key (""
// for none), and returns it with its ID; or, when key was taken, the
// message that took it and added == false.
func (db *conn) appendDurably(m troupe.Message, key string) (_ troupe.Message, added bool, _ error) {
	req := &appendReq{m: m, key: key, done: make(chan struct{}), lead: make(chan struct{})}
	q := &db.appends
	q.mu.Lock()
	q.queue = append(q.queue, req)
	leader := !q.busy
	q.busy = true
	q.mu.Unlock()
	if !leader {
		select {
		case <-req.done:
			return req.m, req.added, req.err
		case <-req.lead:
		}
	}
	db.commitBatch()
	<-req.done // its own batch: the one just committed
	return req.m, req.added, req.err
}

// commitBatch commits every queued append in one transaction, then passes
// the lead on, or ends it when nothing is queued.
func (db *conn) commitBatch() {
	q := &db.appends
	q.mu.Lock()
	batch := q.queue
	q.queue = nil
	q.mu.Unlock()
	// Not the leader's context: the batch holds other callers' messages.
	ctx := context.Background()
	err := db.write(ctx, func(tx *sql.Tx) error {
		for _, r := range batch {
			m, added, err := insertOnce(ctx, tx, r.key, r.m)
			if err != nil {
				return err
			}
			r.m, r.added = m, added
		}
		return nil
	})
	for _, r := range batch {
		r.err = err
		close(r.done)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.queue) > 0 {
		close(q.queue[0].lead)
	} else {
		q.busy = false
	}
}
