package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fluss-node/fluss-node/node/replica"
	"github.com/fluss-node/fluss-node/raftmeta"
	"github.com/fluss-node/fluss-node/rpc"
)

var _ rpc.Backend = (*Node)(nil)

// splitTableName splits "db.table".
func splitTableName(name string) (db, table string, err error) {
	db, table, ok := strings.Cut(name, ".")
	if !ok || db == "" || table == "" {
		return "", "", fmt.Errorf("%w: table name %q must be \"database.table\"", raftmeta.ErrInvalid, name)
	}
	return db, table, nil
}

// metaLeaderWait bounds how long a catalog write waits for a metadata
// leader (right after start-up, or during an election) before it answers
// unavailable.
const metaLeaderWait = 5 * time.Second

// awaitCatalog waits (up to metaLeaderWait) until this node's registration
// is applied, so that its copy of the catalog is current after a restart.
func (n *Node) awaitCatalog(ctx context.Context) {
	select {
	case <-n.registered:
		return
	default:
	}
	wctx, cancel := context.WithTimeout(ctx, metaLeaderWait)
	defer cancel()
	select {
	case <-n.registered:
	case <-wctx.Done():
	}
}

// awaitMetaLeader waits until a metadata leader is known and this node is
// registered in the catalog (so its copy of the catalog is current), or
// metaLeaderWait passes; the call that follows reports the outcome either
// way. Once registered it costs one channel receive.
func (n *Node) awaitMetaLeader(ctx context.Context) {
	wctx, cancel := context.WithTimeout(ctx, metaLeaderWait)
	defer cancel()
	select {
	case <-n.registered:
	case <-wctx.Done():
	}
	if id, _ := n.meta.Leader(); id == 0 {
		n.meta.WaitForLeader(wctx)
	}
}

func (n *Node) CreateDatabase(ctx context.Context, name, comment string, ignoreIfExists bool) error {
	n.awaitMetaLeader(ctx)
	return n.meta.CreateDatabase(ctx, name, comment, ignoreIfExists)
}

func (n *Node) DropDatabase(ctx context.Context, name string, ignoreIfNotExists, cascade bool) error {
	n.awaitMetaLeader(ctx)
	return n.meta.DropDatabase(ctx, name, ignoreIfNotExists, cascade)
}

func (n *Node) ListDatabases(ctx context.Context) ([]string, error) {
	n.awaitCatalog(ctx)
	dbs := n.meta.Databases()
	names := make([]string, len(dbs))
	for i, d := range dbs {
		names[i] = d.Name
	}
	slices.Sort(names)
	return names, nil
}

// CreateTable creates the table and then waits (up to createWait) until
// this node's replicas of it are open with a leader, so that a client's
// first write does not meet an election.
func (n *Node) CreateTable(ctx context.Context, spec raftmeta.TableSpec, ignoreIfExists bool) (int64, error) {
	n.awaitMetaLeader(ctx)
	id, err := n.meta.CreateTable(ctx, spec, ignoreIfExists)
	if err != nil {
		return 0, err
	}
	wctx, cancel := context.WithTimeout(ctx, createWait)
	defer cancel()
	n.waitTableLeaders(wctx, id)
	return id, nil
}

// createWait bounds how long CreateTable waits for bucket leaders.
const createWait = 10 * time.Second

// waitTableLeaders waits until every bucket of the table assigned to this
// node has an open replica with a known leader, or ctx ends.
func (n *Node) waitTableLeaders(ctx context.Context, tableID int64) {
	for {
		ready := true
		for _, a := range n.meta.AssignmentsForTable(tableID) {
			if !slices.Contains(a.Replicas, n.id) {
				continue
			}
			if r := n.replica(a.BucketID); r == nil || r.WaitLeader(ctx) != nil {
				ready = false
				break
			}
		}
		if ready {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (n *Node) Table(ctx context.Context, name string) (*raftmeta.Table, error) {
	n.awaitCatalog(ctx)
	db, t, err := splitTableName(name)
	if err != nil {
		return nil, err
	}
	return n.meta.TableByName(db, t)
}

func (n *Node) ListTables(ctx context.Context, database string) ([]string, error) {
	n.awaitCatalog(ctx)
	tables, err := n.meta.Tables(database)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(tables))
	for i, t := range tables {
		names[i] = t.Name
	}
	slices.Sort(names)
	return names, nil
}

func (n *Node) DropTable(ctx context.Context, name string, ignoreIfNotExists bool) error {
	db, t, err := splitTableName(name)
	if err != nil {
		return err
	}
	n.awaitMetaLeader(ctx)
	return n.meta.DropTable(ctx, db, t, ignoreIfNotExists)
}

func (n *Node) Layout(ctx context.Context, tableID int64) ([]rpc.BucketLayout, error) {
	n.awaitCatalog(ctx)
	var out []rpc.BucketLayout
	for _, a := range n.meta.AssignmentsForTable(tableID) {
		l := rpc.BucketLayout{PartitionID: a.PartitionID, Bucket: a.Bucket, Replicas: a.Replicas}
		if r := n.replica(a.BucketID); r != nil {
			l.Leader = leaderNode(r)
		}
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b rpc.BucketLayout) int {
		if a.PartitionID != b.PartitionID {
			return int(a.PartitionID - b.PartitionID)
		}
		return int(a.Bucket - b.Bucket)
	})
	return out, nil
}

// leaderNode is the node id of a replica's current Raft leader, 0 if none.
func leaderNode(r *replica.Replica) raftmeta.NodeID {
	id, err := strconv.Atoi(string(r.Leader()))
	if err != nil {
		return 0
	}
	return raftmeta.NodeID(id)
}

func (n *Node) DescribeCluster(ctx context.Context) (*rpc.ClusterInfo, error) {
	n.awaitCatalog(ctx)
	info := &rpc.ClusterInfo{ClusterID: n.meta.ClusterID()}
	leaderID, _ := n.meta.Leader()
	info.MetaLeader = leaderID
	var replicas, leaders int32
	n.mu.Lock()
	for _, r := range n.replicas {
		replicas++
		if r.IsLeader() {
			leaders++
		}
	}
	n.mu.Unlock()
	for _, m := range n.meta.Nodes() {
		ni := rpc.NodeInfo{Node: m, MetaRole: "voter"}
		if m.ID == leaderID {
			ni.MetaRole = "leader"
		}
		if m.ID == n.id {
			ni.Replicas, ni.Leaders = replicas, leaders
		}
		info.Nodes = append(info.Nodes, ni)
	}
	return info, nil
}

// Ready reports whether the node can serve: a metadata leader is known and
// every assigned bucket replica is open with a leader.
func (n *Node) Ready() error {
	if id, _ := n.meta.Leader(); id == 0 {
		return raftmeta.ErrNoLeader
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for id, r := range n.replicas {
		if r.Leader() == "" {
			return fmt.Errorf("%w: table %d bucket %d", rpc.ErrNoBucketLeader, id.TableID, id.Bucket)
		}
	}
	return nil
}

// replica returns the open replica of a bucket, or nil.
func (n *Node) replica(id raftmeta.BucketID) *replica.Replica {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.replicas[id]
}

// bucketReplica resolves a bucket to its open local replica, telling a
// bucket that does not exist apart from one that is still opening.
func (n *Node) bucketReplica(id raftmeta.BucketID) (*replica.Replica, error) {
	if r := n.replica(id); r != nil {
		return r, nil
	}
	for _, a := range n.meta.AssignmentsForTable(id.TableID) {
		if a.BucketID == id {
			return nil, fmt.Errorf("%w: table %d bucket %d is still opening", rpc.ErrNoBucketLeader, id.TableID, id.Bucket)
		}
	}
	return nil, fmt.Errorf("%w: table %d has no bucket %d", rpc.ErrBucketNotFound, id.TableID, id.Bucket)
}

func (n *Node) Append(ctx context.Context, b raftmeta.BucketID, batches [][]byte, writerID int64, seq int32) (rpc.AppendResult, error) {
	r, err := n.bucketReplica(b)
	if err != nil {
		return rpc.AppendResult{}, err
	}
	base, count, err := r.Append(ctx, batches, writerID, seq)
	if err != nil {
		return rpc.AppendResult{}, replicaError(err)
	}
	return rpc.AppendResult{BaseOffset: base, Count: count}, nil
}

func (n *Node) Fetch(ctx context.Context, b raftmeta.BucketID, offset int64, maxBytes int, maxWait time.Duration) (*rpc.FetchResult, error) {
	r, err := n.bucketReplica(b)
	if err != nil {
		return nil, err
	}
	batches, hw, start, err := r.Fetch(ctx, offset, maxBytes, maxWait)
	if err != nil {
		return nil, replicaError(err)
	}
	return &rpc.FetchResult{Batches: batches, HighWatermark: hw, LogStartOffset: start}, nil
}

func (n *Node) ListOffset(ctx context.Context, b raftmeta.BucketID, spec rpc.OffsetSpec, tsMs int64) (int64, error) {
	r, err := n.bucketReplica(b)
	if err != nil {
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

// replicaError maps replica sentinels onto the rpc ones, keeping the
// replica's message.
func replicaError(err error) error {
	var sentinel error
	switch {
	case errors.Is(err, replica.ErrNotLeader):
		sentinel = rpc.ErrNotLeader
	case errors.Is(err, replica.ErrNoLeader), errors.Is(err, replica.ErrClosed):
		sentinel = rpc.ErrNoBucketLeader
	case errors.Is(err, replica.ErrOffsetOutOfRange):
		sentinel = rpc.ErrOffsetOutOfRange
	case errors.Is(err, replica.ErrBusy), errors.Is(err, replica.ErrTooLarge):
		sentinel = rpc.ErrResourceExhausted
	case errors.Is(err, replica.ErrOutOfOrderSequence):
		sentinel = rpc.ErrSequence
	case errors.Is(err, replica.ErrInvalidBatch):
		sentinel = raftmeta.ErrInvalid
	default:
		return err
	}
	return &mappedError{sentinel: sentinel, err: err}
}

// mappedError is err, also matching sentinel with errors.Is.
type mappedError struct{ sentinel, err error }

func (e *mappedError) Error() string   { return e.err.Error() }
func (e *mappedError) Unwrap() []error { return []error{e.sentinel, e.err} }
