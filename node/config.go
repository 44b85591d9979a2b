package node

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/fluss-node/fluss-node/node/replica"
	"github.com/fluss-node/fluss-node/raftmeta"
	"github.com/fluss-node/fluss-node/rpc"
)

// Config mirrors config.example.toml; every field documents its default.
type Config struct {
	// NodeID is this node's id (>0). 0 means: read <data_dir>/node.id, or,
	// on a fresh data dir, use 1 for a bootstrapping node.
	NodeID int32 `toml:"node_id"`
	// DataDir holds everything the node stores. Default "./fluss-data".
	DataDir string `toml:"data_dir"`
	// ClientAddr is the Connect API listener. Default "127.0.0.1:9123".
	ClientAddr string `toml:"client_addr"`
	// PeerAddr is the node-to-node listener (Raft). Default "127.0.0.1:9124".
	PeerAddr string `toml:"peer_addr"`
	// GossipAddr is the membership listener. Default "127.0.0.1:9125".
	GossipAddr string `toml:"gossip_addr"`
	// GossipKey encrypts gossip (AES-GCM): base64 of 16, 24 or 32 bytes,
	// the same on every node. Default "": no encryption.
	GossipKey string `toml:"gossip_key"`
	// Advertise is the host other nodes and clients use to reach this one.
	// Default "": the host of each listener address.
	Advertise string `toml:"advertise"`

	// Join lists addresses of members of the cluster this node belongs to:
	// peer addresses (host:port of a member's peer listener) or gossip
	// addresses (gossip_addr; needs node_id on a fresh node). Empty (default): with
	// BootstrapExpect 0, a fresh node bootstraps a one-node cluster.
	// Non-empty: a fresh node joins the cluster of the first seed that
	// answers; a node with metadata state ignores it.
	Join []string `toml:"join"`
	// BootstrapExpect, when > 0, bootstraps a new cluster once this many
	// distinct nodes (this one and those in Join) see each other and none
	// of them has metadata state; the smallest node id bootstraps, the
	// others join it. Never bootstraps twice. Needs node_id. Default 0.
	BootstrapExpect int `toml:"bootstrap_expect"`
	// MetaVoters is how many nodes vote in the metadata Raft group; further
	// nodes replicate it as non-voters. It is the cluster's starting value:
	// the catalog's counts once set (clusterconfig.go). Default 3.
	MetaVoters int `toml:"meta_voters"`

	Log     LogConfig     `toml:"log"`
	Storage StorageConfig `toml:"storage"`
	Limits  LimitsConfig  `toml:"limits"`
	Raft    RaftConfig    `toml:"raft"`
	KV      KVConfig      `toml:"kv"`
	Cluster ClusterConfig `toml:"cluster"`
	Tiering TieringConfig `toml:"tiering"`
	Debug   DebugConfig   `toml:"debug"`
	Auth    AuthConfig    `toml:"auth"`
	TLS     TLSConfig     `toml:"tls"`
}

// AuthConfig guards the client API (rpc/auth.go). With no users (the
// default) every request is allowed.
type AuthConfig struct {
	Users []AuthUser `toml:"users"`
}

// AuthUser is one principal of the client API: an [[auth.users]] table.
type AuthUser struct {
	// Name names the user in errors and logs.
	Name string `toml:"name"`
	// TokenSHA256 is the hex SHA-256 of the user's bearer token (the
	// server never stores the token itself).
	TokenSHA256 string `toml:"token_sha256"`
	// Grants are "OPERATION:RESOURCE" strings (rpc.ParseGrant), such as
	// "all:*", "read:shop" or "write:shop.orders".
	Grants []string `toml:"grants"`
}

// build returns the rpc.Auth of the users: open when none are listed.
func (c AuthConfig) build() (*rpc.Auth, error) {
	users, err := c.rpcUsers()
	if err != nil {
		return nil, err
	}
	return rpc.NewAuth(users)
}

// rpcUsers parses the users' token hashes and grants.
func (c AuthConfig) rpcUsers() ([]rpc.User, error) {
	users := make([]rpc.User, len(c.Users))
	for i, cu := range c.Users {
		u := rpc.User{Name: cu.Name}
		var err error
		if u.TokenSHA256, err = rpc.ParseTokenHash(cu.TokenSHA256); err != nil {
			return nil, fmt.Errorf("auth user %q: %w", cu.Name, err)
		}
		if len(cu.Grants) == 0 {
			return nil, fmt.Errorf("auth user %q: no grants (such as \"all:*\" or \"read:DB\")", cu.Name)
		}
		for _, gs := range cu.Grants {
			g, err := rpc.ParseGrant(gs)
			if err != nil {
				return nil, fmt.Errorf("auth user %q: %w", cu.Name, err)
			}
			u.Grants = append(u.Grants, g)
		}
		users[i] = u
	}
	return users, nil
}

// TieringConfig moves closed log segments to remote storage (tiering/).
type TieringConfig struct {
	// RemoteDir is the remote storage: a directory on local disk, or, for
	// a cluster, a mount all nodes share (such as NFS). Empty (default),
	// and no S3Bucket: tiering is off.
	RemoteDir string `toml:"remote_dir"`
	// S3Endpoint, S3Bucket, S3Prefix, S3Region and S3Insecure name
	// S3-compatible object storage as the remote storage instead of a
	// directory (tiering.S3Config; credentials from the environment).
	S3Endpoint string `toml:"s3_endpoint"`
	S3Bucket   string `toml:"s3_bucket"`
	S3Prefix   string `toml:"s3_prefix"`
	S3Region   string `toml:"s3_region"`
	S3Insecure bool   `toml:"s3_insecure"`
	// Interval is how often bucket leaders upload closed segments and
	// replicas drop the local copies of tiered ones. Default 1m.
	Interval Duration `toml:"interval"`
	// LakeDir is where log tables with table.datalake.enabled = true are
	// written as Parquet files (tiering/lake.go): a directory on local
	// disk, or a mount all nodes share. Empty (default): such tables
	// cannot be created.
	LakeDir string `toml:"lake_dir"`
	// LakeFormat is "iceberg" (default): every lake table is also an
	// Apache Iceberg table of a Hadoop catalog in LakeDir
	// (tiering/iceberg.go), or "parquet": the Parquet files only.
	LakeFormat string `toml:"lake_format"`
	// LakeSnapshotRetention is how long an Iceberg snapshot that is no
	// longer current is kept, and with it the lake files compaction
	// replaced that it holds; 1ms or more. It is the cluster's starting
	// value: the catalog's counts once set (clusterconfig.go). Default 1h.
	LakeSnapshotRetention Duration `toml:"lake_snapshot_retention"`
	// LocalSegments is how many closed, tiered segments a replica keeps on
	// local disk (the table property table.log.tiered.local-segments
	// overrides it). Default 2.
	LocalSegments int `toml:"local_segments"`
	// KVSnapshotInterval is how often the leader of a primary-key bucket
	// uploads a snapshot of its KV state to remote storage (next to the
	// bucket's remote log), from which a bucket that lost every replica is
	// restored; 0 turns the uploads off. Default 10m.
	KVSnapshotInterval Duration `toml:"kv_snapshot_interval"`
}

// KVConfig sizes the memory of the node's one badger DB, shared by every
// primary-key bucket replica (kvstore.Options).
type KVConfig struct {
	// MemtableBytes is the size of one memtable (three are kept); it also
	// bounds one applied changelog transaction (~15% of it). Default 16 MiB.
	MemtableBytes int64 `toml:"memtable_bytes"`
	// BlockCacheBytes caches SST blocks for lookups and merges. Default 32 MiB.
	BlockCacheBytes int64 `toml:"block_cache_bytes"`
	// IndexCacheBytes bounds SST indexes and bloom filters held in memory;
	// 0 (default) keeps all of them in memory: fastest reads, memory grows
	// with the KV data (a few percent of it).
	IndexCacheBytes int64 `toml:"index_cache_bytes"`
}

// ClusterConfig tunes cluster operations (controller.go).
type ClusterConfig struct {
	// DeadNodeGrace is how long a node may be down (gossip: failed or
	// left) before the metadata leader moves its replicas to live nodes,
	// 1s to 720h. It is the cluster's starting value: the catalog's counts
	// once set (clusterconfig.go). Default 5m.
	DeadNodeGrace Duration `toml:"dead_node_grace"`
}

// DebugConfig enables diagnostics on the client listener.
type DebugConfig struct {
	// Pprof serves net/http/pprof under /debug/pprof/. Default false.
	Pprof bool `toml:"pprof"`
}

// LogConfig configures the process log (log/slog).
type LogConfig struct {
	// Level is debug, info, warn or error. Default "info".
	Level string `toml:"level"`
	// Format is text or json. Default "text".
	Format string `toml:"format"`
}

// StorageConfig configures the bucket logs.
type StorageConfig struct {
	// Fsync is "always" (acknowledge only after fsync; default) or
	// "interval" (fsync every FsyncInterval; an acknowledged write can be
	// lost by a machine crash — weaker, documented).
	Fsync string `toml:"fsync"`
	// FsyncInterval applies to Fsync = "interval". Default 50ms.
	FsyncInterval Duration `toml:"fsync_interval"`
	// SegmentBytes rolls a segment at this size. Default 128 MiB.
	SegmentBytes int64 `toml:"segment_bytes"`
	// SegmentMaxAge rolls a segment at this age. Default 1h.
	SegmentMaxAge Duration `toml:"segment_max_age"`
	// RetentionCheckInterval is how often table.log.ttl is enforced. Default 5m.
	RetentionCheckInterval Duration `toml:"retention_check_interval"`
	// DefaultLogTTL applies to tables without table.log.ttl, 1s or more.
	// It is the cluster's starting value: the catalog's counts once set
	// (clusterconfig.go). Default 168h (7 days, as Fluss).
	DefaultLogTTL Duration `toml:"default_log_ttl"`
	// MinFreeBytes: while the data directory's filesystem has less than
	// this available, bucket leaders refuse new writes (resource_exhausted)
	// so that the node never runs out of space mid-write. 0 turns the
	// check off. Default 256 MiB.
	MinFreeBytes int64 `toml:"min_free_bytes"`
}

// LimitsConfig bounds what one request may cost.
type LimitsConfig struct {
	// MaxRequestBytes bounds a request body. Default 64 MiB.
	MaxRequestBytes int64 `toml:"max_request_bytes"`
	// MaxBatchBytes bounds one encoded batch for one bucket, and so a
	// bucket's raft entry and the peer frame size. Default 16 MiB.
	MaxBatchBytes int64 `toml:"max_batch_bytes"`
	// MaxFetchBytes bounds one Fetch response, and the stored row bytes of
	// one Lookup, PrefixLookup or LimitScan answer. Default 16 MiB.
	MaxFetchBytes int64 `toml:"max_fetch_bytes"`
	// MaxRowsPerRequest bounds the rows one request carries (Append, Upsert,
	// Delete, Lookup keys) or returns (PrefixLookup, LimitScan). Default
	// 1,000,000.
	MaxRowsPerRequest int `toml:"max_rows_per_request"`
	// MaxWait bounds a Fetch long-poll. Default 30s.
	MaxWait Duration `toml:"max_wait"`
	// MaxPendingWriteBytes bounds the bytes of writes the node's bucket
	// leaders hold at once, queued or in flight, over all buckets; more is
	// resource_exhausted. Default 1 GiB.
	MaxPendingWriteBytes int64 `toml:"max_pending_write_bytes"`
	// MaxInflightRequestBytes bounds the bytes of large request messages
	// (64 KiB or more) the node's client API works on at once; more wait
	// their turn. Default 64 MiB.
	MaxInflightRequestBytes int64 `toml:"max_inflight_request_bytes"`
}

// RaftConfig tunes the per-bucket Raft groups (DESIGN.md §5).
type RaftConfig struct {
	// HeartbeatTimeout of bucket groups: how long a leader's node may not
	// answer before its groups elect new leaders (raft itself runs with 10x
	// as a backstop; docs/ARCHITECTURE.md). Default 1s.
	HeartbeatTimeout Duration `toml:"heartbeat_timeout"`
	// ElectionTimeout of bucket groups (raft runs with 10x). Default 1s.
	ElectionTimeout Duration `toml:"election_timeout"`
	// CommitTimeout of bucket groups. Default 5s (idle cost, not latency).
	CommitTimeout Duration `toml:"commit_timeout"`
	// SerialLeaderSync makes bucket leaders sync their log before they
	// replicate, not in parallel with their followers (replica.RaftTuning).
	// Default false.
	SerialLeaderSync bool `toml:"serial_leader_sync"`
	// ReplicaMaxLag is how long a follower may go without catching up
	// with its bucket leader and still count as in sync (Fluss's
	// log.replica.max-lag-time). At least 8x HeartbeatTimeout. Default 30s.
	ReplicaMaxLag Duration `toml:"replica_max_lag"`
}

// Duration is a time.Duration that TOML reads from strings like "1s".
type Duration struct{ time.Duration }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("duration %q: %w", b, err)
	}
	d.Duration = v
	return nil
}

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.Duration.String()), nil }

// Default returns the configuration of `fluss-node serve` with no flags.
func Default() Config {
	return Config{
		DataDir:    "./fluss-data",
		ClientAddr: "127.0.0.1:9123",
		PeerAddr:   "127.0.0.1:9124",
		GossipAddr: "127.0.0.1:9125",
		Join:       []string{},
		MetaVoters: 3,
		Log:        LogConfig{Level: "info", Format: "text"},
		Storage: StorageConfig{
			Fsync:                  "always",
			FsyncInterval:          Duration{50 * time.Millisecond},
			SegmentBytes:           128 << 20,
			SegmentMaxAge:          Duration{time.Hour},
			RetentionCheckInterval: Duration{5 * time.Minute},
			DefaultLogTTL:          Duration{7 * 24 * time.Hour},
			MinFreeBytes:           256 << 20,
		},
		Limits: LimitsConfig{
			MaxRequestBytes:      64 << 20,
			MaxBatchBytes:        16 << 20,
			MaxFetchBytes:        16 << 20,
			MaxRowsPerRequest:    1_000_000,
			MaxPendingWriteBytes: 1 << 30,
			MaxWait:              Duration{30 * time.Second},

			MaxInflightRequestBytes: 64 << 20,
		},
		Raft: RaftConfig{
			HeartbeatTimeout: Duration{time.Second},
			ElectionTimeout:  Duration{time.Second},
			CommitTimeout:    Duration{5 * time.Second},
			ReplicaMaxLag:    Duration{30 * time.Second},
		},
		KV:      KVConfig{MemtableBytes: 16 << 20, BlockCacheBytes: 32 << 20},
		Cluster: ClusterConfig{DeadNodeGrace: Duration{5 * time.Minute}},
		Tiering: TieringConfig{Interval: Duration{time.Minute}, LocalSegments: 2, LakeFormat: "iceberg", KVSnapshotInterval: Duration{10 * time.Minute},
			LakeSnapshotRetention: Duration{time.Hour}},
	}
}

// LoadFile reads a TOML file over the defaults. Unknown keys are errors, so
// a typo never silently falls back to a default.
func LoadFile(path string, cfg *Config) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	md, err := toml.Decode(string(b), cfg)
	if err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	if undec := md.Undecoded(); len(undec) > 0 {
		return fmt.Errorf("config %s: unknown key %q", path, undec[0].String())
	}
	return nil
}

// SlogLevel is the [log] level as a slog.Level.
func (c LogConfig) SlogLevel() (slog.Level, error) {
	switch c.Level {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("log.level must be debug, info, warn or error, got %q", c.Level)
}

// Validate checks cross-field rules.
func (c *Config) Validate() error {
	var errs []error
	if c.NodeID < 0 {
		errs = append(errs, fmt.Errorf("node_id must be > 0, got %d", c.NodeID))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("data_dir must be set"))
	}
	for _, a := range [...]struct{ name, addr string }{
		{"client_addr", c.ClientAddr}, {"peer_addr", c.PeerAddr}, {"gossip_addr", c.GossipAddr},
	} {
		if _, _, err := net.SplitHostPort(a.addr); err != nil {
			errs = append(errs, fmt.Errorf("%s %q: %w", a.name, a.addr, err))
		}
	}
	if _, err := decodeGossipKey(c.GossipKey); err != nil {
		errs = append(errs, err)
	}
	if c.BootstrapExpect < 0 {
		errs = append(errs, fmt.Errorf("bootstrap_expect must be >= 0, got %d", c.BootstrapExpect))
	}
	if c.BootstrapExpect > 1 && len(c.Join) == 0 {
		errs = append(errs, fmt.Errorf("bootstrap_expect = %d needs a join list with the other nodes' peer or gossip addresses", c.BootstrapExpect))
	}
	if c.MetaVoters < 1 || c.MetaVoters > raftmeta.MaxMetaVoters {
		errs = append(errs, fmt.Errorf("meta_voters must be 1 to %d, got %d", raftmeta.MaxMetaVoters, c.MetaVoters))
	}
	for _, j := range c.Join {
		if _, _, err := net.SplitHostPort(j); err != nil {
			errs = append(errs, fmt.Errorf("join address %q: %w", j, err))
		}
	}
	if _, err := c.Log.SlogLevel(); err != nil {
		errs = append(errs, err)
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		errs = append(errs, fmt.Errorf("log.format must be text or json, got %q", c.Log.Format))
	}
	switch c.Storage.Fsync {
	case "always", "interval":
	default:
		errs = append(errs, fmt.Errorf("storage.fsync must be always or interval, got %q", c.Storage.Fsync))
	}
	if c.Storage.Fsync == "interval" && c.Storage.FsyncInterval.Duration <= 0 {
		errs = append(errs, errors.New("storage.fsync_interval must be > 0"))
	}
	if c.Storage.SegmentBytes < 1<<20 {
		errs = append(errs, fmt.Errorf("storage.segment_bytes must be >= 1 MiB, got %d", c.Storage.SegmentBytes))
	}
	if c.Storage.SegmentMaxAge.Duration <= 0 || c.Storage.RetentionCheckInterval.Duration <= 0 || c.Storage.DefaultLogTTL.Duration <= 0 {
		errs = append(errs, errors.New("storage durations must be > 0"))
	} else if d := c.Storage.DefaultLogTTL.Duration; d < raftmeta.MinDefaultLogTTL {
		errs = append(errs, fmt.Errorf("storage.default_log_ttl must be at least %v, got %v", raftmeta.MinDefaultLogTTL, d))
	}
	if c.Storage.MinFreeBytes < 0 {
		errs = append(errs, fmt.Errorf("storage.min_free_bytes must be >= 0 (0: no check), got %d", c.Storage.MinFreeBytes))
	}
	if c.Limits.MaxRequestBytes <= 0 || c.Limits.MaxBatchBytes <= 0 || c.Limits.MaxFetchBytes <= 0 || c.Limits.MaxRowsPerRequest <= 0 {
		errs = append(errs, errors.New("limits must be > 0"))
	}
	if c.Limits.MaxPendingWriteBytes <= 0 {
		errs = append(errs, fmt.Errorf("limits.max_pending_write_bytes must be > 0, got %d", c.Limits.MaxPendingWriteBytes))
	}
	if c.Limits.MaxInflightRequestBytes <= 0 {
		errs = append(errs, fmt.Errorf("limits.max_inflight_request_bytes must be > 0, got %d", c.Limits.MaxInflightRequestBytes))
	}
	if c.Limits.MaxBatchBytes > c.Limits.MaxRequestBytes {
		errs = append(errs, errors.New("limits.max_batch_bytes must not exceed limits.max_request_bytes"))
	}
	if c.Raft.HeartbeatTimeout.Duration < 5*time.Millisecond || c.Raft.ElectionTimeout.Duration < c.Raft.HeartbeatTimeout.Duration {
		errs = append(errs, errors.New("raft: need heartbeat_timeout >= 5ms and election_timeout >= heartbeat_timeout"))
	}
	if d := c.Cluster.DeadNodeGrace.Duration; d < raftmeta.MinDeadNodeGrace || d > raftmeta.MaxDeadNodeGrace {
		errs = append(errs, fmt.Errorf("cluster.dead_node_grace must be %v to %v, got %v", raftmeta.MinDeadNodeGrace, raftmeta.MaxDeadNodeGrace, d))
	}
	if c.Raft.CommitTimeout.Duration <= 0 {
		errs = append(errs, errors.New("raft.commit_timeout must be > 0"))
	}
	if least := replica.HeartbeatCacheAge(c.Raft.HeartbeatTimeout.Duration); c.Raft.ReplicaMaxLag.Duration < least {
		errs = append(errs, fmt.Errorf("raft.replica_max_lag must be at least %s, two rounds of bucket heartbeats at raft.heartbeat_timeout %s (an idle follower is heard from once a round), got %s",
			least, c.Raft.HeartbeatTimeout.Duration, c.Raft.ReplicaMaxLag.Duration))
	}
	if c.KV.MemtableBytes < 1<<20 || c.KV.BlockCacheBytes < 1<<20 || c.KV.IndexCacheBytes < 0 {
		errs = append(errs, fmt.Errorf("kv: need memtable_bytes and block_cache_bytes >= 1 MiB and index_cache_bytes >= 0, got %d, %d, %d",
			c.KV.MemtableBytes, c.KV.BlockCacheBytes, c.KV.IndexCacheBytes))
	}
	if c.Tiering.RemoteDir != "" && c.Tiering.S3Bucket != "" {
		errs = append(errs, errors.New("tiering: set remote_dir or s3_bucket, not both"))
	}
	if (c.Tiering.S3Bucket == "") != (c.Tiering.S3Endpoint == "") {
		errs = append(errs, errors.New("tiering: s3_bucket and s3_endpoint go together"))
	}
	if c.Tiering.Interval.Duration <= 0 || c.Tiering.LocalSegments < 0 {
		errs = append(errs, fmt.Errorf("tiering: need interval > 0 and local_segments >= 0, got %s and %d",
			c.Tiering.Interval.Duration, c.Tiering.LocalSegments))
	}
	if c.Tiering.KVSnapshotInterval.Duration < 0 {
		errs = append(errs, fmt.Errorf("tiering: kv_snapshot_interval must be >= 0 (0: off), got %s", c.Tiering.KVSnapshotInterval.Duration))
	}
	if c.Tiering.LakeFormat != "iceberg" && c.Tiering.LakeFormat != "parquet" {
		errs = append(errs, fmt.Errorf("tiering: lake_format must be \"iceberg\" or \"parquet\", got %q", c.Tiering.LakeFormat))
	}
	if d := c.Tiering.LakeSnapshotRetention.Duration; d < raftmeta.MinLakeSnapshotRetention {
		errs = append(errs, fmt.Errorf("tiering.lake_snapshot_retention must be at least %v, got %v", raftmeta.MinLakeSnapshotRetention, d))
	}
	if _, err := c.Auth.build(); err != nil {
		errs = append(errs, err)
	}
	if err := c.TLS.validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
