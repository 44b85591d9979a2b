package integration

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluss-node/fluss-node/proto/flussv1"
	"github.com/fluss-node/fluss-node/rpc/client"
)

// netFaults cuts the nodes of a multi-process cluster off from each other
// with nftables rules on the loopback interface. Each node runs as a uid of
// its own, and the first packet of every connection a node opens (a TCP
// connection, or a UDP flow of gossip) marks the connection with the node's
// number. A cut between nodes a and b drops every packet, both ways, of the
// connections a opened to b's ports and b to a's, established ones too. The
// test's clients run as root and still reach every node's client port: a
// partition between the nodes that leaves clients on both sides of it.
type netFaults struct {
	nft, table string
	nodes      []*clusterNode
}

// faultUIDBase + i + 1 is the uid node i runs as.
const faultUIDBase = 61000

// newNetFaults prepares nodes (not started yet) to run as uids of their
// own and installs the connection marking; the test is skipped where that
// cannot be done. The rules go when the test ends.
func newNetFaults(t *testing.T, nodes []*clusterNode) *netFaults {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network faults need root: nftables rules and a uid per node")
	}
	nft, err := exec.LookPath("nft")
	if err != nil {
		t.Skip("network faults need nft (Debian package nftables, which .ci/run installs)")
	}
	f := &netFaults{nft: nft, table: fmt.Sprintf("fluss_it_%d", os.Getpid()), nodes: nodes}
	if err := f.apply("add table inet T"); err != nil {
		t.Skipf("nftables not usable here: %v", err)
	}
	t.Cleanup(func() {
		if err := f.apply("delete table inet T"); err != nil {
			t.Errorf("remove the test's nftables table %s: %v", f.table, err)
		}
	})
	script := []string{
		"add chain inet T out { type filter hook output priority 0; policy accept; }",
		"add chain inet T cuts",
	}
	for i, n := range nodes {
		n.uid = faultUIDBase + uint32(i) + 1
		script = append(script, fmt.Sprintf("add rule inet T out meta skuid %d ct state new ct mark set %d", n.uid, i+1))
		if err := os.MkdirAll(n.dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(n.dir, int(n.uid), int(n.uid)); err != nil {
			t.Fatal(err)
		}
		// The node reaches its directory and the config file beside it
		// through t.TempDir's directories, made for root alone.
		for d := filepath.Dir(n.dir); d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	script = append(script, "add rule inet T out jump cuts")
	if err := f.apply(script...); err != nil {
		t.Fatal(err)
	}
	return f
}

// apply runs nft commands ("inet T" names the test's table) as one
// transaction.
func (f *netFaults) apply(cmds ...string) error {
	cmd := exec.Command(f.nft, "-f", "-")
	cmd.Stdin = strings.NewReader(strings.ReplaceAll(strings.Join(cmds, "\n"), "inet T", "inet "+f.table) + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft: %v: %s", err, out)
	}
	return nil
}

// cut drops the traffic between nodes a and b (0-based), both ways.
func (f *netFaults) cut(t *testing.T, a, b int) {
	t.Helper()
	var rules []string
	for _, p := range [][2]int{{a, b}, {b, a}} {
		from, to := p[0], f.nodes[p[1]]
		rules = append(rules,
			fmt.Sprintf("add rule inet T cuts ct mark %d meta l4proto tcp ct original proto-dst { %s, %s, %s } drop",
				from+1, portOf(t, to.client), portOf(t, to.peer), portOf(t, to.gossip)),
			fmt.Sprintf("add rule inet T cuts ct mark %d meta l4proto udp ct original proto-dst %s drop",
				from+1, portOf(t, to.gossip)))
	}
	if err := f.apply(rules...); err != nil {
		t.Fatal(err)
	}
}

// isolate cuts node a off from every other node.
func (f *netFaults) isolate(t *testing.T, a int) {
	t.Helper()
	for b := range f.nodes {
		if b != a {
			f.cut(t, a, b)
		}
	}
}

// heal removes every cut.
func (f *netFaults) heal(t *testing.T) {
	t.Helper()
	if err := f.apply("flush chain inet T cuts"); err != nil {
		t.Fatal(err)
	}
}

func portOf(t *testing.T, addr string) string {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// TestNetworkPartitions: three processes, each running as a uid of its
// own, with a primary-key table and two log tables replicated three ways.
// While clients keep writing and reading through every node, the network
// between the nodes is cut again and again for 6 s: a bucket leader cut
// off from both its followers, the metadata leader cut off, a bucket
// leader cut off from one follower only (both still reach the third node),
// any node cut off. During each cut the nodes that hold a quorum go on
// serving: an upsert through one of them (and, with the metadata leader
// cut off, a database creation) is acknowledged, and the cut-off bucket
// leader, once it finds the others dead, refuses a write at once
// (`unavailable`). Two nodes cut off from
// each other only stand for no election (the third still hears from both,
// and an election would unseat leaders it follows). The cut-off node
// acknowledges no write it cannot commit and answers no stale read: the
// primary-key history must be linearizable, every acknowledged append must
// be stored once at its acknowledged offset with dense offsets, no
// Appender row twice; after the last heal every replica of every bucket is
// back in sync.
func TestNetworkPartitions(t *testing.T) {
	longMultiProcess(t)
	const (
		buckets = 4
		cutFor  = 6 * time.Second // failover under a cut takes 3-5 s
		gap     = 3 * time.Second
	)
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 11))

	nodes := joinedCluster(t, "[raft]\nreplica_max_lag = \"8s\"\n") // for the catch-up check at the end
	faults := newNetFaults(t, nodes)
	for _, n := range nodes {
		n.start(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	admin := client.New("http://"+nodes[0].client, linRetry)
	createLinTable(ctx, t, admin, "lin.kv")
	for _, table := range []struct {
		name string
		cols []string
	}{{"lin.events", []string{"writer", "seq", "i"}}, {"lin.batched", []string{"g", "i"}}} {
		var cols []map[string]any
		for _, c := range table.cols {
			cols = append(cols, map[string]any{"name": c, "type": "INT", "nullable": false})
		}
		mustCall(t, nodes[0].client, "AdminService/CreateTable", map[string]any{
			"table": table.name, "schema": map[string]any{"columns": cols}, "bucketCount": buckets,
			"properties": map[string]string{"table.replication.factor": "3"},
		}, nil)
	}
	tables := []string{"lin.kv", "lin.events", "lin.batched"}
	for _, table := range tables {
		waitFor(t, 60*time.Second, func() error { return checkInSync(nodes[0].client, table, []int{1, 2, 3}) })
	}

	lin := startLinWorkload(ctx, nodes, "lin.kv", seed, 5*time.Second, func(int) bool { return true })
	var stop atomic.Bool
	wait := startAppenders(seed, "lin.events", buckets, 4, func(r *rand.Rand) string { return nodes[r.IntN(3)].client }, &stop)
	addrs := []string{nodes[0].client, nodes[1].client, nodes[2].client}
	waitBatched := startBatchedAppenders("lin.batched", addrs, &stop, func(g, i int) []byte { return fmt.Appendf(nil, `{"g":%d,"i":%d}`, g, i) })

	var cutOff []int // 0-based: the nodes cut off last
	var elections []int64
	routedAcks := map[[2]int]bool{} // rows of lin.batched acknowledged to clients that started at a cut-off leader
	for k, fault := range []string{"bucket leader", "metadata leader", "leader from one follower", "any node"} {
		time.Sleep(gap)
		// Look through a node that was not cut off last time: it knows
		// the leaders as they are now.
		v := rng.IntN(3)
		for slices.Contains(cutOff, v) {
			v = rng.IntN(3)
		}
		view := client.New("http://"+nodes[v].client, linRetry)
		var serving []int
		cutOff = nil
		var pair []int    // with a cut between two nodes only: those two
		probeBucket := -1 // with a leader cut off: a bucket of lin.batched it leads
		switch fault {
		case "bucket leader", "leader from one follower":
			var leader int
			waitFor(t, 30*time.Second, func() error {
				if leader = bucketLeader(ctx, t, view, "lin.kv", rng) - 1; leader < 0 || leader > 2 {
					return fmt.Errorf("cut %d: no leader of lin.kv known", k)
				}
				return nil
			})
			if fault == "bucket leader" {
				probeBucket = bucketLedBy(ctx, t, view, "lin.batched", leader+1)
				faults.isolate(t, leader)
				cutOff = []int{leader}
				serving = others(leader)
			} else {
				o := others(leader)
				pair = []int{leader, o[0]}
				elections = electionsOf(t, nodes, pair)
				faults.cut(t, leader, o[0])
				serving = []int{o[1]}
			}
			t.Logf("cut %d: %s, node %d", k, fault, leader+1)
		case "metadata leader":
			var m int
			waitFor(t, 30*time.Second, func() error {
				desc, err := view.DescribeCluster(ctx)
				if err != nil {
					return err
				}
				if m = int(desc.GetMetaLeader()) - 1; m < 0 || m > 2 {
					return fmt.Errorf("cut %d: metadata leader %d", k, m+1)
				}
				return nil
			})
			faults.isolate(t, m)
			cutOff, serving = []int{m}, others(m)
			t.Logf("cut %d: %s, node %d", k, fault, m+1)
		default:
			n := rng.IntN(3)
			faults.isolate(t, n)
			cutOff, serving = []int{n}, others(n)
			t.Logf("cut %d: %s, node %d", k, fault, n+1)
		}
		cutAt := time.Now()
		for _, s := range serving {
			last := ""
			waitFor(t, 30*time.Second, func() error {
				err := func() error {
					c := client.New("http://"+nodes[s].client, linRetry)
					octx, ocancel := context.WithTimeout(ctx, 5*time.Second)
					defer ocancel()
					// Keys of every bucket.
					if _, err := c.Upsert(octx, "lin.kv", fmt.Appendf(nil, `[{"k":%d,"v":%d},{"k":%d,"v":%d},{"k":%d,"v":%d},{"k":%d,"v":%d}]`,
						1000+4*k, s, 1001+4*k, s, 1002+4*k, s, 1003+4*k, s), nil); err != nil {
						return fmt.Errorf("upsert through node %d: %w", s+1, err)
					}
					if fault == "metadata leader" {
						if err := c.CreateDatabase(octx, fmt.Sprintf("cut%d", s+1), true); err != nil {
							return fmt.Errorf("create database through node %d: %w", s+1, err)
						}
					}
					return nil
				}()
				if err != nil && err.Error() != last {
					t.Logf("cut %d, %v in: %v", k, time.Since(cutAt).Round(time.Millisecond), err)
					last = err.Error()
				}
				return err
			})
		}
		t.Logf("cut %d: nodes %v serving %v after the cut (node(s) %v cut off)", k, plusOne(serving), time.Since(cutAt).Round(time.Millisecond), plusOne(cutOff))
		if probeBucket >= 0 {
			// Once the cut-off leader finds the others dead (three
			// heartbeat timeouts without an answer), it refuses a write
			// it cannot commit at once, instead of holding it until the
			// client's deadline.
			time.Sleep(time.Until(cutAt.Add(4 * time.Second)))
			pctx, pcancel := context.WithTimeout(ctx, 3*time.Second)
			sent := time.Now()
			err := call(pctx, nodes[cutOff[0]].client, "WriteService/Append", map[string]any{
				"table": "lin.batched", "bucket": probeBucket, "rows": []map[string]any{{"g": -1, "i": k}},
			}, nil)
			pcancel()
			wantCode(t, fmt.Sprintf("cut %d: append to bucket %d on its cut-off leader", k, probeBucket), err, "unavailable", "reaches the nodes of only 1 of its 3 replicas")
			t.Logf("cut %d: the cut-off leader answered an append to bucket %d in %v: %v", k, probeBucket, time.Since(sent).Round(time.Millisecond), err)

			// A routing client whose seed is that node still gets the
			// write acknowledged: the seed's layout names no leader and it
			// answers unavailable, so the client asks another node.
			seeded := client.New("http://"+nodes[cutOff[0]].client, client.WithRouting(), linRetry)
			rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
			bucket := int32(probeBucket)
			sent = time.Now()
			_, err = seeded.AppendRequest(rctx, &flussv1.AppendRequest{Table: "lin.batched", Bucket: &bucket, Rows: fmt.Appendf(nil, `[{"g":-2,"i":%d}]`, k)})
			rcancel()
			if err != nil {
				t.Errorf("cut %d: append to bucket %d by a routing client seeded at its cut-off leader: %v", k, probeBucket, err)
			} else {
				routedAcks[[2]int{-2, k}] = true
				t.Logf("cut %d: a routing client seeded at the cut-off leader appended to bucket %d in %v", k, probeBucket, time.Since(sent).Round(time.Millisecond))
			}

			// So does a client without routing given a list of servers
			// that starts with that node: its retry goes to the next.
			other := nodes[serving[0]].client
			listed := client.New(nodes[cutOff[0]].client+","+other, linRetry)
			lctx, lcancel := context.WithTimeout(ctx, 10*time.Second)
			sent = time.Now()
			_, err = listed.AppendRequest(lctx, &flussv1.AppendRequest{Table: "lin.batched", Bucket: &bucket, Rows: fmt.Appendf(nil, `[{"g":-3,"i":%d}]`, k)})
			lcancel()
			if err != nil {
				t.Errorf("cut %d: append to bucket %d by a client given the servers %s,%s: %v", k, probeBucket, nodes[cutOff[0]].client, other, err)
			} else {
				routedAcks[[2]int{-3, k}] = true
				t.Logf("cut %d: a client given the cut-off leader first in its list appended to bucket %d in %v", k, probeBucket, time.Since(sent).Round(time.Millisecond))
			}
		}
		time.Sleep(time.Until(cutAt.Add(cutFor)))
		if pair != nil {
			// Each of the two lost the other's node, the third still
			// hears from both: no group of theirs stood for an election,
			// which would unseat a leader the quorum still follows.
			if now := electionsOf(t, nodes, pair); !slices.Equal(now, elections) {
				t.Errorf("cut %d: nodes %v stood for %v elections while cut off from each other only (before: %v)", k, plusOne(pair), now, elections)
			}
			held := int64(0)
			for _, n := range pair {
				held += metricValue(t, nodes[n].client, "fluss_bucket_elections_held_back_total")
			}
			t.Logf("cut %d: elections held back on nodes %v: %d in all", k, plusOne(pair), held)
		}
		faults.heal(t)
	}
	healed := time.Now()
	time.Sleep(gap)
	lin.finish(t, nodes[1].client)
	acks := stopAndCheckAcks(t, &stop, wait, 4, "lin.events", buckets, func(b int) string { return nodes[b%3].client })
	t.Logf("%d acknowledged appends", len(acks))
	acked, failed := waitBatched()
	maps.Copy(acked, routedAcks)
	stored := checkStoredOnce(t, fetchAllRaw(t, nodes[2].client, "lin.batched", buckets), acked)
	t.Logf("Appender: %d rows acknowledged, %d failed, %d stored", len(acked), failed, stored)

	// Looked at once every leader has led longer than replica_max_lag (a
	// new leader counts unheard followers in for that long), and again
	// past that for leaders that changed meanwhile.
	allInSync := func() {
		for _, table := range tables {
			waitFor(t, 60*time.Second, func() error { return checkInSync(nodes[0].client, table, []int{1, 2, 3}) })
		}
	}
	time.Sleep(time.Until(healed.Add(9 * time.Second)))
	allInSync()
	time.Sleep(9 * time.Second)
	allInSync()
}

// bucketLedBy is a bucket of table that node id leads, as admin sees it
// (-1 if none).
func bucketLedBy(ctx context.Context, t *testing.T, admin *client.Client, table string, id int) int {
	layout, err := admin.GetTableLayout(ctx, table)
	if err != nil {
		t.Logf("no layout of %s: %v", table, err)
		return -1
	}
	for _, b := range layout {
		if int(b.GetLeader()) == id {
			return int(b.GetBucket())
		}
	}
	return -1
}

// electionsOf reads fluss_bucket_elections_total of nodes (0-based).
func electionsOf(t *testing.T, nodes []*clusterNode, of []int) []int64 {
	t.Helper()
	var v []int64
	for _, n := range of {
		e := metricValue(t, nodes[n].client, "fluss_bucket_elections_total")
		if e < 0 {
			t.Fatalf("node %d: no fluss_bucket_elections_total on /metrics", n+1)
		}
		v = append(v, e)
	}
	return v
}

// others is the two nodes (0-based) of three other than n.
func others(n int) []int {
	var o []int
	for i := range 3 {
		if i != n {
			o = append(o, i)
		}
	}
	return o
}

// plusOne is nodes (0-based) as node ids.
func plusOne(nodes []int) []int {
	ids := make([]int, len(nodes))
	for i, n := range nodes {
		ids[i] = n + 1
	}
	return ids
}
