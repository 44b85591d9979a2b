package rpc

import (
	"context"
	"errors"
	"time"

	"github.com/fluss-node/fluss-node/kvstore"
	"github.com/fluss-node/fluss-node/logstore/record"
	"github.com/fluss-node/fluss-node/raftmeta"
)

// Backend is what the Connect handlers need from a node. node.Node implements
// it; tests may fake it. Every method may be called from many goroutines.
//
// Errors are domain sentinels (raftmeta.Err*, the Err* below) wrapped with
// context; toConnectError (errors.go) maps them to Connect codes in one place.
type Backend interface {
	// Catalog reads are served from the local copy of the metadata FSM;
	// catalog writes go through the metadata Raft group.
	CreateDatabase(ctx context.Context, name, comment string, ignoreIfExists bool) error
	DropDatabase(ctx context.Context, name string, ignoreIfNotExists, cascade bool) error
	ListDatabases(ctx context.Context) ([]string, error)
	CreateTable(ctx context.Context, spec raftmeta.TableSpec, ignoreIfExists bool) (tableID int64, err error)
	// Table returns the named table ("db.table"); the result is immutable.
	Table(ctx context.Context, name string) (*raftmeta.Table, error)
	ListTables(ctx context.Context, database string) ([]string, error)
	DropTable(ctx context.Context, name string, ignoreIfNotExists bool) error
	// AddColumns appends nullable columns to a log table's schema as a new
	// schema version and returns its id (raftmeta.Meta.AddColumns).
	AddColumns(ctx context.Context, name string, cols []record.Column) (schemaID int32, err error)
	// SetTableProperties sets and removes properties of a table that may
	// change after it is created (raftmeta.AlterProperties).
	SetTableProperties(ctx context.Context, name string, set map[string]string, reset []string) error
	// CreatePartition creates the partition of a partitioned table
	// ("db.table") with the given values (one per partition key) and
	// returns it once its buckets have leaders (or a bounded wait ended).
	// With ignoreIfExists an existing partition is returned as it is.
	CreatePartition(ctx context.Context, table string, values map[string]string, ignoreIfExists bool) (*raftmeta.Partition, error)
	DropPartition(ctx context.Context, table string, values map[string]string, ignoreIfNotExists bool) error
	// Partitions lists a table's partitions sorted by name; Partition
	// returns one by name (raftmeta.ErrPartitionNotFound if none). The
	// results are immutable.
	Partitions(ctx context.Context, tableID int64) ([]*raftmeta.Partition, error)
	Partition(ctx context.Context, tableID int64, name string) (*raftmeta.Partition, error)
	// Layout lists every bucket of a table with its replicas and live
	// leader; with inSync, also the replicas its leader counts in sync.
	Layout(ctx context.Context, tableID int64, inSync bool) ([]BucketLayout, error)
	DescribeCluster(ctx context.Context) (*ClusterInfo, error)

	// Append proposes already-encoded record batches (record.AppendBatch
	// output with base offset and commit timestamp zero; the bucket leader
	// stamps both) to one bucket and returns once they are committed and
	// applied. writerID 0 means no idempotence. A retried (writerID, seq)
	// returns the first attempt's result without storing anything.
	// The batches slice and its contents are owned by the callee after the call.
	Append(ctx context.Context, b raftmeta.BucketID, batches [][]byte, writerID int64, seq int32) (AppendResult, error)
	// Fetch returns committed batches that hold offsets >= offset, at most
	// about maxBytes (at least one batch when any is available), waiting up
	// to maxWait for data when none is. Returned batches may start before
	// offset; the caller trims. The returned slices must not be modified.
	// An offset above the high watermark or below the log start offset
	// returns ErrOffsetOutOfRange at once (without waiting).
	Fetch(ctx context.Context, b raftmeta.BucketID, offset int64, maxBytes int, maxWait time.Duration) (*FetchResult, error)
	// ListOffset resolves EARLIEST, LATEST (the high watermark) or the first
	// offset whose commit timestamp is >= tsMs (LATEST if none is).
	ListOffset(ctx context.Context, b raftmeta.BucketID, spec OffsetSpec, tsMs int64) (int64, error)

	// Write merges a primary-key write on the bucket leader (DESIGN §6) and
	// returns once its changelog is committed and applied: the changelog's
	// base offset and record count (0 when the merge engine changed
	// nothing). A retried (writerID, seq) returns the first result and is
	// not merged again. Rows are full schema-width rows of the table's
	// current schema; for deletes only the key columns matter.
	Write(ctx context.Context, b raftmeta.BucketID, w *PKWrite, writerID int64, seq int32) (AppendResult, error)
	// Lookup returns, on the bucket leader and linearizably, the stored row
	// (kvstore row encoding) of each encoded primary key
	// (kvstore.Codec.AppendKey), nil where the key has no row. Rows
	// totalling more than maxBytes (> 0) fail it with ErrResourceExhausted.
	Lookup(ctx context.Context, b raftmeta.BucketID, keys [][]byte, maxBytes int) ([][]byte, error)
	// PrefixScan returns, like Lookup, the rows whose encoded key starts
	// with prefix (kvstore.Codec.AppendBucketKey; empty: all), in key order,
	// at most limit (0: no limit), and with maxBytes > 0 stops after the
	// row that takes them past maxBytes bytes in all.
	PrefixScan(ctx context.Context, b raftmeta.BucketID, prefix []byte, limit, maxBytes int) ([][]byte, error)
	// LeadsLocally reports whether this node leads b right now, so that a
	// read of b is served here without a network hop. A hint for how to
	// schedule calls: the calls route themselves whatever it says.
	LeadsLocally(b raftmeta.BucketID) bool

	// Ready returns nil when the node serves client requests (it has joined
	// the cluster and knows a metadata leader), else why not. /readyz
	// answers 200 or 503 with it.
	Ready() error
}

// PKWrite is one Upsert or Delete for one bucket of a primary-key table.
type PKWrite struct {
	Rows       []kvstore.Row
	TargetCols []int // partial update/delete: schema column indexes; nil = all
	Delete     bool
	SchemaID   int32 // the table schema version the rows are of
}

// OffsetSpec selects a ListOffset position.
type OffsetSpec int

const (
	OffsetEarliest OffsetSpec = iota
	OffsetLatest
	OffsetTimestamp
)

// AppendResult is where an appended set of batches landed.
type AppendResult struct {
	BaseOffset int64
	Count      int32
}

// FetchResult is one read of a bucket's committed log.
type FetchResult struct {
	Batches        [][]byte // record.ParseBatch-able, in offset order
	HighWatermark  int64    // offsets below it are committed
	LogStartOffset int64
}

// BucketLayout is one bucket's placement.
type BucketLayout struct {
	PartitionID   int64
	PartitionName string
	Bucket        int32
	Leader        raftmeta.NodeID // 0 while no leader is known
	Replicas      []raftmeta.NodeID
	// InSync: the replicas the leader counts in sync, when asked for; nil
	// when the leader did not say (none known, or it did not answer).
	InSync []raftmeta.NodeID
}

// ClusterInfo describes the cluster as this node sees it.
type ClusterInfo struct {
	ClusterID  string
	MetaLeader raftmeta.NodeID
	Nodes      []NodeInfo
	// Config is the cluster-wide settings in force.
	Config raftmeta.ClusterConfig
	// Leaderless counts the buckets that no replica on the nodes that
	// answered leads.
	Leaderless int32
	// Lost counts the buckets whose every replica is on a node down past
	// the dead-node grace (catalog state left).
	Lost int32
}

// NodeInfo is one member in DescribeCluster.
type NodeInfo struct {
	raftmeta.Node
	MetaRole string // leader | voter | nonvoter
	Replicas int32
	Leaders  int32
	// UnderReplicated: buckets this node leads with fewer replicas in sync
	// than assigned; Offline: replicas assigned to it that it has not
	// open. -1 when the node did not say.
	UnderReplicated int32
	Offline         int32
}

// Data-path sentinel errors returned by a Backend.
var (
	ErrNotLeader         = errors.New("not the bucket leader")
	ErrNoBucketLeader    = errors.New("bucket leader unavailable") // none elected, none reachable, or it cannot reach a quorum
	ErrBucketNotFound    = errors.New("bucket not found")
	ErrOffsetOutOfRange  = errors.New("offset out of range")
	ErrWrongTableKind    = errors.New("operation does not fit the table kind")
	ErrResourceExhausted = errors.New("over a size limit")
	// ErrSequence: an idempotent writer sent a batch sequence older than the
	// ones the bucket remembers for it; the batch is neither stored nor
	// known to be stored.
	ErrSequence = errors.New("writer batch sequence out of order")
)

// ErrBucketNotLost wraps a RestoreBucket of a bucket that still has a
// replica on a node that is up or not yet down past the grace period.
var ErrBucketNotLost = errors.New("the bucket has not lost every replica")

// ErrNotRestorable wraps a RestoreBucket of a primary-key bucket that
// remote storage holds no KV snapshot of from which its remote log runs
// without a gap to the end.
var ErrNotRestorable = errors.New("remote storage cannot restore the bucket")
