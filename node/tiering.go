package node

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fluss-node/fluss-node/node/replica"
	"github.com/fluss-node/fluss-node/raftmeta"
	"github.com/fluss-node/fluss-node/tiering"
)

// tierState is the tiering loop's: mu is held through one bucket's pass
// and by dropRemoteLog, so that an upload still running when its table is
// dropped cannot leave an object behind the deletion. The counters are
// for /metrics.
type tierState struct {
	mu                                                                                     sync.Mutex
	uploaded, dropped, expired, lakeFiles, lakeMerged, icebergCommits, kvSnapshots, errors atomic.Int64
	// kvSnapshotAt is when this node last uploaded each primary-key
	// bucket's KV snapshot (under mu).
	kvSnapshotAt map[raftmeta.BucketID]time.Time
}

// openRemoteStore opens the configured remote storage (none: tiering off)
// and lake directory (none: no lake tiering).
// An S3 bucket that does not answer yet is only logged: tiering retries on
// every pass, and the node serves meanwhile.
func (n *Node) openRemoteStore() error {
	t := n.cfg.Tiering
	switch {
	case t.RemoteDir != "":
		store, err := tiering.NewDirStore(t.RemoteDir)
		if err != nil {
			return err
		}
		n.remote = store
	case t.S3Bucket != "":
		store, err := tiering.NewS3Store(tiering.S3Config{Endpoint: t.S3Endpoint, Bucket: t.S3Bucket, Prefix: t.S3Prefix,
			Region: t.S3Region, Insecure: t.S3Insecure}, filepath.Join(n.cfg.DataDir, "tiering-cache"))
		if err != nil {
			return err
		}
		if err := store.Check(context.Background()); err != nil {
			n.logger.Warn("tiering: remote storage does not answer yet", "err", err)
		}
		n.remote = store
	}
	if t.LakeDir != "" {
		store, err := tiering.NewDirStore(t.LakeDir)
		if err != nil {
			return err
		}
		n.lake = store
		// Opened whatever lake_format says: a table's own
		// table.datalake.format decides (icebergFor).
		if n.iceberg, err = tiering.OpenIcebergLake(t.LakeDir); err != nil {
			return err
		}
	}
	return nil
}

// remoteLog returns the remote log of bucket id, or nil while tiering is
// off. Every replica of a bucket, on any node, names the same directory of
// the store.
func (n *Node) remoteLog(id raftmeta.BucketID) *tiering.RemoteLog {
	if n.remote == nil {
		return nil
	}
	rl := tiering.NewRemoteLog(n.remote, tiering.BucketDir(id.TableID, id.PartitionID, id.Bucket))
	if err := rl.Refresh(); err != nil {
		n.logger.Warn("tiering: list remote log", "bucket", id, "err", err)
	}
	return rl
}

// tieringLoop moves cold data to the remote log on every open replica
// (replica.Tier): every replica uploads the closed segments the remote log
// lacks and drops the local ones it holds; bucket leaders expire remote
// segments past table.log.ttl.
func (n *Node) tieringLoop() {
	n.everyReplicaEvery(n.cfg.Tiering.Interval.Duration, n.tier)
}

func (n *Node) tier(id raftmeta.BucketID, r *replica.Replica) {
	rl := r.RemoteLog()
	if rl == nil {
		return
	}
	n.tiered.mu.Lock()
	defer n.tiered.mu.Unlock()
	if err := rl.Refresh(); err != nil {
		n.tiered.errors.Add(1)
		n.logger.Warn("tiering: list remote log", "bucket", id, "err", err)
		return
	}
	keep := n.cfg.Tiering.LocalSegments
	if t, err := n.meta.TableByID(id.TableID); err == nil {
		if v, err := strconv.Atoi(t.Properties["table.log.tiered.local-segments"]); err == nil {
			keep = v
		}
	}
	st, err := r.Tier(keep)
	if errors.Is(err, replica.ErrClosed) {
		return // closed since the loop listed it (moved away, or its table dropped)
	}
	if err != nil {
		n.tiered.errors.Add(1)
		n.logger.Warn("tiering", "bucket", id, "err", err)
	}
	if err := n.uploadKVSnapshot(id, r, rl); err != nil {
		n.tiered.errors.Add(1)
		n.logger.Warn("tiering: KV snapshot", "bucket", id, "err", err)
	}
	expired := 0
	if r.IsLeader() {
		if keepFrom, ok := n.retentionBound(id, r); ok {
			if expired, err = rl.DeleteBefore(time.Now().Add(-n.tableTTL(id.TableID)).UnixMilli(), keepFrom); err != nil {
				n.tiered.errors.Add(1)
				n.logger.Warn("tiering: remote retention", "bucket", id, "err", err)
			}
		}
	}
	n.tiered.uploaded.Add(int64(st.Uploaded))
	n.tiered.dropped.Add(int64(st.Dropped))
	n.tiered.expired.Add(int64(expired))
	if st.Uploaded+st.Dropped+expired > 0 {
		start, end := rl.Range()
		n.logger.Info("tiered", "table", id.TableID, "partition", id.PartitionID, "bucket", id.Bucket,
			"uploaded", st.Uploaded, "dropped_local", st.Dropped, "expired_remote", expired,
			"remote_start", start, "remote_end", end, "log_start", r.LogStartOffset())
	}
}

// uploadKVSnapshot uploads a snapshot of the KV state of primary-key
// bucket id to its remote log's directory when this node leads it and
// tiering.kv_snapshot_interval has passed since its last upload here, or
// the bucket has none there yet (tiering/kvsnap.go; what restore.go
// restores a bucket that lost every replica from). A bucket that has one
// waits an interval from the first pass that sees it on this node (a
// restart does not upload everything again). Called under n.tiered.mu.
func (n *Node) uploadKVSnapshot(id raftmeta.BucketID, r *replica.Replica, rl *tiering.RemoteLog) error {
	every := n.cfg.Tiering.KVSnapshotInterval.Duration
	if every <= 0 || !r.IsPK() || !r.IsLeader() {
		return nil
	}
	if n.tiered.kvSnapshotAt == nil {
		n.tiered.kvSnapshotAt = map[raftmeta.BucketID]time.Time{}
	}
	last, seen := n.tiered.kvSnapshotAt[id]
	if seen && time.Since(last) < every {
		return nil
	}
	snaps, err := rl.KVSnapshots()
	if err != nil {
		return err
	}
	n.tiered.kvSnapshotAt[id] = time.Now()
	if !seen && len(snaps) > 0 {
		return nil
	}
	var have uint64
	if len(snaps) > 0 {
		have = snaps[len(snaps)-1].Index
	}
	up, err := r.KVSnapshot(have, rl.PutKVSnapshot)
	if up {
		n.tiered.kvSnapshots.Add(1)
	}
	return err
}

// dropRemoteLog deletes the remote log of a bucket that no longer exists
// (its table or partition was dropped), after its replica here is closed.
// Every node that held a replica does it; deleting a missing object is
// not an error.
func (n *Node) dropRemoteLog(id raftmeta.BucketID) {
	rl := n.remoteLog(id)
	if rl == nil {
		return
	}
	n.tiered.mu.Lock()
	defer n.tiered.mu.Unlock()
	if _, err := rl.DeleteBefore(math.MaxInt64, math.MaxInt64); err != nil {
		n.logger.Warn("tiering: remove the remote log of a dropped bucket", "bucket", id, "err", err)
	}
	if err := rl.DeleteKVSnapshots(); err != nil {
		n.logger.Warn("tiering: remove the KV snapshots of a dropped bucket", "bucket", id, "err", err)
	}
	delete(n.tiered.kvSnapshotAt, id)
}
