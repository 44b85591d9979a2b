package integration

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTieringThroughTheBinary configures tiering in a config file, writes
// ~6 MiB through the CLI into 1 MiB segments, waits until the closed
// segments are in the remote directory and only two remain locally, then
// kill -9s and restarts the node: `scan --from earliest` still returns
// every row, in order, from the remote log and the local one.
func TestTieringThroughTheBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	dir, remote := t.TempDir(), t.TempDir()
	config := fmt.Sprintf("[storage]\nsegment_bytes = 1048576\n\n[tiering]\nremote_dir = %q\ninterval = \"100ms\"\nlocal_segments = 1\n", remote)
	p := startNodeWithConfig(t, dir, config)
	mustCLI(t, p.addr, "", "db", "create", "tier")
	mustCLI(t, p.addr, "", "table", "create", "tier.t", "--schema", "id BIGINT NOT NULL, s STRING", "--buckets", "1",
		"--set", "table.log.arrow.compression.type=NONE")
	const rows = 3000
	rng := rand.New(rand.NewPCG(5, 6))
	var in strings.Builder
	for i := range rows {
		s := make([]byte, 2000)
		for k := range s {
			s[k] = 'a' + byte(rng.IntN(26))
		}
		fmt.Fprintf(&in, "{\"id\":%d,\"s\":%q}\n", i, s)
	}
	mustCLI(t, p.addr, in.String(), "append", "tier.t", "--batch", "100") // ~200 KB requests

	count := func(pattern string) int {
		m, _ := filepath.Glob(pattern)
		return len(m)
	}
	local := filepath.Join(dir, "buckets", "*", "*", "*", "log", "*.log")
	tiered := filepath.Join(remote, "t*", "p*", "b0", "*.log")
	waitFor(t, 30*time.Second, func() error {
		if l, r := count(local), count(tiered); l != 2 || r < 4 {
			return fmt.Errorf("%d local and %d remote segments, want 2 and >= 4", l, r)
		}
		return nil
	})

	p.kill()
	p = startNodeWithConfig(t, dir, config)
	out := mustCLI(t, p.addr, "", "scan", "tier.t", "--from", "earliest", "--columns", "id", "--limit", fmt.Sprint(rows)).stdout
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != rows {
		t.Fatalf("scan returned %d rows, want %d", len(lines), rows)
	}
	for i, line := range lines {
		var row struct{ ID int64 }
		if err := json.Unmarshal([]byte(line), &row); err != nil || row.ID != int64(i) {
			t.Fatalf("row %d of the scan is %s (%v)", i, line, err)
		}
	}
	if l := count(local); l != 2 {
		t.Fatalf("%d local segments after the restart, want 2", l)
	}
}
