package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fluss-node/fluss-node/node/replica"
	"github.com/fluss-node/fluss-node/raftmeta"
	"github.com/fluss-node/fluss-node/rpc"
)

// maxRouteAttempts bounds the nodes one data-path request tries: a guess,
// then the leader that guess names, then one more.
const maxRouteAttempts = 3

// forwardTimeout bounds a forwarded request without a deadline.
const forwardTimeout = 30 * time.Second

// route serves a data-path request on the bucket's leader: with local when
// this node holds the leading replica, else forwarded once (call) to the
// node that leads it. A node that receives a forwarded request never
// forwards it again; it answers not-leader with the leader it knows, and
// route follows that hint itself. idempotent says whether a request whose
// outcome is unknown (it may have been proposed, or reached a node that
// died) may be sent again (reads: yes; writes: no — the client retries,
// with its writer id and sequence, after `unavailable`). A write is always
// re-sent when the refusal came before it was proposed.
func (n *Node) route(ctx context.Context, b raftmeta.BucketID, q *bucketReq, call string,
	local func(*replica.Replica) error, remote func(*bucketResp), idempotent bool) error {
	if r := n.replica(b); r != nil && r.IsLeader() { // the common case: no catalog lookup
		if err := n.leaderCutOff(b, call); err != nil {
			return err
		}
		err := local(r)
		var nl *replica.NotLeaderError
		if !idempotent || !errors.As(err, &nl) {
			return err
		}
	}
	a, ok := n.assignment(b)
	if !ok {
		return fmt.Errorf("%w: table %d has no bucket %d", rpc.ErrBucketNotFound, b.TableID, b.Bucket)
	}
	target := n.leaderGuess(b, a)
	tried := make([]raftmeta.NodeID, 0, maxRouteAttempts)
	var lastErr error
	for range maxRouteAttempts {
		if target == 0 {
			target = nextReplica(a, tried)
		}
		if target == 0 {
			break
		}
		tried = append(tried, target)
		if target == n.id {
			r := n.replica(b)
			if r == nil {
				lastErr = n.notOpenErr(b)
				target = 0
				continue
			}
			if !r.IsLeader() {
				lastErr = fmt.Errorf("%w: table %d bucket %d: node %d does not lead it", rpc.ErrNotLeader, b.TableID, b.Bucket, n.id)
				if target = leaderNode(r); target == 0 || slices.Contains(tried, target) {
					break
				}
				continue
			}
			if err := n.leaderCutOff(b, call); err != nil {
				return err
			}
			err := local(r)
			var nl *replica.NotLeaderError
			if idempotent && errors.As(err, &nl) {
				lastErr = err
				target = parseNodeID(string(nl.Leader))
				continue
			}
			return err
		}
		if q.TimeoutMs == 0 {
			q.TimeoutMs = uint64(forwardTimeout.Milliseconds())
			if dl, ok := ctx.Deadline(); ok {
				q.TimeoutMs = uint64(max(1, time.Until(dl).Milliseconds()))
			}
		}
		resp, err := n.callBucket(ctx, target, call, q)
		if err != nil {
			n.forgetLeader(b, target)
			if ctx.Err() != nil {
				return fmt.Errorf("forward to node %d: %w", target, ctx.Err())
			}
			if !idempotent && !notSent(err) {
				return fmt.Errorf("%w: forward to the leader of table %d bucket %d (node %d) failed; the outcome is unknown, retry with the same writer id and sequence: %v",
					rpc.ErrNoBucketLeader, b.TableID, b.Bucket, target, err)
			}
			lastErr = err
			target = 0
			continue
		}
		rerr := decodeError(resp.Code, resp.Msg)
		if errors.Is(rerr, rpc.ErrNotLeader) || (rerr != nil && resp.Leader != 0) {
			lastErr = rerr
			n.forgetLeader(b, target)
			target = raftmeta.NodeID(resp.Leader)
			if !idempotent && !resp.Unsent {
				if target != 0 {
					n.rememberLeader(b, target) // the client's retry goes there
				}
				return rerr
			}
			if target == 0 || slices.Contains(tried, target) {
				break
			}
			continue
		}
		if rerr == nil {
			n.rememberLeader(b, target)
			remote(resp)
		}
		return rerr
	}
	if errors.Is(lastErr, rpc.ErrNoBucketLeader) {
		return lastErr
	}
	return fmt.Errorf("%w: table %d bucket %d: no reachable leader (tried nodes %v): %v", rpc.ErrNoBucketLeader, b.TableID, b.Bucket, tried, lastErr)
}

// nextReplica is the first replica of a not in tried (0 if none).
func nextReplica(a raftmeta.Assignment, tried []raftmeta.NodeID) raftmeta.NodeID {
	for _, id := range a.Replicas {
		if !slices.Contains(tried, id) {
			return id
		}
	}
	return 0
}

func parseNodeID(s string) raftmeta.NodeID {
	v, err := strconv.Atoi(s)
	if err != nil || v <= 0 {
		return 0
	}
	return raftmeta.NodeID(v)
}

// assignment is the catalog's assignment of b.
func (n *Node) assignment(b raftmeta.BucketID) (raftmeta.Assignment, bool) {
	for _, a := range n.meta.AssignmentsForTable(b.TableID) {
		if a.BucketID == b {
			return a, true
		}
	}
	return raftmeta.Assignment{}, false
}

// leaderGuess is where a request for b goes first: the leader a local
// replica knows, else the last leader that answered, else the preferred
// leader (first replica).
func (n *Node) leaderGuess(b raftmeta.BucketID, a raftmeta.Assignment) raftmeta.NodeID {
	if r := n.replica(b); r != nil {
		if id := leaderNode(r); id != 0 {
			return id
		}
	}
	n.leadersMu.Lock()
	id := n.leaders[b]
	n.leadersMu.Unlock()
	if id != 0 && slices.Contains(a.Replicas, id) {
		return id
	}
	if len(a.Replicas) > 0 {
		return a.Replicas[0]
	}
	return 0
}

func (n *Node) rememberLeader(b raftmeta.BucketID, id raftmeta.NodeID) {
	n.leadersMu.Lock()
	n.leaders[b] = id
	n.leadersMu.Unlock()
}

func (n *Node) forgetLeader(b raftmeta.BucketID, id raftmeta.NodeID) {
	n.leadersMu.Lock()
	if n.leaders[b] == id {
		delete(n.leaders, b)
	}
	n.leadersMu.Unlock()
}

// leaderCutOff refuses a write or a lookup on a bucket this node leads
// while it cannot reach the nodes of a quorum of the bucket's replicas: it
// could not commit the write nor confirm its leadership for the lookup, so
// the request would wait for its deadline, or for the leader's lease to run
// out (up to 18 heartbeat timeouts: docs/ARCHITECTURE.md, Cluster), while
// the quorum has elected another leader. It is answered `unavailable`
// at once instead, before anything is proposed (safe to retry), and a
// routing client goes elsewhere; so is a request another node forwarded.
// Fetches and offsets are still served from the local log: what it holds
// is committed, if possibly behind. It costs one atomic load while every
// peer answers.
func (n *Node) leaderCutOff(b raftmeta.BucketID, call string) error {
	if n.live == nil || !n.live.anyDead() {
		return nil
	}
	switch call {
	case callBucketWrite, callBucketPKWrite, callBucketLookup, callBucketPrefix:
	default:
		return nil
	}
	a, ok := n.assignment(b)
	if !ok {
		return nil
	}
	reached := 0
	for _, id := range a.Replicas {
		if id == n.id {
			reached++
		} else if addr, ok := n.nodePeerAddr(id); ok && n.live.Alive(raft.ServerAddress(addr)) {
			reached++
		}
	}
	if reached > len(a.Replicas)/2 {
		return nil
	}
	return fmt.Errorf("%w: table %d bucket %d: this node leads it but reaches the nodes of only %d of its %d replicas, too few to commit or confirm anything (cut off from them, or they are down); retry through another node",
		rpc.ErrNoBucketLeader, b.TableID, b.Bucket, reached, len(a.Replicas))
}

// nodePeerAddr is a node's peer address from the catalog.
func (n *Node) nodePeerAddr(id raftmeta.NodeID) (string, bool) {
	m, err := n.meta.Node(id)
	if err != nil || m.PeerAddr == "" {
		return "", false
	}
	return m.PeerAddr, true
}

// callBucket sends a forwarded request to node id.
func (n *Node) callBucket(ctx context.Context, id raftmeta.NodeID, call string, q *bucketReq) (*bucketResp, error) {
	addr, ok := n.nodePeerAddr(id)
	if !ok {
		return nil, fmt.Errorf("node %d has no known peer address", id)
	}
	if n.live != nil {
		if !n.live.Alive(raft.ServerAddress(addr)) {
			// Its bucket groups elect new leaders; the caller tries
			// another replica, or answers `unavailable` at once, rather
			// than wait for a watch to give this call up.
			return nil, fmt.Errorf("node %d (%s) %w", id, addr, errPeerDead)
		}
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		defer cancel(nil)
		defer n.live.watchGone(raft.ServerAddress(addr), cancel)()
	}
	b, err := n.peers.Call(ctx, addr, call, appendBucketReq(nil, q))
	if err != nil {
		if errors.Is(context.Cause(ctx), errPeerGone) {
			return nil, fmt.Errorf("node %d (%s) %w", id, addr, errPeerGone)
		}
		return nil, err
	}
	return decodeBucketResp(b)
}

// handleBucket serves a forwarded data-path request on this node's own
// replica, never forwarding it again (the hop limit is one).
func (n *Node) handleBucket(call string) func(context.Context, []byte) ([]byte, error) {
	return func(ctx context.Context, req []byte) ([]byte, error) {
		q, err := decodeBucketReq(req)
		if err != nil {
			return nil, err
		}
		timeout := forwardTimeout
		if q.TimeoutMs > 0 {
			timeout = min(time.Duration(q.TimeoutMs)*time.Millisecond, 2*forwardTimeout)
		}
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		var p bucketResp
		var r *replica.Replica
		if n.metaOpen() {
			r = n.replica(q.Bucket)
		}
		switch {
		case r == nil:
			err = fmt.Errorf("%w: node %d holds no open replica of table %d bucket %d", rpc.ErrNoBucketLeader, n.nodeID(), q.Bucket.TableID, q.Bucket.Bucket)
			p.Unsent = true
		case !r.IsLeader():
			p.Leader = int32(leaderNode(r))
			p.Unsent = true
			if p.Leader == 0 {
				err = fmt.Errorf("%w: table %d bucket %d is electing a leader; retry", rpc.ErrNoBucketLeader, q.Bucket.TableID, q.Bucket.Bucket)
			} else {
				err = fmt.Errorf("%w: table %d bucket %d is led by node %d", rpc.ErrNotLeader, q.Bucket.TableID, q.Bucket.Bucket, p.Leader)
			}
		default:
			if err = n.leaderCutOff(q.Bucket, call); err != nil {
				p.Unsent = true
				break
			}
			switch call {
			case callBucketWrite:
				// The request buffer is the transport's: the replica keeps
				// the batches, so they get their own memory.
				batches := make([][]byte, len(q.Batches))
				for i, b := range q.Batches {
					batches[i] = append([]byte(nil), b...)
				}
				p.BaseOffset, p.Count, err = r.Append(ctx, batches, q.WriterID, q.Seq)
			case callBucketFetch:
				p.Batches, p.HighWatermark, p.LogStartOffset, err = n.fetchLeader(ctx, q.Bucket, r, q.Offset, int(q.MaxBytes), time.Duration(q.MaxWaitMs)*time.Millisecond)
			case callBucketOff:
				p.Offset, err = n.listOffsetLeader(q.Bucket, r, rpc.OffsetSpec(q.Spec), q.TsMs)
			default:
				err = n.servePK(ctx, call, r, q, &p)
			}
			if err != nil {
				var nl *replica.NotLeaderError
				if errors.As(err, &nl) {
					p.Leader = int32(parseNodeID(string(nl.Leader)))
				}
				err = replicaError(err)
			}
		}
		p.Code, p.Msg = errorCode(err), errString(err)
		if err != nil {
			p.Batches = nil
		}
		return appendBucketResp(nil, &p), nil
	}
}

// listOffsetLocal answers ListOffset on the leading replica, once it serves
// reads: a leader elected after a restart has not applied its log until
// its barrier commits, and its high watermark would go backwards.
func listOffsetLocal(r *replica.Replica, spec rpc.OffsetSpec, tsMs int64) (int64, error) {
	if err := r.ServingReads(); err != nil {
		return 0, err
	}
	switch spec {
	case rpc.OffsetEarliest:
		return r.LogStartOffset(), nil
	case rpc.OffsetLatest:
		return r.HighWatermark(), nil
	default:
		return r.OffsetForTimestamp(tsMs), nil
	}
}

// handleNodeStats reports this node's replicas and the leader each knows,
// and their replication health when asked (statsWithReplication).
func (n *Node) handleNodeStats(_ context.Context, req []byte) ([]byte, error) {
	replication := len(req) == 1 && req[0] == statsWithReplication
	return appendNodeStats(nil, n.localStats(replication)), nil
}

// localStats is this node's stats, with its replication health when
// replication is set.
func (n *Node) localStats(replication bool) *nodeStats {
	s := &nodeStats{}
	n.mu.Lock()
	for id, r := range n.replicas {
		s.Replicas++
		l := leaderNode(r)
		if l == n.id {
			s.Leaders++
		}
		s.Buckets = append(s.Buckets, bucketLeader{Bucket: id, Leader: l})
	}
	n.mu.Unlock()
	if replication {
		n.replicationOf(s) // takes n.mu itself
	}
	return s
}

// statsOf asks the given nodes (in parallel, briefly) for their stats,
// with their replication health when replication is set; a node that does
// not answer within a second is missing from the result, and so is one the
// failure detection counts dead, without the wait (one whose binary
// predates the replication section answers without it).
func (n *Node) statsOf(ctx context.Context, ids []raftmeta.NodeID, replication bool) map[raftmeta.NodeID]*nodeStats {
	var req []byte
	if replication {
		req = []byte{statsWithReplication}
	}
	out := make(map[raftmeta.NodeID]*nodeStats, len(ids))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, id := range ids {
		if id == n.id {
			s := n.localStats(replication)
			mu.Lock()
			out[id] = s
			mu.Unlock()
			continue
		}
		addr, ok := n.nodePeerAddr(id)
		if !ok || n.live != nil && n.live.knownDead(raft.ServerAddress(addr)) {
			continue
		}
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			b, err := n.peers.Call(cctx, addr, callNodeStats, req)
			if err != nil {
				return
			}
			s, err := decodeNodeStats(b)
			if err != nil {
				return
			}
			mu.Lock()
			out[id] = s
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// notOpenErr is the error for a request to a replica of b this node has
// not opened: still opening, or failing to open (and why).
func (n *Node) notOpenErr(b raftmeta.BucketID) error {
	n.mu.Lock()
	err := n.openErrs[b]
	n.mu.Unlock()
	if err != nil {
		return fmt.Errorf("%w: table %d bucket %d cannot be opened on node %d (retried every %v; see its log): %v", rpc.ErrNoBucketLeader, b.TableID, b.Bucket, n.id, reconcileInterval, err)
	}
	return fmt.Errorf("%w: table %d bucket %d is still opening on node %d", rpc.ErrNoBucketLeader, b.TableID, b.Bucket, n.id)
}
