package integration

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestDecommissionCLI decommissions the third of three nodes through the
// CLI while idempotent writers append through the other two, to a table of
// two replicas per bucket: `cluster decommission --wait` returns once the
// node holds no replica and has left the metadata group, `cluster status`
// shows it so, and after it is stopped every acknowledged append is stored
// once, at its offset, on the two remaining nodes, in sync. Restarted on
// its old data, the node stays out, and its /readyz says it was
// decommissioned, until undrain brings it back.
func TestDecommissionCLI(t *testing.T) {
	longMultiProcess(t)
	const (
		buckets = 6
		writers = 4
	)
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	nodes := startJoinedCluster(t, "")
	mustCall(t, nodes[0].client, "AdminService/CreateDatabase", map[string]any{"name": "dc"}, nil)
	createWriterTable(t, nodes[0].client, "dc.events", buckets, 2)
	var desc struct {
		Nodes []struct {
			ID         int    `json:"id"`
			ClientAddr string `json:"clientAddr"`
		} `json:"nodes"`
	}
	mustCall(t, nodes[0].client, "AdminService/DescribeCluster", map[string]any{}, &desc)
	id, rest := 0, []int{}
	for _, n := range desc.Nodes {
		if n.ClientAddr == nodes[2].client {
			id = n.ID
		} else {
			rest = append(rest, n.ID)
		}
	}
	slices.Sort(rest)
	if id == 0 || len(rest) != 2 {
		t.Fatalf("node at %s is not in DescribeCluster, or not with two others: %+v", nodes[2].client, desc.Nodes)
	}

	_, anyAddr := upNodes(nodes[0].client, nodes[1].client)
	var stop atomic.Bool
	wait := startAppenders(seed, "dc.events", buckets, writers, anyAddr, &stop)
	time.Sleep(time.Second)

	out := mustCLI(t, nodes[0].client, "", "cluster", "decommission", strconv.Itoa(id), "--wait", "50s").stdout
	if !strings.Contains(out, "is decommissioned") {
		t.Fatalf("decommission --wait of node %d printed %q", id, out)
	}
	status := mustCLI(t, nodes[1].client, "", "cluster", "status").stdout
	var row []string
	for _, line := range strings.Split(status, "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[0] == strconv.Itoa(id) {
			row = f
		}
	}
	// NODE STATE META REPLICAS LEADERS ...
	if len(row) < 5 || row[1] != "decommissioned" || row[2] != "none" || row[3] != "0" || row[4] != "0" {
		t.Fatalf("cluster status after the decommission, node %d: %q\n%s", id, row, status)
	}
	nodes[2].p.stop(t)

	acks := stopAndCheckAcks(t, &stop, wait, 1, "dc.events", buckets, func(b int) string { return nodes[b%2].client })
	t.Logf("%d acknowledged appends across %d buckets during the decommission", len(acks), buckets)
	waitFor(t, 30*time.Second, func() error { return checkInSync(nodes[0].client, "dc.events", rest) })

	// Restarted on its old data, the node stays out of the cluster and its
	// /readyz says why.
	nodes[2].start(t)
	waitFor(t, 30*time.Second, func() error {
		code, body, err := readyz(nodes[2].client)
		if err == nil && (code != http.StatusServiceUnavailable || !strings.Contains(body, "decommissioned")) {
			err = fmt.Errorf("/readyz of the restarted decommissioned node: %d %q", code, body)
		}
		return err
	})
	status = mustCLI(t, nodes[0].client, "", "cluster", "status").stdout
	if !regexp.MustCompile(`(?m)^` + strconv.Itoa(id) + `\s+decommissioned\s+none\s`).MatchString(status) {
		t.Fatalf("cluster status with the decommissioned node restarted:\n%s", status)
	}
	// Undrain brings it back, as the reason says.
	mustCLI(t, nodes[0].client, "", "cluster", "undrain", strconv.Itoa(id))
	waitFor(t, 30*time.Second, func() error {
		code, body, err := readyz(nodes[2].client)
		if err != nil {
			return err
		}
		status = mustCLI(t, nodes[0].client, "", "cluster", "status").stdout
		if code != http.StatusOK || !regexp.MustCompile(`(?m)^`+strconv.Itoa(id)+`\s+active\s+(voter|nonvoter)\s`).MatchString(status) {
			return fmt.Errorf("after undrain: /readyz %d %q, cluster status:\n%s", code, body, status)
		}
		return nil
	})
	nodes[2].p.stop(t)
}
