package node

import (
	"context"
	"fmt"

	"github.com/fluss-node/fluss-node/raftmeta"
	"github.com/fluss-node/fluss-node/rpc"
)

// Draining and decommissioning are declarative: DrainNode and
// DecommissionNode write the node's state into the catalog (replicated),
// and every node acts on its own copy. Draining:
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
//
// Decommissioning (a node leaving the cluster for good, while it runs) is
// a drain that also moves the node's data away:
//   - the node hands off its leaderships as a draining node does, and no
//     node hands one back;
//   - the controller (on the metadata leader) moves its replicas to active
//     nodes, one per bucket at a time, as rebalance moves replicas
//     (raftmeta.MoveOff): the bucket's group adds the new replica, waits
//     until it caught up and votes, and only then drops the old one, so
//     the bucket never has fewer voting copies than assigned;
//   - once no assignment names it and it reports no open replica, the
//     controller removes it from the metadata group; promote does not count
//     a decommissioning voter, so its vote passes to a non-voter first when
//     there is one (fixMetaMembers, promote).
//
// It then holds nothing and votes nowhere; it stays decommissioning in the
// catalog and can be stopped. Undrain stops a decommission at any point:
// the node is active again, added back to the metadata group, and
// rebalance moves replicas back onto it.

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

// UndrainNode implements rpc.ClusterAdmin: it returns node id to active,
// from draining or decommissioning.
func (n *Node) UndrainNode(ctx context.Context, id raftmeta.NodeID) error {
	return n.changeNodeState(ctx, id, raftmeta.NodeActive)
}

// DecommissionNode implements rpc.ClusterAdmin: it marks node id
// decommissioning (see the package comment above).
func (n *Node) DecommissionNode(ctx context.Context, id raftmeta.NodeID) error {
	if err := n.requireFeature(featureDecommission, "decommissioning a node"); err != nil {
		return err
	}
	return n.changeNodeState(ctx, id, raftmeta.NodeDecommissioning)
}

func (n *Node) changeNodeState(ctx context.Context, id raftmeta.NodeID, s raftmeta.NodeState) error {
	n.awaitMetaLeader(ctx)
	_, err := n.metaCall(ctx, &metaOp{Op: opSetNodeState, Node: &raftmeta.Node{ID: id, State: s}})
	return err
}

// setNodeState runs on the metadata leader. The changes allowed: active
// to draining (drain), draining or decommissioning to active (undrain), and
// active or draining to decommissioning (decommission), which some other
// active node must be able to take each of the node's replicas for. A
// joining node becomes active by registering.
func (n *Node) setNodeState(ctx context.Context, nd *raftmeta.Node) error {
	if nd == nil || nd.ID <= 0 {
		return fmt.Errorf("%w: node state change without a node id", raftmeta.ErrInvalid)
	}
	if nd.State != raftmeta.NodeActive && nd.State != raftmeta.NodeDraining && nd.State != raftmeta.NodeDecommissioning {
		return fmt.Errorf("%w: node %d: state %q can not be set (use draining, decommissioning or active)", raftmeta.ErrInvalid, nd.ID, nd.State)
	}
	nodes := n.meta.Nodes()
	for _, m := range nodes {
		if m.ID != nd.ID {
			continue
		}
		switch {
		case m.State == nd.State:
			return nil
		case m.State == raftmeta.NodeDecommissioning && nd.State == raftmeta.NodeDraining:
			return fmt.Errorf("%w: node %d is decommissioning: undrain it first to stop that", raftmeta.ErrInvalid, nd.ID)
		case m.State != raftmeta.NodeActive && m.State != raftmeta.NodeDraining && m.State != raftmeta.NodeDecommissioning:
			return fmt.Errorf("%w: node %d is %s: only an active node can be drained or decommissioned (and only a draining or decommissioning one undrained)", raftmeta.ErrInvalid, nd.ID, m.State)
		}
		if nd.State == raftmeta.NodeDecommissioning {
			if err := n.roomToDecommission(nodes, nd.ID); err != nil {
				return err
			}
		}
		if err := n.meta.SetNodeState(ctx, nd.ID, nd.State); err != nil {
			return err
		}
		n.logger.Info("node state changed", "id", int32(nd.ID), "from", m.State, "to", nd.State)
		return nil
	}
	return raftmeta.Named(raftmeta.ErrNodeNotFound, "node %d is not in the catalog (see `fluss-node cluster status`)", nd.ID)
}

// roomToDecommission refuses to decommission node id when a bucket it
// holds has no other active, up node free to take its replica, or when no
// other node would be left to vote in the metadata group.
func (n *Node) roomToDecommission(nodes []raftmeta.Node, id raftmeta.NodeID) error {
	alive := n.gossipAlive(nodes)
	var targets []raftmeta.NodeID
	for _, m := range nodes {
		if m.ID != id && m.State == raftmeta.NodeActive && alive[m.ID] {
			targets = append(targets, m.ID)
		}
	}
	if len(targets) == 0 {
		return raftmeta.Named(raftmeta.ErrNoRoom, "node %d is the only active node: add a node before decommissioning it", id)
	}
	leaving := func(r raftmeta.NodeID) bool { return r == id }
	none := func(raftmeta.NodeID) bool { return false }
	if _, stuck := raftmeta.MoveOff(n.meta.Assignments(), leaving, none, targets); len(stuck) > 0 {
		return raftmeta.Named(raftmeta.ErrNoRoom, "node %d holds %d bucket(s) that no other active node is free to take (%v first): add a node before decommissioning it", id, len(stuck), stuck[0])
	}
	return nil
}

// Rebalance implements rpc.ClusterAdmin.
func (n *Node) Rebalance(ctx context.Context) (int, error) {
	n.awaitMetaLeader(ctx)
	moved, err := n.metaCall(ctx, &metaOp{Op: opRebalance})
	return int(moved), err
}
