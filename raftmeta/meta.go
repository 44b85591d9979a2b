package raftmeta

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fluss-node/fluss-node/logstore/record"
	"github.com/fluss-node/fluss-node/proto/metapb"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

// Config configures the metadata Raft group of one node.
type Config struct {
	// Dir holds raft.db (log and stable store) and snapshots/. Required.
	Dir string
	// NodeID is this node's id (> 0); its raft.ServerID is the decimal form.
	NodeID NodeID
	// LocalAddr is the address other voters reach this node's Transport at.
	// Default: Transport.LocalAddr().
	LocalAddr raft.ServerAddress
	// Transport carries the group's RPCs. Required; owned by the caller,
	// who closes it after Meta.Close.
	Transport raft.Transport
	// Bootstrap makes a single-voter cluster of this node when Dir holds no
	// Raft state yet. Default false (join an existing group).
	Bootstrap bool
	// Logger receives raft's logs and this package's. Default slog.Default().
	Logger *slog.Logger
	// RaftLogLevel filters raft's own logs. Default hclog.Warn.
	RaftLogLevel hclog.Level

	// Raft tuning; zero means hashicorp/raft's default (1 s heartbeat and
	// election timeouts, 500 ms lease, 50 ms commit timeout, snapshots every
	// 120 s when 8192 entries accrued, 10240 trailing entries).
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration
	SnapshotInterval   time.Duration
	SnapshotThreshold  uint64
	TrailingLogs       uint64
	// SnapshotRetain is how many snapshots are kept on disk. Default 2.
	SnapshotRetain int

	// ApplyTimeout bounds one proposal when the context has no earlier
	// deadline. Default 10 s.
	ApplyTimeout time.Duration
	// DefaultReplicationFactor is used for tables without
	// table.replication.factor. Default 3 (capped at the active node count).
	DefaultReplicationFactor int
	// Now stamps created-at times into commands. Default time.Now.
	Now func() time.Time
}

func (c *Config) setDefaults() error {
	if c.Dir == "" {
		return errors.New("raftmeta: Config.Dir is required")
	}
	if c.NodeID <= 0 {
		return fmt.Errorf("raftmeta: Config.NodeID %d must be positive", c.NodeID)
	}
	if c.Transport == nil {
		return errors.New("raftmeta: Config.Transport is required")
	}
	if c.LocalAddr == "" {
		c.LocalAddr = c.Transport.LocalAddr()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.RaftLogLevel == hclog.NoLevel {
		c.RaftLogLevel = hclog.Warn
	}
	if c.SnapshotRetain <= 0 {
		c.SnapshotRetain = 2
	}
	if c.ApplyTimeout <= 0 {
		c.ApplyTimeout = 10 * time.Second
	}
	if c.DefaultReplicationFactor <= 0 {
		c.DefaultReplicationFactor = 3
	}
	if c.DefaultReplicationFactor > MaxReplicationFactor {
		return fmt.Errorf("raftmeta: Config.DefaultReplicationFactor %d is above %d", c.DefaultReplicationFactor, MaxReplicationFactor)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

// Meta is one node's member of the metadata Raft group: the catalog FSM,
// its Raft instance and stores. Reads are served from the local FSM;
// proposing methods work only on the leader and return ErrNotLeader
// elsewhere. Every method is safe for concurrent use.
type Meta struct {
	cfg   Config
	log   *slog.Logger
	fsm   *FSM
	raft  *raft.Raft
	store *raftboltdb.BoltStore

	quit      chan struct{}
	wg        sync.WaitGroup
	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

// Open opens (or creates) the metadata store in cfg.Dir and starts Raft.
func Open(cfg Config) (*Meta, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("raftmeta: %w", err)
	}
	hc := NewHCLogger(cfg.Logger, cfg.RaftLogLevel).Named("meta-raft")
	store, snaps, err := openStores(cfg.Dir, cfg.SnapshotRetain, hc)
	if err != nil {
		return nil, err
	}

	rc := raft.DefaultConfig()
	rc.LocalID = serverID(cfg.NodeID)
	rc.Logger = hc
	notify := make(chan bool, 1)
	rc.NotifyCh = notify
	setIf(&rc.HeartbeatTimeout, cfg.HeartbeatTimeout)
	setIf(&rc.ElectionTimeout, cfg.ElectionTimeout)
	setIf(&rc.LeaderLeaseTimeout, cfg.LeaderLeaseTimeout)
	setIf(&rc.CommitTimeout, cfg.CommitTimeout)
	setIf(&rc.SnapshotInterval, cfg.SnapshotInterval)
	setIf(&rc.SnapshotThreshold, cfg.SnapshotThreshold)
	setIf(&rc.TrailingLogs, cfg.TrailingLogs)
	if err := raft.ValidateConfig(rc); err != nil {
		store.Close()
		return nil, fmt.Errorf("raftmeta: raft config: %w", err)
	}

	if cfg.Bootstrap {
		has, err := raft.HasExistingState(store, store, snaps)
		if err != nil {
			store.Close()
			return nil, fmt.Errorf("raftmeta: inspect state: %w", err)
		}
		if !has {
			boot := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: rc.LocalID, Address: cfg.LocalAddr}}}
			if err := raft.BootstrapCluster(rc, store, store, snaps, cfg.Transport, boot); err != nil {
				store.Close()
				return nil, fmt.Errorf("raftmeta: bootstrap: %w", err)
			}
			cfg.Logger.Info("bootstrapped metadata raft group", "addr", cfg.LocalAddr) // the logger names the node
		}
	}

	m := &Meta{cfg: cfg, log: cfg.Logger, fsm: NewFSM(), store: store, quit: make(chan struct{})}
	r, err := raft.NewRaft(rc, m.fsm, store, store, snaps, cfg.Transport)
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("raftmeta: start raft: %w", err)
	}
	m.raft = r
	m.wg.Add(1)
	go m.leaderLoop(notify)
	return m, nil
}

// openStores opens the group's log and stable store (raft.db) and its
// snapshot store in dir.
func openStores(dir string, retain int, hc hclog.Logger) (*raftboltdb.BoltStore, *raft.FileSnapshotStore, error) {
	store, err := raftboltdb.New(raftboltdb.Options{
		Path:        filepath.Join(dir, "raft.db"),
		BoltOptions: &bbolt.Options{Timeout: 2 * time.Second},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("raftmeta: open %s (is another process using this data dir?): %w", filepath.Join(dir, "raft.db"), err)
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, retain, hc)
	if err != nil {
		store.Close()
		return nil, nil, fmt.Errorf("raftmeta: snapshot store: %w", err)
	}
	return store, snaps, nil
}

func setIf[T comparable](dst *T, v T) {
	var zero T
	if v != zero {
		*dst = v
	}
}

// Close stops Raft and closes the stores. The Transport stays open (its
// owner closes it). Safe to call more than once.
func (m *Meta) Close() error {
	m.closeOnce.Do(func() {
		m.closed.Store(true)
		close(m.quit)
		err := m.raft.Shutdown().Error()
		m.wg.Wait()
		m.closeErr = errors.Join(err, m.store.Close())
	})
	return m.closeErr
}

// leaderLoop watches leadership; on gaining it, it makes sure the cluster
// has an id.
func (m *Meta) leaderLoop(notify <-chan bool) {
	defer m.wg.Done()
	for {
		select {
		case <-m.quit:
			return
		case leader := <-notify:
			if leader {
				m.ensureClusterID()
			}
		}
	}
}

func (m *Meta) ensureClusterID() {
	if err := m.raft.Barrier(m.cfg.ApplyTimeout).Error(); err != nil {
		m.log.Warn("metadata leader could not catch up", "err", err)
		return
	}
	if m.fsm.ClusterID() != "" {
		return
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.ApplyTimeout)
	defer cancel()
	go func() { // stop waiting when Meta closes
		select {
		case <-m.quit:
			cancel()
		case <-ctx.Done():
		}
	}()
	_, err := m.propose(ctx, &metapb.Command{Cmd: &metapb.Command_SetClusterId{SetClusterId: &metapb.SetClusterID{ClusterId: id, OnlyIfUnset: true}}})
	if err != nil {
		m.log.Warn("could not set the cluster id", "err", err)
		return
	}
	m.log.Info("cluster id set", "cluster_id", m.fsm.ClusterID())
}

// propose replicates cmd and returns the FSM's result. Errors: ErrNotLeader,
// ErrNoLeader (leadership lost mid-way: the outcome is unknown), ErrClosed,
// the context's error, or the domain error of the command.
func (m *Meta) propose(ctx context.Context, cmd *metapb.Command) (*ApplyResult, error) {
	if m.closed.Load() {
		return nil, ErrClosed
	}
	if m.raft.State() != raft.Leader {
		return nil, m.notLeader()
	}
	b, err := EncodeCommand(cmd)
	if err != nil {
		return nil, fmt.Errorf("raftmeta: encode command: %w", err)
	}
	timeout := m.cfg.ApplyTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	if timeout <= 0 {
		return nil, fmt.Errorf("propose metadata change: %w", context.DeadlineExceeded)
	}
	fut := m.raft.Apply(b, timeout)
	done := make(chan error, 1)
	go func() { done <- fut.Error() }()
	select {
	case <-ctx.Done():
		return nil, fmt.Errorf("propose metadata change (it may still be applied): %w", ctx.Err())
	case err = <-done:
	}
	switch {
	case err == nil:
	case errors.Is(err, raft.ErrNotLeader):
		return nil, m.notLeader()
	case errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return nil, fmt.Errorf("%w: leadership changed while proposing; the change may or may not be applied, retry: %v", ErrNoLeader, err)
	case errors.Is(err, raft.ErrRaftShutdown):
		return nil, ErrClosed
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return nil, fmt.Errorf("%w: metadata proposal timed out: %v", ErrNoLeader, err)
	default:
		return nil, fmt.Errorf("raftmeta: apply: %w", err)
	}
	res, ok := fut.Response().(*ApplyResult)
	if !ok {
		return nil, fmt.Errorf("raftmeta: unexpected apply response %T", fut.Response())
	}
	return res, res.Err
}

func (m *Meta) notLeader() error {
	id, addr := m.Leader()
	if id == 0 {
		return fmt.Errorf("%w: no leader is known yet, retry", ErrNotLeader)
	}
	return fmt.Errorf("%w: the leader is node %d at %s", ErrNotLeader, id, addr)
}

func (m *Meta) nowMs() int64 { return m.cfg.Now().UnixMilli() }

// ---------------------------------------------------------------- writes

// CreateDatabase creates a database.
func (m *Meta) CreateDatabase(ctx context.Context, name, comment string, ignoreIfExists bool) error {
	if err := ValidateDatabaseName(name); err != nil {
		return err
	}
	_, err := m.propose(ctx, &metapb.Command{Cmd: &metapb.Command_CreateDatabase{CreateDatabase: &metapb.CreateDatabase{
		Database:       &metapb.Database{Name: name, Comment: comment, CreatedAtMs: m.nowMs()},
		IgnoreIfExists: ignoreIfExists,
	}}})
	return err
}

// DropDatabase drops a database; with cascade, its tables too.
func (m *Meta) DropDatabase(ctx context.Context, name string, ignoreIfNotExists, cascade bool) error {
	_, err := m.propose(ctx, &metapb.Command{Cmd: &metapb.Command_DropDatabase{DropDatabase: &metapb.DropDatabase{
		Name: name, IgnoreIfNotExists: ignoreIfNotExists, Cascade: cascade,
	}}})
	return err
}

// ReplicationFactor is the replication factor of the table with id tableID
// (its table.replication.factor or the default), 0 for an unknown table.
func (m *Meta) ReplicationFactor(tableID int64) int {
	t, err := m.fsm.TableByID(tableID)
	if err != nil {
		return 0
	}
	return m.replicationFactor(t)
}

// ExplicitReplicationFactor is the table.replication.factor the table with
// id tableID sets, 0 if it sets none (or is unknown): the factor the
// controller shrinks a bucket's replicas to (raftmeta.Shrink).
func (m *Meta) ExplicitReplicationFactor(tableID int64) int {
	t, err := m.fsm.TableByID(tableID)
	if err != nil {
		return 0
	}
	return m.explicitReplication(t)
}

func (m *Meta) explicitReplication(t *Table) int {
	if n, err := strconv.Atoi(t.Properties[PropReplication]); err == nil && n > 0 {
		return n
	}
	return 0
}

// replicationFactor is the table's table.replication.factor or the default.
func (m *Meta) replicationFactor(t *Table) int {
	if n := m.explicitReplication(t); n > 0 {
		return n
	}
	return m.cfg.DefaultReplicationFactor
}

// place computes the assignments of a new table's or partition's buckets.
// The start node rotates with the number of buckets already placed, so
// leaders spread across tables too.
func (m *Meta) place(t *Table) ([]*metapb.Assignment, error) {
	nodes := m.fsm.Nodes()
	rf := m.replicationFactor(t)
	active := 0
	for _, n := range nodes {
		if n.State == NodeActive {
			active++
		}
	}
	if rf > active && active > 0 {
		level := slog.LevelDebug // the default factor on a small cluster is expected
		if _, explicit := t.Properties["table.replication.factor"]; explicit {
			level = slog.LevelWarn
		}
		m.log.Log(context.Background(), level, "replication factor above the active node count; placing fewer replicas",
			"table", t.FullName(), "replication_factor", rf, "active_nodes", active)
	}
	reps, err := PlacementFrom(nodes, t.BucketCount, rf, m.fsm.assignmentCount())
	if err != nil {
		return nil, fmt.Errorf("table %s: %w", t.FullName(), err)
	}
	out := make([]*metapb.Assignment, len(reps))
	for b, r := range reps {
		out[b] = assignmentToPB(Assignment{BucketID: BucketID{Bucket: int32(b)}, Replicas: r})
	}
	return out, nil
}

// CreateTable validates spec, places the buckets of an unpartitioned table
// on the active nodes, and creates the table with its assignments in one
// entry. It returns the table id (the existing one when ignoreIfExists
// finds the table).
func (m *Meta) CreateTable(ctx context.Context, spec TableSpec, ignoreIfExists bool) (int64, error) {
	t, err := BuildTable(spec)
	if err != nil {
		return 0, err
	}
	if _, err := m.fsm.Database(t.Database); err != nil {
		return 0, err
	}
	if old, err := m.fsm.TableByName(t.Database, t.Name); err == nil {
		if ignoreIfExists {
			return old.ID, nil
		}
		return 0, Named(ErrTableExists, "table %s already exists", t.FullName())
	}
	t.CreatedAtMs = m.nowMs()
	var as []*metapb.Assignment
	if len(t.PartitionKeys) == 0 {
		if as, err = m.place(t); err != nil {
			return 0, err
		}
	}
	res, err := m.propose(ctx, &metapb.Command{Cmd: &metapb.Command_CreateTable{CreateTable: &metapb.CreateTable{
		Table: tableToPB(t), IgnoreIfExists: ignoreIfExists, Assignments: as,
	}}})
	if err != nil {
		return 0, err
	}
	return res.ID, nil
}

// AddColumns appends nullable columns to db.table's schema as a new schema
// version and returns its id.
func (m *Meta) AddColumns(ctx context.Context, db, table string, cols []record.Column) (int32, error) {
	t, err := m.fsm.TableByName(db, table)
	if err != nil {
		return 0, err
	}
	if err := ValidateNewColumns(t.FullName(), t.Schema(), cols); err != nil {
		return 0, err
	}
	res, err := m.propose(ctx, &metapb.Command{Cmd: &metapb.Command_AddColumns{AddColumns: &metapb.AddColumns{
		TableId: t.ID, Columns: schemaToPB(&record.Schema{Columns: cols}).Columns,
	}}})
	if err != nil {
		return 0, err
	}
	return int32(res.ID), nil
}

// SetTableProperties sets and resets properties of db.table that may
// change after creation (AlterProperties checks the change).
func (m *Meta) SetTableProperties(ctx context.Context, db, table string, set map[string]string, reset []string) error {
	t, err := m.fsm.TableByName(db, table)
	if err != nil {
		return err
	}
	props, err := AlterProperties(t, set, reset)
	if err != nil {
		return err
	}
	// The controller adds replicas up to the factor (Grow) and removes
	// those above an explicit one (Shrink): a table without one never
	// loses replicas, so a reset may not lower its effective factor.
	nt := *t
	nt.Properties = props
	if from, to := m.replicationFactor(t), m.replicationFactor(&nt); to < from && m.explicitReplication(&nt) == 0 {
		return fmt.Errorf("%w: alter table %s: resetting %s would lower it from %d to the default %d; set the lower factor instead", ErrInvalid, t.FullName(), PropReplication, from, to)
	}
	_, err = m.propose(ctx, &metapb.Command{Cmd: &metapb.Command_SetTableProperties{SetTableProperties: &metapb.SetTableProperties{
		TableId: t.ID, Set: set, Reset_: reset,
	}}})
	return err
}

// DropTable drops db.name with its partitions and assignments.
func (m *Meta) DropTable(ctx context.Context, db, name string, ignoreIfNotExists bool) error {
	_, err := m.propose(ctx, &metapb.Command{Cmd: &metapb.Command_DropTable{DropTable: &metapb.DropTable{
		Database: db, Name: name, IgnoreIfNotExists: ignoreIfNotExists,
	}}})
	return err
}

// CreatePartition creates the partition of db.table with the given values
// (one per partition key) and places its buckets. It returns the partition
// id (the existing one when ignoreIfExists finds it).
func (m *Meta) CreatePartition(ctx context.Context, db, table string, values map[string]string, ignoreIfExists bool) (int64, error) {
	t, err := m.fsm.TableByName(db, table)
	if err != nil {
		return 0, err
	}
	name, err := PartitionName(t, values)
	if err != nil {
		return 0, err
	}
	if p, err := m.fsm.PartitionByName(t.ID, name); err == nil {
		if ignoreIfExists {
			return p.ID, nil
		}
		return 0, Named(ErrPartitionExists, "partition %q of table %s already exists", name, t.FullName())
	}
	if err := m.checkRetention(t, name, values); err != nil {
		return 0, err
	}
	as, err := m.place(t)
	if err != nil {
		return 0, err
	}
	res, err := m.propose(ctx, &metapb.Command{Cmd: &metapb.Command_CreatePartition{CreatePartition: &metapb.CreatePartition{
		TableId: t.ID, Name: name, Values: values, IgnoreIfExists: ignoreIfExists, Assignments: as, CreatedAtMs: m.nowMs(),
	}}})
	if err != nil {
		return 0, err
	}
	return res.ID, nil
}

// checkRetention refuses a partition of an auto-partitioned table that is
// already past the table's retention: the controller would drop it, with
// the rows written to it, at its next pass.
func (m *Meta) checkRetention(t *Table, name string, values map[string]string) error {
	ap, on, err := AutoPartitionOf(t)
	if !on || err != nil {
		return nil
	}
	p := &Partition{TableID: t.ID, Name: name, Values: values}
	if _, drop := PlanAutoPartitions(t, ap, []*Partition{p}, m.cfg.Now()); slices.Contains(drop, name) {
		return fmt.Errorf("%w: partition %q of %s is older than the table's auto-partition retention (%d %s partitions before the current one): it would be dropped at once", ErrInvalid, name, t.FullName(), ap.Retention, ap.Unit)
	}
	return nil
}

// DropPartition drops the partition of db.table with the given values.
func (m *Meta) DropPartition(ctx context.Context, db, table string, values map[string]string, ignoreIfNotExists bool) error {
	t, err := m.fsm.TableByName(db, table)
	if err != nil {
		return err
	}
	name, err := PartitionName(t, values)
	if err != nil {
		return err
	}
	_, err = m.propose(ctx, &metapb.Command{Cmd: &metapb.Command_DropPartition{DropPartition: &metapb.DropPartition{
		TableId: t.ID, Name: name, IgnoreIfNotExists: ignoreIfNotExists,
	}}})
	return err
}

// SetAssignments replaces the replica sets of the given buckets (the
// controller's write).
func (m *Meta) SetAssignments(ctx context.Context, as []Assignment) error {
	pbs := make([]*metapb.Assignment, len(as))
	for i, a := range as {
		pbs[i] = assignmentToPB(a)
	}
	_, err := m.propose(ctx, &metapb.Command{Cmd: &metapb.Command_SetAssignments{SetAssignments: &metapb.SetAssignments{Assignments: pbs}}})
	return err
}

// RestoreBucket starts a new Raft group for bucket id, which
// lost every replica, on replicas at data offset start
// (Assignment.Generation). The caller checks that the old replicas are
// gone.
func (m *Meta) RestoreBucket(ctx context.Context, id BucketID, replicas []NodeID, start int64) error {
	reps := make([]int32, len(replicas))
	for i, r := range replicas {
		reps[i] = int32(r)
	}
	_, err := m.propose(ctx, &metapb.Command{Cmd: &metapb.Command_RestoreBucket{RestoreBucket: &metapb.RestoreBucket{
		TableId: id.TableID, PartitionId: id.PartitionID, Bucket: id.Bucket, Replicas: reps, StartOffset: start}}})
	return err
}

// RegisterNode inserts or replaces a node's record.
func (m *Meta) RegisterNode(ctx context.Context, n Node) error {
	_, err := m.propose(ctx, &metapb.Command{Cmd: &metapb.Command_RegisterNode{RegisterNode: &metapb.RegisterNode{Node: nodeToPB(n)}}})
	return err
}

// SetNodeState changes a registered node's state.
func (m *Meta) SetNodeState(ctx context.Context, id NodeID, s NodeState) error {
	_, err := m.propose(ctx, &metapb.Command{Cmd: &metapb.Command_SetNodeState{SetNodeState: &metapb.SetNodeState{Id: int32(id), State: string(s)}}})
	return err
}

// FenceNodes records ids as given up for lost by a recovery: every node
// refuses their raft requests and admission (node/fence.go).
func (m *Meta) FenceNodes(ctx context.Context, ids []NodeID) error {
	c := &metapb.FenceNodes{}
	for _, id := range ids {
		c.Ids = append(c.Ids, int32(id))
	}
	_, err := m.propose(ctx, &metapb.Command{Cmd: &metapb.Command_FenceNodes{FenceNodes: c}})
	return err
}

// ForgetNode removes a decommissioned node (state decommissioning, named
// by no assignment) from the catalog.
func (m *Meta) ForgetNode(ctx context.Context, id NodeID) error {
	_, err := m.propose(ctx, &metapb.Command{Cmd: &metapb.Command_ForgetNode{ForgetNode: &metapb.ForgetNode{Id: int32(id)}}})
	return err
}

// SetClusterID sets the cluster id (normally done once by the first leader).
func (m *Meta) SetClusterID(ctx context.Context, id string) error {
	_, err := m.propose(ctx, &metapb.Command{Cmd: &metapb.Command_SetClusterId{SetClusterId: &metapb.SetClusterID{ClusterId: id}}})
	return err
}

// SetClusterConfig sets the fields of c that are not zero; with
// onlyIfUnset, only those the catalog has no value for. It reports whether
// the catalog changed.
func (m *Meta) SetClusterConfig(ctx context.Context, c ClusterConfig, onlyIfUnset bool) (bool, error) {
	if err := c.Validate(); err != nil {
		return false, err
	}
	before := m.fsm.ClusterConfig()
	_, err := m.propose(ctx, &metapb.Command{Cmd: &metapb.Command_SetClusterConfig{SetClusterConfig: &metapb.SetClusterConfig{Config: clusterConfigToPB(c), OnlyIfUnset: onlyIfUnset}}})
	return err == nil && before != m.fsm.ClusterConfig(), err
}

// ---------------------------------------------------------------- membership

func (m *Meta) membership(ctx context.Context, f func(timeout time.Duration) raft.IndexFuture) error {
	if m.closed.Load() {
		return ErrClosed
	}
	if m.raft.State() != raft.Leader {
		return m.notLeader()
	}
	timeout := m.cfg.ApplyTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	err := f(timeout).Error()
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader):
		return m.notLeader()
	case errors.Is(err, raft.ErrRaftShutdown):
		return ErrClosed
	}
	return fmt.Errorf("raftmeta: membership change: %w", err)
}

// AddVoter adds (or promotes) a node as a voter of the metadata group.
// Leader only.
func (m *Meta) AddVoter(ctx context.Context, id NodeID, addr raft.ServerAddress) error {
	return m.membership(ctx, func(to time.Duration) raft.IndexFuture {
		return m.raft.AddVoter(serverID(id), addr, 0, to)
	})
}

// AddNonvoter adds a node that receives the metadata log without voting.
// Leader only.
func (m *Meta) AddNonvoter(ctx context.Context, id NodeID, addr raft.ServerAddress) error {
	return m.membership(ctx, func(to time.Duration) raft.IndexFuture {
		return m.raft.AddNonvoter(serverID(id), addr, 0, to)
	})
}

// DemoteVoter makes a voter of the metadata group a non-voter: it keeps
// receiving the log but no longer votes or counts toward a quorum. Leader
// only.
func (m *Meta) DemoteVoter(ctx context.Context, id NodeID) error {
	return m.membership(ctx, func(to time.Duration) raft.IndexFuture {
		return m.raft.DemoteVoter(serverID(id), 0, to)
	})
}

// RemoveServer removes a node from the metadata group. Leader only.
func (m *Meta) RemoveServer(ctx context.Context, id NodeID) error {
	return m.membership(ctx, func(to time.Duration) raft.IndexFuture {
		return m.raft.RemoveServer(serverID(id), 0, to)
	})
}

// Servers is the latest Raft configuration of the metadata group.
func (m *Meta) Servers() ([]raft.Server, error) {
	f := m.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, fmt.Errorf("raftmeta: configuration: %w", err)
	}
	return f.Configuration().Servers, nil
}

func serverID(id NodeID) raft.ServerID { return raft.ServerID(strconv.Itoa(int(id))) }

// ---------------------------------------------------------------- reads

// FSM is the local catalog (for Watch, AppliedIndex and reads).
func (m *Meta) FSM() *FSM { return m.fsm }

// Raft is the underlying Raft instance (membership changes, stats).
func (m *Meta) Raft() *raft.Raft { return m.raft }

// Watch returns a channel closed on the next applied catalog change.
func (m *Meta) Watch() <-chan struct{} { return m.fsm.Watch() }

// AppliedIndex is the last applied log index of the local catalog.
func (m *Meta) AppliedIndex() uint64 { return m.fsm.AppliedIndex() }

// CaughtUp reports whether the local catalog has applied every entry this
// node knows to be committed, and it knows of a commit at all: after a
// restart, not before the log kept on disk is replayed (a leader's first
// commit of its term, or a follower's first from its leader).
//
// The catalog sees only commands: a membership change or a new leader's
// no-op may end the committed log, with nothing after them for a while
// (a node added back to the group, on a quiet cluster), so the entries
// between the catalog's index and the commit index are looked at: caught
// up when none is a command. One missing from the local log is below the
// local snapshot, which the catalog holds.
func (m *Meta) CaughtUp() bool {
	c := m.raft.CommitIndex()
	if c == 0 {
		return false
	}
	for i := c; i > m.fsm.AppliedIndex(); i-- {
		var l raft.Log
		switch err := m.store.GetLog(i, &l); {
		case errors.Is(err, raft.ErrLogNotFound):
			return true
		case err != nil, l.Type == raft.LogCommand:
			return false
		}
	}
	return true
}

func (m *Meta) Databases() []Database                          { return m.fsm.Databases() }
func (m *Meta) Tables(db string) ([]*Table, error)             { return m.fsm.Tables(db) }
func (m *Meta) TableByName(db, name string) (*Table, error)    { return m.fsm.TableByName(db, name) }
func (m *Meta) TableByID(id int64) (*Table, error)             { return m.fsm.TableByID(id) }
func (m *Meta) Partitions(tableID int64) ([]*Partition, error) { return m.fsm.Partitions(tableID) }
func (m *Meta) Assignments() []Assignment                      { return m.fsm.Assignments() }
func (m *Meta) AssignmentsForTable(id int64) []Assignment      { return m.fsm.AssignmentsForTable(id) }
func (m *Meta) Nodes() []Node                                  { return m.fsm.Nodes() }
func (m *Meta) Node(id NodeID) (Node, error)                   { return m.fsm.Node(id) }
func (m *Meta) ClusterID() string                              { return m.fsm.ClusterID() }
func (m *Meta) ForgottenNodeID() NodeID                        { return m.fsm.ForgottenNodeID() }
func (m *Meta) ClusterConfig() ClusterConfig                   { return m.fsm.ClusterConfig() }

// IsLeader reports whether this node leads the metadata group.
func (m *Meta) IsLeader() bool { return m.raft.State() == raft.Leader }

// Leader returns the known leader, or 0 and "" when none is known.
func (m *Meta) Leader() (NodeID, raft.ServerAddress) {
	addr, id := m.raft.LeaderWithID()
	if id == "" {
		return 0, ""
	}
	n, err := strconv.Atoi(string(id))
	if err != nil {
		return 0, addr
	}
	return NodeID(n), addr
}

// WaitForLeader blocks until a leader is known (returning it), ctx ends, or
// Meta closes.
func (m *Meta) WaitForLeader(ctx context.Context) (NodeID, error) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if id, _ := m.Leader(); id != 0 {
			return id, nil
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("%w: %w", ErrNoLeader, ctx.Err())
		case <-m.quit:
			return 0, ErrClosed
		case <-tick.C:
		}
	}
}
