package filter

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/fluss-node/fluss-node/logstore/record"
)

// TestEvalMatchesNaive checks the column-at-a-time evaluator against the
// row-at-a-time three-valued one on random records and filters, and that
// MayMatch never skips a batch that has a passing row.
func TestEvalMatchesNaive(t *testing.T) {
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	s := testSchema()
	iters := 3000
	if testing.Short() {
		iters = 300
	}
	var passed, skipped, skippable int
	for it := 0; it < iters; it++ {
		rows := []int{0, 1, 2, 5, 63, 64, 65, 130}[r.IntN(8)]
		rec := genRecord(r, s, rows, r.IntN(3) == 0)
		idx := reverseIndex(len(s.Columns))
		stats := statsOf(s, rec, idx)
		for k := 0; k < 8; k++ {
			text := genFilter(r, s, r.IntN(4))
			e, err := Parse(text)
			if err != nil {
				t.Fatalf("iteration %d: Parse(%q): %v", it, text, err)
			}
			// The generator's text and the canonical form must agree.
			e2, err := Parse(e.String())
			if err != nil || e2.String() != e.String() {
				t.Fatalf("iteration %d: %q does not round-trip: %v", it, e.String(), err)
			}
			f, err := Bind(e, s)
			if err != nil {
				t.Fatalf("iteration %d: Bind(%q): %v", it, text, err)
			}
			prefix := []int32{-7} // Eval must append, not overwrite
			got, err := f.Eval(rec, idx, prefix)
			if err != nil {
				t.Fatalf("iteration %d: Eval(%q): %v", it, text, err)
			}
			if got[0] != -7 {
				t.Fatalf("Eval overwrote the caller's prefix")
			}
			got = got[1:]
			n := naive{s: s, rec: rec, idx: idx}
			var want []int32
			for row := 0; row < rows; row++ {
				if n.eval(t, e, row) == tru {
					want = append(want, int32(row))
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("iteration %d (seed %d): filter %q on %d rows\n got  %v\n want %v\nrecord:\n%v",
					it, seed, e, rows, got, want, recString(rec))
			}
			may := f.MayMatch(stats)
			if len(want) > 0 {
				passed++
				if !may {
					t.Fatalf("iteration %d (seed %d): MayMatch(%q) = false but rows %v pass\nstats %+v",
						it, seed, e, want, stats)
				}
			} else {
				skippable++
				if !may {
					skipped++
				}
			}
		}
	}
	t.Logf("%d filters with matches, %d without; MayMatch skipped %d of those", passed, skippable, skipped)
	if passed == 0 || skipped == 0 {
		t.Fatalf("generator is degenerate: %d matching filters, %d skipped batches", passed, skipped)
	}
}

func recString(rec arrow.Record) string {
	out := ""
	for i, c := range rec.Columns() {
		out += rec.ColumnName(i) + ": " + c.String() + "\n"
	}
	return out
}

// buildRecord makes a one-column record for focused tests.
func buildRecord(t *testing.T, b array.Builder, name string) arrow.Record {
	t.Helper()
	a := b.NewArray()
	t.Cleanup(a.Release)
	return array.NewRecord(arrow.NewSchema([]arrow.Field{{Name: name, Type: a.DataType(), Nullable: true}}, nil), []arrow.Array{a}, int64(a.Len()))
}

func oneColSchema(name, typ string) *record.Schema {
	return &record.Schema{ID: 1, Columns: []record.Column{{Name: name, Type: mustType(typ), Nullable: true}}}
}

func evalText(t *testing.T, s *record.Schema, rec arrow.Record, text string) []int32 {
	t.Helper()
	e, err := Parse(text)
	if err != nil {
		t.Fatalf("Parse(%q): %v", text, err)
	}
	f, err := Bind(e, s)
	if err != nil {
		t.Fatalf("Bind(%q): %v", text, err)
	}
	got, err := f.Eval(rec, nil, nil)
	if err != nil {
		t.Fatalf("Eval(%q): %v", text, err)
	}
	return got
}

func TestEvalThreeValued(t *testing.T) {
	s := oneColSchema("x", "INT")
	b := array.NewInt32Builder(memory.DefaultAllocator)
	b.AppendValues([]int32{1, 0, 2, 0}, []bool{true, false, true, true}) // 1, NULL, 2, 0
	rec := buildRecord(t, b, "x")
	f := func(text string, want ...int32) {
		t.Helper()
		if got := evalText(t, s, rec, text); !slices.Equal(got, want) {
			t.Fatalf("%s: got %v want %v", text, got, want)
		}
	}
	f("x = 1", 0)
	f("NOT x = 1", 2, 3) // the NULL row stays UNKNOWN
	f("x != 1", 2, 3)    // likewise
	f("x = NULL")        // always UNKNOWN
	f("NOT x = NULL")    // still UNKNOWN
	f("x IS NULL", 1)    //
	f("x IS NOT NULL", 0, 2, 3)
	f("x IN (1, NULL)", 0)
	f("x NOT IN (1, NULL)") // never TRUE
	f("x NOT IN (1)", 2, 3)
	f("NOT x IN (7)", 0, 2, 3)
	f("x = 1 OR x IS NULL", 0, 1)
	f("x = NULL OR x = 2", 2)           // UNKNOWN OR TRUE is TRUE
	f("NOT (x = NULL AND x = 2)", 0, 3) // NOT (UNKNOWN AND FALSE) = TRUE
	f("x > 0 AND x < 2", 0)
	f("x BETWEEN 0 AND 1", 0, 3)
	f("x BETWEEN 1 AND 0")           // an empty range, as in SQL
	f("x NOT BETWEEN 1 AND 1", 2, 3) // the NULL row stays UNKNOWN
	f("x BETWEEN NULL AND 5")        // UNKNOWN AND ... is never TRUE
}

// TestEvalBareColumn: a BOOLEAN column alone is TRUE where it is true;
// NOT of it where it is false; a null row is neither.
func TestEvalBareColumn(t *testing.T) {
	s := oneColSchema("ok", "BOOLEAN")
	b := array.NewBooleanBuilder(memory.DefaultAllocator)
	b.AppendValues([]bool{true, false, false, true}, []bool{true, true, false, true}) // true, false, NULL, true
	rec := buildRecord(t, b, "ok")
	for text, want := range map[string][]int32{"ok": {0, 3}, "NOT ok": {1}, "ok OR ok IS NULL": {0, 2, 3}} {
		if got := evalText(t, s, rec, text); !slices.Equal(got, want) {
			t.Errorf("%s: got %v want %v", text, got, want)
		}
	}
}

func TestBindConversions(t *testing.T) {
	type tc struct {
		typ, filter string
		want        []int32
	}
	mem := memory.DefaultAllocator
	cases := []tc{
		// Integers against fractional and out-of-range literals.
		{"TINYINT", "x > 1.5", []int32{2, 3}},
		{"TINYINT", "x >= 1.5", []int32{2, 3}},
		{"TINYINT", "x < 1.5", []int32{0, 1}},
		{"TINYINT", "x = 1.5", nil},
		{"TINYINT", "x != 1.5", []int32{0, 1, 2, 3}},
		{"TINYINT", "x < 1000", []int32{0, 1, 2, 3}},
		{"TINYINT", "x > 99999999999999999999999", nil},
		{"TINYINT", "x IN (1.0, 2.5, 1e0, 3)", []int32{1, 3}},
		{"TINYINT", "x > -1.5", []int32{0, 1, 2, 3}},
		{"TINYINT", "x <= -0.5", nil},
	}
	for _, c := range cases {
		b := array.NewInt8Builder(mem)
		b.AppendValues([]int8{0, 1, 2, 3}, nil)
		rec := buildRecord(t, b, "x")
		if got := evalText(t, oneColSchema("x", c.typ), rec, c.filter); !slices.Equal(got, c.want) {
			t.Errorf("%s %s: got %v want %v", c.typ, c.filter, got, c.want)
		}
	}

	// DECIMAL(10,2) exact: 1.00, 1.50, 1.505 is between 1.50 and 1.51.
	db := array.NewDecimal128Builder(mem, &arrow.Decimal128Type{Precision: 10, Scale: 2})
	for _, v := range []int64{100, 150, 151} {
		db.Append(decimal128.FromI64(v))
	}
	drec := buildRecord(t, db, "x")
	dsch := oneColSchema("x", "DECIMAL(10,2)")
	for _, c := range []tc{
		{"", "x = 1.5", []int32{1}},
		{"", "x = 1.50", []int32{1}},
		{"", "x > 1.505", []int32{2}},
		{"", "x < 1.505", []int32{0, 1}},
		{"", "x = 1.505", nil},
		{"", "x IN (1, 1.51)", []int32{0, 2}},
		{"", "x >= 15e-1", []int32{1, 2}},
	} {
		if got := evalText(t, dsch, drec, c.filter); !slices.Equal(got, c.want) {
			t.Errorf("DECIMAL %s: got %v want %v", c.filter, got, c.want)
		}
	}

	// TIMESTAMP(3): strings, typed literals, epoch ms, dates, sub-ms.
	tb := array.NewTimestampBuilder(mem, &arrow.TimestampType{Unit: arrow.Millisecond})
	for _, v := range []int64{0, 1000, 1704103200123} { // epoch, +1s, 2024-01-01 10:00:00.123
		tb.Append(arrow.Timestamp(v))
	}
	trec := buildRecord(t, tb, "ts")
	tsch := oneColSchema("ts", "TIMESTAMP(3)")
	for _, c := range []tc{
		{"", "ts = TIMESTAMP '2024-01-01 10:00:00.123'", []int32{2}},
		{"", "ts = '2024-01-01 10:00:00.123'", []int32{2}},
		{"", "ts = '2024-01-01T10:00:00.123Z'", []int32{2}},
		{"", "ts = '2024-01-01T12:00:00.123+02:00'", []int32{2}},
		{"", "ts = 1000", []int32{1}},
		{"", "ts > 999.5", []int32{1, 2}},
		{"", "ts >= DATE '2024-01-01'", []int32{2}},
		{"", "ts < '1970-01-01 00:00:00.0005'", []int32{0}},
		{"", "ts = '1970-01-01 00:00:00.0005'", nil},
		{"", "ts > '1970-01-01 00:00:00.999999999'", []int32{1, 2}},
	} {
		if got := evalText(t, tsch, trec, c.filter); !slices.Equal(got, c.want) {
			t.Errorf("TIMESTAMP(3) %s: got %v want %v", c.filter, got, c.want)
		}
	}

	// DATE against dates and timestamps.
	dtb := array.NewDate32Builder(mem)
	dtb.AppendValues([]arrow.Date32{19723, 19724}, nil) // 2024-01-01, 2024-01-02
	dtrec := buildRecord(t, dtb, "d")
	dtsch := oneColSchema("d", "DATE")
	for _, c := range []tc{
		{"", "d = DATE '2024-01-01'", []int32{0}},
		{"", "d = '2024-01-02'", []int32{1}},
		{"", "d > TIMESTAMP '2024-01-01 10:00:00'", []int32{1}},
		{"", "d >= TIMESTAMP '2024-01-01 00:00:00'", []int32{0, 1}},
	} {
		if got := evalText(t, dtsch, dtrec, c.filter); !slices.Equal(got, c.want) {
			t.Errorf("DATE %s: got %v want %v", c.filter, got, c.want)
		}
	}

	// FLOAT literals are rounded to float32; DOUBLE to float64.
	fb := array.NewFloat32Builder(mem)
	fb.AppendValues([]float32{0.1, 1}, nil)
	frec := buildRecord(t, fb, "f")
	if got := evalText(t, oneColSchema("f", "FLOAT"), frec, "f = 0.1"); !slices.Equal(got, []int32{0}) {
		t.Errorf("FLOAT f = 0.1: got %v", got)
	}
	// Booleans and strings.
	bb := array.NewBooleanBuilder(mem)
	bb.AppendValues([]bool{true, false, true}, []bool{true, true, false})
	brec := buildRecord(t, bb, "b")
	if got := evalText(t, oneColSchema("b", "BOOLEAN"), brec, "b = TRUE OR b IS NULL"); !slices.Equal(got, []int32{0, 2}) {
		t.Errorf("BOOLEAN: got %v", got)
	}
}

func TestBindErrors(t *testing.T) {
	s := testSchema()
	f := func(text string, want error, msgPart string) {
		t.Helper()
		e, err := Parse(text)
		if err != nil {
			t.Fatalf("Parse(%q): %v", text, err)
		}
		_, err = Bind(e, s)
		if !errors.Is(err, want) {
			t.Fatalf("Bind(%q) = %v, want %v", text, err, want)
		}
		if !strings.Contains(err.Error(), msgPart) {
			t.Fatalf("Bind(%q) error %q does not mention %q", text, err, msgPart)
		}
	}
	f("nope = 1", ErrUnknownColumn, `"nope" at position 1`)
	f("i64 = 1 AND nope IS NULL", ErrUnknownColumn, "the table has: b, i8")
	f("i64 = 'x'", ErrType, `column "i64" is BIGINT`)
	f("i64 = TRUE", ErrType, "a number")
	f("b = 1", ErrType, "TRUE or FALSE")
	f("s = 1", ErrType, "quoted string")
	f("s IN ('a', 2)", ErrType, "quoted string")
	f("f64 = 'x'", ErrType, "a number")
	f("d = 5", ErrType, "DATE")
	f("d = 'yesterday'", ErrType, "not a date")
	f("t3 = '25:00:00'", ErrType, "not a time of day")
	f("ts3 = 'soon'", ErrType, "not a timestamp")
	f("ts3 = TIME '10:00:00'", ErrType, "TIMESTAMP")
	f("dec = 1e500", ErrType, "exponent outside")
	f("i64 IN (1, 'a')", ErrType, "a number")
	f("b AND s", ErrType, `column "s" is STRING: a column alone (position 7) is a condition only when it is BOOLEAN`)
	f("s BETWEEN 'a' AND 3", ErrType, "quoted string")
	f("by LIKE 'a%'", ErrType, `column "by" is BYTES: LIKE (position 1) applies to STRING columns`)
	f("i64 NOT LIKE 'a%'", ErrType, "applies to STRING columns")
	f("by ILIKE 'a%'", ErrType, `column "by" is BYTES: ILIKE (position 1) applies to STRING columns`)
	f("s ILIKE 'a!' ESCAPE '!'", ErrType, "ILIKE at position 1: pattern 'a!' ends with the escape character")
	f("s LIKE 'a!' ESCAPE '!'", ErrType, "ends with the escape character")
	f("s LIKE 'a!b' ESCAPE '!'", ErrType, "may precede only %, _ or itself")
	f("s LIKE 'a' ESCAPE '!!'", ErrType, "must be one character")
	// Hand-built trees with holes are rejected, not dereferenced.
	for _, e := range []Expr{nil, &And{L: &IsNull{Column: "b"}}, &Not{}, (*Compare)(nil)} {
		if _, err := Bind(e, s); !errors.Is(err, ErrType) {
			t.Fatalf("Bind(%#v) = %v, want ErrType", e, err)
		}
	}
	// Case-insensitive resolution of bare names when unambiguous.
	if e, _ := Parse("I64 = 1"); e != nil {
		if _, err := Bind(e, s); err != nil {
			t.Fatalf("Bind(I64 = 1): %v", err)
		}
	}
}

func TestColumns(t *testing.T) {
	e, _ := Parse("s = 'a' OR i8 > 1 AND (s IS NULL OR NOT b = TRUE)")
	f, err := Bind(e, testSchema())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := f.Columns(), []int{0, 1, 8}; !slices.Equal(got, want) {
		t.Fatalf("Columns() = %v, want %v", got, want)
	}
}

func TestEvalRecordMismatch(t *testing.T) {
	s := oneColSchema("x", "BIGINT")
	e, _ := Parse("x = 1")
	f, err := Bind(e, s)
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewStringBuilder(memory.DefaultAllocator)
	b.Append("1")
	rec := buildRecord(t, b, "x")
	if _, err := f.Eval(rec, nil, nil); !errors.Is(err, ErrRecord) {
		t.Fatalf("string column for BIGINT: err = %v, want ErrRecord", err)
	}
	if _, err := f.Eval(rec, func(int) int { return 5 }, nil); !errors.Is(err, ErrRecord) {
		t.Fatalf("missing column: err = %v, want ErrRecord", err)
	}
	ts := oneColSchema("x", "TIMESTAMP(6)")
	e, _ = Parse("x > 0")
	f, _ = Bind(e, ts)
	tb := array.NewTimestampBuilder(memory.DefaultAllocator, &arrow.TimestampType{Unit: arrow.Millisecond})
	tb.Append(1)
	if _, err := f.Eval(buildRecord(t, tb, "x"), nil, nil); !errors.Is(err, ErrRecord) {
		t.Fatalf("unit mismatch: err = %v, want ErrRecord", err)
	}
}

func TestMayMatch(t *testing.T) {
	s := testSchema()
	ints := func(lo, hi int64, nulls int32) record.ColumnStats {
		return record.ColumnStats{HasMinMax: true, MinInt: lo, MaxInt: hi, NullCount: nulls}
	}
	strs := func(lo, hi string) record.ColumnStats {
		return record.ColumnStats{HasMinMax: true, MinBytes: []byte(lo), MaxBytes: []byte(hi)}
	}
	stats := make([]record.ColumnStats, len(s.Columns))
	stats[4] = ints(10, 50, 0)                                               // i64 in [10, 50], no nulls
	stats[8] = strs("c", "f")                                                // s in ["c", "f"]
	stats[6] = record.ColumnStats{HasMinMax: true, MinFloat: 1, MaxFloat: 1} // f64 = 1 (or NaN)
	stats[13] = ints(1704103200000, 1704106800000, 2)                        // ts3 2024-01-01 10:00..11:00, 2 nulls
	stats[0] = ints(1, 1, 0)                                                 // b all TRUE
	f := func(text string, want bool) {
		t.Helper()
		e, err := Parse(text)
		if err != nil {
			t.Fatal(err)
		}
		fl, err := Bind(e, s)
		if err != nil {
			t.Fatal(err)
		}
		if got := fl.MayMatch(stats); got != want {
			t.Fatalf("MayMatch(%q) = %v, want %v", text, got, want)
		}
		if !fl.MayMatch(nil) {
			t.Fatalf("MayMatch(%q, nil) = false", text)
		}
	}
	f("i64 > 100", false)
	f("i64 > 50", false)
	f("i64 >= 50", true)
	f("i64 < 10", false)
	f("i64 = 30", true)
	f("i64 = 5", false)
	f("i64 != 30", true)
	f("i64 IN (1, 2, 60)", false)
	f("i64 IN (1, 20)", true)
	f("i64 NOT IN (1, 20)", true)
	f("i64 IS NULL", false)
	f("i64 IS NOT NULL", true)
	f("NOT i64 > 100", true)
	f("NOT i64 <= 100", false)
	f("i64 > 100 OR s = 'd'", true)
	f("i64 > 100 OR s = 'a'", false)
	f("i64 > 20 AND s > 'z'", false)
	f("s IN ('a', 'b')", false)
	f("s >= 'f'", true)
	f("s > 'f'", false)
	f("ts3 > '2024-01-01 12:00:00'", false)
	f("ts3 IS NULL", true)
	f("ts3 < DATE '2024-01-02'", true)
	f("b = FALSE", false)
	f("f64 = 2", false)
	f("f64 != 1", true) // a NaN row would pass
	f("NOT f64 = 1", true)
	f("i64 = NULL", false)
	f("NOT i64 = NULL", false)
	f("i64 IN (NULL)", false)
	f("i8 > 5", true) // no stats for i8: anything goes
	// Stats written before a column was added are shorter than the schema.
	short := stats[:5]
	for _, text := range []string{"ts3 > '2030-01-01'", "s = 'zzz'", "ltz9 IS NULL"} {
		e, _ := Parse(text)
		fl, _ := Bind(e, s)
		if !fl.MayMatch(short) {
			t.Fatalf("MayMatch(%q) on short stats = false", text)
		}
	}
}

// TestEvalDictionaryNulls: a row whose index points at a null dictionary
// entry is null, and sliced dictionary arrays keep their offsets.
func TestEvalDictionaryNulls(t *testing.T) {
	mem := memory.DefaultAllocator
	vb := array.NewStringBuilder(mem)
	vb.AppendValues([]string{"a", "", "b"}, []bool{true, false, true}) // "a", NULL, "b"
	dict := vb.NewArray()
	defer dict.Release()
	ib := array.NewInt8Builder(mem)
	ib.AppendValues([]int8{2, 0, 1, 2, 0, 1}, []bool{true, true, true, true, false, true})
	idx := ib.NewArray()
	defer idx.Release()
	dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}
	full := array.NewDictionaryArray(dt, idx, dict)
	defer full.Release()
	a := array.NewSlice(full, 1, 6) // rows: "a", NULL(dict), "b", NULL(index), NULL(dict)
	defer a.Release()
	rec := array.NewRecord(arrow.NewSchema([]arrow.Field{{Name: "s", Type: dt, Nullable: true}}, nil), []arrow.Array{a}, 5)
	s := oneColSchema("s", "STRING")
	f := func(text string, want ...int32) {
		t.Helper()
		if got := evalText(t, s, rec, text); !slices.Equal(got, want) {
			t.Fatalf("%s: got %v want %v", text, got, want)
		}
	}
	f("s IS NULL", 1, 3, 4)
	f("s IS NOT NULL", 0, 2)
	f("s = 'a'", 0)
	f("s != 'a'", 2)
	f("NOT s IN ('b')", 0)
	f("s > ''", 0, 2)
}

// TestEvalConcurrent shares one Filter between goroutines (run with -race).
func TestEvalConcurrent(t *testing.T) {
	s := testSchema()
	r := rand.New(rand.NewPCG(3, 4))
	rec := genRecord(r, s, 200, true)
	idx := reverseIndex(len(s.Columns))
	e, err := Parse("(i64 > 0 OR s IN ('a', 'b')) AND NOT dec < 1.5")
	if err != nil {
		t.Fatal(err)
	}
	f, err := Bind(e, s)
	if err != nil {
		t.Fatal(err)
	}
	want, err := f.Eval(rec, idx, nil)
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 4)
	for g := 0; g < 4; g++ {
		go func() {
			for i := 0; i < 200; i++ {
				got, err := f.Eval(rec, idx, nil)
				if err == nil && !slices.Equal(got, want) {
					err = errors.New("concurrent Eval disagrees")
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for g := 0; g < 4; g++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestEvalAbsentColumn: colIndex -1 (a batch written before the column was
// added) reads as all NULL.
func TestEvalAbsentColumn(t *testing.T) {
	s := &record.Schema{ID: 2, Columns: []record.Column{
		{Name: "x", Type: mustType("INT"), Nullable: true},
		{Name: "added", Type: mustType("STRING"), Nullable: true},
	}}
	b := array.NewInt32Builder(memory.DefaultAllocator)
	b.AppendValues([]int32{1, 2, 3}, nil)
	rec := buildRecord(t, b, "x")
	idx := func(c int) int {
		if c == 0 {
			return 0
		}
		return -1
	}
	f := func(text string, want ...int32) {
		t.Helper()
		e, err := Parse(text)
		if err != nil {
			t.Fatal(err)
		}
		fl, err := Bind(e, s)
		if err != nil {
			t.Fatal(err)
		}
		got, err := fl.Eval(rec, idx, nil)
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: got %v want %v", text, got, want)
		}
	}
	f("added IS NULL", 0, 1, 2)
	f("added IS NOT NULL")
	f("added = 'a'")
	f("NOT added = 'a'")
	f("added = 'a' OR x > 1", 1, 2)
	f("x > 1 AND added NOT IN ('a')")
}

// TestEvalMalformedArray: a validity bitmap shorter than the rows is an
// error, not a panic, and the caller's slice comes back unchanged.
func TestEvalMalformedArray(t *testing.T) {
	vals := memory.NewBufferBytes(arrow.Int64Traits.CastToBytes(make([]int64, 100)))
	bitmap := memory.NewBufferBytes([]byte{0xfe}) // 8 bits for 100 rows
	a := array.NewInt64Data(array.NewData(arrow.PrimitiveTypes.Int64, 100, []*memory.Buffer{bitmap, vals}, nil, 1, 0))
	defer a.Release()
	rec := array.NewRecord(arrow.NewSchema([]arrow.Field{{Name: "x", Type: a.DataType(), Nullable: true}}, nil), []arrow.Array{a}, 100)
	e, _ := Parse("x = 0")
	f, err := Bind(e, oneColSchema("x", "BIGINT"))
	if err != nil {
		t.Fatal(err)
	}
	sel, err := f.Eval(rec, nil, []int32{9})
	if !errors.Is(err, ErrRecord) {
		t.Fatalf("err = %v, want ErrRecord", err)
	}
	if !slices.Equal(sel, []int32{9}) {
		t.Fatalf("sel = %v, want the caller's slice back", sel)
	}
	// The filter still works afterwards.
	b := array.NewInt64Builder(memory.DefaultAllocator)
	b.AppendValues([]int64{0, 1}, nil)
	if got, err := f.Eval(buildRecord(t, b, "x"), nil, nil); err != nil || !slices.Equal(got, []int32{0}) {
		t.Fatalf("after a bad record: %v, %v", got, err)
	}
}
