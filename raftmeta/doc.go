// Package raftmeta is the metadata Raft group of a fluss-node cluster: the
// catalog state machine (nodes, databases, tables with their schema
// versions, partitions, bucket assignments, cluster id), its commands and
// snapshots (protobuf, proto/fluss/meta/v1/meta.proto), validation of
// user-supplied table definitions, bucket placement, and the wiring of
// hashicorp/raft with raft-boltdb.
//
// Invariants:
//
//   - Apply is deterministic. It reads only the current state and the
//     command: no clocks, no randomness, no output that depends on map
//     order. Proposers stamp creation times, cluster ids and bucket
//     placements into commands; the FSM assigns table and partition ids
//     from counters kept in its state (so ids are never reused, even after
//     a failed or dropped create).
//   - Apply panics only on an entry DecodeCommand rejects (the replica must
//     stop rather than diverge). Domain failures come back as
//     *ApplyResult{Err}; a failed command changes nothing but the applied
//     index.
//   - A snapshot is one metapb.State with every list sorted and maps
//     encoded deterministically: replicas that applied the same log produce
//     byte-identical snapshots (MarshalState).
//   - An unpartitioned table is created together with the assignments of
//     all its buckets in one entry; a partitioned table has buckets only
//     per partition, created with the partition. Dropping a table or
//     partition drops its assignments.
//   - An assignment's Epoch is 0 for the replica set a bucket was created
//     with and grows by one on every SetAssignments that changes the set
//     (not its order); commands cannot set it. Only epoch-0 replicas
//     bootstrap a bucket's Raft group.
//   - ReplaceDown and Rebalance (placement.go) are pure: the controller
//     on the metadata leader feeds them the catalog and liveness and
//     proposes their output. Neither puts two replicas of a bucket on one
//     node; ReplaceDown changes only buckets whose live replicas are a
//     majority, Rebalance moves at most one replica of a bucket per run
//     (whatever its replication factor: the moved-away replica serves
//     until its group drops it, node/controller.go).
//   - User input is validated before proposing (BuildTable, PartitionName,
//     ValidateNewColumns); Apply re-checks only what keeps the catalog
//     consistent (existence, id ranges, bucket coverage, nullable added
//     columns). Tightening a validation rule therefore never changes how an
//     old log replays.
//   - Schemas only grow: AddColumns appends a version with nullable columns
//     at the end; earlier versions stay readable by id (SchemaByID).
//   - Values returned by reads (*Table, *Partition, Assignment.Replicas)
//     are immutable: the FSM replaces them, never edits them. Callers must
//     not modify them either.
//   - Watch returns a channel closed on the next state change (or restore);
//     reconcilers re-read the catalog and call Watch again.
//   - Proposing methods of Meta run on the metadata leader only; elsewhere
//     they return ErrNotLeader naming the leader when one is known.
//     Forwarding is the caller's job.
//
// Disk layout under Config.Dir: raft.db (bbolt: log and stable store) and
// snapshots/ (raft's file snapshot store, the newest SnapshotRetain kept).
package raftmeta
