package replica

import (
	"context"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fluss-node/fluss-node/logstore"
	"github.com/fluss-node/fluss-node/logstore/record"
)

// BenchmarkAppend64 appends 1-row batches from 64 goroutines to one
// single-voter replica on the real disk with SyncAlways through a node
// Syncer: the group-commit path. Reports appends/s and raft entries/s.
func BenchmarkAppend64(b *testing.B) {
	syncer := logstore.NewSyncer(nil)
	defer syncer.Close()
	r := openSingle(b, b.TempDir(), func(c *Config) {
		c.Syncer = syncer
		c.Log.SyncMode = logstore.SyncAlways
	})
	defer r.Close()
	body := make([]byte, 64)
	batch := record.AppendBatch(nil, record.BatchHeader{RecordCount: 1, SchemaID: 1}, nil, body)
	var writer atomic.Int64
	_, entries0 := r.stats()
	b.ReportAllocs()
	b.SetParallelism(64 / max(1, runtime.GOMAXPROCS(0)))
	start := time.Now()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		w := writer.Add(1)
		var seq int32
		ctx := context.Background()
		for pb.Next() {
			bt := append([]byte(nil), batch...)
			if _, _, err := r.Append(ctx, [][]byte{bt}, w, seq); err != nil {
				b.Error(err)
				return
			}
			seq++
		}
	})
	b.StopTimer()
	el := time.Since(start).Seconds()
	_, entries1 := r.stats()
	b.ReportMetric(float64(b.N)/el, "appends/s")
	b.ReportMetric(float64(entries1-entries0)/el, "entries/s")
	b.ReportMetric(float64(b.N)/float64(max(1, entries1-entries0)), "appends/entry")
}

// BenchmarkReplicatedAppend appends 1-row batches one after another to a
// group of three replicas whose logs each sync on a disk of their own that
// takes at least 1 ms per flush (a model: the replicas of one machine's
// tests share its disk). ns/op is one write's latency: with the leader's
// sync in parallel with its followers' (the default) about one flush, with
// SerialLeaderSync about two.
func BenchmarkReplicatedAppend(b *testing.B) {
	for _, serial := range []bool{false, true} {
		b.Run(map[bool]string{false: "parallel", true: "serial"}[serial], func(b *testing.B) {
			c := &testCluster{t: b, wrap: newAckGateTransport, tweak: func(cfg *Config) {
				cfg.Log.FS = &syncGateFS{FS: logstore.OSFS{}, delay: time.Millisecond}
				cfg.Raft.SerialLeaderSync = serial
			}}
			c.init(3)
			defer c.closeAll()
			if _, err := c.append([][]byte{makeBatch(1, "first")}, 1, 0); err != nil {
				b.Fatal(err)
			}
			r := c.reps[c.leader()]
			batch := makeBatch(1, "0123456789012345678901234567890123456789")
			ctx := context.Background()
			b.ResetTimer()
			for i := range b.N {
				if _, _, err := r.Append(ctx, [][]byte{append([]byte(nil), batch...)}, 2, int32(i)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAppendSerial appends 1-row batches one at a time to a
// single-voter replica whose log is on tmpfs (/dev/shm), synced through a
// node Syncer as in production: every append is a raft entry of its own,
// and ns/op is the whole path of one entry (proposer, raft's leader loop,
// log write, sync round, commit, apply, answer) without a disk's latency.
// cpu-ns/op is the process CPU per append: the per-entry cost that one
// client per bucket cannot share with others.
func BenchmarkAppendSerial(b *testing.B) {
	dir, err := os.MkdirTemp("/dev/shm", "fluss-bench-")
	if err != nil {
		b.Skipf("no tmpfs at /dev/shm: %v", err)
	}
	defer os.RemoveAll(dir)
	syncer := logstore.NewSyncer(nil)
	defer syncer.Close()
	r := openSingle(b, dir, func(c *Config) { c.Syncer = syncer })
	defer r.Close()
	batch := record.AppendBatch(nil, record.BatchHeader{RecordCount: 1, SchemaID: 1}, nil, make([]byte, 64))
	ctx := context.Background()
	b.ReportAllocs()
	cpu0 := processCPU(b)
	b.ResetTimer()
	for i := range b.N {
		if _, _, err := r.Append(ctx, [][]byte{append([]byte(nil), batch...)}, 1, int32(i)); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
}

// processCPU is the process's user + system CPU time in nanoseconds.
func processCPU(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
