package node

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluss-node/fluss-node/node/membership"
	"github.com/fluss-node/fluss-node/node/nodetest"
	"github.com/fluss-node/fluss-node/raftmeta"
)

// TestFencedNodesFile: the fence list a survivor keeps reads back, keeps
// what it had when more is added, and a file that is not a list of ids is
// an error rather than an empty fence.
func TestFencedNodesFile(t *testing.T) {
	dir := t.TempDir()
	if ids, err := readFencedNodes(dir); err != nil || ids != nil {
		t.Fatalf("no file: %v, %v; want no fenced node", ids, err)
	}
	if _, err := addFencedNodes(dir, []raftmeta.NodeID{7, 3}); err != nil {
		t.Fatal(err)
	}
	all, err := addFencedNodes(dir, []raftmeta.NodeID{3, 12})
	if err != nil {
		t.Fatal(err)
	}
	read, err := readFencedNodes(dir)
	if err != nil || len(read) != 3 || read[0] != 3 || read[1] != 7 || read[2] != 12 || len(all) != 3 {
		t.Fatalf("fence after two additions: %v (returned %v), %v; want [3 7 12]", read, all, err)
	}
	for _, bad := range []string{"2\nx\n", "0\n", "-4\n", "99999999999\n"} {
		if err := os.WriteFile(filepath.Join(dir, fencedNodesFile), []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if ids, err := readFencedNodes(dir); err == nil || !strings.Contains(err.Error(), "is not a node id") {
			t.Fatalf("fence file %q: %v, %v; want an error", bad, ids, err)
		}
		cfg := Default()
		cfg.DataDir = dir
		if _, err := New(cfg, nil); err == nil || !strings.Contains(err.Error(), "is not a node id") {
			t.Fatalf("a node with the fence file %q: %v; want it refused", bad, err)
		}
	}
}

// TestFencedNodeStops: a node refused by a survivor records it, reports it
// on Fatal once however many refusals come, and never starts on that data
// directory again; a node with a fence list refuses the listed servers.
func TestFencedNodeStops(t *testing.T) {
	dir := t.TempDir()
	cfg := Default()
	cfg.DataDir = dir
	cfg.NodeID = 2
	n, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n.fenced("3") {
		t.Fatal("a node without a fence list refuses node 3")
	}
	n.onFenced("127.0.0.1:9124", "refused")
	n.onFenced("127.0.0.1:9125", "refused again")
	select {
	case err := <-n.Fatal():
		if !strings.Contains(err.Error(), "node 2 was given up for lost") || !strings.Contains(err.Error(), "127.0.0.1:9124") {
			t.Fatalf("Fatal: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a fenced node did not report it on Fatal")
	}
	select {
	case err := <-n.Fatal():
		t.Fatalf("a second refusal reported again: %v", err)
	default:
	}
	n.unlock()
	if _, err := New(cfg, nil); err == nil || !strings.Contains(err.Error(), "this node was fenced") {
		t.Fatalf("New on a fenced node's data directory: %v", err)
	}

	survivor := t.TempDir()
	if _, err := addFencedNodes(survivor, []raftmeta.NodeID{2, 3}); err != nil {
		t.Fatal(err)
	}
	cfg.DataDir, cfg.NodeID = survivor, 1
	s, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.unlock()
	if !s.fenced("2") || !s.fenced("3") || s.fenced("4") || s.fenced("1") {
		t.Fatalf("the survivor fences %v; want nodes 2 and 3 only", s.fence.refused)
	}
	if err := checkNotFenced(survivor); err != nil {
		t.Fatalf("a survivor counts as fenced: %v", err)
	}
}

// TestFenceRecordedInTheCatalog: a node started with a fence list records
// it in the catalog, from which any node fences too; the admission of a
// fenced id is refused, and a fenced node is never among the members.
func TestFenceRecordedInTheCatalog(t *testing.T) {
	cfg := testConfig(t.TempDir())
	if _, err := addFencedNodes(cfg.DataDir, []raftmeta.NodeID{7, 9}); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, cfg)
	defer n.Close()
	deadline := time.Now().Add(30 * time.Second)
	for fmt.Sprint(n.meta.FSM().FencedNodes()) != "[7 9]" {
		if time.Now().After(deadline) {
			t.Fatalf("the catalog fences %v, want [7 9]", n.meta.FSM().FencedNodes())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// What the catalog lists is fenced without the file.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := n.metaCall(ctx, &metaOp{Op: opFenceNodes, Nodes: []raftmeta.NodeID{11}}); err != nil {
		t.Fatal(err)
	}
	if !n.fenced("11") || !n.fenced("7") || n.fenced("1") || n.fence.refused["11"] {
		t.Fatal("the catalog's fenced nodes are not fenced (or this node is)")
	}
	if _, err := n.admit(ctx, raftmeta.Node{ID: 9, PeerAddr: "127.0.0.1:1"}, true); !errors.Is(err, raftmeta.ErrNodeIDInUse) || !strings.Contains(err.Error(), "fenced") {
		t.Fatalf("admitting fenced node 9: %v", err)
	}
	// A node given an id gets one above every fenced id, though no node
	// ever had 7, 9 or 11.
	if id, err := n.admit(ctx, raftmeta.Node{PeerAddr: nodetest.FreeAddr()}, true); err != nil || id != 12 {
		t.Fatalf("a joining node was given id %d (%v), want 12", id, err)
	}
	for id, want := range map[uint64]string{9: "fences node 9", 11: "fences node 11", 4: ""} {
		b, err := n.peers.Call(ctx, n.peers.Addr(), callNodeFenced, binary.AppendUvarint(nil, id))
		if err != nil || !strings.Contains(string(b), want) || want == "" && len(b) != 0 {
			t.Fatalf("node.fenced for %d: %q, %v; want %q", id, b, err, want)
		}
	}
	for _, bad := range [][]byte{nil, {0}, binary.AppendUvarint(nil, 1<<40), {9, 9}} {
		if _, err := n.handleFencedQuery(ctx, bad); !errors.Is(err, ErrBadMessage) {
			t.Fatalf("node.fenced %x: %v, want ErrBadMessage", bad, err)
		}
	}
	if got := n.withoutFenced([]membership.Member{{Meta: membership.Meta{ID: 1}}, {Meta: membership.Meta{ID: 9}}, {Meta: membership.Meta{ID: 4}}}); len(got) != 2 || got[0].ID != 1 || got[1].ID != 4 {
		t.Fatalf("members without the fenced: %v", got)
	}
}

// TestFenceNeedsTheFeatureLevel: where a node cannot apply fence_nodes
// (here this node, as a binary of the level before), the fence is not
// proposed: the node keeps refusing from its own file.
func TestFenceNeedsTheFeatureLevel(t *testing.T) {
	cfg := testConfig(t.TempDir())
	if _, err := addFencedNodes(cfg.DataDir, []raftmeta.NodeID{7}); err != nil {
		t.Fatal(err)
	}
	n := startNodeWith(t, cfg, func(n *Node) { n.featureLevel = featureFence - 1 })
	defer n.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := n.metaCall(ctx, &metaOp{Op: opFenceNodes, Nodes: []raftmeta.NodeID{7}}); !errors.Is(err, raftmeta.ErrFeatureLevel) {
		t.Fatalf("fence_nodes at level %d: %v, want ErrFeatureLevel", featureFence-1, err)
	}
	if got := n.meta.FSM().FencedNodes(); got != nil || !n.fenced("7") {
		t.Fatalf("the catalog fences %v, and node 7 fenced: %v; want none in the catalog, 7 by the file", got, n.fenced("7"))
	}
}
