package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/h2c"
	"golang.org/x/sys/unix"

	"github.com/fluss-node/fluss-node/kvstore"
	"github.com/fluss-node/fluss-node/logstore"
	"github.com/fluss-node/fluss-node/node/replica"
	"github.com/fluss-node/fluss-node/raftmeta"
	"github.com/fluss-node/fluss-node/rpc"
	"github.com/fluss-node/fluss-node/rpc/peer"
	"github.com/fluss-node/fluss-node/tiering"
)

// Version is the binary version, set by main (ldflags or build info).
var Version = "dev"

// Node is one running fluss-node process.
type Node struct {
	cfg     Config
	id      raftmeta.NodeID
	logger  *slog.Logger
	baseLog *slog.Logger

	lockFile  *os.File
	fence     fence     // nodes this one refuses, and its own refusal (fence.go)
	peers     *peer.Mux // the peer listener: every Raft group of this node
	meta      *raftmeta.Meta
	syncer    *logstore.Syncer
	disk      *diskGuard             // refuses writes while the data directory is nearly full
	writes    *replica.WriteBudget   // limits.max_pending_write_bytes over all bucket leaders
	remote    tiering.Store          // nil while tiering is off
	lake      tiering.Store          // nil without [tiering] lake_dir
	lakeReads lakeReads              // the union read's caches (lakeread.go)
	lakeEnds  lakeProgress           // lake ends after this node's passes (lake.go)
	iceberg   *tiering.IcebergLake   // nil unless [tiering] lake_format = "iceberg"
	settling  lakeSettling           // what settleLake keeps between passes (lakecompact.go)
	tiered    tierState              // the tiering loop (tiering.go)
	pump      *replica.HeartbeatPump // heartbeats and failure detection of the bucket groups
	live      *liveness              // which peer nodes answer (for the pump)
	registry  *prometheus.Registry

	listener net.Listener
	server   *http.Server
	auth     *rpc.Auth // the client API's users (ReloadAuth replaces them)

	reconcileMu sync.Mutex // serializes opening and closing replicas (reconcile.go)

	mu         sync.Mutex
	replicas   map[raftmeta.BucketID]*replica.Replica
	transports map[raftmeta.BucketID]*peer.Transport
	// openErrs: why the last attempt to open a wanted replica failed
	// (reconcile), for the errors of requests that reach it meanwhile.
	openErrs map[raftmeta.BucketID]error
	// catalogCaughtUp is set by Ready once the catalog has applied every
	// metadata entry the node knew committed (raftmeta CaughtUp), the
	// first time after start; later lag is normal and does not unset it.
	catalogCaughtUp atomic.Bool

	idv       atomic.Int32  // n.id, for peer handlers that run before the id is known
	metaReady chan struct{} // closed once n.meta is set
	joinMu    sync.Mutex    // serializes admissions on the metadata leader

	leadersMu sync.Mutex
	leaders   map[raftmeta.BucketID]raftmeta.NodeID // last leader that served a forwarded request

	kvMu     sync.Mutex
	kv       *kvstore.Store // <data_dir>/kv, opened with the first PK replica
	kvClosed bool

	closeStoresOnce sync.Once
	closeStoresErr  error

	gossip        gossipState
	gossipProfile string // membership profile ("" = LAN); tests use ProfileLocal
	// featureLevel is the cluster feature level this node gossips
	// (featureLevel; tests play an older binary with less).
	featureLevel uint32
	// autoPartitionNow is the controller's clock for auto-partitioning
	// (nil: time.Now); tests set it before Start.
	autoPartitionNow func() time.Time
	// lakeCheckEvery is how often the lake loop looks at the buckets (0:
	// every second); tests set it before Start.
	lakeCheckEvery time.Duration
	deadMu         sync.Mutex
	deadSince      map[raftmeta.NodeID]time.Time // nodes gossip declared failed (hook for re-replication)

	registered chan struct{} // closed once this node is in the catalog
	quit       chan struct{}
	wg         sync.WaitGroup
}

// New validates cfg, locks the data directory and opens the stores. Start
// begins serving.
func New(cfg Config, logger *slog.Logger) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if logger == nil {
		logger = slog.Default()
	}
	n := &Node{
		cfg:          cfg,
		logger:       logger,
		baseLog:      logger,
		registry:     prometheus.NewRegistry(),
		replicas:     make(map[raftmeta.BucketID]*replica.Replica),
		transports:   make(map[raftmeta.BucketID]*peer.Transport),
		openErrs:     make(map[raftmeta.BucketID]error),
		writes:       replica.NewWriteBudget(cfg.Limits.MaxPendingWriteBytes),
		quit:         make(chan struct{}),
		registered:   make(chan struct{}),
		metaReady:    make(chan struct{}),
		leaders:      make(map[raftmeta.BucketID]raftmeta.NodeID),
		gossip:       gossipState{started: make(chan struct{}), events: make(chan struct{})},
		featureLevel: featureLevel,
		deadSince:    make(map[raftmeta.NodeID]time.Time),
	}
	n.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	n.registerMetrics()
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	if err := n.openRemoteStore(); err != nil {
		return nil, err
	}
	if err := n.lockDataDir(); err != nil {
		return nil, err
	}
	// A node that joins learns its id from the metadata leader, unless
	// given one; a bootstrapping node is 1 unless given one.
	fallback := int32(1)
	if len(cfg.Join) > 0 {
		fallback = 0
	}
	if cfg.BootstrapExpect > 0 && cfg.NodeID == 0 {
		fallback = -1
	}
	id, err := loadNodeID(cfg.DataDir, cfg.NodeID, fallback)
	if err != nil {
		n.unlock()
		return nil, err
	}
	n.setID(id)
	if err := n.loadFence(); err != nil {
		n.unlock()
		return nil, err
	}
	return n, nil
}

// ID is this node's id (0 until a joining node is admitted).
func (n *Node) ID() raftmeta.NodeID { return n.nodeID() }

func (n *Node) nodeID() raftmeta.NodeID { return raftmeta.NodeID(n.idv.Load()) }

// setID sets the node id; before Start's metadata group opens only.
func (n *Node) setID(id raftmeta.NodeID) {
	n.id = id
	n.idv.Store(int32(id))
	n.logger = n.baseLog.With("node", int32(id))
}

// lockDataDir takes an exclusive flock on <data_dir>/LOCK.
func (n *Node) lockDataDir() error {
	f, err := lockDir(n.cfg.DataDir)
	n.lockFile = f
	return err
}

// lockDir takes an exclusive flock on dir/LOCK; closing the file releases
// it.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "LOCK"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock data dir: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("data dir %s is in use by another process: %w", dir, err)
	}
	return f, nil
}

func (n *Node) unlock() {
	if n.lockFile != nil {
		unix.Flock(int(n.lockFile.Fd()), unix.LOCK_UN)
		n.lockFile.Close()
		n.lockFile = nil
	}
}

// loadNodeID reads <data_dir>/node.id, or writes it on first start. A
// configured id that disagrees with the stored one is an error: a node's
// identity never changes. With neither, fallback is used: > 0 is written,
// 0 means "the cluster will allocate one" (nothing written), < 0 is an
// error (static bootstrap needs ids).
func loadNodeID(dir string, configured, fallback int32) (raftmeta.NodeID, error) {
	path := filepath.Join(dir, "node.id")
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		v, perr := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 32)
		if perr != nil || v <= 0 {
			return 0, fmt.Errorf("%s holds %q, not a node id", path, strings.TrimSpace(string(b)))
		}
		if configured != 0 && int32(v) != configured {
			return 0, fmt.Errorf("node_id %d does not match %s (%d): a data directory belongs to one node", configured, path, v)
		}
		return raftmeta.NodeID(v), nil
	case errors.Is(err, os.ErrNotExist):
		id := configured
		if id == 0 {
			id = fallback
		}
		if id == 0 {
			return 0, nil
		}
		if id < 0 {
			return 0, errors.New("bootstrap_expect needs node_id (or --node-id) on a new data directory: the smallest id bootstraps the cluster")
		}
		if err := writeFileSync(path, []byte(strconv.Itoa(int(id))+"\n")); err != nil {
			return 0, fmt.Errorf("write node id: %w", err)
		}
		return raftmeta.NodeID(id), nil
	default:
		return 0, fmt.Errorf("read node id: %w", err)
	}
}

// writeFileSync writes a small file atomically and durably.
func writeFileSync(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return renameSync(tmp, path)
}

// renameSync renames from to to and makes the rename durable (both must
// be in one directory).
func renameSync(from, to string) error {
	if err := os.Rename(from, to); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(to))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Start opens the metadata group, starts reconciling bucket replicas and
// begins serving clients. It returns once the client listener is bound; the
// bound address is logged as `msg="serving" client_addr=...` (tests read it).
func (n *Node) Start(ctx context.Context) error {
	peerTLS, err := n.cfg.TLS.peerTLS(func(err error) {
		n.logger.Error("peer TLS: keeping the certificate in use", "err", err)
	})
	if err != nil {
		return err
	}
	peers, err := peer.Listen(n.cfg.PeerAddr, peer.Options{
		Advertise: n.advertisedPeer(),
		Logger:    n.logger,
		// Half a heartbeat interval at most (raft beats every timeout/10).
		HeartbeatBatchDelay: n.cfg.Raft.HeartbeatTimeout.Duration / 20,
		MaxFrameSize:        peerFrameSize(n.cfg.Limits),
		TLS:                 peerTLS,
		Fenced:              n.fenced,
		OnFenced:            n.onFenced,
	})
	if err != nil {
		return fmt.Errorf("peer listener: %w", err)
	}
	n.peers = peers
	hb := n.cfg.Raft.HeartbeatTimeout.Duration
	n.live = newLiveness(peers.Ping, n.askSilence, hb)
	n.registerPeerMetrics(peers)
	n.registerHandlers()
	n.syncer = logstore.NewSyncer(n.logger)
	n.registerSyncMetrics(n.syncer)
	n.disk = newDiskGuard(n.cfg.DataDir, n.cfg.Storage.MinFreeBytes, n.logger)
	n.registerDiskMetrics(n.disk)
	n.pump = replica.NewHeartbeatPump(replica.PumpConfig{HeartbeatTimeout: hb, Liveness: n.live})
	metaTransport, err := peers.Transport(metaGroup)
	if err != nil {
		n.closeStores()
		return fmt.Errorf("metadata transport: %w", err)
	}
	// Gossip starts as soon as the node id is known: before entering the
	// cluster (its join may learn peer addresses from gossip seeds), or,
	// for a node the cluster gives an id, right after.
	if n.id != 0 {
		if err := n.startGossip(n.configuredClientAddr()); err != nil {
			n.closeStores()
			return err
		}
	}
	metaDir := filepath.Join(n.cfg.DataDir, "meta")
	bootstrap, err := n.enterCluster(ctx, metaDir)
	if err != nil {
		n.closeStores()
		return err
	}
	if !n.gossipStarted() {
		if err := n.startGossip(n.configuredClientAddr()); err != nil {
			n.closeStores()
			return err
		}
	}
	meta, err := raftmeta.Open(raftmeta.Config{
		Dir:       metaDir,
		NodeID:    n.id,
		LocalAddr: raft.ServerAddress(peers.Addr()),
		Transport: metaTransport,
		Bootstrap: bootstrap,
		Logger:    n.logger,
	})
	if err != nil {
		n.closeStores()
		return fmt.Errorf("metadata: %w", err)
	}
	n.meta = meta
	close(n.metaReady)
	if err := n.askFenced(ctx); err != nil {
		n.closeStores()
		return err
	}

	auth, err := n.cfg.Auth.build()
	if err != nil { // Validate ran it already
		n.closeStores()
		return err
	}
	n.auth = auth
	if len(n.cfg.Auth.Users) > 0 {
		n.logger.Info("client API calls need a bearer token", "users", len(n.cfg.Auth.Users))
	}
	var certs *certReloader
	if n.cfg.TLS.enabled() {
		certs, err = newCertReloader(n.cfg.TLS, func(err error) {
			n.logger.Error("client TLS: keeping the certificate in use", "err", err)
		})
		if err != nil {
			n.closeStores()
			return err
		}
	}
	lis, err := net.Listen("tcp", n.cfg.ClientAddr)
	if err != nil {
		n.closeStores()
		return fmt.Errorf("client listener: %w", err)
	}
	n.listener = lis
	var handler http.Handler = rpc.NewHandler(n, n.limits(), n.registry, n.logger, rpc.WithAuth(auth))
	if n.cfg.Debug.Pprof {
		mux := http.NewServeMux()
		mux.Handle("/", handler)
		mux.Handle("/debug/pprof/", auth.RequireAdmin(http.HandlerFunc(pprof.Index)))
		mux.Handle("/debug/pprof/profile", auth.RequireAdmin(http.HandlerFunc(pprof.Profile)))
		mux.Handle("/debug/pprof/trace", auth.RequireAdmin(http.HandlerFunc(pprof.Trace)))
		handler = mux
	}
	// Keep-alive connections idle for clientIdleTimeout are closed, so
	// clients that went away without closing (a crashed pool, a NAT that
	// dropped the flow) do not hold a connection and its goroutine forever.
	// Clients reconnect on their next call (the Go client checks an idle
	// connection before reusing it).
	n.server = &http.Server{
		Handler:           h2c.NewHandler(handler, &http2.Server{IdleTimeout: clientIdleTimeout}),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       clientIdleTimeout,
	}
	serve := n.server.Serve
	if certs != nil {
		n.server.TLSConfig = certs.serverTLS()
		serve = func(l net.Listener) error { return n.server.ServeTLS(l, "", "") }
	}
	n.goFunc(func() {
		if err := serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.logger.Error("client server stopped", "err", err)
		}
	})
	n.goFunc(n.registerLoop)
	n.goFunc(n.reconcileLoop)
	n.goFunc(n.retentionLoop)
	if n.remote != nil {
		n.goFunc(n.tieringLoop)
	}
	if n.lake != nil {
		n.goFunc(n.lakeLoop)
	}
	n.goFunc(n.promoteLoop)
	n.goFunc(n.balanceLoop)
	// Until this node's registration is applied, its copy of the catalog may
	// lag (a restarted node replays the metadata log after its election):
	// announce "serving" once it is current, or after startWait regardless
	// (a node without a metadata quorum still answers, with unavailable).
	select {
	case <-n.registered:
	case <-time.After(startWait):
		n.logger.Warn("no metadata leader yet; serving anyway", "waited", startWait)
	case <-ctx.Done():
	}
	n.logger.Info("serving", "client_addr", lis.Addr().String(), "tls", certs != nil, "data_dir", n.cfg.DataDir, "version", Version)
	return nil
}

// startWait bounds how long Start waits for the catalog to be current.
const startWait = 15 * time.Second

// clientIdleTimeout closes client connections (HTTP/1.1 keep-alive and
// HTTP/2) idle that long.
const clientIdleTimeout = 5 * time.Minute

// ClientAddr is the bound client listener address (after Start).
func (n *Node) ClientAddr() string { return n.listener.Addr().String() }

// peerFrameSize bounds one node-to-node frame: at least peer's default,
// and room for the largest thing a frame carries, with 1 MiB to spare: a
// raft entry (at most limits.max_batch_bytes, see entryBytes), a request
// forwarded to a bucket's leader (at most max_request_bytes) or its
// answer (at most max_fetch_bytes of rows).
func peerFrameSize(l LimitsConfig) int {
	return max(peer.DefaultMaxFrameSize, max(entryBytes(l), int(l.MaxRequestBytes), int(l.MaxFetchBytes))+1<<20)
}

// entryBytes is the largest raft entry a bucket proposes: one request's
// batch for the bucket may be as large as limits.max_batch_bytes.
func entryBytes(l LimitsConfig) int { return int(l.MaxBatchBytes) }

func (n *Node) limits() rpc.Limits {
	l := n.cfg.Limits
	return rpc.Limits{
		MaxRequestBytes:   int(l.MaxRequestBytes),
		MaxBatchBytes:     int(l.MaxBatchBytes),
		MaxFetchBytes:     int(l.MaxFetchBytes),
		MaxRowsPerRequest: l.MaxRowsPerRequest,
		MaxWait:           l.MaxWait.Duration,

		MaxInflightRequestBytes: l.MaxInflightRequestBytes,
	}
}

// goFunc runs f on a goroutine that Close waits for.
func (n *Node) goFunc(f func()) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		f()
	}()
}

// Close stops serving and closes every component in reverse start order.
func (n *Node) Close() error {
	select {
	case <-n.quit:
		return nil
	default:
	}
	close(n.quit)
	n.leaveGossip()
	waitHandoff := n.handOffLeadership()
	var errs []error
	if n.server != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := n.server.Shutdown(ctx); err != nil {
			n.server.Close()
		}
		cancel()
	}
	n.wg.Wait()
	errs = append(errs, n.closeReplicas())
	errs = append(errs, n.closeKV())
	errs = append(errs, n.closeStores())
	waitHandoff() // the transfers still out ended with their groups
	n.unlock()
	return errors.Join(errs...)
}

func (n *Node) closeReplicas() error {
	n.mu.Lock()
	ids := make([]raftmeta.BucketID, 0, len(n.replicas))
	for id := range n.replicas {
		ids = append(ids, id)
	}
	n.mu.Unlock()
	var errs []error
	for _, id := range ids {
		errs = append(errs, n.closeReplica(id))
	}
	return errors.Join(errs...)
}

// closeStores closes the metadata group, the syncer and the peer
// listener, once. The fields stay set: peer handlers still running see a
// closed component (ErrClosed), never a nil one.
func (n *Node) closeStores() error {
	n.closeStoresOnce.Do(func() {
		var errs []error
		if n.meta != nil {
			errs = append(errs, n.meta.Close())
		}
		if n.syncer != nil {
			n.syncer.Close()
		}
		if n.pump != nil {
			n.pump.Close()
		}
		errs = append(errs, n.shutdownGossip())
		if n.peers != nil {
			errs = append(errs, n.peers.Close())
		}
		if n.live != nil {
			n.live.close() // after the peers: a ping out ends with its session
		}
		n.closeStoresErr = errors.Join(errs...)
	})
	return n.closeStoresErr
}

// enterCluster decides how this node enters its cluster, before the
// metadata group opens: a node with metadata state just starts; a fresh
// node with no join list bootstraps a one-node cluster; with a join list it
// is admitted by the cluster's leader (and learns its id); with
// bootstrap_expect it waits for the expected nodes and then bootstraps
// (smallest id) or joins. It returns whether to bootstrap.
func (n *Node) enterCluster(ctx context.Context, metaDir string) (bool, error) {
	has, err := metaHasState(metaDir)
	if err != nil {
		return false, fmt.Errorf("metadata: %w", err)
	}
	switch {
	case has:
		if n.id == 0 {
			return false, fmt.Errorf("%s holds metadata state but %s/node.id is missing: restore node.id or start with --node-id", metaDir, n.cfg.DataDir)
		}
		return false, nil
	case n.cfg.BootstrapExpect > 0:
		boot, err := n.awaitBootstrap(ctx)
		if err != nil || boot {
			return boot, err
		}
		return false, n.joinCluster(ctx, n.cfg.Join)
	case len(n.cfg.Join) > 0:
		return false, n.joinCluster(ctx, n.cfg.Join)
	default:
		return true, nil
	}
}

// registerLoop records this node in the catalog once a metadata leader
// exists, so DescribeCluster lists it with its addresses and version.
func (n *Node) registerLoop() {
	self := raftmeta.Node{
		ID:         n.id,
		ClientAddr: n.advertised(n.ClientAddr()),
		PeerAddr:   n.peers.Addr(),
		GossipAddr: n.gossip.m.GossipAddr(),
		Version:    Version,
		State:      raftmeta.NodeActive,
	}
	start, warned := time.Now(), false
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := n.rejoinIfMoved(ctx, self)
		var at uint64
		if err == nil {
			_, at, err = n.metaCallAt(ctx, &metaOp{Op: opRegister, Node: &self})
		}
		cancel()
		if err == nil {
			// metaCall waits for this node's catalog only so long; being
			// registered promises a catalog that includes the registration
			// (awaitCatalog), so wait for it here as long as it takes.
			if !n.waitApplied(context.Background(), at) {
				return
			}
			n.leaveOldGenerations()
			close(n.registered)
			n.goFunc(n.publishFence) // Close waits for it: it calls the metadata group
			n.gossipActive(self.ClientAddr)
			return
		}
		n.logger.Debug("register node", "err", err)
		if !warned && time.Since(start) >= registerWarnAfter {
			warned = true
			if id, _ := n.meta.Leader(); id == 0 && n.removedFromMeta() {
				n.logger.Warn(errRemoved.Error(), "id", int32(n.id))
			} else {
				n.logger.Warn("node not registered in the catalog yet; still trying", "after", registerWarnAfter, "err", err)
			}
		}
		select {
		case <-n.quit:
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// registerWarnAfter is how long registerLoop tries quietly before it says
// at Warn level why the node is not registered.
const registerWarnAfter = 30 * time.Second

// errRemoved is why a node that the metadata group dropped is neither
// ready nor registered: the group sends it nothing, so it knows no leader.
// A decommissioned node restarted on its old data stays so; a node removed
// while it was down past dead_node_grace is added back by the metadata
// leader once it sees it up.
var errRemoved = errors.New("this node is no longer a member of the metadata group: it was decommissioned " +
	"(stop it; `fluss-node cluster undrain ID` takes it back unless the cluster forgot it, which it does once the node " +
	"has been down for cluster.dead_node_grace; or join it afresh with an empty data directory), " +
	"or removed while it was down longer than cluster.dead_node_grace (the metadata leader adds it back once it sees it up)")

// removedFromMeta reports whether the metadata group's configuration, as
// this node last learned it, lists other nodes but not this one. (Its
// catalog copy cannot tell: after a restart it holds only what the last
// snapshot held until a leader says which entries are committed.)
func (n *Node) removedFromMeta() bool {
	servers, err := n.meta.Servers()
	if err != nil || len(servers) == 0 {
		return false
	}
	return !slices.ContainsFunc(servers, func(s raft.Server) bool { return serverNode(s.ID) == n.id })
}

// rejoinIfMoved re-admits this node when its peer address differs from
// the one the metadata group's configuration holds for it (it restarted
// elsewhere): the leader cannot reach it at the old address, so it asks
// the other members (their addresses are in the same configuration, which
// Raft restores from the local log before any leader is heard from).
func (n *Node) rejoinIfMoved(ctx context.Context, self raftmeta.Node) error {
	servers, err := n.meta.Servers()
	if err != nil {
		return err
	}
	sid := raft.ServerID(strconv.Itoa(int(n.id)))
	var old raft.ServerAddress
	var others []string
	for _, s := range servers {
		if s.ID == sid {
			old = s.Address
		} else {
			others = append(others, string(s.Address))
		}
	}
	switch {
	case old == "" || old == raft.ServerAddress(self.PeerAddr):
		return nil
	case len(others) == 0:
		// A one-node group elects itself without the network; nobody
		// needs to reach it at its address.
		return nil
	case n.meta.IsLeader():
		_, err := n.admit(ctx, raftmeta.Node{ID: n.id, PeerAddr: self.PeerAddr}, false)
		return err
	}
	op := &metaOp{Op: opJoin, Node: &raftmeta.Node{ID: n.id, PeerAddr: self.PeerAddr}}
	lastErr := errors.New("no other member is known")
	for _, addr := range append(others, n.cfg.Join...) {
		resp, err := n.callMetaOp(ctx, addr, op, false)
		if err == nil {
			err = decodeError(resp.Code, resp.Msg)
		}
		if err == nil {
			n.logger.Info("peer address changed; re-admitted", "old", old, "new", self.PeerAddr)
			return nil
		}
		lastErr = err
	}
	return fmt.Errorf("re-admit at the new peer address %s: %w", self.PeerAddr, lastErr)
}

// metaGroup is the peer-transport group of the metadata Raft group; bucket
// groups are "bucket/<table>/<partition>/<bucket>".
const metaGroup = "meta"

// advertisedPeer is the peer address other nodes dial ("" = the bound one).
func (n *Node) advertisedPeer() string {
	if n.cfg.Advertise == "" {
		return ""
	}
	return n.advertised(n.cfg.PeerAddr)
}

// advertised replaces the host of addr with the advertise host, if set.
func (n *Node) advertised(addr string) string {
	if n.cfg.Advertise == "" {
		return addr
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return net.JoinHostPort(n.cfg.Advertise, port)
}

// ReloadAuth makes the users of c the client API's users from the next
// request on, as `serve` does on SIGHUP. An invalid c changes nothing.
func (n *Node) ReloadAuth(c AuthConfig) error {
	if n.auth == nil {
		return errors.New("reload auth: the node is not serving")
	}
	users, err := c.rpcUsers()
	if err == nil {
		err = n.auth.Replace(users)
	}
	if err != nil {
		return fmt.Errorf("reload auth: %w", err)
	}
	n.logger.Info("reloaded the client API's users", "users", len(users))
	return nil
}
