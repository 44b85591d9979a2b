package filter

import (
	"math/rand/v2"
	"syscall"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/fluss-node/fluss-node/logstore/record"
)

func benchRecord(b *testing.B, rows int, dict bool) (*record.Schema, arrow.Record) {
	s := &record.Schema{ID: 1, Columns: []record.Column{
		{Name: "amount", Type: mustType("BIGINT"), Nullable: true},
		{Name: "city", Type: mustType("STRING"), Nullable: true},
	}}
	r := rand.New(rand.NewPCG(7, 7))
	mem := memory.DefaultAllocator
	ab := array.NewInt64Builder(mem)
	cityType := arrow.DataType(arrow.BinaryTypes.String)
	if dict {
		cityType = &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int16, ValueType: arrow.BinaryTypes.String}
	}
	cb := array.NewBuilder(mem, cityType)
	cities := []string{"a", "b", "berlin", "paris", "tokyo"}
	for i := 0; i < rows; i++ {
		if r.IntN(10) == 0 {
			ab.AppendNull()
		} else {
			ab.Append(int64(r.IntN(200)))
		}
		c := cities[r.IntN(len(cities))]
		switch cb := cb.(type) {
		case *array.StringBuilder:
			cb.Append(c)
		case *array.BinaryDictionaryBuilder:
			_ = cb.AppendString(c)
		}
	}
	a, c := ab.NewArray(), cb.NewArray()
	b.Cleanup(func() { a.Release(); c.Release() })
	rec := array.NewRecord(arrow.NewSchema([]arrow.Field{
		{Name: "amount", Type: a.DataType(), Nullable: true},
		{Name: "city", Type: c.DataType(), Nullable: true},
	}, nil), []arrow.Array{a, c}, int64(rows))
	return s, rec
}

// cpuTime is the process's user+system CPU time in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func benchEval(b *testing.B, text string, dict bool) {
	s, rec := benchRecord(b, 1000, dict)
	e, err := Parse(text)
	if err != nil {
		b.Fatal(err)
	}
	f, err := Bind(e, s)
	if err != nil {
		b.Fatal(err)
	}
	sel := make([]int32, 0, 1000)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		sel, err = f.Eval(rec, nil, sel[:0])
		if err != nil {
			b.Fatal(err)
		}
	}
	// The build machine is shared: process CPU time per op is a steadier
	// number than wall time.
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(len(sel)), "rows-passed")
}

// BenchmarkEval is the brief's benchmark: 1000 rows, BIGINT and STRING.
func BenchmarkEval(b *testing.B) {
	b.Run("plain", func(b *testing.B) { benchEval(b, "amount > 100 AND city IN ('a','b')", false) })
	b.Run("dict", func(b *testing.B) { benchEval(b, "amount > 100 AND city IN ('a','b')", true) })
	b.Run("int-only", func(b *testing.B) { benchEval(b, "amount > 100", false) })
	b.Run("like-prefix", func(b *testing.B) { benchEval(b, "city LIKE 'be%'", false) })
	b.Run("like-infix", func(b *testing.B) { benchEval(b, "city LIKE '%r_i%'", false) })
	b.Run("like-dict", func(b *testing.B) { benchEval(b, "city LIKE '%r_i%'", true) })
	b.Run("ilike-prefix", func(b *testing.B) { benchEval(b, "city ILIKE 'BE%'", false) })
	b.Run("ilike-infix", func(b *testing.B) { benchEval(b, "city ILIKE '%R_I%'", false) })
}

func BenchmarkParseBind(b *testing.B) {
	s, _ := benchRecord(b, 1, false)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		e, err := Parse("amount > 100 AND city IN ('a','b') OR city IS NULL")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Bind(e, s); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMayMatch(b *testing.B) {
	s, _ := benchRecord(b, 1, false)
	e, _ := Parse("amount > 100 AND city IN ('a','b')")
	f, _ := Bind(e, s)
	stats := []record.ColumnStats{
		{HasMinMax: true, MinInt: 0, MaxInt: 50},
		{HasMinMax: true, MinBytes: []byte("a"), MaxBytes: []byte("z")},
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if f.MayMatch(stats) {
			b.Fatal("should skip")
		}
	}
}
