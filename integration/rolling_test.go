package integration

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestRollingRestart runs the rolling restart of docs/OPERATIONS.md with
// the CLI on three processes while idempotent writers append through the
// nodes that are up: for each node in turn, `cluster drain --wait` (it
// returns once the node leads nothing), SIGTERM (a clean exit; a drain
// --wait of the stopped node fails, as it reports nothing), a start on
// the same directory, /readyz and no under-replicated bucket, `cluster
// undrain` until it leads again. Every acknowledged append is stored
// once, at its offset, and every replica is in sync at the end.
func TestRollingRestart(t *testing.T) {
	longMultiProcess(t)
	const (
		buckets = 6
		writers = 4
	)
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	nodes := startJoinedCluster(t, "[raft]\nreplica_max_lag = \"8s\"\n")
	up, anyAddr := upNodes(nodes[0].client, nodes[1].client, nodes[2].client)
	mustCall(t, nodes[0].client, "AdminService/CreateDatabase", map[string]any{"name": "rr"}, nil)
	createWriterTable(t, nodes[0].client, "rr.events", buckets, 3)
	waitFor(t, 30*time.Second, func() error { return checkInSync(nodes[0].client, "rr.events", []int{1, 2, 3}) })

	var stop atomic.Bool
	wait := startAppenders(seed, "rr.events", buckets, writers, anyAddr, &stop)

	// describe is, as addr's node sees the cluster, each node's state
	// and the buckets it leads (by node id), and each node's id by its
	// client address.
	type nodeView struct {
		leaders int
		state   string
	}
	describe := func(addr string) (map[int]nodeView, map[string]int, error) {
		var desc struct {
			Nodes []struct {
				ID         int    `json:"id"`
				State      string `json:"state"`
				Leaders    int    `json:"leaders"`
				ClientAddr string `json:"clientAddr"`
			} `json:"nodes"`
		}
		if err := callOnce(addr, "AdminService/DescribeCluster", map[string]any{}, &desc); err != nil {
			return nil, nil, err
		}
		views, ids := map[int]nodeView{}, map[string]int{}
		for _, n := range desc.Nodes {
			views[n.ID] = nodeView{n.Leaders, n.State}
			ids[n.ClientAddr] = n.ID
		}
		return views, ids, nil
	}
	_, ids, err := describe(nodes[0].client)
	if err != nil {
		t.Fatal(err)
	}

	for i, n := range nodes {
		id, ok := ids[n.client]
		if !ok {
			t.Fatalf("node at %s is not in DescribeCluster: %v", n.client, ids)
		}
		other := nodes[(i+1)%3].client
		if out := mustCLI(t, other, "", "cluster", "drain", strconv.Itoa(id), "--wait", "60s").stdout; !strings.Contains(out, "is draining and leads no bucket") {
			t.Fatalf("drain --wait of node %d printed %q", id, out)
		}
		if v, _, err := describe(other); err != nil || v[id].state != "draining" || v[id].leaders != 0 {
			t.Fatalf("after drain --wait node %d is %+v (%v), want draining and leading nothing", id, v[id], err)
		}
		// Writers stop choosing the node; what they sent it is answered
		// before it stops serving.
		up[i].Store(false)
		time.Sleep(300 * time.Millisecond)
		n.p.stop(t)
		// Stopped, it reports nothing: --wait does not take that as drained.
		if r := runCLI(t, other, "", "cluster", "drain", strconv.Itoa(id), "--wait", "1s"); r.code == 0 || !strings.Contains(r.stderr, "did not report what it leads") {
			t.Errorf("drain --wait of the stopped node %d: exit %d, stderr %q", id, r.code, r.stderr)
		}
		n.start(t)
		waitFor(t, 60*time.Second, func() error {
			code, body, err := readyz(n.client)
			if err == nil && code != http.StatusOK {
				err = fmt.Errorf("/readyz answers %d %q", code, body)
			}
			return err
		})
		waitFor(t, 60*time.Second, func() error {
			under, offline, err := clusterHealth(other)
			if err != nil {
				return err
			}
			for _, m := range []map[int]int{under, offline} {
				if len(m) != 3 || m[1]+m[2]+m[3] != 0 {
					return fmt.Errorf("under-replicated %v, offline %v", under, offline)
				}
			}
			return nil
		})
		up[i].Store(true)
		if out := mustCLI(t, n.client, "", "cluster", "undrain", strconv.Itoa(id)).stdout; !strings.Contains(out, "active") {
			t.Fatalf("undrain of node %d printed %q", id, out)
		}
		waitFor(t, 60*time.Second, func() error {
			v, _, err := describe(n.client)
			if err == nil && (v[id].state != "active" || v[id].leaders == 0) {
				err = fmt.Errorf("node %d is %s and leads %d buckets", id, v[id].state, v[id].leaders)
			}
			return err
		})
		t.Logf("node %d drained, restarted and undrained", id)
	}

	acks := stopAndCheckAcks(t, &stop, wait, len(nodes), "rr.events", buckets, func(b int) string { return nodes[b%3].client })
	retried, most := 0, 1
	for _, a := range acks {
		if a.tries > 1 {
			retried++
		}
		most = max(most, a.tries)
	}
	t.Logf("%d acknowledged appends across %d buckets during the rolling restart; %d needed more than one send (at most %d)", len(acks), buckets, retried, most)
	waitFor(t, 60*time.Second, func() error { return checkInSync(nodes[0].client, "rr.events", []int{1, 2, 3}) })
}
