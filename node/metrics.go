package node

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fluss-node/fluss-node/logstore"
	"github.com/fluss-node/fluss-node/node/replica"
	"github.com/fluss-node/fluss-node/rpc/peer"
)

// registerMetrics adds the node-level gauges, computed on scrape.
func (n *Node) registerMetrics() {
	n.registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fluss_log_size_bytes",
			Help: "Bytes of log segments of all bucket replicas on this node.",
		}, func() float64 {
			var total int64
			n.eachReplica(func(r replicaStats) { total += r.LogSize() })
			return float64(total)
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fluss_bucket_replicas",
			Help: "Bucket replicas open on this node.",
		}, func() float64 {
			var c int
			n.eachReplica(func(replicaStats) { c++ })
			return float64(c)
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fluss_bucket_leaders",
			Help: "Bucket replicas on this node that lead their bucket.",
		}, func() float64 {
			var c int
			n.eachReplica(func(r replicaStats) {
				if r.IsLeader() {
					c++
				}
			})
			return float64(c)
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fluss_bucket_under_replicated",
			Help: "Buckets led on this node with fewer replicas in sync than assigned (raft.replica_max_lag).",
		}, func() float64 { return float64(n.replicationHealth().UnderReplicated) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fluss_bucket_replicas_offline",
			Help: "Bucket replicas assigned to this node that it has not open (failing to open, or opening).",
		}, func() float64 { return float64(n.replicationHealth().Offline) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fluss_pending_write_bytes",
			Help: "Bytes of writes this node's bucket leaders hold (queued or in flight, not yet answered), against limits.max_pending_write_bytes.",
		}, func() float64 { return float64(n.writes.Used()) }),
		counterFunc("fluss_bucket_elections_total", "Elections this node's bucket replicas stood in because their leader's node stopped answering (a quorum of the group's voters agreeing) or no leader was known.",
			func() int64 { return int64(n.pumpStats().Elections) }),
		counterFunc("fluss_bucket_elections_held_back_total", "Times a bucket replica here did not stand for election although its leader's node stopped answering this node, because a quorum of the group's voters still heard from it.",
			func() int64 { return int64(n.pumpStats().HeldBack) }),
		counterFunc("fluss_tiering_segments_uploaded_total", "Closed log segments this node uploaded to remote storage.",
			n.tiered.uploaded.Load),
		counterFunc("fluss_tiering_kv_snapshots_uploaded_total", "Snapshots of primary-key buckets' KV state this node uploaded to remote storage.",
			n.tiered.kvSnapshots.Load),
		counterFunc("fluss_tiering_local_segments_dropped_total", "Local log segments deleted because remote storage holds them.",
			n.tiered.dropped.Load),
		counterFunc("fluss_tiering_remote_segments_expired_total", "Remote log segments deleted by table.log.ttl.",
			n.tiered.expired.Load),
		counterFunc("fluss_lake_files_written_total", "Parquet files this node wrote to the lake as a bucket leader (compaction's included).",
			n.tiered.lakeFiles.Load),
		counterFunc("fluss_lake_files_compacted_total", "Lake files this node deleted as a bucket leader after merging them into a bigger one, or because another file held their rows.",
			n.tiered.lakeMerged.Load),
		counterFunc("fluss_lake_iceberg_commits_total", "Snapshots (and schema changes) this node committed to the Iceberg tables of the lake as a bucket leader.",
			n.tiered.icebergCommits.Load),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fluss_lake_lag_records",
			Help: "Committed records of the lake-table buckets this node leads that are not in the lake yet, as of each bucket's last lake pass.",
		}, func() float64 { return float64(n.lakeLag()) }),
		counterFunc("fluss_lake_files_read_total", "Lake files this node decoded to serve reads below a log's start (the union read).",
			n.lakeReads.filesRead.Load),
		counterFunc("fluss_lake_batches_read_total", "Record batches this node served from lake files.",
			n.lakeReads.batchesRead.Load),
		counterFunc("fluss_tiering_errors_total", "Tiering and lake passes of a bucket that failed (listing, upload, deletion); the next pass retries.",
			n.tiered.errors.Load),
	)
}

// registerPeerMetrics adds the counters of the peer transport's idle-cost
// machinery (rpc/peer heartbeat.go, hbcache.go).
func (n *Node) registerPeerMetrics(m *peer.Mux) {
	n.registry.MustRegister(
		counterFunc("fluss_peer_heartbeats_batched_total", "Raft heartbeats sent to other nodes in shared batch frames.",
			func() int64 { h, _ := m.HeartbeatStats(); return h }),
		counterFunc("fluss_peer_heartbeat_batches_total", "Heartbeat batch frames sent to other nodes.",
			func() int64 { _, f := m.HeartbeatStats(); return f }),
		counterFunc("fluss_peer_heartbeats_cached_total", "Raft heartbeats bucket groups answered from the follower's recent acknowledgement instead of sending them.",
			m.CachedHeartbeats),
		counterFunc("fluss_peer_appends_repeated_total", "Idle AppendEntries repeats bucket groups' replication pipelines answered instead of sending them.",
			m.RepeatedAppends),
		counterFunc("fluss_peer_fenced_requests_total", "Raft requests refused because their sender is a node given up for lost by `fluss-node recover` (fenced).",
			m.FencedRequests),
	)
}

// registerSyncMetrics adds the counters of the node's group commit of log
// file syncs (logstore.Syncer).
func (n *Node) registerSyncMetrics(s *logstore.Syncer) {
	n.registry.MustRegister(
		counterFunc("fluss_log_sync_rounds_total", "Group-commit rounds of the node's log syncer (each one syncfs per filesystem or one fdatasync per file).",
			func() int64 { return s.Stats().Rounds }),
		counterFunc("fluss_log_sync_files_total", "Log files made durable by the syncer's rounds (a file synced for many writers counts once per round).",
			func() int64 { return s.Stats().Files }),
		counterFunc("fluss_log_sync_waits_total", "Requests to make a log file durable (Raft log stores and stable-store writes of all buckets).",
			func() int64 { return s.Stats().Waits }),
		counterFunc("fluss_log_sync_seconds_total", "Time the syncer spent in its rounds' syncs.",
			func() float64 { return float64(s.Stats().Nanos) / 1e9 }),
	)
}

// registerDiskMetrics adds the gauges of the data directory's free space
// (diskGuard).
func (n *Node) registerDiskMetrics(g *diskGuard) {
	n.registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fluss_storage_available_bytes",
			Help: "Bytes still available to the node on the filesystem of its data directory (statfs; -1 if it cannot be read).",
		}, func() float64 {
			free, err := g.avail(g.dir)
			if err != nil {
				return -1
			}
			return float64(free)
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fluss_storage_writes_refused",
			Help: "1 while the node's bucket leaders refuse writes because its data directory has less than storage.min_free_bytes available, else 0 (as of the scrape: it looks at the disk if no write did in the last 250 ms).",
		}, func() float64 {
			if g.check() != nil {
				return 1
			}
			return 0
		}),
	)
}

// pumpStats is the heartbeat pump's counters, zero before it starts.
func (n *Node) pumpStats() replica.PumpStats {
	if n.pump == nil {
		return replica.PumpStats{}
	}
	return n.pump.Stats()
}

// counterFunc is a counter read from f on every scrape.
func counterFunc[N int64 | float64](name, help string, f func() N) prometheus.Collector {
	return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(f()) })
}

// replicaStats is what the gauges read of a replica.
type replicaStats interface {
	LogSize() int64
	IsLeader() bool
}

// eachReplica calls f for every open replica (without holding n.mu while f runs).
func (n *Node) eachReplica(f func(replicaStats)) {
	n.mu.Lock()
	reps := make([]replicaStats, 0, len(n.replicas))
	for _, r := range n.replicas {
		reps = append(reps, r)
	}
	n.mu.Unlock()
	for _, r := range reps {
		f(r)
	}
}
