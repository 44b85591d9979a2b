package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestClusterOpsCLI drives `cluster drain|undrain|decommission|rebalance|config`
// through the binary on one node: the state shows in `cluster status`, bad
// node ids fail with a non-zero exit and a message, `drain --wait` fails
// when the node's buckets have no other replica to move to, the only
// node cannot be decommissioned, and meta_voters set by `cluster config`
// outlasts a restart whose configuration says otherwise.
func TestClusterOpsCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	dir := t.TempDir()
	p := startNode(t, dir)
	addr := p.addr
	mustCall(t, addr, "AdminService/ListDatabases", map[string]any{}, nil)
	status := func() string {
		return mustCLI(t, addr, "", "cluster", "status").stdout
	}
	if out := mustCLI(t, addr, "", "cluster", "drain", "1").stdout; !strings.Contains(out, "node 1 is draining") {
		t.Fatalf("drain printed %q", out)
	}
	if s := status(); !strings.Contains(s, "draining") {
		t.Fatalf("cluster status after drain:\n%s", s)
	}
	if out := mustCLI(t, addr, "", "cluster", "undrain", "1").stdout; !strings.Contains(out, "node 1 is active") {
		t.Fatalf("undrain printed %q", out)
	}
	if s := status(); strings.Contains(s, "draining") || !strings.Contains(s, "active") {
		t.Fatalf("cluster status after undrain:\n%s", s)
	}
	for _, args := range [][]string{{"cluster", "drain", "9"}, {"cluster", "drain", "x"}, {"cluster", "undrain", "0"}} {
		r := runCLI(t, addr, "", args...)
		if r.code == 0 || strings.TrimSpace(r.stderr) == "" {
			t.Errorf("%v: exit %d, stderr %q: want a failure with a reason", args, r.code, r.stderr)
		}
	}
	// A single node's buckets have nowhere to go: drain --wait says so.
	mustCLI(t, addr, "", "db", "create", "ops")
	mustCLI(t, addr, "", "table", "create", "ops.t", "--schema", "id BIGINT", "--buckets", "2")
	r := runCLI(t, addr, "", "cluster", "drain", "1", "--wait", "1s")
	if r.code == 0 || !strings.Contains(r.stderr, "node 1 still leads 2 bucket(s) after 1s") || !strings.Contains(r.stderr, "drain: bucket leadership cannot leave") {
		t.Errorf("drain --wait of the only node: exit %d, stderr %q: want a failure naming the 2 buckets it leads", r.code, r.stderr)
	}
	if r := runCLI(t, addr, "", "cluster", "drain", "1", "--wait", "-1s"); r.code == 0 || !strings.Contains(r.stderr, "--wait must be 0") {
		t.Errorf("drain --wait -1s: exit %d, stderr %q", r.code, r.stderr)
	}
	mustCLI(t, addr, "", "cluster", "undrain", "1")
	// Nor can the only node be decommissioned: refused, and it stays active.
	r = runCLI(t, addr, "", "cluster", "decommission", "1", "--wait", "5s")
	if r.code == 0 || !strings.Contains(r.stderr, "failed_precondition") || !strings.Contains(r.stderr, "only active node") {
		t.Errorf("decommission of the only node: exit %d, stderr %q: want failed_precondition", r.code, r.stderr)
	}
	if s := status(); strings.Contains(s, "decommissioning") {
		t.Fatalf("cluster status after a refused decommission:\n%s", s)
	}
	if r := runCLI(t, addr, "", "cluster", "decommission", "1", "--wait", "-1s"); r.code == 0 || !strings.Contains(r.stderr, "--wait must be 0") {
		t.Errorf("decommission --wait -1s: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := mustCLI(t, addr, "", "cluster", "rebalance"); !strings.Contains(r.stdout, "0 replica(s) moving") {
		t.Errorf("rebalance of one node printed %q", r.stdout)
	}

	if out := mustCLI(t, addr, "", "cluster", "config").stdout; out != "meta_voters = 3\ndead_node_grace = \"5m0s\"\ndefault_log_ttl = \"168h0m0s\"\nlake_snapshot_retention = \"1h0m0s\"\n" {
		t.Errorf("cluster config printed %q, want the defaults", out)
	}
	for _, args := range [][]string{
		{"--meta-voters", "0", "meta_voters must be 1 to 9, got 0"},
		{"--meta-voters", "10", "meta_voters must be 1 to 9, got 10"},
		{"--dead-node-grace", "500ms", "dead_node_grace must be 1s to 720h0m0s, got 500ms"},
		{"--default-log-ttl", "0s", "default_log_ttl must be at least 1s, got 0s"},
		{"--lake-snapshot-retention", "0s", "lake_snapshot_retention must be at least 1ms, got 0s"},
	} {
		if r := runCLI(t, addr, "", "cluster", "config", args[0], args[1]); r.code == 0 || !strings.Contains(r.stderr, "invalid_argument") || !strings.Contains(r.stderr, args[2]) {
			t.Errorf("cluster config %s %s: exit %d, stderr %q", args[0], args[1], r.code, r.stderr)
		}
	}
	if out := mustCLI(t, addr, "", "cluster", "config", "--meta-voters", "5", "--dead-node-grace", "10m", "--default-log-ttl", "72h", "--lake-snapshot-retention", "24h").stdout; out != "meta_voters = 5\ndead_node_grace = \"10m0s\"\ndefault_log_ttl = \"72h0m0s\"\nlake_snapshot_retention = \"24h0m0s\"\n" {
		t.Errorf("cluster config --meta-voters 5 --dead-node-grace 10m --default-log-ttl 72h --lake-snapshot-retention 24h printed %q", out)
	}
	p.stop(t)
	p = startNode(t, dir, "--meta-voters", "3")
	addr = p.addr
	if s := status(); !strings.Contains(s, "meta_voters: 5, dead_node_grace: 10m0s, default_log_ttl: 72h0m0s, lake_snapshot_retention: 24h0m0s") {
		t.Errorf("cluster status after a restart configured with meta_voters 3:\n%s", s)
	}
	waitFor(t, 10*time.Second, func() error {
		if !strings.Contains(p.logText(), "meta_voters is 3 in this node's configuration but 5 for the cluster") {
			return fmt.Errorf("no warning about the configured meta_voters in the log:\n%s", p.logTail(2000))
		}
		return nil
	})
}
