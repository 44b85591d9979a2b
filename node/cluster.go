package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	"github.com/fluss-node/fluss-node/logstore/record"
	"github.com/fluss-node/fluss-node/node/membership"
	"github.com/fluss-node/fluss-node/raftmeta"
)

// Metadata operations that run on the metadata leader (peer call meta.op).
const (
	opCreateDatabase  = "create_database"
	opDropDatabase    = "drop_database"
	opCreateTable     = "create_table"
	opDropTable       = "drop_table"
	opAddColumns      = "add_columns"
	opSetProperties   = "set_properties"
	opCreatePartition = "create_partition"
	opDropPartition   = "drop_partition"
	opRegister        = "register" // a node records its addresses and state
	opJoin            = "join"     // a node enters the metadata Raft group
)

// metaOp is one catalog write or join, forwarded to the metadata leader as
// JSON. A forwarded op is never forwarded again: a node that is not the
// leader answers ErrNotLeader, except for an op a non-member sent to a seed
// (Forwarded false), which the seed forwards once.
type metaOp struct {
	Op                string                  `json:"op"`
	Forwarded         bool                    `json:"fwd,omitempty"`
	TimeoutMs         int64                   `json:"timeout_ms,omitempty"`
	Database          string                  `json:"db,omitempty"`
	Name              string                  `json:"name,omitempty"`
	Comment           string                  `json:"comment,omitempty"`
	IgnoreIfExists    bool                    `json:"ignore_exists,omitempty"`
	IgnoreIfNotExists bool                    `json:"ignore_missing,omitempty"`
	Cascade           bool                    `json:"cascade,omitempty"`
	Spec              *raftmeta.TableSpec     `json:"spec,omitempty"`
	Columns           []record.Column         `json:"columns,omitempty"`
	Values            map[string]string       `json:"values,omitempty"`    // a partition's, by partition key
	Partition         string                  `json:"partition,omitempty"` // restore_bucket: a partition's name
	Bucket            int32                   `json:"bucket,omitempty"`    // restore_bucket
	Props             map[string]string       `json:"props,omitempty"`     // table properties to set
	Reset             []string                `json:"reset,omitempty"`     // table properties to remove
	Node              *raftmeta.Node          `json:"node,omitempty"`
	Config            *raftmeta.ClusterConfig `json:"config,omitempty"` // set_cluster_config
	Nodes             []raftmeta.NodeID       `json:"nodes,omitempty"`  // fence_nodes
	// Fresh: a join from a node without metadata state (joinCluster), as
	// opposed to a member's rejoin at a new address (rejoinIfMoved).
	Fresh bool `json:"fresh,omitempty"`
}

// metaResp answers a metaOp. Applied is the leader's applied index after
// the op: the caller waits until its own catalog has applied that far, so
// it reads its own writes.
type metaResp struct {
	Code    byte   `json:"code,omitempty"`
	Msg     string `json:"msg,omitempty"`
	ID      int64  `json:"id,omitempty"`
	Applied uint64 `json:"applied,omitempty"`
}

// helloResp answers node.hello (static bootstrap).
type helloResp struct {
	ID       raftmeta.NodeID `json:"id"`
	PeerAddr string          `json:"peer_addr"`
	HasState bool            `json:"has_state"`
	// GossipAddr is the node's gossip address, "" before its gossip runs.
	GossipAddr string `json:"gossip_addr,omitempty"`
}

// opTimeout is the deadline of a forwarded op without one.
const opTimeout = 10 * time.Second

// registerHandlers installs this node's peer-call handlers. They answer
// before the metadata group is open (node.hello must, for static
// bootstrap); the others report "no metadata leader" until it is.
func (n *Node) registerHandlers() {
	n.peers.Handle(callHello, n.handleHello)
	n.peers.Handle(callMetaOp, n.handleMetaOp)
	n.peers.Handle(callBucketWrite, n.handleBucket(callBucketWrite))
	n.peers.Handle(callBucketFetch, n.handleBucket(callBucketFetch))
	n.peers.Handle(callBucketOff, n.handleBucket(callBucketOff))
	n.peers.Handle(callBucketPKWrite, n.handleBucket(callBucketPKWrite))
	n.peers.Handle(callBucketLookup, n.handleBucket(callBucketLookup))
	n.peers.Handle(callBucketPrefix, n.handleBucket(callBucketPrefix))
	n.peers.Handle(callNodeStats, n.handleNodeStats)
	n.peers.Handle(callNodeSilence, n.handleSilence)
	n.peers.Handle(callBucketProgress, n.handleBucketProgress)
	n.peers.Handle(callBucketReset, n.handleBucketReset)
	n.peers.Handle(callBucketMember, n.handleBucketMember)
	n.peers.Handle(callNodeFenced, n.handleFencedQuery)
}

// metaOpen reports whether the metadata group is open (n.meta is set).
func (n *Node) metaOpen() bool {
	select {
	case <-n.metaReady:
		return true
	default:
		return false
	}
}

func (n *Node) handleHello(context.Context, []byte) ([]byte, error) {
	r := helloResp{ID: n.nodeID(), PeerAddr: n.peers.Addr()}
	if n.gossipStarted() {
		r.GossipAddr = n.gossip.m.GossipAddr()
	}
	if n.metaOpen() {
		r.HasState = n.meta.Raft().LastIndex() > 0
	}
	return json.Marshal(r)
}

func (n *Node) handleMetaOp(ctx context.Context, req []byte) ([]byte, error) {
	var op metaOp
	if err := json.Unmarshal(req, &op); err != nil {
		return nil, fmt.Errorf("%w: meta.op: %v", ErrBadMessage, err)
	}
	timeout := opTimeout
	if op.TimeoutMs > 0 {
		timeout = min(time.Duration(op.TimeoutMs)*time.Millisecond, 2*opTimeout)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var resp metaResp
	var err error
	switch {
	case !n.metaOpen():
		err = fmt.Errorf("%w: node %d is still starting", raftmeta.ErrNoLeader, n.nodeID())
	case n.meta.IsLeader():
		resp.ID, err = n.runMetaOp(ctx, &op)
	case !op.Forwarded:
		resp.ID, err = n.metaCall(ctx, &op)
	default:
		err = fmt.Errorf("%w: node %d lost the metadata leadership", raftmeta.ErrNotLeader, n.id)
	}
	resp.Code, resp.Msg = errorCode(err), errString(err)
	if n.metaOpen() {
		resp.Applied = n.meta.AppliedIndex()
	}
	return json.Marshal(resp)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// runMetaOp runs op on this node, which must lead the metadata group.
func (n *Node) runMetaOp(ctx context.Context, op *metaOp) (int64, error) {
	switch op.Op {
	case opCreateDatabase:
		return 0, n.meta.CreateDatabase(ctx, op.Name, op.Comment, op.IgnoreIfExists)
	case opDropDatabase:
		return 0, n.meta.DropDatabase(ctx, op.Name, op.IgnoreIfNotExists, op.Cascade)
	case opCreateTable:
		if op.Spec == nil {
			return 0, fmt.Errorf("%w: create_table without a table spec", raftmeta.ErrInvalid)
		}
		spec := *op.Spec
		spec.Properties = n.stampLakeFormat(nil, spec.Properties)
		return n.meta.CreateTable(ctx, spec, op.IgnoreIfExists)
	case opDropTable:
		return 0, n.meta.DropTable(ctx, op.Database, op.Name, op.IgnoreIfNotExists)
	case opAddColumns:
		id, err := n.meta.AddColumns(ctx, op.Database, op.Name, op.Columns)
		return int64(id), err
	case opSetProperties:
		set := op.Props
		if t, err := n.meta.TableByName(op.Database, op.Name); err == nil {
			if set, err = n.lakeFormatOnAlter(t, set); err != nil {
				return 0, err
			}
		}
		return 0, n.meta.SetTableProperties(ctx, op.Database, op.Name, set, op.Reset)
	case opCreatePartition:
		return n.createPartition(ctx, op.Database, op.Name, op.Values, op.IgnoreIfExists)
	case opDropPartition:
		return 0, n.meta.DropPartition(ctx, op.Database, op.Name, op.Values, op.IgnoreIfNotExists)
	case opRegister:
		if op.Node == nil || op.Node.ID <= 0 {
			return 0, fmt.Errorf("%w: register without a node id", raftmeta.ErrInvalid)
		}
		rec := *op.Node
		// A draining or decommissioning node stays so across restarts,
		// until undrained.
		if old, err := n.meta.FSM().Node(rec.ID); err == nil && (old.State == raftmeta.NodeDraining || old.State == raftmeta.NodeDecommissioning) && rec.State == raftmeta.NodeActive {
			rec.State = old.State
		}
		return 0, n.meta.RegisterNode(ctx, rec)
	case opSetNodeState:
		return 0, n.setNodeState(ctx, op.Node)
	case opRebalance:
		moved, err := n.rebalance(ctx)
		return int64(moved), err
	case opSetClusterConfig:
		return 0, n.setClusterConfig(ctx, op.Config)
	case opRestoreBucket:
		return n.restoreBucket(ctx, op)
	case opFenceNodes:
		return 0, n.fenceNodes(ctx, op.Nodes)
	case opJoin:
		if op.Node == nil || op.Node.PeerAddr == "" {
			return 0, fmt.Errorf("%w: join without a peer address", raftmeta.ErrInvalid)
		}
		id, err := n.admit(ctx, *op.Node, op.Fresh)
		return int64(id), err
	}
	return 0, fmt.Errorf("%w: unknown metadata operation %q (is this node older than its peers?)", raftmeta.ErrInvalid, op.Op)
}

// metaCall runs op on the metadata leader: here when this node leads,
// else forwarded once to the leader. It returns after this node's catalog
// has applied the op (or metaLeaderWait passed).
func (n *Node) metaCall(ctx context.Context, op *metaOp) (int64, error) {
	id, _, err := n.metaCallAt(ctx, op)
	return id, err
}

// metaCallAt is metaCall that also returns the index of the metadata log
// up to which the leader had applied when op was done: this node's catalog
// includes op once its applied index reaches it.
func (n *Node) metaCallAt(ctx context.Context, op *metaOp) (int64, uint64, error) {
	var lastErr error
	deadline := time.Now().Add(2 * metaLeaderWait)
	for time.Now().Before(deadline) {
		if err := ctx.Err(); err != nil {
			return 0, 0, err
		}
		if n.meta.IsLeader() {
			id, err := n.runMetaOp(ctx, op)
			if !errors.Is(err, raftmeta.ErrNotLeader) {
				return id, n.meta.AppliedIndex(), err
			}
			lastErr = err
		}
		leader, addr := n.meta.Leader()
		if leader == 0 || leader == n.id {
			wctx, cancel := context.WithTimeout(ctx, metaLeaderWait)
			_, err := n.meta.WaitForLeader(wctx)
			cancel()
			if err != nil {
				return 0, 0, fmt.Errorf("%w: no metadata leader is known to node %d; retry", raftmeta.ErrNoLeader, n.id)
			}
			if leader == n.id {
				sleepCtx(ctx, 50*time.Millisecond)
			}
			continue
		}
		resp, err := n.callMetaOp(ctx, string(addr), op, true)
		if err != nil && notSent(err) {
			// The leader is gone and the request never left: wait for
			// the election and send it to the new leader.
			lastErr = err
			sleepCtx(ctx, 100*time.Millisecond)
			continue
		}
		if err != nil {
			return 0, 0, fmt.Errorf("%w: forward to the metadata leader (node %d at %s): %v", raftmeta.ErrNoLeader, leader, addr, err)
		}
		rerr := decodeError(resp.Code, resp.Msg)
		if errors.Is(rerr, raftmeta.ErrNotLeader) {
			lastErr = rerr
			sleepCtx(ctx, 50*time.Millisecond)
			continue
		}
		n.awaitApplied(ctx, resp.Applied)
		return resp.ID, resp.Applied, rerr
	}
	return 0, 0, fmt.Errorf("%w: the metadata leader keeps changing; retry: %v", raftmeta.ErrNoLeader, lastErr)
}

// callMetaOp sends op to the node at addr.
func (n *Node) callMetaOp(ctx context.Context, addr string, op *metaOp, forwarded bool) (*metaResp, error) {
	o := *op
	o.Forwarded = forwarded
	o.TimeoutMs = opTimeout.Milliseconds()
	if dl, ok := ctx.Deadline(); ok {
		o.TimeoutMs = max(1, time.Until(dl).Milliseconds())
	}
	req, err := json.Marshal(&o)
	if err != nil {
		return nil, err
	}
	b, err := n.peers.Call(ctx, addr, callMetaOp, req)
	if err != nil {
		return nil, err
	}
	var resp metaResp
	if err := json.Unmarshal(b, &resp); err != nil {
		return nil, fmt.Errorf("%w: meta.op reply: %v", ErrBadMessage, err)
	}
	return &resp, nil
}

// awaitApplied waits until the local catalog applied index reaches idx,
// for at most metaLeaderWait.
func (n *Node) awaitApplied(ctx context.Context, idx uint64) {
	wctx, cancel := context.WithTimeout(ctx, metaLeaderWait)
	defer cancel()
	n.waitApplied(wctx, idx)
}

// waitApplied waits until this node's catalog has applied the metadata log
// up to idx, and reports whether it has: false when ctx ends or the node
// stops first.
func (n *Node) waitApplied(ctx context.Context, idx uint64) bool {
	for n.meta.AppliedIndex() < idx {
		watch := n.meta.Watch()
		if n.meta.AppliedIndex() >= idx {
			break
		}
		select {
		case <-watch:
		case <-ctx.Done():
			return false
		case <-n.quit:
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
	return true
}

// notSent reports whether a peer call failed before its request left this
// node (the dial failed, or the target was dead already and the call was
// not made), so that sending it elsewhere cannot apply it twice.
func notSent(err error) bool {
	var op *net.OpError
	return errors.Is(err, errPeerDead) || errors.As(err, &op) && op.Op == "dial"
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// admit adds a node to the metadata Raft group (as a non-voter; the
// promote loop makes it a voter while voters < meta_voters) and registers
// it, allocating an id when it has none. Leader only. Re-admitting a
// member updates its peer address, unless a running node still answers as
// that id at the old one (idInUse), or the join is fresh (from a node
// without state) and the id still holds bucket replicas (idHoldsData).
// Under joinMu, so that two joins never get one id: the registration is
// applied before the lock is released.
func (n *Node) admit(ctx context.Context, nd raftmeta.Node, fresh bool) (raftmeta.NodeID, error) {
	n.joinMu.Lock()
	defer n.joinMu.Unlock()
	if nd.ID != 0 && n.fenced(nodeServer(nd.ID)) {
		return 0, fmt.Errorf("%w: node %d was given up for lost by `fluss-node recover` and is fenced: a machine that held it joins with an empty data directory and without that node_id",
			raftmeta.ErrNodeIDInUse, nd.ID)
	}
	servers, err := n.meta.Servers()
	if err != nil {
		return 0, err
	}
	nodes := n.meta.Nodes()
	if err := n.idInUse(ctx, nd, servers, nodes); err != nil {
		return 0, err
	}
	if fresh {
		if err := n.idHoldsData(nd); err != nil {
			return 0, err
		}
	}
	if nd.ID == 0 {
		top := n.meta.ForgottenNodeID() // never reused (raftmeta forgetNode)
		for _, s := range servers {
			if v, err := strconv.Atoi(string(s.ID)); err == nil {
				top = max(top, raftmeta.NodeID(v))
			}
		}
		for _, m := range nodes {
			top = max(top, m.ID)
		}
		// A fenced id is never given, even one no node ever had (a
		// mistyped --lost): the cluster would refuse its new owner.
		for _, id := range n.meta.FSM().FencedNodes() {
			top = max(top, id)
		}
		for id := range n.fence.refused {
			top = max(top, serverNode(id))
		}
		nd.ID = top + 1
	}
	sid := raft.ServerID(strconv.Itoa(int(nd.ID)))
	addr := raft.ServerAddress(nd.PeerAddr)
	i := slices.IndexFunc(servers, func(s raft.Server) bool { return s.ID == sid })
	switch {
	case i < 0:
		err = n.meta.AddNonvoter(ctx, nd.ID, addr)
	case servers[i].Address != addr && servers[i].Suffrage == raft.Voter:
		err = n.meta.AddVoter(ctx, nd.ID, addr)
	case servers[i].Address != addr:
		err = n.meta.AddNonvoter(ctx, nd.ID, addr)
	}
	if err != nil {
		return 0, fmt.Errorf("add node %d to the metadata group: %w", nd.ID, err)
	}
	rec := nd
	rec.State = raftmeta.NodeJoining
	if j := slices.IndexFunc(nodes, func(m raftmeta.Node) bool { return m.ID == nd.ID }); j >= 0 {
		switch {
		case fresh && nodes[j].State == raftmeta.NodeDecommissioning:
			// A fresh node under the id of a decommissioned one is a
			// new member: it registers as joining, not in the state
			// that keeps it out.
		case nodes[j].PeerAddr == nd.PeerAddr:
			return nd.ID, nil
		default:
			rec = nodes[j]
			rec.PeerAddr = nd.PeerAddr
		}
	}
	if err := n.meta.RegisterNode(ctx, rec); err != nil {
		return 0, fmt.Errorf("register node %d: %w", nd.ID, err)
	}
	n.logger.Info("node admitted to the cluster", "id", int32(nd.ID), "peer_addr", nd.PeerAddr)
	return nd.ID, nil
}

// idInUse refuses a join under a configured node id that a running node
// holds at another peer address (two nodes given the same node_id).
// Admitting it would move that node's place in the metadata group to the
// newcomer, and two processes with one raft server id in the same groups
// break them. The member at the old address is asked who it is
// (node.hello): one that does not answer, or answers as another id, has
// moved or died, and the join goes ahead, as a member restarted at a new
// address rejoins (rejoinIfMoved).
func (n *Node) idInUse(ctx context.Context, nd raftmeta.Node, servers []raft.Server, nodes []raftmeta.Node) error {
	if nd.ID == 0 {
		return nil
	}
	var old string
	if i := slices.IndexFunc(servers, func(s raft.Server) bool { return s.ID == raft.ServerID(strconv.Itoa(int(nd.ID))) }); i >= 0 {
		old = string(servers[i].Address)
	} else if j := slices.IndexFunc(nodes, func(m raftmeta.Node) bool { return m.ID == nd.ID }); j >= 0 {
		old = nodes[j].PeerAddr
	}
	if old == "" || old == nd.PeerAddr {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	b, err := n.peers.Call(cctx, old, callHello, nil)
	var h helloResp
	if err != nil || json.Unmarshal(b, &h) != nil || h.ID != nd.ID {
		return nil
	}
	return fmt.Errorf("%w: node id %d belongs to the running node at %s, not to %s: give the new node another node_id, or none to be given one",
		raftmeta.ErrNodeIDInUse, nd.ID, old, nd.PeerAddr)
}

// idHoldsData refuses a node without state joining under an id that
// bucket replicas are still assigned to: it would take the place of
// those replicas in their Raft groups with an empty log, and raft counts
// on every voter keeping what it acknowledged (an entry committed on a
// majority that included the lost copy could be lost with one more
// failure). Once the cluster has moved the replicas away (a dead member,
// after cluster.dead_node_grace) the id is free again.
func (n *Node) idHoldsData(nd raftmeta.Node) error {
	if nd.ID == 0 {
		return nil
	}
	held := 0
	for _, a := range n.meta.Assignments() {
		if slices.Contains(a.Replicas, nd.ID) {
			held++
		}
	}
	if held == 0 {
		return nil
	}
	return fmt.Errorf("%w: node id %d still holds %d bucket replicas, which a node with an empty data directory (%s) cannot take over: "+
		"start it on its old data directory, join without node_id to be given a new id, or wait until the cluster has moved those replicas (cluster.dead_node_grace after the old node died)",
		raftmeta.ErrNodeIDInUse, nd.ID, held, nd.PeerAddr)
}

// promoteLoop runs on every node and acts on the metadata leader: while
// the group has fewer than meta_voters voters, it promotes non-voters that
// are running (registered active), smallest id first. On every node it
// also checks its configured cluster settings against the cluster's.
func (n *Node) promoteLoop() {
	var warned raftmeta.ClusterConfig
	for {
		watch := n.meta.Watch()
		if n.meta.IsLeader() {
			n.recordClusterConfig()
			n.promote()
		}
		n.checkClusterConfig(&warned)
		select {
		case <-n.quit:
			return
		case <-watch:
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (n *Node) promote() {
	servers, err := n.meta.Servers()
	if err != nil {
		return
	}
	// A leader restarted on a new peer address (a one-node group elects
	// itself without the network) corrects its own address, so that
	// nodes joining later can reach it.
	self := raft.ServerID(strconv.Itoa(int(n.id)))
	for _, s := range servers {
		if s.ID == self && s.Suffrage == raft.Voter && s.Address != raft.ServerAddress(n.peers.Addr()) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := n.meta.AddVoter(ctx, n.id, raft.ServerAddress(n.peers.Addr()))
			cancel()
			if err != nil {
				n.logger.Warn("update own metadata peer address", "err", err)
				return
			}
			n.logger.Info("own metadata peer address updated", "old", s.Address, "addr", n.peers.Addr())
			return
		}
	}
	// A decommissioning voter does not count: it is about to leave, and
	// its vote passes to a non-voter first, so that the group never has
	// fewer than meta_voters voters in between (nor none, when it was
	// the only one).
	active := map[raft.ServerID]bool{}
	leaving := map[raft.ServerID]bool{}
	for _, m := range n.meta.Nodes() {
		switch m.State {
		case raftmeta.NodeActive:
			active[nodeServer(m.ID)] = true
		case raftmeta.NodeDecommissioning:
			leaving[nodeServer(m.ID)] = true
		}
	}
	voters := 0
	for _, s := range servers {
		if s.Suffrage == raft.Voter && !leaving[s.ID] {
			voters++
		}
	}
	servers = slices.Clone(servers) // the configuration's slice is shared
	slices.SortFunc(servers, func(a, b raft.Server) int { return cmpServerID(a.ID, b.ID) })
	target := n.clusterConfig().MetaVoters
	for _, s := range servers {
		if voters >= target {
			return
		}
		if s.Suffrage != raft.Nonvoter || !active[s.ID] {
			continue
		}
		id, _ := strconv.Atoi(string(s.ID))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := n.meta.AddVoter(ctx, raftmeta.NodeID(id), s.Address)
		cancel()
		if err != nil {
			n.logger.Warn("promote metadata voter", "id", id, "err", err)
			return
		}
		voters++
		n.logger.Info("node promoted to metadata voter", "id", id, "voters", voters)
	}
}

func cmpServerID(a, b raft.ServerID) int {
	x, _ := strconv.Atoi(string(a))
	y, _ := strconv.Atoi(string(b))
	return x - y
}

// joinCluster asks the seeds (in turn, until one answers) to admit this
// node, and adopts the id the leader gives it. It retries until ctx ends or
// the node closes.
//
// Seeds may be gossip addresses. The peer addresses of this node's gossip
// members (if it gossips already) are asked too. A seed not known to be a
// peer address is first probed as a gossip address (membership.Probe; a
// fresh node has no gossip name before it has an id) and the peer
// addresses of the members it reports are asked next; a seed that is no
// gossip address is asked as a peer. Probing first sends a peer listener a
// gossip message, which it closes quietly (peer.Mux.admit), rather than a
// gossip listener peer bytes, which memberlist logs as a protocol error.
func (n *Node) joinCluster(ctx context.Context, seeds []string) error {
	op := &metaOp{Op: opJoin, Node: &raftmeta.Node{ID: n.id, PeerAddr: n.peers.Addr()}, Fresh: true}
	var lastErr error
	isGossip := map[string]bool{} // seeds and members known to be gossip addresses
	isPeer := map[string]bool{}   // seeds that answered as peers
	var learned []string          // peer addresses reported by probes
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		peerAddrs, gossipAddrs := n.gossipPeerAddrs()
		for _, a := range gossipAddrs {
			isGossip[a] = true
		}
		var round []string
		add := func(a string) {
			if !isGossip[a] && a != n.peers.Addr() && !slices.Contains(round, a) {
				round = append(round, a)
			}
		}
		for _, a := range slices.Concat(seeds, peerAddrs, learned) {
			add(a)
		}
		for i := 0; i < len(round); i++ { // a probe may add to round
			seed := round[i]
			gossip, known := n.gossip.seedKind(seed)
			if !isPeer[seed] && slices.Contains(seeds, seed) && (!known || gossip) {
				members, perr := n.probeGossip(seed)
				if perr == nil {
					isGossip[seed] = true
					n.gossip.markSeed(seed, true)
					for _, mb := range members {
						isGossip[mb.GossipAddr] = true
						if mb.PeerAddr != "" && !slices.Contains(learned, mb.PeerAddr) {
							learned = append(learned, mb.PeerAddr)
							add(mb.PeerAddr)
						}
					}
					n.logger.Info("join: seed is a gossip address; asking its members' peer addresses", "seed", seed, "peers", learned)
					continue
				}
				if gossip || errors.Is(perr, membership.ErrUnreachable) {
					// A gossip address that does not answer now, or
					// nothing listens yet: say so once, not every round.
					if lastErr == nil || lastErr.Error() != perr.Error() {
						n.logger.Info("join: seed does not answer yet", "seed", seed, "err", perr)
					}
					lastErr = perr
					continue
				}
				n.logger.Debug("join: seed is no gossip address (or does not answer); asking it as a peer", "seed", seed, "err", perr)
			}
			cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			resp, err := n.callMetaOp(cctx, seed, op, false)
			cancel()
			if err == nil {
				isPeer[seed] = true
				n.gossip.markSeed(seed, false)
				err = decodeError(resp.Code, resp.Msg)
			}
			if err == nil {
				return n.adoptID(raftmeta.NodeID(resp.ID))
			}
			if errors.Is(err, raftmeta.ErrNodeIDInUse) {
				return fmt.Errorf("join the cluster of %v: %w", seeds, err) // retrying cannot help
			}
			lastErr = err
			n.logger.Info("join: seed did not admit this node yet", "seed", seed, "err", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("join the cluster of %v: %w (last error: %v)", seeds, ctx.Err(), lastErr)
		case <-n.quit:
			return fmt.Errorf("join: node closed")
		case <-time.After(wait):
		}
	}
}

// adoptID records the id the cluster gave this node.
func (n *Node) adoptID(id raftmeta.NodeID) error {
	if id <= 0 {
		return fmt.Errorf("join: the leader returned node id %d", id)
	}
	if n.id != 0 {
		if n.id != id {
			return fmt.Errorf("join: this node is %d but the leader admitted %d", n.id, id)
		}
		return nil
	}
	if err := writeFileSync(filepath.Join(n.cfg.DataDir, "node.id"), []byte(strconv.Itoa(int(id))+"\n")); err != nil {
		return fmt.Errorf("write node id: %w", err)
	}
	n.setID(id)
	n.logger.Info("joined the cluster", "id", int32(id))
	return nil
}

// awaitBootstrap implements bootstrap_expect: it says hello to the join
// list (and to the peer addresses of the alive gossip members, for a join
// list of gossip addresses) until BootstrapExpect distinct nodes (this one included) answered.
// It returns true when this node must bootstrap (no node has state and it
// has the smallest id); false when it must join (someone has state, or a
// smaller id will bootstrap).
func (n *Node) awaitBootstrap(ctx context.Context) (bool, error) {
	for {
		seen := map[raftmeta.NodeID]bool{n.id: true}
		existing := false
		// Join-list entries that are gossip addresses stand for the peer
		// addresses their members gossip.
		peerAddrs, gossipAddrs := n.gossipPeerAddrs()
		var addrs []string
		for _, a := range slices.Concat(n.cfg.Join, peerAddrs) {
			if !slices.Contains(gossipAddrs, a) && !slices.Contains(addrs, a) {
				addrs = append(addrs, a)
			}
		}
		for _, addr := range addrs {
			if addr == n.peers.Addr() {
				continue
			}
			if slices.Contains(n.cfg.Join, addr) {
				if gossip, ok := n.seedIsGossip(addr); !ok || gossip {
					continue // its members' peer addresses stand for a gossip address
				}
			}
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			b, err := n.peers.Call(cctx, addr, callHello, nil)
			cancel()
			if err != nil {
				continue
			}
			var h helloResp
			if err := json.Unmarshal(b, &h); err != nil || h.ID <= 0 {
				continue
			}
			if slices.Contains(n.cfg.Join, addr) {
				n.gossip.markSeed(addr, false)
			}
			seen[h.ID] = true
			existing = existing || h.HasState
		}
		if existing {
			return false, nil
		}
		if len(seen) >= n.cfg.BootstrapExpect {
			smallest := n.id
			for id := range seen {
				smallest = min(smallest, id)
			}
			n.logger.Info("bootstrap_expect reached", "nodes", len(seen), "bootstrapper", int32(smallest))
			return smallest == n.id, nil
		}
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("bootstrap_expect = %d: saw %d node(s) of %v: %w", n.cfg.BootstrapExpect, len(seen), n.cfg.Join, ctx.Err())
		case <-n.quit:
			return false, errors.New("node closed")
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// metaHasState reports whether dir holds metadata Raft state (a node that
// is already a member: it neither bootstraps nor joins).
func metaHasState(dir string) (bool, error) {
	path := filepath.Join(dir, "raft.db")
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	store, err := raftboltdb.New(raftboltdb.Options{Path: path, BoltOptions: &bbolt.Options{Timeout: 2 * time.Second}})
	if err != nil {
		return false, fmt.Errorf("inspect %s: %w", path, err)
	}
	defer store.Close()
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, hclog.NewNullLogger())
	if err != nil {
		return false, fmt.Errorf("inspect %s: %w", dir, err)
	}
	return raft.HasExistingState(store, store, snaps)
}
