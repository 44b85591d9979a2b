package node

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fluss-node/fluss-node/logstore"
	"github.com/fluss-node/fluss-node/raftmeta"
	"github.com/fluss-node/fluss-node/rpc"
)

// Damaged replicas of replicated buckets (docs/ARCHITECTURE.md "Damaged
// replicas"). A replica whose log does not open because the disk changed
// it (logstore.CorruptionError: damaged, not torn) may have lost entries
// it acknowledged, and it must never vote again with that log: raft counts
// on every voter keeping what it acknowledged, so a voter with a hole
// (damaged, or truncated to get past the damage) could help elect a leader
// that lacks a committed entry. When the bucket's group has at least three
// voters, the node asks the group's leader to remove its replica from the
// group (bucket.reset; the other voters are a majority and commit the
// change), and once that is done renames the damaged directory aside
// (<bucket dir>.damaged-<unix seconds>, kept for the operator). The
// bucket is still assigned here, so the leader adds the replica back as
// a non-voter, as it adds a moved one; this node opens it empty without
// bootstrapping (a set-aside directory says it is no first replica), it
// copies the log from the leader and is promoted to voter once caught up.
// A bucket of one or two replicas cannot spare one: its damaged replica
// stays unopened and the node answers the bucket's requests with the
// reason, for the operator to restore or truncate.

// callBucketReset asks a bucket's leader to remove a node's damaged
// replica from the group. The request is the bucket id and the node id;
// the answer is empty.
const callBucketReset = "bucket.reset"

const damagedSuffix = ".damaged-"

// setAsideDamaged handles a failed open of this node's replica of a: when
// err says the log is damaged and the group can spare the replica, it has
// the leader remove it from the group and renames the directory aside. It
// reports whether it did; a next reconcile opens the replica empty.
func (n *Node) setAsideDamaged(a raftmeta.Assignment, err error) bool {
	var ce *logstore.CorruptionError
	if !errors.As(err, &ce) || !slices.Contains(a.Replicas, n.id) || len(a.Replicas) < 3 {
		return false
	}
	log := n.logger.With("table", a.TableID, "partition", a.PartitionID, "bucket", a.Bucket)
	qctx, qcancel := ctxOf(n.quit)
	defer qcancel()
	ctx, cancel := context.WithTimeout(qctx, 2*memberChangeTimeout)
	defer cancel()
	if rerr := n.resetAtLeader(ctx, a); rerr != nil {
		log.Warn("bucket replica damaged; its removal from the group failed, trying again later", "damage", err, "err", rerr)
		return false
	}
	aside := n.bucketDir(a.BucketID) + damagedSuffix + strconv.FormatInt(time.Now().Unix(), 10)
	// Durably: a rename a crash undid would bring the damaged log back.
	if rerr := renameSync(n.bucketDir(a.BucketID), aside); rerr != nil {
		log.Error("set a damaged bucket replica aside", "err", rerr)
		return false
	}
	log.Error("bucket replica damaged: removed from its group and set aside; it rejoins empty and copies the log from the leader",
		"kept_in", aside, "damage", err)
	return true
}

// wasReset reports whether a replica of b was set aside here, as damaged
// or by recovery (recover.go): a replica opened afterwards is no first
// replica and must not bootstrap.
func (n *Node) wasReset(b raftmeta.BucketID) bool {
	for _, suffix := range []string{damagedSuffix, setAsideSuffix} {
		if m, _ := filepath.Glob(n.bucketDir(b) + suffix + "*"); len(m) > 0 {
			return true
		}
	}
	return false
}

// resetAtLeader asks the leader of a's bucket, found through the other
// replicas' nodes, to remove this node's replica from the group.
func (n *Node) resetAtLeader(ctx context.Context, a raftmeta.Assignment) error {
	var others []raftmeta.NodeID
	for _, id := range a.Replicas {
		if id != n.id {
			others = append(others, id)
		}
	}
	var leader raftmeta.NodeID
	for _, s := range n.statsOf(ctx, others, false) {
		for _, b := range s.Buckets {
			if b.Bucket == a.BucketID && b.Leader != 0 && b.Leader != n.id {
				leader = b.Leader
			}
		}
	}
	addr, ok := n.nodePeerAddr(leader)
	if !ok {
		return fmt.Errorf("%w: %v: none of nodes %v knows a leader", rpc.ErrNoBucketLeader, a.BucketID, others)
	}
	if _, err := n.peers.Call(ctx, addr, callBucketReset, appendResetReq(nil, a.BucketID, n.id)); err != nil {
		return fmt.Errorf("%v: leader node %d: %w", a.BucketID, leader, err)
	}
	return nil
}

func appendResetReq(dst []byte, b raftmeta.BucketID, node raftmeta.NodeID) []byte {
	return appendVarint(appendBucketID(dst, b), int64(node))
}

func decodeResetReq(req []byte) (raftmeta.BucketID, raftmeta.NodeID, error) {
	rd := &reader{b: req}
	b := rd.bucketID()
	node := raftmeta.NodeID(rd.int32("node"))
	return b, node, rd.done()
}

// handleBucketReset answers bucket.reset on the bucket's leader: it removes
// the asking node's replica from the group if the group has at least three
// voters (the others are a majority and commit the change without it).
// Not in the group (removed already) is success.
func (n *Node) handleBucketReset(_ context.Context, req []byte) ([]byte, error) {
	b, node, err := decodeResetReq(req)
	if err != nil {
		return nil, err
	}
	r := n.replica(b)
	if r == nil || !r.IsLeader() {
		return nil, fmt.Errorf("%w: %v is not led by node %d", rpc.ErrNotLeader, b, n.id)
	}
	if node == n.id {
		return nil, fmt.Errorf("%w: node %d cannot reset the replica that leads %v", raftmeta.ErrInvalid, node, b)
	}
	f := r.Raft().GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, err
	}
	voters, member := 0, false
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			voters++
		}
		member = member || serverNode(s.ID) == node
	}
	if !member {
		return nil, nil
	}
	if voters < 3 {
		return nil, fmt.Errorf("%w: %v has %d voters: the group cannot spare node %d's replica", raftmeta.ErrInvalid, b, voters, node)
	}
	if err := r.Raft().RemoveServer(nodeServer(node), 0, memberChangeTimeout).Error(); err != nil {
		return nil, fmt.Errorf("%v: remove node %d's damaged replica: %w", b, node, err)
	}
	n.logger.Warn("damaged replica removed from the bucket group; it rejoins as a new replica",
		"table", b.TableID, "partition", b.PartitionID, "bucket", b.Bucket, "node", int32(node))
	return nil, nil
}
