package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fluss-node/fluss-node/node/nodetest"
)

// TestJoinWithATakenNodeIDIsRefused: a node started with the node_id of a
// running member (two nodes configured alike) is refused and exits with
// the reason, and the member keeps its place: its peer address in the
// cluster is unchanged and it still serves. Once that member is dead, a
// node with an empty data directory under its id is refused while bucket
// replicas are assigned to the id, and admitted at its new address once
// none are.
func TestJoinWithATakenNodeIDIsRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	nodes := startJoinedCluster(t, "") // three: the metadata group keeps a majority when node 2 dies
	peerOf := func(id int) (string, error) {
		var desc struct {
			Nodes []struct {
				ID       int    `json:"id"`
				PeerAddr string `json:"peerAddr"`
				State    string `json:"state"`
			} `json:"nodes"`
		}
		if err := callOnce(nodes[0].client, "AdminService/DescribeCluster", map[string]any{}, &desc); err != nil {
			return "", err
		}
		for _, n := range desc.Nodes {
			if n.ID == id {
				return n.PeerAddr, nil
			}
		}
		return "", fmt.Errorf("node %d is not in the cluster", id)
	}
	waitFor(t, 30*time.Second, func() error {
		p, err := peerOf(2)
		if err == nil && p != nodes[1].peer {
			err = fmt.Errorf("node 2 registered at %s, want %s", p, nodes[1].peer)
		}
		return err
	})

	twin := &clusterNode{dir: t.TempDir(), client: nodetest.FreeAddr(), peer: nodetest.FreeAddr(), gossip: nodetest.FreeAddr()}
	args := []string{"--client-addr", twin.client, "--peer-addr", twin.peer, "--gossip-addr", twin.gossip,
		"--join", nodes[0].peer, "--node-id", "2"}
	p, err := startNodeErr(t, 0, twin.dir, args...)
	if err == nil {
		p.kill()
		t.Fatal("a second node with node id 2 was admitted while node 2 runs")
	}
	if msg := err.Error(); !strings.Contains(msg, "node id 2 belongs to the running node at "+nodes[1].peer) {
		t.Fatalf("the refused node's error does not say why:\n%s", msg)
	}
	if p, err := peerOf(2); err != nil || p != nodes[1].peer {
		t.Fatalf("after the refused join node 2 is at %q (%v), want %s", p, err, nodes[1].peer)
	}
	mustCall(t, nodes[1].client, "AdminService/CreateDatabase", map[string]any{"name": "still"}, nil)

	// Node 2 dies while it holds bucket replicas: a node with an empty data
	// directory may not take their place under its id.
	cols := []map[string]any{{"name": "id", "type": "BIGINT", "nullable": false}}
	mustCall(t, nodes[0].client, "AdminService/CreateTable", map[string]any{"table": "still.t", "schema": map[string]any{"columns": cols},
		"bucketCount": 2, "properties": map[string]string{"table.replication.factor": "3"}}, nil)
	nodes[1].p.kill()
	_, err = startNodeErr(t, 0, twin.dir, args...)
	if err == nil || !strings.Contains(err.Error(), "node id 2 still holds 2 bucket replicas") {
		t.Fatalf("a node with an empty data directory under the id of a dead node that holds replicas: %v", err)
	}

	// Once nothing is assigned to the id (here: the table dropped), it may
	// be taken up at a new address.
	mustCall(t, nodes[0].client, "AdminService/DropTable", map[string]any{"table": "still.t"}, nil)
	q, err := startNodeErr(t, 0, twin.dir, args...)
	if err != nil {
		t.Fatalf("node id 2 at a new address after node 2 died and its replicas went: %v", err)
	}
	t.Cleanup(q.kill)
	waitFor(t, 30*time.Second, func() error {
		p, err := peerOf(2)
		if err == nil && p != twin.peer {
			err = fmt.Errorf("node 2 registered at %s, want %s", p, twin.peer)
		}
		return err
	})
}
