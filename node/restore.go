package node

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fluss-node/fluss-node/node/replica"
	"github.com/fluss-node/fluss-node/raftmeta"
	"github.com/fluss-node/fluss-node/rpc"
	"github.com/fluss-node/fluss-node/tiering"
)

// Restoring a bucket that lost every replica (`cluster restore-bucket`,
// AdminService.RestoreBucket; docs/OPERATIONS.md "A bucket lost every
// replica"). Raft cannot elect where no replica is left, and `recover`
// has no survivor to force, so such a bucket would answer `unavailable`
// for good. What remote storage holds of its log (tiering) is what is
// left of it; restoring starts a new Raft group for the bucket, the next
// generation (raftmeta.Assignment.Generation), whose log begins where
// remote storage (and the lake) end, so reads below that are served from
// them as before and new writes continue after them:
//
//   - the metadata leader checks that every replica's node is down past
//     cluster.dead_node_grace (marked left, and not alive now), takes the
//     start offset from remote storage and the lake (for a primary-key
//     table it checks that a KV snapshot and the remote log after it reach
//     it: restorable), and commits RestoreBucket with one replica on the
//     least loaded live node (the controller's Grow adds the others once
//     the new group leads);
//   - that node bootstraps the new group at the start offset
//     (replica.Config.StartOffset: a seed snapshot in place of the first
//     log entry; for a primary-key table with the KV state of the lost
//     group's snapshot and remote changelog, replica.Config.Lost);
//   - a replica of an older generation belongs to a group that no longer
//     exists: the transport group name carries the generation
//     (bucketGroup), so the two never exchange a message, and a node that
//     finds one (a lost node that came back, or a leftover directory) sets
//     it aside as <bucket dir>.old-generation-<unix seconds> (for the
//     operator to delete) before it opens the new one. A generation file
//     in the directory of a restored group's replica says which it is.

// opRestoreBucket is the metadata operation of RestoreBucket.
const opRestoreBucket = "restore_bucket"

// oldGenerationSuffix names a replica directory of an earlier generation of
// its bucket's group, set aside.
const oldGenerationSuffix = ".old-generation-"

// generationFile, in a replica directory of a restored bucket (generation
// > 0), holds the generation in decimal.
const generationFile = "GENERATION"

// RestoreBucket implements rpc.ClusterAdmin: it starts a new group for a
// bucket of table db.name (partition: a partition's name, "" for an
// unpartitioned table) that lost every replica, and returns the bucket's
// new assignment.
func (n *Node) RestoreBucket(ctx context.Context, db, name, partition string, bucket int32) (raftmeta.Assignment, error) {
	n.awaitMetaLeader(ctx)
	op := &metaOp{Op: opRestoreBucket, Database: db, Name: name, Partition: partition, Bucket: bucket}
	if _, err := n.metaCall(ctx, op); err != nil {
		return raftmeta.Assignment{}, err
	}
	id, err := n.restoreTarget(db, name, partition, bucket)
	if err != nil {
		return raftmeta.Assignment{}, err
	}
	for _, a := range n.meta.Assignments() {
		if a.BucketID == id {
			return a, nil
		}
	}
	return raftmeta.Assignment{}, raftmeta.Named(raftmeta.ErrTableNotFound, "table %s.%s was dropped meanwhile", db, name)
}

// restoreTarget resolves the bucket RestoreBucket names.
func (n *Node) restoreTarget(db, name, partition string, bucket int32) (raftmeta.BucketID, error) {
	t, err := n.meta.TableByName(db, name)
	if err != nil {
		return raftmeta.BucketID{}, err
	}
	id := raftmeta.BucketID{TableID: t.ID, PartitionID: raftmeta.NoPartition, Bucket: bucket}
	switch {
	case len(t.PartitionKeys) > 0 && partition == "":
		return id, fmt.Errorf("%w: table %s is partitioned: name the partition", rpc.ErrInvalidRequest, t.FullName())
	case len(t.PartitionKeys) == 0 && partition != "":
		return id, fmt.Errorf("%w: table %s is not partitioned", rpc.ErrInvalidRequest, t.FullName())
	case partition != "":
		p, err := n.meta.FSM().PartitionByName(t.ID, partition)
		if err != nil {
			return id, err
		}
		id.PartitionID = p.ID
	}
	if bucket < 0 || bucket >= t.BucketCount {
		return id, fmt.Errorf("%w: table %s has no bucket %d (it has %d)", rpc.ErrInvalidRequest, t.FullName(), bucket, t.BucketCount)
	}
	return id, nil
}

// restoreBucket runs RestoreBucket on the metadata leader and returns the
// new group's start offset.
func (n *Node) restoreBucket(ctx context.Context, op *metaOp) (int64, error) {
	if err := n.requireFeature(featureRestoreBucket, "restoring a bucket"); err != nil {
		return 0, err
	}
	id, err := n.restoreTarget(op.Database, op.Name, op.Partition, op.Bucket)
	if err != nil {
		return 0, err
	}
	t, err := n.meta.TableByID(id.TableID)
	if err != nil {
		return 0, err
	}
	as := n.meta.Assignments()
	i := slices.IndexFunc(as, func(a raftmeta.Assignment) bool { return a.BucketID == id })
	if i < 0 {
		return 0, raftmeta.Named(raftmeta.ErrTableNotFound, "%v of table %s has no assignment", id, t.FullName())
	}
	a := as[i]
	nodes := n.meta.Nodes()
	alive := n.aliveNodes(ctx, nodes)
	state := map[raftmeta.NodeID]raftmeta.NodeState{}
	var targets []raftmeta.NodeID
	for _, m := range nodes {
		state[m.ID] = m.State
		if m.State == raftmeta.NodeActive && alive[m.ID] {
			targets = append(targets, m.ID)
		}
	}
	for _, r := range a.Replicas {
		if alive[r] || state[r] != raftmeta.NodeLeft {
			return 0, fmt.Errorf("%w: bucket %d of %s still has its replica on node %d (%s, %s): only a bucket whose every replica's node has been down past cluster.dead_node_grace can be restored",
				rpc.ErrBucketNotLost, id.Bucket, t.FullName(), r, upOrDown(alive[r]), cmp.Or(string(state[r]), "not in the catalog"))
		}
	}
	target := raftmeta.LeastLoaded(as, targets)
	if target == 0 {
		return 0, raftmeta.Named(raftmeta.ErrNoActiveNodes, "restore bucket %d of %s: no active node is up", id.Bucket, t.FullName())
	}
	start, err := n.remoteEnd(id, t)
	if err != nil {
		return 0, err
	}
	if t.HasPrimaryKey() {
		if err := n.restorable(id, t, start); err != nil {
			return 0, err
		}
	}
	if err := n.meta.RestoreBucket(ctx, id, []raftmeta.NodeID{target}, start); err != nil {
		return 0, err
	}
	n.logger.Warn("bucket restored: a new group started after every replica was lost",
		"table", t.FullName(), "partition", id.PartitionID, "bucket", id.Bucket, "node", int32(target),
		"start_offset", start, "lost_replicas", a.Replicas)
	return start, nil
}

func upOrDown(alive bool) string {
	if alive {
		return "up"
	}
	return "down"
}

// remoteEnd is where a restored group of bucket id starts: after every
// record remote storage and the lake hold of it (not only their gap-free
// run: an offset they hold must never be written again).
func (n *Node) remoteEnd(id raftmeta.BucketID, t *raftmeta.Table) (int64, error) {
	var end int64
	if rl := n.remoteLog(id); rl != nil {
		if err := rl.Refresh(); err != nil {
			return 0, fmt.Errorf("restore: list the remote log of %v: %w", id, err)
		}
		for _, s := range rl.Segments() {
			end = max(end, s.NextOffset)
		}
		snaps, err := rl.KVSnapshots()
		if err != nil {
			return 0, fmt.Errorf("restore: list the KV snapshots of %v: %w", id, err)
		}
		for _, s := range snaps {
			end = max(end, s.NextOffset)
		}
	}
	if n.lake != nil && lakeEnabled(t) {
		files, err := n.lakeList(id, t, true)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return 0, fmt.Errorf("restore: list the lake files of %v: %w", id, err)
		}
		for _, f := range files {
			end = max(end, f.NextOffset)
		}
	}
	return end, nil
}

// restorable checks that remote storage holds the state of primary-key
// bucket id at offset end: a KV snapshot and the remote log after it up to
// end, or the whole changelog up to end (restoreLost).
func (n *Node) restorable(id raftmeta.BucketID, t *raftmeta.Table, end int64) error {
	rl := n.remoteLog(id)
	if rl == nil {
		if end == 0 {
			return nil
		}
		return fmt.Errorf("%w: %s is a primary-key table and this node has no remote storage", rpc.ErrNotRestorable, t.FullName())
	}
	_, ok, err := rl.RestorePoint(end)
	if err != nil {
		return fmt.Errorf("restore: list the KV snapshots of %v: %w", id, err)
	}
	if !ok {
		return fmt.Errorf("%w: bucket %d of primary-key table %s: remote storage holds no KV snapshot from which its remote log runs without a gap to offset %d (tiering.kv_snapshot_interval)",
			rpc.ErrNotRestorable, id.Bucket, t.FullName(), end)
	}
	return nil
}

// lostState is what remote storage holds of the lost group of primary-key
// bucket id, up to offset start (replica.Config.Lost).
// The remote listing is read only when the replica asks (it has no raft
// state yet).
func (n *Node) lostState(id raftmeta.BucketID, start int64) *replica.LostState {
	remote := sync.OnceValue(func() *tiering.RemoteLog { return n.remoteLog(id) })
	return &replica.LostState{
		Snapshot: func() (io.ReadCloser, error) {
			rl := remote()
			if rl == nil {
				return nil, fmt.Errorf("%w: no remote storage to restore offsets below %d from", rpc.ErrNotRestorable, start)
			}
			s, ok, err := rl.RestorePoint(start)
			switch {
			case err != nil:
				return nil, err
			case !ok:
				return nil, fmt.Errorf("%w: no KV snapshot from which the remote log reaches offset %d", rpc.ErrNotRestorable, start)
			case s.Name == "":
				return nil, nil // the whole changelog from offset 0
			}
			return rl.OpenKVSnapshot(s)
		},
		Changelog: func(from, to int64, fn func(index uint64, data []byte) error) error {
			rl := remote()
			if rl == nil && from < to {
				return fmt.Errorf("%w: no remote storage to restore offsets below %d from", rpc.ErrNotRestorable, start)
			}
			for from < to {
				var ferr error
				next := from
				err := rl.Read(from, to, 4<<20, func(index uint64, base int64, count int32, data []byte) bool {
					if base+int64(count) <= next {
						return true
					}
					if ferr = fn(index, data); ferr != nil {
						return false
					}
					next = base + int64(count)
					return true
				})
				if err = cmp.Or(ferr, err); err != nil {
					return err
				}
				if next == from {
					return fmt.Errorf("the remote log holds nothing at offset %d", from)
				}
				from = next
			}
			return nil
		},
	}
}

// lostStateOf is lostState for a replica of a restored primary-key bucket
// that starts above offset 0, nil otherwise.
func (n *Node) lostStateOf(a raftmeta.Assignment, pk *replica.PKConfig) *replica.LostState {
	if pk == nil || a.Generation == 0 || a.StartOffset == 0 {
		return nil
	}
	return n.lostState(a.BucketID, a.StartOffset)
}

// oldGeneration reports whether this node's replica of a's bucket (r when
// it is open, else its directory) belongs to an earlier generation of the
// bucket's group than the catalog's.
func (n *Node) oldGeneration(a raftmeta.Assignment, r *replica.Replica) bool {
	if a.Generation == 0 {
		return false
	}
	if r != nil {
		return r.Generation() < a.Generation
	}
	if !n.hasBucketDir(a.BucketID) {
		return false
	}
	g, err := readGeneration(n.bucketDir(a.BucketID))
	return err == nil && g < a.Generation
}

// leaveGeneration closes this node's replica r (if open) of an earlier
// generation than a's and, unless the bucket is assigned here (then
// openReplica sets it aside: prepareGeneration), sets its directory aside.
// It reports whether the bucket is assigned here.
func (n *Node) leaveGeneration(a raftmeta.Assignment, r *replica.Replica) bool {
	if r != nil {
		n.logger.Warn("closing a bucket replica of an earlier generation (the bucket was restored after losing every replica)",
			"table", a.TableID, "partition", a.PartitionID, "bucket", a.Bucket, "generation", r.Generation(), "now", a.Generation)
		if err := n.closeReplica(a.BucketID); err != nil {
			n.logger.Warn("close a bucket replica of an earlier generation", "bucket", a.BucketID, "err", err)
		}
	}
	if slices.Contains(a.Replicas, n.id) {
		return true
	}
	if err := n.setAsideGenerations(a); err != nil {
		n.logger.Error("set aside a bucket replica of an earlier generation", "bucket", a.BucketID, "err", err)
	}
	return false
}

// leaveOldGenerations closes the open replicas of an earlier generation
// than the catalog's (leaveGeneration). A node that was down while its
// bucket was restored opens its old copy with the catalog it had; it runs
// this once its catalog is current, before it counts as registered, so no
// client request, which waits for that (awaitCatalog), reaches such a copy.
func (n *Node) leaveOldGenerations() {
	var restored []raftmeta.Assignment
	for _, a := range n.meta.Assignments() {
		if a.Generation > 0 {
			restored = append(restored, a)
		}
	}
	if len(restored) == 0 {
		return // nearly always: no need to wait for a reconcile pass
	}
	n.reconcileMu.Lock()
	defer n.reconcileMu.Unlock()
	for _, a := range restored {
		if r := n.replica(a.BucketID); r != nil && n.oldGeneration(a, r) {
			n.leaveGeneration(a, r)
		}
	}
}

// prepareGeneration readies this node's directory for its replica of a
// restored bucket (a.Generation > 0): what is there of an earlier
// generation is set aside (setAsideGenerations) and the directory is
// created with its generation file. Nothing to do when the directory is
// this generation's already.
func (n *Node) prepareGeneration(a raftmeta.Assignment) error {
	if a.Generation == 0 {
		return nil
	}
	dir := n.bucketDir(a.BucketID)
	if g, err := readGeneration(dir); err == nil && g == a.Generation {
		return nil
	}
	if err := n.setAsideGenerations(a); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return writeFileSync(filepath.Join(dir, generationFile), []byte(strconv.FormatInt(a.Generation, 10)+"\n"))
}

// setAsideGenerations renames this node's directory of a's bucket, and
// what damage or recovery set aside of it (which would keep a replica of
// the new group from bootstrapping: wasReset), to
// <bucket dir>.old-generation-<unix seconds>[-<n>][<their own suffix>],
// each only if it is of an earlier generation than a's: a copy of this
// generation that damage set aside must keep this node's replica from
// bootstrapping the group a second time.
func (n *Node) setAsideGenerations(a raftmeta.Assignment) error {
	dir := n.bucketDir(a.BucketID)
	old, _ := filepath.Glob(dir + ".*")
	if _, err := os.Stat(dir); err == nil {
		old = append(old, dir)
	}
	stamp := dir + oldGenerationSuffix + strconv.FormatInt(time.Now().Unix(), 10)
	for i := 2; ; i++ { // a name no earlier set-aside took (two in one second)
		if taken, _ := filepath.Glob(stamp + "*"); len(taken) == 0 {
			break
		}
		stamp = dir + oldGenerationSuffix + strconv.FormatInt(time.Now().Unix(), 10) + "-" + strconv.Itoa(i)
	}
	for _, p := range old {
		rest := strings.TrimPrefix(p, dir)
		if strings.HasPrefix(rest, oldGenerationSuffix) {
			continue
		}
		if g, err := readGeneration(p); err != nil || g >= a.Generation {
			continue // this generation's (or unreadable: left as it is)
		}
		if err := renameSync(p, stamp+rest); err != nil {
			return fmt.Errorf("set aside a replica of an earlier generation: %w", err)
		}
		n.logger.Warn("bucket replica of an earlier generation set aside (the bucket was restored after losing every replica)",
			"table", a.TableID, "partition", a.PartitionID, "bucket", a.Bucket, "kept_in", stamp+rest)
	}
	return nil
}

// readGeneration reads a replica directory's generation file (0 when it
// has none: a bucket's first group).
func readGeneration(dir string) (int64, error) {
	b, err := os.ReadFile(filepath.Join(dir, generationFile))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}
