package node

import (
	"context"
	"fmt"

	"github.com/fluss-node/fluss-node/raftmeta"
	"github.com/fluss-node/fluss-node/rpc"
)

// Draining is declarative: DrainNode writes state draining into the
// catalog (replicated), and every node acts on its own copy:
//   - placement (raftmeta.Placement) and the controller place replicas on
//     active nodes only, so a draining node gets no new buckets;
//   - the balance loop of the draining node hands the leadership of every
//     bucket it leads to the first active replica of the bucket that is a
//     voter, and the metadata group's to an active voter of that group
//     (moveMetaLeader); the other nodes' balance loops never hand
//     leadership to a node that is not active;
//   - a draining node that restarts stays draining: its registration
//     keeps the state (runMetaOp), until UndrainNode.
//
// A bucket whose every other replica is down or draining keeps its leader
// on the draining node (there is nowhere to move it).

var _ rpc.ClusterAdmin = (*Node)(nil)

// Metadata operations of cluster administration (peer call meta.op).
const (
	opSetNodeState = "set_node_state"
	opRebalance    = "rebalance"
)

// DrainNode implements rpc.ClusterAdmin: it marks node id draining.
func (n *Node) DrainNode(ctx context.Context, id raftmeta.NodeID) error {
	return n.changeNodeState(ctx, id, raftmeta.NodeDraining)
}

// UndrainNode implements rpc.ClusterAdmin: it returns node id to active.
func (n *Node) UndrainNode(ctx context.Context, id raftmeta.NodeID) error {
	return n.changeNodeState(ctx, id, raftmeta.NodeActive)
}

func (n *Node) changeNodeState(ctx context.Context, id raftmeta.NodeID, s raftmeta.NodeState) error {
	n.awaitMetaLeader(ctx)
	_, err := n.metaCall(ctx, &metaOp{Op: opSetNodeState, Node: &raftmeta.Node{ID: id, State: s}})
	return err
}

// setNodeState runs on the metadata leader: only active <-> draining
// changes are allowed (a joining node becomes active by registering).
func (n *Node) setNodeState(ctx context.Context, nd *raftmeta.Node) error {
	if nd == nil || nd.ID <= 0 {
		return fmt.Errorf("%w: node state change without a node id", raftmeta.ErrInvalid)
	}
	if nd.State != raftmeta.NodeActive && nd.State != raftmeta.NodeDraining {
		return fmt.Errorf("%w: node %d: state %q can not be set (use draining or active)", raftmeta.ErrInvalid, nd.ID, nd.State)
	}
	for _, m := range n.meta.Nodes() {
		if m.ID != nd.ID {
			continue
		}
		switch {
		case m.State == nd.State:
			return nil
		case m.State != raftmeta.NodeActive && m.State != raftmeta.NodeDraining:
			return fmt.Errorf("%w: node %d is %s: only an active node can be drained (and only a draining one undrained)", raftmeta.ErrInvalid, nd.ID, m.State)
		}
		if err := n.meta.SetNodeState(ctx, nd.ID, nd.State); err != nil {
			return err
		}
		n.logger.Info("node state changed", "id", int32(nd.ID), "from", m.State, "to", nd.State)
		return nil
	}
	return raftmeta.Named(raftmeta.ErrNodeNotFound, "node %d is not in the catalog (see `fluss-node cluster status`)", nd.ID)
}

// Rebalance implements rpc.ClusterAdmin.
func (n *Node) Rebalance(ctx context.Context) (int, error) {
	n.awaitMetaLeader(ctx)
	moved, err := n.metaCall(ctx, &metaOp{Op: opRebalance})
	return int(moved), err
}
