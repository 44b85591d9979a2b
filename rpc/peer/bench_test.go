package peer

import (
	"fmt"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// transportKind builds the three transports of one group on three nodes.
type transportKind struct {
	name  string
	setup func(b *testing.B) (newGroup func(g string) []raft.Transport, cleanup func())
}

var kinds = []transportKind{
	muxKind("mux", func(b *testing.B) *Mux { return listen(b, "127.0.0.1:0") }),
	muxKind("mux-tls", func(b *testing.B) *Mux { return listenTLS(b, testTLS(b, "node")) }),
	{"tcp", func(b *testing.B) (func(string) []raft.Transport, func()) {
		return func(string) []raft.Transport {
			trs := make([]raft.Transport, 3)
			for i := range trs {
				tr, err := raft.NewTCPTransport("127.0.0.1:0", nil, 3, 10*time.Second, io.Discard)
				if err != nil {
					b.Fatal(err)
				}
				trs[i] = tr
			}
			return trs
		}, func() {}
	}},
}

// muxKind is the transport of Muxes that listen makes.
func muxKind(name string, listen func(b *testing.B) *Mux) transportKind {
	return transportKind{name, func(b *testing.B) (func(string) []raft.Transport, func()) {
		ms := make([]*Mux, 3)
		for i := range ms {
			ms[i] = listen(b)
		}
		return func(g string) []raft.Transport {
				trs := make([]raft.Transport, 3)
				for i, m := range ms {
					tr, err := m.Transport(g)
					if err != nil {
						b.Fatal(err)
					}
					trs[i] = tr
				}
				return trs
			}, func() {
				for _, m := range ms {
					m.Close()
				}
			}
	}}
}

// BenchmarkApply: committed Applies of one 3-replica group, 256 in flight.
func BenchmarkApply(b *testing.B) {
	for _, k := range kinds {
		b.Run(k.name, func(b *testing.B) {
			b.ReportAllocs()
			newGroup, cleanup := k.setup(b)
			defer cleanup()
			reps := bootstrap(b, newGroup("g"))
			defer func() {
				for _, rp := range reps {
					rp.stop(b)
				}
			}()
			r := reps[leaderOf(b, reps)].r
			b.ResetTimer()
			for done := 0; done < b.N; {
				n := min(256, b.N-done)
				applyN(b, r, n)
				done += n
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "applies/s")
		})
	}
}

func heapAndGoroutines() (uint64, int) {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse, runtime.NumGoroutine()
}

// BenchmarkIdleGroups: heap and goroutines of 100 idle 3-replica groups (all three nodes in this
// process), per group. Run with -benchtime=1x.
func BenchmarkIdleGroups(b *testing.B) {
	const groups = 100
	for _, k := range kinds {
		b.Run(k.name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				h0, g0 := heapAndGoroutines()
				newGroup, cleanup := k.setup(b)
				var all [][]*replica
				for i := range groups {
					all = append(all, bootstrap(b, newGroup(fmt.Sprintf("g%d", i))))
				}
				for _, reps := range all {
					leaderOf(b, reps)
				}
				time.Sleep(2 * time.Second) // let replication settle into the idle steady state
				h1, g1 := heapAndGoroutines()
				b.ReportMetric(float64(h1-h0)/groups/(1<<20), "MiB/group")
				b.ReportMetric(float64(g1-g0)/groups, "goroutines/group")
				for _, reps := range all {
					for _, rp := range reps {
						rp.stop(b)
					}
				}
				cleanup()
			}
		})
	}
}
