package node

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fluss-node/fluss-node/logstore/record"
	"github.com/fluss-node/fluss-node/node/membership"
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
// If it is not by then, the catalog may lack tables created while the node
// was down: the read is refused as unavailable (worth a retry) rather than
// answered not_found from a stale copy.
func (n *Node) awaitCatalog(ctx context.Context) error {
	select {
	case <-n.registered:
		return nil
	default:
	}
	wctx, cancel := context.WithTimeout(ctx, metaLeaderWait)
	defer cancel()
	select {
	case <-n.registered:
		return nil
	case <-wctx.Done():
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return fmt.Errorf("%w: node %d has not caught up with the metadata group since it started; retry", rpc.ErrCatalogBehind, n.id)
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
	_, err := n.metaCall(ctx, &metaOp{Op: opCreateDatabase, Name: name, Comment: comment, IgnoreIfExists: ignoreIfExists})
	return err
}

func (n *Node) DropDatabase(ctx context.Context, name string, ignoreIfNotExists, cascade bool) error {
	n.awaitMetaLeader(ctx)
	_, err := n.metaCall(ctx, &metaOp{Op: opDropDatabase, Name: name, IgnoreIfNotExists: ignoreIfNotExists, Cascade: cascade})
	return err
}

func (n *Node) ListDatabases(ctx context.Context) ([]string, error) {
	if err := n.awaitCatalog(ctx); err != nil {
		return nil, err
	}
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
	if v := spec.Properties["table.datalake.enabled"]; strings.EqualFold(v, "true") && n.lake == nil {
		return 0, fmt.Errorf("%w: table %s.%s sets table.datalake.enabled = %s, but node %d has no lake directory ([tiering] lake_dir)",
			rpc.ErrNotConfigured, spec.Database, spec.Name, v, n.id)
	}
	if err := n.requireDictionary(spec.Columns); err != nil {
		return 0, err
	}
	n.awaitMetaLeader(ctx)
	id, err := n.metaCall(ctx, &metaOp{Op: opCreateTable, Spec: &spec, IgnoreIfExists: ignoreIfExists})
	if err != nil {
		return 0, err
	}
	wctx, cancel := context.WithTimeout(ctx, createWait)
	defer cancel()
	n.waitTableLeaders(wctx, id, raftmeta.NoPartition)
	return id, nil
}

// createWait bounds how long CreateTable waits for bucket leaders.
const createWait = 10 * time.Second

// waitTableLeaders waits until every bucket of the table (of one partition
// of it, for a partitioned table) assigned to this node has an open replica
// with a known leader, and every other such bucket has a leader its
// replicas know, or ctx ends.
func (n *Node) waitTableLeaders(ctx context.Context, tableID, partitionID int64) {
	for {
		ready := true
		for _, a := range n.meta.AssignmentsForTable(tableID) {
			if a.PartitionID != partitionID || !slices.Contains(a.Replicas, n.id) {
				continue
			}
			if r := n.replica(a.BucketID); r == nil || r.WaitLeader(ctx) != nil {
				ready = false
				break
			}
		}
		if ready {
			l, _ := n.Layout(ctx, tableID, false)
			for _, b := range l {
				ready = ready && (b.PartitionID != partitionID || b.Leader != 0)
			}
		}
		if ready {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (n *Node) Table(ctx context.Context, name string) (*raftmeta.Table, error) {
	if err := n.awaitCatalog(ctx); err != nil {
		return nil, err
	}
	db, t, err := splitTableName(name)
	if err != nil {
		return nil, err
	}
	return n.meta.TableByName(db, t)
}

func (n *Node) ListTables(ctx context.Context, database string) ([]string, error) {
	if err := n.awaitCatalog(ctx); err != nil {
		return nil, err
	}
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
	_, err = n.metaCall(ctx, &metaOp{Op: opDropTable, Database: db, Name: t, IgnoreIfNotExists: ignoreIfNotExists})
	return err
}

func (n *Node) AddColumns(ctx context.Context, name string, cols []record.Column) (int32, error) {
	db, t, err := splitTableName(name)
	if err != nil {
		return 0, err
	}
	if err := n.requireDictionary(cols); err != nil {
		return 0, err
	}
	if tb, err := n.meta.TableByName(db, t); err == nil && tb.HasPrimaryKey() {
		if err := n.requireFeature(featurePKColumns, "adding columns to a primary-key table"); err != nil {
			return 0, err
		}
	}
	n.awaitMetaLeader(ctx)
	id, err := n.metaCall(ctx, &metaOp{Op: opAddColumns, Database: db, Name: t, Columns: cols})
	return int32(id), err
}

// SetTableProperties sets and resets properties of a table that may
// change after it is created (raftmeta.AlterProperties says which).
func (n *Node) SetTableProperties(ctx context.Context, name string, set map[string]string, reset []string) error {
	db, t, err := splitTableName(name)
	if err != nil {
		return err
	}
	if err := n.requireFeature(featureAlterProperties, "changing table properties"); err != nil {
		return err
	}
	if v := set[raftmeta.PropLakeEnabled]; strings.EqualFold(v, "true") && n.lake == nil {
		return fmt.Errorf("%w: table %s sets %s = %s, but node %d has no lake directory ([tiering] lake_dir)",
			rpc.ErrNotConfigured, name, raftmeta.PropLakeEnabled, v, n.id)
	}
	n.awaitMetaLeader(ctx)
	_, err = n.metaCall(ctx, &metaOp{Op: opSetProperties, Database: db, Name: t, Props: set, Reset: reset})
	return err
}

// CreatePartition creates the partition of the table with the given values
// and then waits (up to createWait), as CreateTable does, until its buckets
// have leaders.
func (n *Node) CreatePartition(ctx context.Context, table string, values map[string]string, ignoreIfExists bool) (*raftmeta.Partition, error) {
	db, name, err := splitTableName(table)
	if err != nil {
		return nil, err
	}
	n.awaitMetaLeader(ctx)
	id, err := n.metaCall(ctx, &metaOp{Op: opCreatePartition, Database: db, Name: name, Values: values, IgnoreIfExists: ignoreIfExists})
	if err != nil {
		return nil, err
	}
	t, err := n.meta.TableByName(db, name)
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, createWait)
	defer cancel()
	n.waitTableLeaders(wctx, t.ID, id)
	ps, err := n.meta.Partitions(t.ID)
	if err != nil {
		return nil, err
	}
	for _, p := range ps {
		if p.ID == id {
			return p, nil
		}
	}
	// Created, and dropped again since (by a client, or auto-partitioning):
	// the create succeeded all the same.
	pname, err := raftmeta.PartitionName(t, values)
	if err != nil {
		return nil, err
	}
	return &raftmeta.Partition{ID: id, TableID: t.ID, Name: pname, Values: values}, nil
}

func (n *Node) DropPartition(ctx context.Context, table string, values map[string]string, ignoreIfNotExists bool) error {
	db, name, err := splitTableName(table)
	if err != nil {
		return err
	}
	n.awaitMetaLeader(ctx)
	_, err = n.metaCall(ctx, &metaOp{Op: opDropPartition, Database: db, Name: name, Values: values, IgnoreIfNotExists: ignoreIfNotExists})
	return err
}

func (n *Node) Partitions(ctx context.Context, tableID int64) ([]*raftmeta.Partition, error) {
	if err := n.awaitCatalog(ctx); err != nil {
		return nil, err
	}
	return n.meta.Partitions(tableID)
}

func (n *Node) Partition(ctx context.Context, tableID int64, name string) (*raftmeta.Partition, error) {
	if err := n.awaitCatalog(ctx); err != nil {
		return nil, err
	}
	return n.meta.FSM().PartitionByName(tableID, name)
}

func (n *Node) Layout(ctx context.Context, tableID int64, inSync bool) ([]rpc.BucketLayout, error) {
	_ = n.awaitCatalog(ctx) // the table was resolved (Table) already
	var out []rpc.BucketLayout
	var ask []raftmeta.NodeID // nodes to ask for leaders of buckets not held here
	as := n.meta.AssignmentsForTable(tableID)
	names := map[int64]string{}
	if ps, err := n.meta.Partitions(tableID); err == nil {
		for _, p := range ps {
			names[p.ID] = p.Name
		}
	}
	for _, a := range as {
		l := rpc.BucketLayout{PartitionID: a.PartitionID, PartitionName: names[a.PartitionID], Bucket: a.Bucket, Replicas: a.Replicas}
		if r := n.replica(a.BucketID); r != nil {
			l.Leader = leaderNode(r)
		}
		if l.Leader == n.id && n.leaderCutOff(a.BucketID, callBucketWrite) != nil {
			// This node still holds the lease but cannot commit: the
			// quorum it lost has likely elected another leader. Report
			// what the other replicas know instead (nothing, when they
			// cannot be reached either).
			l.Leader = 0
		}
		if l.Leader == 0 {
			for _, id := range a.Replicas {
				if id != n.id && !slices.Contains(ask, id) {
					ask = append(ask, id)
				}
			}
		}
		out = append(out, l)
	}
	if len(ask) > 0 {
		known := map[raftmeta.BucketID]raftmeta.NodeID{}
		for _, s := range n.statsOf(ctx, ask, false) {
			for _, b := range s.Buckets {
				if b.Leader != 0 {
					known[b.Bucket] = b.Leader
				}
			}
		}
		for i, a := range as {
			if out[i].Leader == 0 {
				out[i].Leader = known[a.BucketID]
			}
		}
	}
	if inSync {
		isr := n.inSyncOf(ctx, out)
		for i, a := range as {
			out[i].InSync = isr[a.BucketID]
		}
	}
	slices.SortFunc(out, func(a, b rpc.BucketLayout) int {
		return cmp.Or(cmp.Compare(a.PartitionName, b.PartitionName), cmp.Compare(a.Bucket, b.Bucket))
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
	// Diagnostics answer from whatever this node knows, caught up or not:
	// `cluster status` must work while the metadata group has no quorum.
	_ = n.awaitCatalog(ctx)
	info := &rpc.ClusterInfo{ClusterID: n.meta.ClusterID(), Config: n.clusterConfig()}
	leaderID, _ := n.meta.Leader()
	info.MetaLeader = leaderID
	roles := map[raftmeta.NodeID]string{}
	if servers, err := n.meta.Servers(); err == nil {
		for _, s := range servers {
			role := "voter"
			if s.Suffrage != raft.Voter {
				role = "nonvoter"
			}
			roles[parseNodeID(string(s.ID))] = role
		}
	}
	nodes := n.meta.Nodes()
	ids := make([]raftmeta.NodeID, len(nodes))
	for i, m := range nodes {
		ids[i] = m.ID
	}
	assigned := map[raftmeta.NodeID]bool{}
	for _, a := range n.meta.Assignments() {
		for _, r := range a.Replicas {
			assigned[r] = true
		}
	}
	stats := n.statsOf(ctx, ids, true)
	gossiped := map[raftmeta.NodeID]*membership.Member{}
	members := n.members()
	for i := range members {
		gossiped[raftmeta.NodeID(members[i].ID)] = &members[i]
	}
	for _, m := range nodes {
		switch {
		case n.fenced(nodeServer(m.ID)):
			m.State = StateFenced
		case m.State == raftmeta.NodeDecommissioning && roles[m.ID] == "" && !assigned[m.ID]:
			m.State = StateDecommissioned
		default:
			m.State = gossipNodeState(m.State, gossiped[m.ID])
		}
		ni := rpc.NodeInfo{Node: m, MetaRole: roles[m.ID]}
		switch {
		case m.ID == leaderID:
			ni.MetaRole = "leader"
		case ni.MetaRole == "":
			ni.MetaRole = "none"
		}
		ni.UnderReplicated, ni.Offline = -1, -1
		if s := stats[m.ID]; s != nil {
			ni.Replicas, ni.Leaders = s.Replicas, s.Leaders
			if rs := s.Replication; rs != nil {
				ni.UnderReplicated, ni.Offline = rs.UnderReplicated, rs.Offline
			}
		}
		info.Nodes = append(info.Nodes, ni)
	}
	info.Leaderless = leaderless(n.meta.Assignments(), stats)
	info.Lost = lostBuckets(n.meta.Assignments(), nodes)
	return info, nil
}

// lostBuckets counts the buckets of as whose every replica is on a node
// that nodes (the catalog's) mark left: down past the dead-node grace, so
// no replica of theirs can take part in an election (restore.go).
func lostBuckets(as []raftmeta.Assignment, nodes []raftmeta.Node) int32 {
	left := map[raftmeta.NodeID]bool{}
	for _, m := range nodes {
		left[m.ID] = m.State == raftmeta.NodeLeft
	}
	var n int32
	for _, a := range as {
		if len(a.Replicas) > 0 && !slices.ContainsFunc(a.Replicas, func(r raftmeta.NodeID) bool { return !left[r] }) {
			n++
		}
	}
	return n
}

// leaderless counts the buckets of as that no replica leads among the
// nodes whose stats answered (a silent node may lead some of them).
func leaderless(as []raftmeta.Assignment, stats map[raftmeta.NodeID]*nodeStats) int32 {
	led := map[raftmeta.BucketID]bool{}
	for id, s := range stats {
		for _, b := range s.Buckets {
			if b.Leader == id {
				led[b.Bucket] = true
			}
		}
	}
	var n int32
	for _, a := range as {
		if !led[a.BucketID] {
			n++
		}
	}
	return n
}

// Ready reports whether the node can serve: a metadata leader is known,
// the catalog has caught up once since start (until then it may not list
// every replica of this node), every bucket replica assigned here is open
// with a leader, and those led here have applied their log (ServingReads).
// A replica that failed to open is left out: it is reported as offline
// (fluss_bucket_replicas_offline), and the node serves its other buckets.
func (n *Node) Ready() error {
	if id, _ := n.meta.Leader(); id == 0 {
		if n.removedFromMeta() {
			return errRemoved
		}
		return raftmeta.ErrNoLeader
	}
	if !n.catalogCaughtUp.Load() {
		if !n.meta.CaughtUp() {
			return fmt.Errorf("the metadata catalog is catching up (applied index %d)", n.meta.AppliedIndex())
		}
		n.catalogCaughtUp.Store(true)
	}
	assigned := n.meta.Assignments()
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, a := range assigned {
		id := a.BucketID
		r := n.replicas[id]
		if r == nil {
			if !slices.Contains(a.Replicas, n.id) || n.openErrs[id] != nil {
				continue
			}
			return fmt.Errorf("table %d partition %d bucket %d: replica not open yet", id.TableID, id.PartitionID, id.Bucket)
		}
		if r.Leader() == "" {
			return fmt.Errorf("%w: table %d bucket %d", rpc.ErrNoBucketLeader, id.TableID, id.Bucket)
		}
		// A leader elected here serves only once its barrier applied the
		// log (after a restart, until then its offsets lag).
		if r.IsLeader() {
			if err := r.ServingReads(); err != nil {
				return fmt.Errorf("table %d bucket %d: %w", id.TableID, id.Bucket, err)
			}
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

// Append stores batches on the bucket leader: here, or forwarded once.
func (n *Node) Append(ctx context.Context, b raftmeta.BucketID, batches [][]byte, writerID int64, seq int32) (rpc.AppendResult, error) {
	var res rpc.AppendResult
	q := &bucketReq{Bucket: b, WriterID: writerID, Seq: seq, Batches: batches}
	err := n.route(ctx, b, q, callBucketWrite, func(r *replica.Replica) error {
		base, count, err := r.Append(ctx, batches, writerID, seq)
		if err != nil {
			return replicaError(err)
		}
		res = rpc.AppendResult{BaseOffset: base, Count: count}
		return nil
	}, func(p *bucketResp) {
		res = rpc.AppendResult{BaseOffset: p.BaseOffset, Count: p.Count}
	}, false)
	return res, err
}

// Fetch reads committed batches from the bucket leader: here, or forwarded once.
func (n *Node) Fetch(ctx context.Context, b raftmeta.BucketID, offset int64, maxBytes int, maxWait time.Duration) (*rpc.FetchResult, error) {
	var res *rpc.FetchResult
	q := &bucketReq{Bucket: b, Offset: offset, MaxBytes: int64(maxBytes), MaxWaitMs: maxWait.Milliseconds()}
	err := n.route(ctx, b, q, callBucketFetch, func(r *replica.Replica) error {
		batches, hw, start, err := n.fetchLeader(ctx, b, r, offset, maxBytes, maxWait)
		if err != nil {
			return replicaError(err)
		}
		res = &rpc.FetchResult{Batches: batches, HighWatermark: hw, LogStartOffset: start}
		return nil
	}, func(p *bucketResp) {
		res = &rpc.FetchResult{Batches: p.Batches, HighWatermark: p.HighWatermark, LogStartOffset: p.LogStartOffset}
	}, true)
	return res, err
}

// ListOffset resolves an offset on the bucket leader: here, or forwarded once.
func (n *Node) ListOffset(ctx context.Context, b raftmeta.BucketID, spec rpc.OffsetSpec, tsMs int64) (int64, error) {
	var off int64
	q := &bucketReq{Bucket: b, Spec: int32(spec), TsMs: tsMs}
	err := n.route(ctx, b, q, callBucketOff, func(r *replica.Replica) error {
		v, err := n.listOffsetLeader(b, r, spec, tsMs)
		if err != nil {
			return replicaError(err)
		}
		off = v
		return nil
	}, func(p *bucketResp) { off = p.Offset }, true)
	return off, err
}

// replicaError maps replica sentinels onto the rpc ones, keeping the
// replica's message.
func replicaError(err error) error {
	sentinel := pkErrorSentinel(err)
	switch {
	case sentinel != nil:
	case errors.Is(err, replica.ErrNotLeader):
		sentinel = rpc.ErrNotLeader
	case errors.Is(err, replica.ErrNoLeader), errors.Is(err, replica.ErrClosed):
		sentinel = rpc.ErrNoBucketLeader
	case errors.Is(err, replica.ErrOffsetOutOfRange):
		sentinel = rpc.ErrOffsetOutOfRange
	case errors.Is(err, replica.ErrBusy), errors.Is(err, replica.ErrTooLarge), errors.Is(err, replica.ErrNoSpace):
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
