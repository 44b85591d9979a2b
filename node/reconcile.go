package node

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fluss-node/fluss-node/logstore"
	"github.com/fluss-node/fluss-node/node/replica"
	"github.com/fluss-node/fluss-node/raftmeta"
	"github.com/fluss-node/fluss-node/rpc/peer"
)

// reconcileInterval bounds how long a missed watch notification can delay
// convergence.
const reconcileInterval = 10 * time.Second

// retiredChecks is how many retiring replicas closeUnassigned asks about at
// once.
const retiredChecks = 16

// reconcileLoop makes the open replicas match the catalog's assignments for
// this node, on every catalog change.
func (n *Node) reconcileLoop() {
	swept := false
	for {
		watch := n.meta.Watch()
		n.reconcile()
		if !swept {
			swept = n.sweepBucketDirs()
		}
		select {
		case <-n.quit:
			return
		case <-watch:
		case <-time.After(reconcileInterval):
		}
	}
}

// reconcile opens replicas assigned to this node that are not open, and
// closes and deletes replicas whose bucket is no longer assigned here once
// that is safe (closeUnassigned). It also (re)opens replicas of buckets
// that moved away while their data is still here (after a restart, or a
// failed open): until the group has dropped them they may be needed (a
// one-replica bucket moving to another node has no other copy yet).
// Failures are logged and retried on the next round.
func (n *Node) reconcile() {
	n.reconcileMu.Lock()
	defer n.reconcileMu.Unlock()
	want := make(map[raftmeta.BucketID]raftmeta.Assignment)
	for _, a := range n.meta.Assignments() {
		switch {
		case slices.Contains(a.Replicas, n.id):
			want[a.BucketID] = a
		case n.hasBucketDir(a.BucketID):
			want[a.BucketID] = a // not ours: opens without bootstrapping (bootConfig)
		}
	}
	n.mu.Lock()
	for id := range n.openErrs {
		if _, ok := want[id]; !ok {
			delete(n.openErrs, id)
		}
	}
	n.mu.Unlock()
	for id, a := range want {
		n.mu.Lock()
		r, open := n.replicas[id]
		n.mu.Unlock()
		if n.oldGeneration(a, r) {
			if !n.leaveGeneration(a, r) {
				continue // not assigned here: nothing to open
			}
			open = false
		}
		if open {
			n.upgradeSchema(r, id)
			continue
		}
		r, tr, err := n.openReplica(a)
		if err != nil && n.setAsideDamaged(a, err) {
			continue // opens empty in the next round
		}
		n.mu.Lock()
		if err != nil {
			n.openErrs[id] = err
		} else {
			delete(n.openErrs, id)
		}
		n.mu.Unlock()
		if err != nil {
			n.logger.Error("open bucket replica", "table", id.TableID, "partition", id.PartitionID, "bucket", id.Bucket, "err", err)
			continue
		}
		n.mu.Lock()
		select {
		case <-n.quit:
			n.mu.Unlock()
			r.Close()
			tr.Close()
			return
		default:
		}
		n.replicas[id] = r
		n.transports[id] = tr
		n.mu.Unlock()
	}
	n.closeUnassignedLocked()
}

// closeUnassigned closes and deletes the open replicas whose bucket is not
// assigned to this node: at once when the bucket is gone (its table was
// dropped), else once the group's leader has committed a configuration
// without this node (retired). Until then a replica that moved away keeps
// serving its group, and hands leadership over if it leads
// (reconcileGroup), so the group never has fewer voting copies than
// assigned.
func (n *Node) closeUnassigned() {
	n.reconcileMu.Lock()
	defer n.reconcileMu.Unlock()
	n.closeUnassignedLocked()
}

func (n *Node) closeUnassignedLocked() {
	assigned := map[raftmeta.BucketID]raftmeta.Assignment{}
	for _, a := range n.meta.Assignments() {
		assigned[a.BucketID] = a
	}
	n.mu.Lock()
	var drop []raftmeta.BucketID
	retiring := map[raftmeta.BucketID]*replica.Replica{}
	oldGen := map[raftmeta.BucketID]*replica.Replica{}
	for id, r := range n.replicas {
		a, exists := assigned[id]
		switch {
		case !exists:
			drop = append(drop, id)
		case r.Generation() < a.Generation:
			oldGen[id] = r // of a group that no longer exists: kept aside, not deleted
		case !slices.Contains(a.Replicas, n.id):
			retiring[id] = r
		}
	}
	n.mu.Unlock()
	for id, r := range oldGen {
		n.leaveGeneration(assigned[id], r)
	}
	// Ask about the retiring replicas concurrently (a few at a time): one
	// whose group's nodes are unreachable must not hold up the others.
	var retiredMu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, retiredChecks)
	for id, r := range retiring {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if n.retired(r, assigned[id]) {
				retiredMu.Lock()
				drop = append(drop, id)
				retiredMu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, id := range drop {
		if err := n.closeReplica(id); err != nil {
			n.logger.Warn("close unassigned bucket replica", "bucket", id, "err", err)
		}
		if _, exists := assigned[id]; !exists {
			n.dropRemoteLog(id) // the bucket is gone, not moved
		}
		if err := n.removeBucketDir(id); err != nil {
			n.logger.Warn("remove unassigned bucket data", "bucket", id, "err", err)
		}
		if err := n.dropKV(id); err != nil {
			n.logger.Warn("remove unassigned bucket KV state", "bucket", id, "err", err)
		}
		n.logger.Info("bucket replica removed", "table", id.TableID, "partition", id.PartitionID, "bucket", id.Bucket)
	}
}

func (n *Node) hasBucketDir(id raftmeta.BucketID) bool {
	_, err := os.Stat(n.bucketDir(id))
	return err == nil
}

// sweepBucketDirs deletes the bucket directories of buckets that no longer
// exist (their tables were dropped while this node was down). Directories
// of buckets that exist but moved away are reopened by reconcile and
// deleted once their group has dropped them (closeUnassigned). It runs
// once, when this node's own registration is in its catalog copy (so the
// copy is current up to a point after the node restarted), and reports
// whether it ran.
func (n *Node) sweepBucketDirs() bool {
	select {
	case <-n.registered:
	default:
		return false
	}
	self, err := n.meta.FSM().Node(n.id)
	if err != nil || self.PeerAddr != n.peers.Addr() {
		return false
	}
	n.reconcileMu.Lock() // no replica opens meanwhile (removeBucketDir)
	defer n.reconcileMu.Unlock()
	want := map[raftmeta.BucketID]bool{}
	for _, a := range n.meta.Assignments() {
		want[a.BucketID] = true
	}
	for _, id := range bucketDirs(n.cfg.DataDir) {
		if want[id] || n.replica(id) != nil {
			continue
		}
		if err := n.removeBucketDir(id); err != nil {
			n.logger.Warn("remove the data of a bucket that no longer exists", "bucket", id, "err", err)
			continue
		}
		if err := n.dropKV(id); err != nil {
			n.logger.Warn("remove the KV state of a bucket that no longer exists", "bucket", id, "err", err)
		}
		n.logger.Info("bucket replica data removed: the bucket no longer exists", "table", id.TableID, "partition", id.PartitionID, "bucket", id.Bucket)
	}
	return true
}

// bucketDirs lists the buckets that have a replica directory under
// dataDir (bucketDir), in directory order; other entries (a replica set
// aside, say) are skipped.
func bucketDirs(dataDir string) []raftmeta.BucketID {
	var out []raftmeta.BucketID
	root := filepath.Join(dataDir, "buckets")
	tables, _ := os.ReadDir(root)
	for _, t := range tables {
		tid, err := strconv.ParseInt(t.Name(), 10, 64)
		if err != nil || !t.IsDir() {
			continue
		}
		parts, _ := os.ReadDir(filepath.Join(root, t.Name()))
		for _, p := range parts {
			pid, err := strconv.ParseInt(p.Name(), 10, 64)
			if err != nil || !p.IsDir() {
				continue
			}
			buckets, _ := os.ReadDir(filepath.Join(root, t.Name(), p.Name()))
			for _, b := range buckets {
				bn, err := strconv.ParseInt(b.Name(), 10, 32)
				if err != nil || !b.IsDir() {
					continue
				}
				out = append(out, raftmeta.BucketID{TableID: tid, PartitionID: pid, Bucket: int32(bn)})
			}
		}
	}
	return out
}

// bucketDir is <data_dir>/buckets/<table_id>/<partition_id>/<bucket> (DESIGN §11).
func (n *Node) bucketDir(id raftmeta.BucketID) string { return bucketPath(n.cfg.DataDir, id) }

func bucketPath(dataDir string, id raftmeta.BucketID) string {
	return filepath.Join(dataDir, "buckets",
		strconv.FormatInt(id.TableID, 10), strconv.FormatInt(id.PartitionID, 10), strconv.Itoa(int(id.Bucket)))
}

// removeBucketDir deletes a bucket replica's directory, then its partition's
// and its table's directories once they are empty (a dropped partition or
// table leaves nothing behind; an auto-partitioned table drops one
// partition per time unit).
func (n *Node) removeBucketDir(id raftmeta.BucketID) error {
	dir := n.bucketDir(id)
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	part := filepath.Dir(dir)
	if os.Remove(part) == nil { // fails, as it should, while not empty
		os.Remove(filepath.Dir(part))
	}
	return nil
}

// closeReplica closes one open replica and unregisters its transport.
func (n *Node) closeReplica(id raftmeta.BucketID) error {
	n.mu.Lock()
	r, tr := n.replicas[id], n.transports[id]
	delete(n.replicas, id)
	delete(n.transports, id)
	n.mu.Unlock()
	var errs []error
	if r != nil {
		if err := r.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close %v: %w", id, err))
		}
	}
	if tr != nil {
		errs = append(errs, tr.Close())
	}
	return errors.Join(errs...)
}

// bucketGroup is the peer-transport group name of a bucket's Raft group.
// A restored bucket's group (generation > 0, restore.go) has a name of its
// own, so a replica of an earlier generation can never reach it.
func bucketGroup(a raftmeta.Assignment) string {
	if a.Generation > 0 {
		return fmt.Sprintf("bucket/%d/%d/%d/g%d", a.TableID, a.PartitionID, a.Bucket, a.Generation)
	}
	return fmt.Sprintf("bucket/%d/%d/%d", a.TableID, a.PartitionID, a.Bucket)
}

// openReplica opens (or creates) this node's replica of one bucket, with its
// own transport on the node's peer listener. A replica with no Raft state
// bootstraps with the assignment's full replica set (every replica uses the
// same configuration, as hashicorp/raft allows): server id = node id,
// address = the node's peer address from the catalog.
func (n *Node) openReplica(a raftmeta.Assignment) (*replica.Replica, *peer.Transport, error) {
	localID := raft.ServerID(strconv.Itoa(int(n.id)))
	addr := raft.ServerAddress(n.peers.Addr())
	if err := n.prepareGeneration(a); err != nil {
		return nil, nil, err
	}
	transport, err := n.peers.Transport(bucketGroup(a))
	if err != nil {
		return nil, nil, err
	}
	// Idle groups answer most heartbeats from the last acknowledgement
	// (rpc/peer hbcache.go); replica confirms leadership past the cache.
	// The heartbeat pump's heartbeats go past the cache; raft's own, in
	// between, are answered from their acknowledgements (pump.go).
	transport.CacheHeartbeats(replica.HeartbeatCacheAge(n.cfg.Raft.HeartbeatTimeout.Duration))
	sync := logstore.SyncAlways
	if n.cfg.Storage.Fsync == "interval" {
		sync = logstore.SyncInterval
	}
	pk, err := n.pkConfig(a.BucketID)
	if err != nil {
		transport.Close()
		return nil, nil, err
	}
	r, err := replica.Open(replica.Config{
		PK:              pk,
		ID:              a.BucketID,
		Dir:             n.bucketDir(a.BucketID),
		LocalID:         localID,
		LocalAddr:       addr,
		Transport:       transport,
		Bootstrap:       func() ([]raft.Server, error) { return n.bootConfig(a) },
		StartOffset:     a.StartOffset,
		Generation:      a.Generation,
		Lost:            n.lostStateOf(a, pk),
		Syncer:          n.syncer,
		Pump:            n.pump,
		PreferredLeader: func() raft.ServerID { return n.preferredServer(a.BucketID) },
		SnapshotLog:     func() bool { return n.clusterFeatureLevel() >= featureSnapshotLog },
		SpaceCheck:      n.spaceCheck,
		Writes:          n.writes,
		Log: logstore.Options{
			SegmentBytes:  n.cfg.Storage.SegmentBytes,
			SegmentMaxAge: n.cfg.Storage.SegmentMaxAge.Duration,
			SyncMode:      sync,
			SyncInterval:  n.cfg.Storage.FsyncInterval.Duration,
		},
		Raft: replica.RaftTuning{
			HeartbeatTimeout: n.cfg.Raft.HeartbeatTimeout.Duration,
			ElectionTimeout:  n.cfg.Raft.ElectionTimeout.Duration,
			CommitTimeout:    n.cfg.Raft.CommitTimeout.Duration,
			SerialLeaderSync: n.cfg.Raft.SerialLeaderSync,
			MaxEntryBytes:    entryBytes(n.cfg.Limits),
		},
		Logger: n.logger, // the replica adds its table, partition and bucket
	})
	if err != nil {
		transport.Close()
		return nil, nil, err
	}
	if rl := n.remoteLog(a.BucketID); rl != nil {
		r.SetRemoteLog(rl)
	}
	return r, transport, nil
}

// bootConfig is the initial Raft configuration of a bucket group: every
// replica of the assignment as a voter, at its node's peer address. Only
// the set a bucket was created with (epoch 0) bootstraps: a replica placed
// here later (epoch > 0) gets none and waits for the group's leader to add
// it (controller.go), so it can never form a second group; nor does one
// that replaces a damaged replica set aside here (damaged.go). The replica
// asks for it only when it has no raft state: wasReset reads the bucket's
// parent directory, which a node restarting with thousands of buckets must
// not do once per bucket.
func (n *Node) bootConfig(a raftmeta.Assignment) ([]raft.Server, error) {
	if a.Epoch > 0 || !slices.Contains(a.Replicas, n.id) || n.wasReset(a.BucketID) {
		return nil, nil
	}
	peers := map[raftmeta.NodeID]string{}
	for _, m := range n.meta.Nodes() {
		peers[m.ID] = m.PeerAddr
	}
	peers[n.id] = n.peers.Addr()
	out := make([]raft.Server, 0, len(a.Replicas))
	for _, id := range a.Replicas {
		if peers[id] == "" {
			return nil, fmt.Errorf("%v: the peer address of replica node %d is not in the catalog yet", a.BucketID, id)
		}
		out = append(out, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(strconv.Itoa(int(id))), Address: raft.ServerAddress(peers[id])})
	}
	return out, nil
}

// retentionLoop enforces table.log.ttl on every open replica.
func (n *Node) retentionLoop() {
	n.everyReplicaEvery(n.cfg.Storage.RetentionCheckInterval.Duration, n.enforceRetention)
}

// enforceRetention enforces table.log.ttl on replica r of bucket id, never
// beyond what a lake table's lake holds (retentionBound).
func (n *Node) enforceRetention(id raftmeta.BucketID, r *replica.Replica) {
	keepFrom, ok := n.retentionBound(id, r)
	if !ok {
		return
	}
	if err := r.EnforceRetention(n.tableTTL(id.TableID), keepFrom); err != nil {
		n.logger.Warn("retention", "bucket", id, "err", err)
	}
}

// everyReplicaEvery calls fn for each open replica every interval until
// the node closes (retention, tiering and lake tiering passes).
func (n *Node) everyReplicaEvery(interval time.Duration, fn func(raftmeta.BucketID, *replica.Replica)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-n.quit:
			return
		case <-t.C:
		}
		for id, r := range n.openReplicas() {
			fn(id, r)
		}
	}
}

// openReplicas returns the replicas open now.
func (n *Node) openReplicas() map[raftmeta.BucketID]*replica.Replica {
	n.mu.Lock()
	defer n.mu.Unlock()
	return maps.Clone(n.replicas)
}

// tableTTL is the table's table.log.ttl, or the cluster's default_log_ttl.
func (n *Node) tableTTL(tableID int64) time.Duration {
	if t, err := n.meta.TableByID(tableID); err == nil {
		if v, ok := t.Properties["table.log.ttl"]; ok {
			if d, err := raftmeta.ParseDuration(v); err == nil {
				return d
			}
		}
	}
	return n.clusterConfig().DefaultLogTTL
}

// preferredServer is the raft server id of bucket id's preferred leader:
// its first replica in the catalog; "" when the catalog has no such bucket.
func (n *Node) preferredServer(id raftmeta.BucketID) raft.ServerID {
	as := n.meta.AssignmentsForTable(id.TableID)
	i := slices.IndexFunc(as, func(a raftmeta.Assignment) bool { return a.BucketID == id })
	if i < 0 || len(as[i].Replicas) == 0 {
		return ""
	}
	return nodeServer(as[i].Replicas[0])
}
