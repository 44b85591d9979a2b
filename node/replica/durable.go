package replica

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/fluss-node/fluss-node/logstore"
	"github.com/fluss-node/fluss-node/raftmeta"
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

// Parallel leader syncs for a group of several voters (the Raft thesis,
// §10.2.1: the leader may write its log in parallel with replicating it).
//
// hashicorp/raft stores a leader's new entries (StoreLogs, which syncs)
// before it hands them to the replication goroutines, so a write waits
// for the leader's sync and then for a follower's, one after the other.
// With leaderDefers the leader's StoreLogs returns once the entries are
// written, their sync runs in the node's Syncer while the followers
// store and sync their copies, and a write waits for the slower of the
// two. Raft counts the leader's stored entry toward the quorum at once,
// so an index can count as committed while the leader's copy is not yet
// durable. Nothing may act on that until it is: an entry counted
// committed by the leader and one follower is then durable on those two
// (a follower acknowledges only what it holds durably), a majority of
// three. Three rules keep it so:
//
//   - the FSM applies nothing before the log holds it durably (the same
//     wait as a sole voter's; writes are acknowledged and reads served
//     only from applied entries);
//   - the commit index the leader sends its followers stays below the
//     first entry whose sync is pending (durableTransport), so no
//     follower applies an entry the leader could still lose;
//   - a server acknowledges appended entries only once none of them
//     waits for a deferred sync (ackSynced, checked by the transport
//     before it answers): a leader that stepped down may still be syncing
//     entries that the next leader's AppendEntries finds already stored.
//
// Configuration entries are always synced before StoreLogs returns, so a
// membership change counts as committed only once the leader holds it.
// Only groups whose transport runs that last check (rpc/peer) defer.

// leaderDefers returns the deferral rule of a group led through rf: defer
// the sync of a leader's entries unless they change the configuration.
// StoreLogs runs on raft's main goroutine, the one that changes its state,
// so the state read here is the one the entries are stored under.
func leaderDefers(rf *raft.Raft) func(logs []*raft.Log) bool {
	return func(logs []*raft.Log) bool {
		if rf.State() != raft.Leader {
			return false
		}
		for _, e := range logs {
			if e.Type == raft.LogConfiguration {
				return false
			}
		}
		return true
	}
}

// appendAckGater is a transport that checks each successful AppendEntries
// answer before it sends it (rpc/peer.Transport.GateAppendAck).
type appendAckGater interface {
	GateAppendAck(check func(req *raft.AppendEntriesRequest) error)
}

// writesGater is a transport that can refuse incoming requests that
// would store new data before raft sees them (rpc/peer.Transport.GateWrites).
type writesGater interface {
	GateWrites(admit func() error)
}

// admitWrites is the check a replica gives its transport's GateWrites:
// while space says no, the follower refuses new data.
func admitWrites(id raftmeta.BucketID, space func() error) func() error {
	return func() error {
		if err := space(); err != nil {
			return fmt.Errorf("replica of %v refuses new data: %w", id, err)
		}
		return nil
	}
}

// ackSynced is the check a replica gives its transport's GateAppendAck:
// an answer that acknowledges entries waits until none of them waits for
// a deferred sync.
func ackSynced(log dataLog) func(req *raft.AppendEntriesRequest) error {
	return func(req *raft.AppendEntriesRequest) error {
		n := len(req.Entries)
		if n == 0 {
			return nil // acknowledges no entry: raft's leader counts none
		}
		if err := log.WaitSynced(req.Entries[n-1].Index); err != nil {
			return fmt.Errorf("bucket log not durable, not acknowledging: %w", err)
		}
		return nil
	}
}

// soleVoter reports whether id is the only server of c and a voter.
func soleVoter(c raft.Configuration, id raft.ServerID) bool {
	return len(c.Servers) == 1 && c.Servers[0].ID == id && c.Servers[0].Suffrage == raft.Voter
}

// durableTransport is the group's raft.Transport: before the first message
// to another server it ends deferred syncs (end), and it holds the commit
// index of every AppendEntries below the log's first pending sync
// (pending). Everything else passes through.
type durableTransport struct {
	raft.Transport
	once    sync.Once
	end     func() error
	err     error
	pending func() uint64 // the log's PendingSync; nil: nothing is held back
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

// holdCommit lowers args' commit index below the first entry whose
// deferred sync is pending. raft builds every request afresh and reads
// nothing but its entries back, so it is changed in place.
func (t *durableTransport) holdCommit(args *raft.AppendEntriesRequest) {
	if t.pending == nil {
		return
	}
	if p := t.pending(); p != 0 && args.LeaderCommitIndex >= p {
		args.LeaderCommitIndex = p - 1
	}
}

func (t *durableTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	if err := t.before(); err != nil {
		return nil, err
	}
	p, err := t.Transport.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	return &durablePipeline{AppendPipeline: p, t: t}, nil
}

func (t *durableTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	if err := t.before(); err != nil {
		return err
	}
	t.holdCommit(args)
	return t.Transport.AppendEntries(id, target, args, resp)
}

// durablePipeline holds the commit index of pipelined AppendEntries as
// durableTransport does.
type durablePipeline struct {
	raft.AppendPipeline
	t *durableTransport
}

func (p *durablePipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	p.t.holdCommit(args)
	return p.AppendPipeline.AppendEntries(args, resp)
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
