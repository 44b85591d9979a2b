package raftmeta

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/fluss-node/fluss-node/logstore/record"
)

// NodeID identifies a node for its whole life; it is stored in
// <data_dir>/node.id and never reused.
type NodeID int32

// Database is one namespace of tables.
type Database struct {
	Name        string
	Comment     string
	CreatedAtMs int64
}

// Table is a table's catalog entry. Schemas holds every schema version in
// order; the last is current. Readers must treat a *Table returned by the
// catalog as immutable: the FSM replaces entries, it never edits them.
type Table struct {
	ID            int64
	Database      string
	Name          string
	Schemas       []*record.Schema
	PartitionKeys []string
	BucketKeys    []string // defaults to the primary key minus partition keys
	BucketCount   int32
	Properties    map[string]string
	Comment       string
	CreatedAtMs   int64
}

// FullName is "db.table".
func (t *Table) FullName() string { return t.Database + "." + t.Name }

// Schema is the current schema.
func (t *Table) Schema() *record.Schema { return t.Schemas[len(t.Schemas)-1] }

// SchemaByID returns the schema version with the given id, or nil.
func (t *Table) SchemaByID(id int32) *record.Schema {
	for _, s := range t.Schemas {
		if s.ID == id {
			return s
		}
	}
	return nil
}

// HasPrimaryKey reports whether t is a primary-key table.
func (t *Table) HasPrimaryKey() bool { return t.Schema().HasPrimaryKey() }

// TableSpec is a CreateTable request after parsing, before validation.
type TableSpec struct {
	Database      string
	Name          string
	Columns       []record.Column
	PrimaryKey    []string
	PartitionKeys []string
	BucketKeys    []string
	BucketCount   int32 // 0 means the default (1)
	Properties    map[string]string
	Comment       string
}

// Partition is one partition of a partitioned table. Name is the values
// joined in partition-key order with '$' (as Fluss names them).
type Partition struct {
	ID      int64
	TableID int64
	Name    string
	Values  map[string]string
	// CreatedAtMs is stamped by the proposer (0 in catalogs written before it existed).
	CreatedAtMs int64
}

// MaxPartitionsPerTable bounds a table's partitions (Fluss's default
// max.partition.num): every partition is bucket.num Raft groups, and
// writes create partitions on demand.
const MaxPartitionsPerTable = 1000

// MaxBucketsPerTable bounds a partitioned table's buckets over all its
// partitions (Fluss's default max.bucket.num): a table of 4096 buckets
// holds at most 31 partitions.
const MaxBucketsPerTable = 128000

// NoPartition is the partition id of the buckets of an unpartitioned table.
const NoPartition int64 = 0

// BucketID names one bucket of one table (and partition).
type BucketID struct {
	TableID     int64
	PartitionID int64
	Bucket      int32
}

// String names the bucket in messages: "table 7 bucket 2", or "table 7
// partition 3 bucket 2".
func (b BucketID) String() string {
	if b.PartitionID == NoPartition {
		return "table " + strconv.FormatInt(b.TableID, 10) + " bucket " + strconv.Itoa(int(b.Bucket))
	}
	return "table " + strconv.FormatInt(b.TableID, 10) + " partition " + strconv.FormatInt(b.PartitionID, 10) + " bucket " + strconv.Itoa(int(b.Bucket))
}

// Assignment is the desired placement of one bucket's replicas. The first
// replica is the preferred leader.
type Assignment struct {
	BucketID
	Replicas []NodeID
	// Epoch counts the changes of the replica set: 0 is the set the bucket
	// was created with, whose replicas bootstrap its Raft group with it; a
	// replica that opens with no Raft state at a later epoch was moved
	// there and waits for the group's leader to add it. Set by the FSM:
	// ignored in commands.
	Epoch int64
	// Generation counts the Raft groups the bucket has had: 0 is the one
	// it was created with; RestoreBucket starts a new one (Epoch 0 again)
	// after the bucket lost every replica. A replica of an older
	// generation belongs to a group that no longer exists. Set by the
	// FSM: ignored in SetAssignments.
	Generation int64
	// StartOffset is the data offset this generation's group started
	// from: the end of what remote storage held of the lost group's log
	// (0 for generation 0). Set by the FSM: ignored in SetAssignments.
	StartOffset int64
}

// SameReplicas reports whether a and b hold the same set of nodes, in any
// order.
func SameReplicas(a, b []NodeID) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// NodeState is a node's membership state.
type NodeState string

const (
	NodeJoining  NodeState = "joining"
	NodeActive   NodeState = "active"
	NodeDraining NodeState = "draining"
	NodeLeft     NodeState = "left"
	// NodeDecommissioning: the node is leaving the cluster for good while
	// it runs. Its replicas move to active nodes, then it leaves the
	// metadata group; it stays in this state (holding nothing, voting in
	// nothing) until it is stopped, or undrained back to active.
	NodeDecommissioning NodeState = "decommissioning"
)

// ClusterConfig is the cluster-wide settings held in the catalog, so that
// every metadata leader acts on the same values. A zero field is not set
// (nodes then use their configured value).
type ClusterConfig struct {
	// MetaVoters is how many nodes vote in the metadata Raft group.
	MetaVoters int
	// DeadNodeGrace is how long a node may be down before the controller
	// moves its replicas and takes it out of the metadata group
	// (millisecond precision).
	DeadNodeGrace time.Duration
	// DefaultLogTTL is the retention of tables without table.log.ttl
	// (millisecond precision).
	DefaultLogTTL time.Duration
	// LakeSnapshotRetention is how long an Iceberg snapshot of a lake
	// table stays after a newer one replaced it, with the files only it
	// holds (millisecond precision).
	LakeSnapshotRetention time.Duration
}

// Node is a cluster member as recorded in the catalog.
type Node struct {
	ID         NodeID
	ClientAddr string
	PeerAddr   string
	GossipAddr string
	Version    string
	State      NodeState
}

// Sentinel errors of the catalog. Validation failures wrap ErrInvalid with a
// message that names the offending input.
var (
	ErrInvalid           = errors.New("invalid request")
	ErrDatabaseNotFound  = errors.New("database not found")
	ErrDatabaseExists    = errors.New("database already exists")
	ErrDatabaseNotEmpty  = errors.New("database is not empty")
	ErrTableNotFound     = errors.New("table not found")
	ErrTableExists       = errors.New("table already exists")
	ErrPartitionNotFound = errors.New("partition not found")
	ErrPartitionExists   = errors.New("partition already exists")
	// ErrTooManyPartitions: a table holds MaxPartitionsPerTable partitions.
	ErrTooManyPartitions = errors.New("too many partitions")
	// ErrFeatureLevel: an alive node runs a binary without the feature an
	// operation needs (a rolling upgrade is not finished).
	ErrFeatureLevel  = errors.New("cluster feature level too low")
	ErrNotLeader     = errors.New("not the metadata leader")
	ErrNoLeader      = errors.New("no metadata leader")
	ErrClosed        = errors.New("metadata store closed")
	ErrNodeNotFound  = errors.New("node not found")
	ErrNodeIDInUse   = errors.New("node id in use")
	ErrNoActiveNodes = errors.New("no active nodes to place buckets on")
	// ErrNoRoom: a node cannot be decommissioned because some bucket it
	// holds has no other active node to move to.
	ErrNoRoom = errors.New("no active node can take the node's replicas")
)

// namedError is a catalog error about one named object. Its message says
// what is wrong with the object in words ("table shop.orders already
// exists", not "table shop.orders: table already exists"); errors.Is
// matches its sentinel, which picks the error code.
type namedError struct {
	sentinel error
	msg      string
}

func (e *namedError) Error() string { return e.msg }
func (e *namedError) Unwrap() error { return e.sentinel }

// Named returns sentinel with the message format makes of args: an error
// that names what it is about in its own words and still matches sentinel.
func Named(sentinel error, format string, args ...any) error {
	return &namedError{sentinel: sentinel, msg: fmt.Sprintf(format, args...)}
}
