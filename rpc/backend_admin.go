package rpc

import (
	"context"
	"errors"
	"time"

	"connectrpc.com/connect"

	"github.com/fluss-node/fluss-node/raftmeta"
)

// ClusterAdmin is the optional capability of a Backend that runs cluster
// operations (DrainNode, UndrainNode, DecommissionNode, Rebalance,
// SetClusterConfig, RestoreBucket). The server finds it by
// type assertion; a Backend without it answers those calls Unimplemented.
// Every method may be called from many goroutines; each runs on the
// metadata leader (the backend forwards) and returns once the change is
// applied on the node that answers.
type ClusterAdmin interface {
	// DrainNode marks node id draining: it leads no bucket and gets no new
	// replicas. Draining a draining node is a no-op. Unknown ids wrap
	// raftmeta.ErrNodeNotFound.
	DrainNode(ctx context.Context, id raftmeta.NodeID) error
	// UndrainNode returns node id to active (from draining or
	// decommissioning).
	UndrainNode(ctx context.Context, id raftmeta.NodeID) error
	// DecommissionNode marks node id decommissioning: it drains, its
	// replicas move to active nodes and it leaves the metadata group. It
	// wraps raftmeta.ErrNoRoom when a bucket it holds has no other active
	// node to go to.
	DecommissionNode(ctx context.Context, id raftmeta.NodeID) error
	// Rebalance rewrites the assignments so replicas are spread evenly over
	// the active nodes, and returns how many replicas move.
	Rebalance(ctx context.Context) (moved int, err error)
	// SetClusterConfig changes the cluster-wide settings that change names
	// (nil: kept) and returns the settings in force afterwards. Invalid
	// values wrap raftmeta.ErrInvalid.
	SetClusterConfig(ctx context.Context, change ClusterConfigChange) (raftmeta.ClusterConfig, error)
	// RestoreBucket starts a new Raft group for a bucket of table db.table
	// (partition: a partition's name, "" if unpartitioned) that lost every
	// replica, starting after what remote storage holds of it, and returns
	// the bucket's new assignment. It wraps ErrBucketNotLost while a
	// replica's node is up or not down past the grace period, and
	// ErrNotRestorable for a primary-key bucket whose KV state remote
	// storage cannot give back.
	RestoreBucket(ctx context.Context, db, table, partition string, bucket int32) (raftmeta.Assignment, error)
}

// ClusterConfigChange names the settings SetClusterConfig changes.
type ClusterConfigChange struct {
	MetaVoters            *int
	DeadNodeGrace         *time.Duration
	DefaultLogTTL         *time.Duration
	LakeSnapshotRetention *time.Duration
}

// clusterAdmin returns the backend's ClusterAdmin, or an Unimplemented error.
func (s *service) clusterAdmin(op string) (ClusterAdmin, error) {
	ca, ok := s.b.(ClusterAdmin)
	if !ok {
		return nil, connect.NewError(connect.CodeUnimplemented, errors.New(op+": this server does not run cluster operations"))
	}
	return ca, nil
}

// adminError maps the errors of cluster operations that the shared mapping
// does not know (a node id that is not in the catalog) and leaves the rest
// to it.
func adminError(err error) error {
	if errors.Is(err, raftmeta.ErrNodeNotFound) {
		return connect.NewError(connect.CodeNotFound, err)
	}
	return err
}
