package rpc_test

import (
	"context"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	flussv1 "github.com/fluss-node/fluss-node/proto/flussv1"
	"github.com/fluss-node/fluss-node/rpc"
	"github.com/fluss-node/fluss-node/rpc/client"
)

func benchEnv(b *testing.B) (*env, []byte) {
	e := newEnvTB(b)
	e.mustPostTB(b, "/fluss.v1.AdminService/CreateDatabase", `{"name":"s"}`)
	e.mustPostTB(b, "/fluss.v1.AdminService/CreateTable", `{"table":"s.t","schema":{"columns":[
		{"name":"id","type":"BIGINT NOT NULL"},{"name":"city","type":"STRING"},
		{"name":"amount","type":"DOUBLE"},{"name":"n","type":"INT NOT NULL"}]}}`)
	return e, rowsJSON(randomRows(rand.New(rand.NewPCG(1, 1)), 0, 1000))
}

// BenchmarkAppendJSON: one 1000-row JSON append per op through HTTP
// (Connect proto client → handler → in-memory backend).
func BenchmarkAppendJSON(b *testing.B) {
	e, rows := benchEnv(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.SetBytes(int64(len(rows)))
	for b.Loop() {
		if _, err := e.c.Append(ctx, "s.t", rows); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkFetch: fetch 1000 rows (one stored batch) per op, 2 of 4 columns.
func BenchmarkFetch(b *testing.B) {
	for _, f := range []flussv1.Format{flussv1.Format_JSON, flussv1.Format_ARROW} {
		b.Run(f.String(), func(b *testing.B) {
			e, rows := benchEnv(b)
			ctx := context.Background()
			if _, err := e.c.Append(ctx, "s.t", rows); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				res, err := e.c.Fetch(ctx, &flussv1.FetchRequest{Table: "s.t", Columns: []string{"id", "amount"}, Format: f})
				if err != nil || res.GetNextOffset() != 1000 {
					b.Fatal(err, res.GetNextOffset())
				}
			}
			b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

func BenchmarkCodecUnmarshal(b *testing.B) {
	rows := rowsJSON(randomRows(rand.New(rand.NewPCG(1, 1)), 0, 1000))
	body := append(append([]byte(`{"table":"s.t","writerId":"5","rows":`), rows...), '}')
	c := rpc.Codecs()[0]
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		var m flussv1.AppendRequest
		if err := c.Unmarshal(body, &m); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendJSON1RowParallel: 1-row JSON appends from 64 concurrent
// clients over loopback (client and handler in this process, in-memory
// backend), per client protocol. cpu-us/op is the process's user+system
// CPU per request: client plus server, the figure that matters when both
// share the cores.
func BenchmarkAppendJSON1RowParallel(b *testing.B) {
	protocols := []struct {
		name string
		opts func() []client.Option
	}{
		{"connect-http1", func() []client.Option { return []client.Option{client.WithHTTPClient(client.DefaultHTTPClient(false))} }},
		{"connect-h2c", func() []client.Option { return []client.Option{client.WithHTTPClient(client.DefaultHTTPClient(true))} }},
		{"grpc-h2c", func() []client.Option {
			return []client.Option{client.WithGRPC(), client.WithHTTPClient(client.DefaultHTTPClient(true))}
		}},
	}
	for _, p := range protocols {
		b.Run(p.name, func(b *testing.B) {
			e, _ := benchEnv(b)
			row := rowsJSON(randomRows(rand.New(rand.NewPCG(2, 2)), 0, 1))
			shared := p.opts()
			ctx := context.Background()
			b.ReportAllocs()
			b.SetParallelism(32) // 64 goroutines on 2 cores
			cpu0 := processCPU()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				c := client.New(e.url, append([]client.Option{client.WithRetry(client.Retry{Attempts: 1})}, shared...)...)
				for pb.Next() {
					if _, err := c.Append(ctx, "s.t", row); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-us/op")
		})
	}
}

// processCPU is the user+system CPU time of this process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
