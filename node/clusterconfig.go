package node

import (
	"context"
	"fmt"
	"time"

	"github.com/fluss-node/fluss-node/raftmeta"
	"github.com/fluss-node/fluss-node/rpc"
)

// Cluster-wide settings live in the catalog, not in each node's
// configuration, where they could differ between nodes. The one so far is
// meta_voters, the metadata group's target size: the metadata leader
// promotes non-voters up to it (promote) and demotes voters beyond it
// (fixMetaMembers). Were it read from the leader's configuration, two
// nodes configured differently would undo each other's changes at every
// change of leader.
//
// A node's configured meta_voters is the cluster's starting value: the
// first metadata leader whose cluster is at featureClusterConfig records
// it (a no-op once a value is set, so a cluster upgraded from an earlier
// binary keeps the value its leader used). From then on it changes only
// through SetClusterConfig (`cluster config --meta-voters N`), and a node
// whose configuration says otherwise logs so.

// opSetMetaVoters sets the catalog's meta_voters (peer call meta.op).
const opSetMetaVoters = "set_meta_voters"

// metaVoters is the metadata group's target number of voters: the
// catalog's, or this node's configured one until the catalog has one.
func (n *Node) metaVoters() int {
	if v := n.meta.MetaVoters(); v > 0 {
		return v
	}
	return n.cfg.MetaVoters
}

// SetClusterConfig implements rpc.ClusterAdmin.
func (n *Node) SetClusterConfig(ctx context.Context, change rpc.ClusterConfigChange) (rpc.ClusterConfig, error) {
	if change.MetaVoters != nil {
		if err := raftmeta.ValidateMetaVoters(*change.MetaVoters); err != nil {
			return rpc.ClusterConfig{}, err
		}
		if err := n.requireFeature(featureClusterConfig, "setting meta_voters"); err != nil {
			return rpc.ClusterConfig{}, err
		}
		n.awaitMetaLeader(ctx)
		if _, err := n.metaCall(ctx, &metaOp{Op: opSetMetaVoters, Voters: *change.MetaVoters}); err != nil {
			return rpc.ClusterConfig{}, err
		}
	} else if err := n.awaitCatalog(ctx); err != nil {
		return rpc.ClusterConfig{}, err
	}
	return rpc.ClusterConfig{MetaVoters: n.metaVoters()}, nil
}

// setMetaVoters runs on the metadata leader.
func (n *Node) setMetaVoters(ctx context.Context, voters int) error {
	changed, err := n.meta.SetMetaVoters(ctx, voters, false)
	if changed {
		n.logger.Info("meta_voters set", "meta_voters", voters)
	}
	return err
}

// recordMetaVoters runs on the metadata leader: it records this node's
// configured meta_voters as the cluster's when the catalog has none yet
// and every alive node can read the command.
func (n *Node) recordMetaVoters() {
	if n.meta.MetaVoters() > 0 || !n.gossipStarted() || n.clusterFeatureLevel() < featureClusterConfig {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	changed, err := n.meta.SetMetaVoters(ctx, n.cfg.MetaVoters, true)
	switch {
	case err != nil:
		n.logger.Warn("record meta_voters in the catalog", "err", err)
	case changed:
		n.logger.Info("meta_voters recorded in the catalog from this node's configuration", "meta_voters", n.cfg.MetaVoters)
	}
}

// checkMetaVotersConfig logs, once per catalog value, that this node's
// configured meta_voters is not the cluster's (which is the one that
// counts). warned is the catalog value last warned about.
func (n *Node) checkMetaVotersConfig(warned *int) {
	v := n.meta.MetaVoters()
	if v == 0 || v == n.cfg.MetaVoters || v == *warned {
		return
	}
	*warned = v
	n.logger.Warn(fmt.Sprintf("meta_voters is %d in this node's configuration but %d for the cluster; the cluster's counts (change it with `fluss-node cluster config --meta-voters N`)", n.cfg.MetaVoters, v),
		"configured", n.cfg.MetaVoters, "cluster", v)
}
