package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fluss-node/fluss-node/raftmeta"
	"github.com/fluss-node/fluss-node/rpc"
)

// Cluster-wide settings live in the catalog (raftmeta.ClusterConfig), not
// in each node's configuration, where they could differ between nodes:
//
//   - meta_voters, the metadata group's target size: the metadata leader
//     promotes non-voters up to it (promote) and demotes voters beyond it
//     (fixMetaMembers). Read from the leader's own configuration, two nodes
//     configured differently would undo each other's changes at every
//     change of leader.
//   - cluster.dead_node_grace: how long the controller, on the metadata
//     leader, waits before it moves a down node's replicas. A leader change
//     would otherwise change the policy.
//   - storage.default_log_ttl: the retention of tables without
//     table.log.ttl. Every replica applies it to its own log: replicas
//     configured differently would keep different amounts, and a change
//     of bucket leader would move the log's start.
//   - tiering.lake_snapshot_retention: how long a replaced Iceberg snapshot
//     of a lake table, and the files only it holds, stays. Every bucket
//     leader expires its table's snapshots at each commit: a node with a
//     shorter retention would delete files the snapshots another node
//     keeps still name (time travel to them would fail).
//
// A node's configured values are the cluster's starting values: the first
// metadata leader whose cluster is at featureClusterConfig records those
// the catalog lacks (so a cluster upgraded from an earlier binary takes its
// leader's values then). From then on they change only through
// SetClusterConfig (`cluster config`), and a node whose configuration says
// otherwise logs so.

// opSetClusterConfig sets catalog settings (peer call meta.op).
const opSetClusterConfig = "set_cluster_config"

// clusterConfig is the settings in force: the catalog's, and this node's
// configured ones where the catalog has none yet.
func (n *Node) clusterConfig() raftmeta.ClusterConfig {
	c := n.meta.ClusterConfig()
	if c.MetaVoters == 0 {
		c.MetaVoters = n.cfg.MetaVoters
	}
	if c.DeadNodeGrace == 0 {
		c.DeadNodeGrace = n.cfg.Cluster.DeadNodeGrace.Duration
	}
	if c.DefaultLogTTL == 0 {
		c.DefaultLogTTL = n.cfg.Storage.DefaultLogTTL.Duration
	}
	if c.LakeSnapshotRetention == 0 {
		c.LakeSnapshotRetention = n.cfg.Tiering.LakeSnapshotRetention.Duration
	}
	return c
}

// configuredClusterConfig is this node's configured cluster settings.
func (n *Node) configuredClusterConfig() raftmeta.ClusterConfig {
	return raftmeta.ClusterConfig{MetaVoters: n.cfg.MetaVoters, DeadNodeGrace: n.cfg.Cluster.DeadNodeGrace.Duration,
		DefaultLogTTL: n.cfg.Storage.DefaultLogTTL.Duration, LakeSnapshotRetention: n.cfg.Tiering.LakeSnapshotRetention.Duration}
}

// SetClusterConfig implements rpc.ClusterAdmin.
func (n *Node) SetClusterConfig(ctx context.Context, change rpc.ClusterConfigChange) (raftmeta.ClusterConfig, error) {
	var c raftmeta.ClusterConfig
	if err := errors.Join(
		changeField(&c.MetaVoters, change.MetaVoters, raftmeta.ValidateMetaVoters),
		changeField(&c.DeadNodeGrace, change.DeadNodeGrace, raftmeta.ValidateDeadNodeGrace),
		changeField(&c.DefaultLogTTL, change.DefaultLogTTL, raftmeta.ValidateDefaultLogTTL),
		changeField(&c.LakeSnapshotRetention, change.LakeSnapshotRetention, raftmeta.ValidateLakeSnapshotRetention),
	); err != nil {
		return raftmeta.ClusterConfig{}, err
	}
	if c != (raftmeta.ClusterConfig{}) {
		if err := n.requireFeature(featureClusterConfig, "changing cluster settings"); err != nil {
			return raftmeta.ClusterConfig{}, err
		}
		n.awaitMetaLeader(ctx)
		if _, err := n.metaCall(ctx, &metaOp{Op: opSetClusterConfig, Config: &c}); err != nil {
			return raftmeta.ClusterConfig{}, err
		}
	} else if err := n.awaitCatalog(ctx); err != nil {
		return raftmeta.ClusterConfig{}, err
	}
	return n.clusterConfig(), nil
}

// changeField sets *to to *v if v is given and valid.
func changeField[T any](to *T, v *T, validate func(T) error) error {
	if v == nil {
		return nil
	}
	if err := validate(*v); err != nil {
		return err
	}
	*to = *v
	return nil
}

// setClusterConfig runs on the metadata leader.
func (n *Node) setClusterConfig(ctx context.Context, c *raftmeta.ClusterConfig) error {
	if c == nil {
		return fmt.Errorf("%w: set_cluster_config without settings", raftmeta.ErrInvalid)
	}
	changed, err := n.meta.SetClusterConfig(ctx, *c, false)
	if changed {
		in := n.meta.ClusterConfig()
		n.logger.Info("cluster settings changed", "meta_voters", in.MetaVoters, "dead_node_grace", in.DeadNodeGrace, "default_log_ttl", in.DefaultLogTTL,
			"lake_snapshot_retention", in.LakeSnapshotRetention)
	}
	return err
}

// recordClusterConfig runs on the metadata leader: it records this node's
// configured settings where the catalog has none, once every alive node
// can read the command.
func (n *Node) recordClusterConfig() {
	have := n.meta.ClusterConfig()
	if have.MetaVoters != 0 && have.DeadNodeGrace != 0 && have.DefaultLogTTL != 0 && have.LakeSnapshotRetention != 0 || !n.gossipStarted() || n.clusterFeatureLevel() < featureClusterConfig {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	changed, err := n.meta.SetClusterConfig(ctx, n.configuredClusterConfig(), true)
	switch {
	case err != nil:
		n.logger.Warn("record the cluster settings in the catalog", "err", err)
	case changed:
		in := n.meta.ClusterConfig()
		n.logger.Info("cluster settings recorded in the catalog from this node's configuration", "meta_voters", in.MetaVoters, "dead_node_grace", in.DeadNodeGrace, "default_log_ttl", in.DefaultLogTTL,
			"lake_snapshot_retention", in.LakeSnapshotRetention)
	}
}

// checkClusterConfig logs, once per catalog value, each setting this
// node's configuration gives otherwise than the cluster (whose value is
// the one that counts). warned is the catalog settings last warned about.
func (n *Node) checkClusterConfig(warned *raftmeta.ClusterConfig) {
	have, mine := n.meta.ClusterConfig(), n.configuredClusterConfig()
	if v := have.MetaVoters; v != 0 && v != mine.MetaVoters && v != warned.MetaVoters {
		warned.MetaVoters = v
		n.logger.Warn(fmt.Sprintf("meta_voters is %d in this node's configuration but %d for the cluster; the cluster's counts (change it with `fluss-node cluster config --meta-voters N`)", mine.MetaVoters, v))
	}
	differs := func(key, flag string, have, mine time.Duration, warned *time.Duration) {
		if have != 0 && have != mine && have != *warned {
			*warned = have
			n.logger.Warn(fmt.Sprintf("%s is %v in this node's configuration but %v for the cluster; the cluster's counts (change it with `fluss-node cluster config --%s D`)", key, mine, have, flag))
		}
	}
	differs("cluster.dead_node_grace", "dead-node-grace", have.DeadNodeGrace, mine.DeadNodeGrace, &warned.DeadNodeGrace)
	differs("storage.default_log_ttl", "default-log-ttl", have.DefaultLogTTL, mine.DefaultLogTTL, &warned.DefaultLogTTL)
	differs("tiering.lake_snapshot_retention", "lake-snapshot-retention", have.LakeSnapshotRetention, mine.LakeSnapshotRetention, &warned.LakeSnapshotRetention)
}
