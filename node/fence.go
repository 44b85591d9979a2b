package node

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fluss-node/fluss-node/node/membership"
	"github.com/fluss-node/fluss-node/raftmeta"
)

// Fencing the nodes `fluss-node recover` gave up for lost (docs/OPERATIONS.md
// "A majority of nodes died for good"). Recovery forces the survivors' copies
// of the metadata group and of the buckets to run without the lost nodes, but
// a lost machine may still start again on its old data directory (systemd
// does so on boot). Its groups' configurations still name the survivors, and
// two such nodes can elect each other in their old configuration; a leader so
// elected would be followed by a survivor (hashicorp/raft follows an
// AppendEntries of a higher term from any server) and overwrite what the
// recovered cluster committed since.
//
// So recover writes the lost ids to <data_dir>/fenced-nodes on each
// survivor, and the survivor's peer listener refuses every raft request from
// them (rpc/peer Options.Fenced). Once it runs, the survivor records them in
// the catalog too (publishFence: metadata command fence_nodes), so that
// every node, those that join later included, does the same. A fenced node
// is never alive to a node that fences it and never admitted. A starting
// node asks the other metadata servers whether they fence it before it
// serves clients (askFenced); failing that, a lost node hears the refusal at
// its first election or heartbeat to a survivor (rpc/peer
// Options.OnFenced). Either way it writes <data_dir>/FENCED, saying why, and
// stops (Node.Fatal); it will not start on that directory again.

const (
	// fencedNodesFile lists, in a survivor's data directory, the nodes
	// recover gave up for lost: one id per line, # comments.
	fencedNodesFile = "fenced-nodes"
	// fencedFile, in a lost node's data directory, says that the cluster
	// refused it and why.
	fencedFile = "FENCED"
)

// readFencedNodes reads dir's fenced-nodes file (none: no node is fenced).
func readFencedNodes(dir string) ([]raftmeta.NodeID, error) {
	b, err := os.ReadFile(filepath.Join(dir, fencedNodesFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ids []raftmeta.NodeID
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		id, err := strconv.ParseInt(line, 10, 32)
		if err != nil || id <= 0 {
			return nil, fmt.Errorf("%s line %d: %q is not a node id", filepath.Join(dir, fencedNodesFile), i+1, line)
		}
		ids = append(ids, raftmeta.NodeID(id))
	}
	return ids, nil
}

// addFencedNodes adds ids to dir's fenced-nodes file (durably; the ids
// already there stay) and returns the whole list.
func addFencedNodes(dir string, ids []raftmeta.NodeID) ([]raftmeta.NodeID, error) {
	all, err := readFencedNodes(dir)
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		if !slices.Contains(all, id) {
			all = append(all, id)
		}
	}
	slices.Sort(all)
	var b strings.Builder
	b.WriteString("# Nodes given up for lost by `fluss-node recover`: this node refuses their raft\n")
	b.WriteString("# requests, so that one started again on its old data cannot disturb the recovered\n")
	b.WriteString("# cluster. Never give a new node one of these ids.\n")
	for _, id := range all {
		fmt.Fprintln(&b, id)
	}
	return all, writeFileSync(filepath.Join(dir, fencedNodesFile), []byte(b.String()))
}

// checkNotFenced refuses to start on the data directory of a node that the
// cluster fenced.
func checkNotFenced(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, fencedFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("%s: this node was fenced and does not start on this data directory: %s", filepath.Join(dir, fencedFile), strings.TrimSpace(string(b)))
}

// fence is what a node knows of fencing: the nodes it refuses, and whether
// it was refused itself.
type fence struct {
	refused map[raft.ServerID]bool // read-only after New

	once  sync.Once
	fatal chan error // cap 1: the reason this node was fenced
}

// fenced says whether id is a fenced node: one this node's recover gave up
// (its fenced-nodes file) or one the catalog records as fenced (another
// survivor's, published by publishFence). Called for every raft request
// the node receives.
func (n *Node) fenced(id raft.ServerID) bool {
	if n.fence.refused[id] {
		return true
	}
	if !n.metaOpen() {
		return false
	}
	fenced := n.meta.FSM().FencedNodes()
	return len(fenced) > 0 && slices.Contains(fenced, serverNode(id))
}

// onFenced handles a survivor's word that it fences this node, a refused
// raft request or an answer to askFenced (once): it records it in the data
// directory and reports it on Fatal.
func (n *Node) onFenced(remote, msg string) {
	n.fence.once.Do(func() {
		why := fmt.Sprintf("node %d was given up for lost by `fluss-node recover` on the cluster's surviving nodes; "+
			"at %s the node at %s said it fences this one (%s). Its data is stale: move this data directory "+
			"away and `fluss-node join` the machine as a new node with an empty one.",
			int32(n.nodeID()), time.Now().UTC().Format(time.RFC3339), remote, msg)
		err := errors.New(why)
		if werr := writeFileSync(filepath.Join(n.cfg.DataDir, fencedFile), []byte(why+"\n")); werr != nil {
			err = fmt.Errorf("%w (and %s could not be written: %v)", err, fencedFile, werr)
		}
		n.logger.Error("fenced: this node stops", "err", err)
		n.fence.fatal <- err
	})
}

// Fatal delivers the error that ends this node without a signal: the
// cluster fenced it. The caller closes the node and exits with it.
func (n *Node) Fatal() <-chan error { return n.fence.fatal }

// loadFence refuses a fenced data directory and reads the nodes this one
// fences.
func (n *Node) loadFence() error {
	if err := checkNotFenced(n.cfg.DataDir); err != nil {
		return err
	}
	ids, err := readFencedNodes(n.cfg.DataDir)
	if err != nil {
		return err
	}
	n.fence.fatal = make(chan error, 1)
	n.fence.refused = make(map[raft.ServerID]bool, len(ids))
	for _, id := range ids {
		n.fence.refused[nodeServer(id)] = true
	}
	if len(ids) > 0 {
		n.logger.Info("refusing raft requests from the nodes recover gave up for lost", "nodes", ids)
	}
	return nil
}

// withoutFenced is members less the fenced nodes: gossip may see a fenced
// node that started again, but to this node it is gone for good (never
// alive, never a replica to add back or a leader to hand over to).
func (n *Node) withoutFenced(members []membership.Member) []membership.Member {
	return slices.DeleteFunc(members, func(m membership.Member) bool { return n.fenced(nodeServer(raftmeta.NodeID(m.ID))) })
}

// opFenceNodes is the metadata operation that records fenced nodes in the
// catalog.
const opFenceNodes = "fence_nodes"

// fenceNodes records ids as fenced in the catalog (on the metadata
// leader), once every node can apply it.
func (n *Node) fenceNodes(ctx context.Context, ids []raftmeta.NodeID) error {
	if err := n.requireFeature(featureFence, "fencing nodes in the catalog"); err != nil {
		return err
	}
	return n.meta.FenceNodes(ctx, ids)
}

// publishFence records this node's fenced-nodes in the catalog, so that
// every node refuses them, nodes that join later and metadata leaders that
// did not run recover included. It retries until done (a cluster still
// upgrading, no metadata leader yet) or the node closes.
func (n *Node) publishFence() {
	var ids []raftmeta.NodeID
	for id := range n.fence.refused {
		ids = append(ids, serverNode(id))
	}
	slices.Sort(ids)
	for attempt := 0; len(ids) > 0; attempt++ {
		ids = slices.DeleteFunc(ids, func(id raftmeta.NodeID) bool { return slices.Contains(n.meta.FSM().FencedNodes(), id) })
		if len(ids) == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := n.metaCall(ctx, &metaOp{Op: opFenceNodes, Nodes: ids})
		cancel()
		if err == nil {
			n.logger.Info("fenced nodes recorded in the catalog", "nodes", ids)
			return
		}
		if attempt%12 == 0 {
			n.logger.Warn("fenced nodes not recorded in the catalog yet; retrying", "nodes", ids, "err", err)
		}
		select {
		case <-n.quit:
			return
		case <-time.After(5 * time.Second):
		}
	}
}

// handleFencedQuery answers node.fenced: empty if the node id in the
// request is not fenced here, else the refusal.
func (n *Node) handleFencedQuery(_ context.Context, req []byte) ([]byte, error) {
	id, w := binary.Uvarint(req)
	if w <= 0 || w != len(req) || id == 0 || id > math.MaxInt32 {
		return nil, fmt.Errorf("%w: node.fenced: want one node id", ErrBadMessage)
	}
	if !n.fenced(nodeServer(raftmeta.NodeID(id))) {
		return nil, nil
	}
	return fmt.Appendf(nil, "%s fences node %d: it was given up for lost", n.peers.Addr(), id), nil
}

// fencedQueryWait bounds how long a starting node waits for the answers of
// the other metadata servers (asked at once) to whether they fence it.
const fencedQueryWait = 2 * time.Second

// askFenced asks the other servers of this node's metadata group, before
// the node serves clients, whether they fence it, and stops it at once if
// one does: so a lost node started again on its old data does not answer a
// client from its stale copy until its groups' first election tells it. A
// server that does not answer in time, or runs a binary without the call,
// counts as no.
func (n *Node) askFenced(ctx context.Context) error {
	servers, err := n.meta.Servers()
	if err != nil || n.id == 0 {
		return nil // a joining node, or no configuration yet: nothing to ask
	}
	req := binary.AppendUvarint(nil, uint64(n.id))
	ctx, cancel := context.WithTimeout(ctx, fencedQueryWait)
	defer cancel()
	type answer struct{ addr, msg string }
	answers := make(chan answer, len(servers))
	asked := 0
	for _, s := range servers {
		if serverNode(s.ID) == n.id {
			continue
		}
		asked++
		go func() {
			b, err := n.peers.Call(ctx, string(s.Address), callNodeFenced, req)
			if err != nil {
				b = nil
			}
			answers <- answer{string(s.Address), string(b)}
		}()
	}
	for range asked {
		if a := <-answers; a.msg != "" {
			n.onFenced(a.addr, a.msg)
			return <-n.fence.fatal
		}
	}
	return nil
}
