package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// ack is one acknowledged append: rows (writer, seq, 0..count-1) stored at
// baseOffset.. in bucket 0.
type ack struct {
	writer, seq int
	base        int64
	count       int
}

// TestKillNineKeepsEveryAcknowledgedRow appends with concurrent idempotent
// writers while the server is kill -9'ed and restarted, then reads the
// bucket back: every acknowledged row is there exactly once, at the offset
// the acknowledgement named, offsets are dense, and no row of any attempt
// appears twice. One column is dictionary-encoded, so that its per-batch
// dictionaries go through the crashes too.
func TestKillNineKeepsEveryAcknowledgedRow(t *testing.T) {
	longMultiProcess(t)
	const writers = 6
	restarts := killCount(t, 4)
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 1))

	dir := t.TempDir()
	p := startNode(t, dir)
	var addr atomic.Value
	addr.Store(p.addr)
	ctx := context.Background()

	mustCall := func(procedure string, req any) {
		t.Helper()
		waitFor(t, 20*time.Second, func() error { return call(ctx, addr.Load().(string), procedure, req, nil) })
	}
	mustCall("AdminService/CreateDatabase", map[string]any{"name": "it"})
	mustCall("AdminService/CreateTable", map[string]any{
		"table": "it.events",
		"schema": map[string]any{"columns": []map[string]any{
			{"name": "writer", "type": "INT", "nullable": false},
			{"name": "seq", "type": "INT", "nullable": false},
			{"name": "i", "type": "INT", "nullable": false},
			{"name": "payload", "type": "STRING"},
			{"name": "kind", "type": "STRING", "nullable": false, "dictionary": true},
		}},
		"bucketCount": 1,
	})

	var (
		mu      sync.Mutex
		acks    []ack
		stop    atomic.Bool
		lastErr atomic.Value
		wg      sync.WaitGroup
	)
	for w := 1; w <= writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := 1; !stop.Load(); seq++ {
				n := 1 + (seq*7+w)%20
				rows := make([]map[string]any, n)
				for i := range rows {
					rows[i] = map[string]any{"writer": w, "seq": seq, "i": i, "payload": fmt.Sprintf("w%d-s%d-%d", w, seq, i), "kind": kindOf(w, i)}
				}
				req := map[string]any{"table": "it.events", "bucket": 0, "rows": rows, "writerId": w, "batchSequence": seq}
				// Retry the same (writer, seq) until it is acknowledged: the
				// server must store it once however often it is sent.
				for !stop.Load() {
					var resp struct {
						Results []struct {
							BaseOffset any `json:"baseOffset"`
							Count      int `json:"count"`
						} `json:"results"`
					}
					cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
					err := call(cctx, addr.Load().(string), "WriteService/Append", req, &resp)
					cancel()
					if err == nil && len(resp.Results) == 1 {
						mu.Lock()
						acks = append(acks, ack{writer: w, seq: seq, base: jsonInt(resp.Results[0].BaseOffset), count: resp.Results[0].Count})
						mu.Unlock()
						break
					}
					if err != nil {
						lastErr.Store(err.Error())
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}

	for r := 0; r < restarts; r++ {
		time.Sleep(time.Duration(1500+rng.IntN(1500)) * time.Millisecond)
		p.kill()
		p = startNode(t, dir)
		addr.Store(p.addr)
	}
	time.Sleep(time.Second)
	stop.Store(true)
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	if len(acks) < restarts {
		t.Fatalf("only %d appends acknowledged; the server did not recover; last error: %v", len(acks), lastErr.Load())
	}

	// Read the whole bucket back.
	type row struct {
		Writer, Seq, I int
		Kind           string
	}
	var rows []row
	var hw int64 = -1
	offset := int64(0)
	waitFor(t, 20*time.Second, func() error {
		for {
			var resp struct {
				Rows          []row `json:"rows"`
				NextOffset    any   `json:"nextOffset"`
				HighWatermark any   `json:"highWatermark"`
			}
			if err := call(ctx, addr.Load().(string), "ReadService/Fetch",
				map[string]any{"table": "it.events", "bucket": 0, "offset": offset, "maxBytes": 1 << 20}, &resp); err != nil {
				return err
			}
			rows = append(rows, resp.Rows...)
			offset = jsonInt(resp.NextOffset)
			hw = jsonInt(resp.HighWatermark)
			if offset >= hw {
				return nil
			}
		}
	})
	if int64(len(rows)) != hw {
		t.Fatalf("read %d rows, high watermark %d: offsets are not dense", len(rows), hw)
	}

	// No row of any attempt appears twice.
	seen := make(map[row]int64, len(rows))
	for off, r := range rows {
		if prev, dup := seen[r]; dup {
			t.Fatalf("row %+v at offsets %d and %d", r, prev, off)
		}
		seen[r] = int64(off)
	}
	// Every acknowledged row is where its acknowledgement said.
	for _, a := range acks {
		for i := 0; i < a.count; i++ {
			off := a.base + int64(i)
			if off >= int64(len(rows)) {
				t.Fatalf("ack %+v: offset %d beyond the log (%d rows)", a, off, len(rows))
			}
			if got, want := rows[off], (row{a.writer, a.seq, i, kindOf(a.writer, i)}); got != want {
				t.Fatalf("offset %d holds %+v, acknowledged %+v", off, got, want)
			}
		}
	}
	// Per writer, batches appear in sequence order and whole.
	last := map[int]int{}
	for off := 0; off < len(rows); {
		r := rows[off]
		if r.Seq <= last[r.Writer] {
			t.Fatalf("writer %d seq %d at offset %d after seq %d", r.Writer, r.Seq, off, last[r.Writer])
		}
		last[r.Writer] = r.Seq
		n := 1 + (r.Seq*7+r.Writer)%20
		for i := 0; i < n; i++ {
			if off+i >= len(rows) || rows[off+i] != (row{r.Writer, r.Seq, i, kindOf(r.Writer, i)}) {
				t.Fatalf("batch writer %d seq %d not whole at offset %d", r.Writer, r.Seq, off)
			}
		}
		off += n
	}
	b, _ := json.Marshal(map[string]int{"acknowledged appends": len(acks), "rows": len(rows), "restarts": restarts})
	t.Logf("%s", b)
}

// kindOf is the value of the crash test's dictionary-encoded column.
func kindOf(writer, i int) string { return fmt.Sprintf("k%d", (writer+i)%3) }
