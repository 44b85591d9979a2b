// Package node wires one fluss-node process: it owns the data directory,
// the metadata Raft group (raftmeta), the bucket replicas assigned to this
// node (node/replica, one Raft group each), the node-wide fsync scheduler
// and the client listener (rpc). It owns lifecycles, not domain rules:
// components start in dependency order and stop in reverse.
//
// Invariants:
//   - The data directory is locked for the life of the Node; a second
//     process on the same directory fails at New.
//   - The set of open replicas converges to the assignments in the metadata
//     FSM that name this node (reconcile loop); reconciling is idempotent
//     and restart-safe.
//   - Node implements rpc.Backend; every error it returns wraps a sentinel
//     of raftmeta or rpc so that rpc maps it to one Connect code.
package node
