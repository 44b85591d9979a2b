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
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/h2c"
	"golang.org/x/sys/unix"

	"github.com/fluss-node/fluss-node/logstore"
	"github.com/fluss-node/fluss-node/node/replica"
	"github.com/fluss-node/fluss-node/raftmeta"
	"github.com/fluss-node/fluss-node/rpc"
	"github.com/fluss-node/fluss-node/rpc/peer"
)

// Version is the binary version, set by main (ldflags or build info).
var Version = "dev"

// Node is one running fluss-node process.
type Node struct {
	cfg    Config
	id     raftmeta.NodeID
	logger *slog.Logger

	lockFile *os.File
	peers    *peer.Mux // the peer listener: every Raft group of this node
	meta     *raftmeta.Meta
	syncer   *logstore.Syncer
	registry *prometheus.Registry

	listener net.Listener
	server   *http.Server

	mu         sync.Mutex
	replicas   map[raftmeta.BucketID]*replica.Replica
	transports map[raftmeta.BucketID]*peer.Transport

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
		cfg:        cfg,
		logger:     logger,
		registry:   prometheus.NewRegistry(),
		replicas:   make(map[raftmeta.BucketID]*replica.Replica),
		transports: make(map[raftmeta.BucketID]*peer.Transport),
		quit:       make(chan struct{}),
		registered: make(chan struct{}),
	}
	n.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	n.registerMetrics()
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	if err := n.lockDataDir(); err != nil {
		return nil, err
	}
	id, err := loadNodeID(cfg.DataDir, cfg.NodeID)
	if err != nil {
		n.unlock()
		return nil, err
	}
	n.id = id
	n.logger = logger.With("node", int32(id))
	return n, nil
}

// ID is this node's id.
func (n *Node) ID() raftmeta.NodeID { return n.id }

// lockDataDir takes an exclusive flock on <data_dir>/LOCK.
func (n *Node) lockDataDir() error {
	f, err := os.OpenFile(filepath.Join(n.cfg.DataDir, "LOCK"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("lock data dir: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return fmt.Errorf("data dir %s is in use by another process: %w", n.cfg.DataDir, err)
	}
	n.lockFile = f
	return nil
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
// identity never changes.
func loadNodeID(dir string, configured int32) (raftmeta.NodeID, error) {
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
			id = 1
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
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
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
	peers, err := peer.Listen(n.cfg.PeerAddr, peer.Options{Advertise: n.advertisedPeer(), Logger: n.logger})
	if err != nil {
		return fmt.Errorf("peer listener: %w", err)
	}
	n.peers = peers
	n.syncer = logstore.NewSyncer(n.logger)
	metaTransport, err := peers.Transport(metaGroup)
	if err != nil {
		n.closeStores()
		return fmt.Errorf("metadata transport: %w", err)
	}
	meta, err := raftmeta.Open(raftmeta.Config{
		Dir:       filepath.Join(n.cfg.DataDir, "meta"),
		NodeID:    n.id,
		LocalAddr: raft.ServerAddress(peers.Addr()),
		Transport: metaTransport,
		Bootstrap: true,
		Logger:    n.logger,
	})
	if err != nil {
		n.closeStores()
		return fmt.Errorf("metadata: %w", err)
	}
	n.meta = meta

	lis, err := net.Listen("tcp", n.cfg.ClientAddr)
	if err != nil {
		n.closeStores()
		return fmt.Errorf("client listener: %w", err)
	}
	n.listener = lis
	var handler http.Handler = rpc.NewHandler(n, n.limits(), n.registry, n.logger)
	if n.cfg.Debug.Pprof {
		mux := http.NewServeMux()
		mux.Handle("/", handler)
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		handler = mux
	}
	n.server = &http.Server{
		Handler:           h2c.NewHandler(handler, &http2.Server{}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	n.goFunc(func() {
		if err := n.server.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.logger.Error("client server stopped", "err", err)
		}
	})
	n.goFunc(n.registerLoop)
	n.goFunc(n.reconcileLoop)
	n.goFunc(n.retentionLoop)
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
	n.logger.Info("serving", "client_addr", lis.Addr().String(), "data_dir", n.cfg.DataDir, "version", Version)
	return nil
}

// startWait bounds how long Start waits for the catalog to be current.
const startWait = 15 * time.Second

// ClientAddr is the bound client listener address (after Start).
func (n *Node) ClientAddr() string { return n.listener.Addr().String() }

func (n *Node) limits() rpc.Limits {
	l := n.cfg.Limits
	return rpc.Limits{
		MaxRequestBytes:   int(l.MaxRequestBytes),
		MaxBatchBytes:     int(l.MaxBatchBytes),
		MaxFetchBytes:     int(l.MaxFetchBytes),
		MaxRowsPerRequest: l.MaxRowsPerRequest,
		MaxWait:           l.MaxWait.Duration,
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
	errs = append(errs, n.closeStores())
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

func (n *Node) closeStores() error {
	var errs []error
	if n.meta != nil {
		errs = append(errs, n.meta.Close())
		n.meta = nil
	}
	if n.syncer != nil {
		n.syncer.Close()
		n.syncer = nil
	}
	if n.peers != nil {
		errs = append(errs, n.peers.Close())
		n.peers = nil
	}
	return errors.Join(errs...)
}

// registerLoop records this node in the catalog once a metadata leader
// exists, so DescribeCluster lists it with its addresses and version.
func (n *Node) registerLoop() {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := n.meta.RegisterNode(ctx, raftmeta.Node{
			ID:         n.id,
			ClientAddr: n.advertised(n.ClientAddr()),
			PeerAddr:   n.peers.Addr(),
			GossipAddr: n.advertised(n.cfg.GossipAddr),
			Version:    Version,
			State:      raftmeta.NodeActive,
		})
		cancel()
		if err == nil {
			close(n.registered)
			return
		}
		n.logger.Debug("register node", "err", err)
		select {
		case <-n.quit:
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
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
