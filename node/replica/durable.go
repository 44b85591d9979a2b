package replica

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/fluss-node/fluss-node/logstore"
)

// Deferred syncs for a group of one voter (logstore.Log.SetDeferSync).
//
// hashicorp/raft stores the leader's entries on its leader loop, so with
// syncs in StoreLogs a bucket's group makes one entry per sync round and
// waits out most of a round more whenever the node's Syncer is busy with
// other buckets' files. A group whose only voter is this replica does not
// need its entries durable when they are stored, only before anything acts
// on them: the FSM applies an entry (acknowledging the write, moving the
// high watermark, changing the KV state) only once the log reports it
// durable. So the leader loop stores the next entry while the Syncer
// flushes the last one.
//
// The moment another server could count this log toward a quorum, that
// shortcut would be unsafe: raft takes a stored entry as this server's
// vote for committing it. Every message the group sends to another server
// (entries, votes, snapshots, TimeoutNow) goes through durableTransport,
// whose first one turns deferral off, which makes the log durable, before
// it goes out; from then on every StoreLogs syncs before it returns again,
// as in a group of several voters. Deferral is turned on only when the
// replica opens as the sole voter of its group.

// soleVoter reports whether id is the only server of c and a voter.
func soleVoter(c raft.Configuration, id raft.ServerID) bool {
	return len(c.Servers) == 1 && c.Servers[0].ID == id && c.Servers[0].Suffrage == raft.Voter
}

// durableTransport is the group's raft.Transport: before the first message
// to another server it ends deferred syncs (end). Everything else passes
// through.
type durableTransport struct {
	raft.Transport
	once sync.Once
	end  func() error
	err  error
	// send, when set, sends snapshots (Replica.sendSnapshot: with the
	// log section).
	send func(tr raft.Transport, id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error
}

// wrapTransport returns t wrapped; end is called once before the first
// outbound message. t must support pre-vote (raft.WithPreVote), as the
// node's and the in-memory transports do; others are returned unwrapped
// with ok false, and their replicas never defer.
func wrapTransport(t raft.Transport, end func() error) (raft.Transport, bool) {
	if _, ok := t.(raft.WithPreVote); !ok {
		return t, false
	}
	return &durableTransport{Transport: t, end: end}, true
}

func (t *durableTransport) before() error {
	t.once.Do(func() { t.err = t.end() })
	if t.err != nil {
		return fmt.Errorf("bucket log not durable, not sending: %w", t.err)
	}
	return nil
}

func (t *durableTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	if err := t.before(); err != nil {
		return nil, err
	}
	return t.Transport.AppendEntriesPipeline(id, target)
}

func (t *durableTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	if err := t.before(); err != nil {
		return err
	}
	return t.Transport.AppendEntries(id, target, args, resp)
}

func (t *durableTransport) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	if err := t.before(); err != nil {
		return err
	}
	return t.Transport.RequestVote(id, target, args, resp)
}

func (t *durableTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	if err := t.before(); err != nil {
		return err
	}
	return t.Transport.(raft.WithPreVote).RequestPreVote(id, target, args, resp)
}

func (t *durableTransport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	if err := t.before(); err != nil {
		return err
	}
	if t.send != nil {
		return t.send(t.Transport, id, target, args, resp, data)
	}
	return t.Transport.InstallSnapshot(id, target, args, resp, data)
}

func (t *durableTransport) TimeoutNow(id raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	if err := t.before(); err != nil {
		return err
	}
	return t.Transport.TimeoutNow(id, target, args, resp)
}

// Close closes the wrapped transport when it can be closed: raft closes
// its transport on shutdown (raft.WithClose).
func (t *durableTransport) Close() error {
	if c, ok := t.Transport.(raft.WithClose); ok {
		return c.Close()
	}
	return nil
}

// waitDurable blocks until the log holds the entries up to index durably.
// A failed sync is fatal: the entry may be gone after a crash, and
// applying it anyway could show a write that is later lost.
func waitDurable(log dataLog, index uint64) error {
	err := log.WaitDurable(index)
	if err == nil || errors.Is(err, logstore.ErrClosed) {
		return err
	}
	panic(fmt.Sprintf("replica FSM: raft index %d never became durable (%v); refusing to apply it", index, err))
}
