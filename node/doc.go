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
//     of raftmeta or rpc so that rpc maps it to one Connect code, also when
//     the error was produced on another node (wire.go carries sentinels).
//   - A node bootstraps a metadata group only when its meta/ holds no Raft
//     state and either it has no join list and bootstrap_expect is 0, or
//     bootstrap_expect nodes answered, none with state, and it has the
//     smallest id. A node with state never bootstraps or joins again.
//   - Node ids are allocated on the metadata leader under joinMu, with the
//     registration applied before the lock is released: never reused.
//   - Catalog writes run on the metadata leader; a request is forwarded at
//     most once (meta.op carries a forwarded flag; bucket.* requests are
//     never forwarded by their receiver), so forwarding cannot loop.
//   - A bucket replica with no Raft state bootstraps with the assignment's
//     full replica set, identical on every replica, only at assignment
//     epoch 0 (the set the bucket was created with). A replica placed on a
//     node later (epoch > 0) opens empty, never bootstraps, and is added
//     to the existing group by its leader, so a bucket never has two
//     groups.
//   - Bucket group membership follows the catalog (controller.go): the
//     leader of each group adds an assigned node as a non-voter, promotes
//     it once its last Raft index reached the leader's applied index
//     (bucket.progress), and removes an unassigned server at once when it
//     is down, else only once every assigned replica is a voter.
//   - The controller runs on the metadata leader only and writes
//     assignments; it moves the replicas of a node down (gossip failed or
//     left, or unknown to gossip and not answering node.hello) for longer
//     than cluster.dead_node_grace, and only of buckets whose group can
//     still reconfigure: their other replicas are a majority, or their
//     group has a leader anyway (recovered with `fluss-node recover`,
//     recover.go). The grace period starts again on a new metadata leader.
//   - A node deletes the data of every bucket not assigned to it: open
//     replicas when the assignment changes, directories on disk once after
//     start, when its own registration is in its catalog copy.
//   - Draining is a catalog state (drain.go): a draining node gets no new
//     replicas, hands every leadership it holds to the first active, up,
//     voting replica, and is never handed leadership; it stays draining
//     across restarts until undrained.
//   - Gossip (node/membership) starts once the node id is known and stops
//     with the metadata group (closeStores); it gossips joining until this node's catalog
//     registration is applied, then active, then left on Close (Leave).
//     Gossip never writes the catalog: it overrides the state that
//     DescribeCluster shows (alive: gossiped state, or draining when the
//     catalog says so; failed: dead; left: left) and tells the controller
//     and the leader handback which nodes are down.
package node
