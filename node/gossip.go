package node

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/fluss-node/fluss-node/node/membership"
	"github.com/fluss-node/fluss-node/raftmeta"
)

// StateDead is the state DescribeCluster reports for a node that gossip
// declared failed (it is never stored in the catalog).
const StateDead raftmeta.NodeState = "dead"

// StateDecommissioned is the state DescribeCluster reports for a node
// whose decommission finished: decommissioning in the catalog, named by no
// assignment and out of the metadata group. Whether it still runs or not,
// it is gone from the cluster (stop it if it runs).
const StateDecommissioned raftmeta.NodeState = "decommissioned"

// StateFenced is the state DescribeCluster reports for a node that
// `fluss-node recover` gave up for lost (fence.go): whatever its catalog
// state, it is never part of the cluster again.
const StateFenced raftmeta.NodeState = "fenced"

// gossipLeaveTimeout bounds the leave broadcast of a clean Close.
const gossipLeaveTimeout = 2 * time.Second

// decodeGossipKey decodes gossip_key: "" is no encryption, else base64 of
// 16, 24 or 32 bytes (AES-128/192/256).
func decodeGossipKey(s string) ([]byte, error) {
	if s == "" {
		return nil, nil
	}
	k, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("gossip_key is not base64 (generate one with `openssl rand -base64 32`): %w", err)
	}
	switch len(k) {
	case 16, 24, 32:
		return k, nil
	}
	return nil, fmt.Errorf("gossip_key decodes to %d bytes, want 16, 24 or 32", len(k))
}

// gossipState is the gossip side of a Node. m is set once, by startGossip,
// before started is closed: read m only after started.
type gossipState struct {
	m       *membership.Membership
	started chan struct{} // closed once m is set
	events  chan struct{} // closed when the event logger returned

	// The join-list entries known to be gossip addresses (a probe
	// answered) and peer addresses (a peer call answered): seedIsGossip.
	seedsMu     sync.Mutex
	gossipSeeds []string
	peerSeeds   []string
}

// markSeed records what kind of address the join-list entry a is.
func (g *gossipState) markSeed(a string, gossip bool) {
	g.seedsMu.Lock()
	defer g.seedsMu.Unlock()
	list := &g.peerSeeds
	if gossip {
		list = &g.gossipSeeds
	}
	if !slices.Contains(*list, a) {
		*list = append(*list, a)
	}
}

// seedKind returns whether a is known to be a gossip address, and whether
// its kind is known at all.
func (g *gossipState) seedKind(a string) (gossip, known bool) {
	g.seedsMu.Lock()
	defer g.seedsMu.Unlock()
	switch {
	case slices.Contains(g.gossipSeeds, a):
		return true, true
	case slices.Contains(g.peerSeeds, a):
		return false, true
	}
	return false, false
}

// seedIsGossip reports whether the join-list entry a is a gossip address:
// known from an earlier answer, else probed now (membership.Probe). Join
// lists may name either kind of address, and each must only be spoken to
// in its own protocol: memberlist logs peer bytes as protocol errors (a
// peer listener closes a gossip probe quietly, peer.Mux.admit). ok is
// false while a accepts no connections (a node starting up may open its
// peer listener before its gossip one): the caller tries again later
// rather than guess. An entry that accepts connections but does not answer
// the probe is taken for a peer address, unmarked, and probed again next
// time.
func (n *Node) seedIsGossip(a string) (gossip, ok bool) {
	if gossip, known := n.gossip.seedKind(a); known {
		return gossip, true
	}
	_, err := n.probeGossip(a)
	switch {
	case err == nil:
		n.gossip.markSeed(a, true)
		return true, true
	case errors.Is(err, membership.ErrUnreachable):
		return false, false
	}
	return false, true
}

// startGossip starts membership on gossip_addr with this node's meta
// (state joining) and begins joining the gossip cluster in the background.
// It needs the node id; clientAddr may be "" while unknown.
func (n *Node) startGossip(clientAddr string) error {
	cfg, err := n.gossipConfig()
	if err != nil {
		return err
	}
	cfg.Meta = n.gossipMeta(clientAddr, membership.StateJoining)
	m, err := membership.Start(cfg)
	if err != nil {
		return fmt.Errorf("gossip: %w", err)
	}
	n.gossip.m = m
	close(n.gossip.started)
	n.logger.Info("gossip started", "gossip_addr", m.GossipAddr(), "encrypted", cfg.SecretKey != nil)
	go n.logGossipEvents(m)
	n.goFunc(n.gossipJoinLoop)
	return nil
}

// probeGossip asks the gossip member at addr for the cluster's members,
// without joining its gossip.
func (n *Node) probeGossip(addr string) ([]membership.Member, error) {
	cfg, err := n.gossipConfig()
	if err != nil {
		return nil, err
	}
	return membership.Probe(cfg, []string{addr})
}

// gossipConfig is this node's membership config without its Meta.
func (n *Node) gossipConfig() (membership.Config, error) {
	key, err := decodeGossipKey(n.cfg.GossipKey)
	if err != nil {
		return membership.Config{}, fmt.Errorf("config: %w", err)
	}
	return membership.Config{
		BindAddr:  n.cfg.GossipAddr,
		Advertise: n.cfg.Advertise, // a host: the bound gossip port is used
		SecretKey: key,
		Logger:    n.logger,
		Profile:   n.gossipProfile,
	}, nil
}

// gossipMeta is what this node gossips about itself.
func (n *Node) gossipMeta(clientAddr, state string) membership.Meta {
	return membership.Meta{
		ID:           int32(n.id),
		ClientAddr:   clientAddr,
		PeerAddr:     n.peers.Addr(),
		Version:      Version,
		State:        state,
		FeatureLevel: n.featureLevel,
	}
}

// members returns the gossip view, nil before gossip started.
func (n *Node) members() []membership.Member {
	select {
	case <-n.gossip.started:
		return n.withoutFenced(n.gossip.m.Members())
	default:
		return nil
	}
}

// gossipJoinLoop joins the gossip cluster: through the join list (seeds
// may be gossip addresses), the gossip addresses of the other nodes in
// the catalog (known once this node is registered, so also on a restart
// and to a node admitted through a peer address) and the other servers of
// the metadata group (gossipSeeds). It returns once one seed answered,
// when no other node is known, or at Close.
func (n *Node) gossipJoinLoop() {
	m := n.gossip.m
	for attempt := 0; ; attempt++ {
		seeds := n.gossipSeeds()
		if len(seeds) == 0 {
			// Nothing to join through yet: wait for the metadata group
			// to open (its configuration names the other servers), then
			// for this node's registration (its catalog copy names the
			// other nodes).
			opened := n.metaReady
			if n.metaOpen() {
				opened = nil
			}
			select {
			case <-opened:
				continue
			case <-n.registered:
				if seeds = n.gossipSeeds(); len(seeds) == 0 {
					return // a cluster of one, so far: the others join us
				}
			case <-n.quit:
				return
			}
		}
		qctx, qcancel := ctxOf(n.quit)
		ctx, cancel := context.WithTimeout(qctx, 5*time.Second)
		_, err := m.Join(ctx, seeds)
		cancel()
		qcancel()
		switch {
		case err == nil:
			return
		case errors.Is(err, membership.ErrShutdown):
			return
		case attempt%10 != 9:
			n.logger.Debug("gossip: join failed; retrying", "seeds", seeds, "err", err)
		case errors.Is(err, membership.ErrIDConflict):
			// Also the case for a few seconds after this node restarted on
			// a new gossip address while the others still hold the old one
			// (memberlist reclaims a dead member's id after a while).
			n.logger.Warn("gossip: the seeds know this node id alive at another address; retrying (two processes with one node_id?)", "seeds", seeds, "err", err)
		default:
			n.logger.Warn("gossip: no seed answered; retrying (check that gossip_addr is reachable and gossip_key matches)", "seeds", seeds, "err", err)
		}
		select {
		case <-n.quit:
			return
		case <-time.After(time.Second):
		}
	}
}

// ctxOf is a context that ends when ch closes or cancel is called; its
// goroutine ends with it.
func ctxOf(ch <-chan struct{}) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-ch:
		case <-ctx.Done():
		}
		cancel()
	}()
	return ctx, cancel
}

// gossipSeeds are the addresses to join through: the gossip addresses of
// the other catalog nodes; for each join-list entry the entry itself when
// it is a gossip address (seedIsGossip), else its gossip address as its
// node.hello answers (a peer address; nothing while it does not answer);
// and the same for the peer address of each other server of the metadata
// group's configuration that the catalog does not already account for.
// Raft restores that configuration from the local log at start, while the
// catalog copy may lack the other nodes until a leader brings it up to
// date: a node without a join list (the one that bootstrapped) that the
// group dropped while it was down hears from no leader until it is added
// back, which needs it alive in gossip first. Own addresses are left out.
func (n *Node) gossipSeeds() []string {
	self := n.gossip.m.GossipAddr()
	var out []string
	add := func(a string) {
		if a != "" && a != self && a != n.peers.Addr() && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	var peers []string // peer addresses of the metadata group not in the catalog
	if n.metaOpen() {
		known := map[string]bool{}
		for _, nd := range n.meta.Nodes() {
			if nd.ID != n.id && nd.GossipAddr != "" {
				add(nd.GossipAddr)
				known[nd.PeerAddr] = true
			}
		}
		if servers, err := n.meta.Servers(); err == nil {
			for _, s := range servers {
				if a := string(s.Address); serverNode(s.ID) != n.id && !known[a] {
					peers = append(peers, a)
				}
			}
		}
	}
	for _, a := range n.cfg.Join {
		if a == n.peers.Addr() || a == self || slices.Contains(out, a) {
			continue
		}
		if gossip, ok := n.seedIsGossip(a); !ok {
			continue
		} else if gossip {
			add(a)
			continue
		}
		if gossip, ok := n.helloGossipAddr(a); ok {
			n.gossip.markSeed(a, false)
			add(gossip) // a peer address: its gossip address, if running
		}
	}
	for _, a := range peers {
		if gossip, ok := n.helloGossipAddr(a); ok {
			add(gossip)
		}
	}
	return out
}

// helloGossipAddr is the gossip address ("" if it runs none) that the
// node at peer address a answers node.hello with; ok is false when it
// does not answer as a node within a second.
func (n *Node) helloGossipAddr(a string) (gossip string, ok bool) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	b, err := n.peers.Call(ctx, a, callHello, nil)
	var h helloResp
	if err != nil || json.Unmarshal(b, &h) != nil || h.PeerAddr == "" {
		return "", false
	}
	return h.GossipAddr, true
}

// gossipPeerAddrs are the peer and the gossip addresses of the alive
// gossip members other than this node: the peer addresses are extra seeds
// for a join whose seeds are gossip addresses.
func (n *Node) gossipPeerAddrs() (peer, gossip []string) {
	for _, mb := range n.members() {
		if mb.Status == membership.StatusAlive && mb.ID != int32(n.id) && mb.PeerAddr != "" {
			peer = append(peer, mb.PeerAddr)
			gossip = append(gossip, mb.GossipAddr)
		}
	}
	return peer, gossip
}

// logGossipEvents logs membership changes and keeps deadSince, until
// membership shuts down (Events closes).
func (n *Node) logGossipEvents(m *membership.Membership) {
	defer close(n.gossip.events)
	for ev := range m.Events() {
		mb := ev.Member
		attrs := []any{"member", mb.ID, "gossip_addr", mb.GossipAddr, "state", mb.State}
		switch ev.Type {
		case membership.EventJoin:
			n.setDeadSince(mb.ID, false)
			n.logger.Info("gossip: member alive", attrs...)
		case membership.EventLeave:
			n.setDeadSince(mb.ID, false)
			n.logger.Info("gossip: member left", attrs...)
		case membership.EventFailed:
			n.setDeadSince(mb.ID, true)
			n.logger.Info("gossip: member failed", attrs...)
		case membership.EventConflict:
			n.logger.Error("gossip: node id conflict (two processes with one node id)", attrs...)
		default:
			n.logger.Debug("gossip: member updated", attrs...)
		}
	}
}

// setDeadSince records (dead) or clears the time a member was declared
// failed by gossip.
func (n *Node) setDeadSince(id int32, dead bool) {
	n.deadMu.Lock()
	defer n.deadMu.Unlock()
	if !dead {
		delete(n.deadSince, raftmeta.NodeID(id))
		return
	}
	if _, ok := n.deadSince[raftmeta.NodeID(id)]; !ok {
		n.deadSince[raftmeta.NodeID(id)] = time.Now()
	}
}

// DeadSince returns, per node gossip declared failed and has not seen
// alive since, when this node learned it. The controller (on the metadata
// leader) starts a dead node's grace period from it.
func (n *Node) DeadSince() map[raftmeta.NodeID]time.Time {
	n.deadMu.Lock()
	defer n.deadMu.Unlock()
	out := make(map[raftmeta.NodeID]time.Time, len(n.deadSince))
	for id, t := range n.deadSince {
		out[id] = t
	}
	return out
}

// gossipNodeState is the state DescribeCluster shows for a catalog node:
// from gossip when gossip knows the node, else the catalog's. Draining is
// a catalog state (drain.go), and so is decommissioning: an alive draining
// node shows draining.
func gossipNodeState(catalog raftmeta.NodeState, mb *membership.Member) raftmeta.NodeState {
	if mb == nil {
		return catalog
	}
	switch mb.Status {
	case membership.StatusDead:
		return StateDead
	case membership.StatusLeft:
		return raftmeta.NodeLeft
	}
	if mb.State == "" || catalog == raftmeta.NodeDraining || catalog == raftmeta.NodeDecommissioning {
		return catalog
	}
	return raftmeta.NodeState(mb.State)
}

// gossipActive announces this node active in gossip (after registration).
func (n *Node) gossipActive(clientAddr string) {
	if err := n.gossip.m.UpdateMeta(n.gossipMeta(clientAddr, membership.StateActive)); err != nil {
		n.logger.Debug("gossip: state active not yet broadcast", "err", err)
	}
}

// leaveGossip announces a clean departure (state left), best effort.
func (n *Node) leaveGossip() {
	select {
	case <-n.gossip.started:
	default:
		return
	}
	if err := n.gossip.m.Leave(gossipLeaveTimeout); err != nil && !errors.Is(err, membership.ErrShutdown) {
		n.logger.Info("gossip: leave not confirmed", "err", err)
	}
}

// shutdownGossip stops gossip and waits for the event logger.
func (n *Node) shutdownGossip() error {
	select {
	case <-n.gossip.started:
	default:
		return nil
	}
	err := n.gossip.m.Shutdown()
	<-n.gossip.events
	return err
}

// gossipStarted reports whether startGossip succeeded.
func (n *Node) gossipStarted() bool {
	select {
	case <-n.gossip.started:
		return true
	default:
		return false
	}
}

// configuredClientAddr is the advertised client address when the port is
// fixed, "" when it is picked at bind time (registration fills it in).
func (n *Node) configuredClientAddr() string {
	if _, port, err := net.SplitHostPort(n.cfg.ClientAddr); err != nil || port == "0" {
		return ""
	}
	return n.advertised(n.cfg.ClientAddr)
}
