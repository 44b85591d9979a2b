package filter

import (
	"flag"
	"math"
	"math/big"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/fluss-node/fluss-node/logstore/record"
)

var seedFlag = flag.Uint64("seed", 0, "seed for the random filter tests (0: FILTER_SEED or the clock)")

// testSeed returns the seed to use and logs it so a failure can be replayed
// with `go test -run NAME -seed N` or FILTER_SEED=N.
func testSeed(t testing.TB) uint64 {
	seed := *seedFlag
	if seed == 0 {
		if s, err := strconv.ParseUint(os.Getenv("FILTER_SEED"), 10, 64); err == nil {
			seed = s
		}
	}
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -seed %d)", seed, seed)
	return seed
}

func mustType(s string) record.Type {
	t, _, err := record.ParseType(s)
	if err != nil {
		panic(err)
	}
	return t
}

// testSchema has one column of every kind (two TIME and three TIMESTAMP
// precisions to cover every Arrow unit).
func testSchema() *record.Schema {
	cols := []struct{ name, typ string }{
		{"b", "BOOLEAN"}, {"i8", "TINYINT"}, {"i16", "SMALLINT"}, {"i32", "INT"}, {"i64", "BIGINT"},
		{"f32", "FLOAT"}, {"f64", "DOUBLE"}, {"dec", "DECIMAL(10,2)"}, {"s", "STRING"}, {"by", "BYTES"},
		{"d", "DATE"}, {"t3", "TIME(3)"}, {"t6", "TIME(6)"}, {"ts3", "TIMESTAMP(3)"}, {"ts6", "TIMESTAMP(6)"},
		{"ltz9", "TIMESTAMP_LTZ(9)"},
	}
	s := &record.Schema{ID: 1}
	for _, c := range cols {
		s.Columns = append(s.Columns, record.Column{Name: c.name, Type: mustType(c.typ), Nullable: true})
	}
	return s
}

var (
	genStrings = []string{"", "a", "b", "ab", "ba", "it's", "é"}
	genFloats  = []float64{-1.5, -1, 0, math.Copysign(0, -1), 0.5, 1, 2.5, math.NaN(), math.Inf(1)}
)

// genInt returns a small value, or now and then an extreme of the type.
func genInt(r *rand.Rand, lo, hi int64) int64 {
	if r.IntN(10) == 0 {
		if r.IntN(2) == 0 {
			return lo
		}
		return hi
	}
	return int64(r.IntN(7)) - 3
}

// genRecord builds a random record for testSchema. Columns are stored in
// reverse order (so colIndex is exercised); the STRING column is dictionary
// encoded when dict is true. The returned record may be a slice of a larger
// one (non-zero array offsets).
func genRecord(r *rand.Rand, s *record.Schema, rows int, dict bool) arrow.Record {
	mem := memory.DefaultAllocator
	nullP := []float64{0, 0.2, 0.6, 1}[r.IntN(4)]
	pad := 0
	if r.IntN(3) == 0 {
		pad = r.IntN(70)
	}
	total := rows + 2*pad
	nc := len(s.Columns)
	fields := make([]arrow.Field, nc)
	arrs := make([]arrow.Array, nc)
	for ci, c := range s.Columns {
		dt := c.Type.ArrowType()
		var b array.Builder
		if dict && c.Type.Kind == record.KindString {
			dt = &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int16, ValueType: arrow.BinaryTypes.String}
		}
		b = array.NewBuilder(mem, dt)
		for i := 0; i < total; i++ {
			if r.Float64() < nullP {
				b.AppendNull()
				continue
			}
			switch c.Type.Kind {
			case record.KindBoolean:
				b.(*array.BooleanBuilder).Append(r.IntN(2) == 0)
			case record.KindTinyInt:
				b.(*array.Int8Builder).Append(int8(genInt(r, math.MinInt8, math.MaxInt8)))
			case record.KindSmallInt:
				b.(*array.Int16Builder).Append(int16(genInt(r, math.MinInt16, math.MaxInt16)))
			case record.KindInt:
				b.(*array.Int32Builder).Append(int32(genInt(r, math.MinInt32, math.MaxInt32)))
			case record.KindBigInt:
				b.(*array.Int64Builder).Append(genInt(r, math.MinInt64, math.MaxInt64))
			case record.KindFloat:
				b.(*array.Float32Builder).Append(float32(genFloats[r.IntN(len(genFloats))]))
			case record.KindDouble:
				v := genFloats[r.IntN(len(genFloats))]
				if r.IntN(8) == 0 {
					v = 0.1 // not exactly representable: FLOAT vs DOUBLE literal rounding
				}
				b.(*array.Float64Builder).Append(v)
			case record.KindDecimal:
				b.(*array.Decimal128Builder).Append(decimal128.FromI64(int64(r.IntN(601)) - 300))
			case record.KindString:
				v := genStrings[r.IntN(len(genStrings))]
				if db, ok := b.(*array.BinaryDictionaryBuilder); ok {
					_ = db.AppendString(v)
				} else {
					b.(*array.StringBuilder).Append(v)
				}
			case record.KindBytes:
				b.(*array.BinaryBuilder).Append([]byte(genStrings[r.IntN(len(genStrings))]))
			case record.KindDate:
				b.(*array.Date32Builder).Append(arrow.Date32(r.IntN(5) - 2))
			case record.KindTime:
				per := int64(1000) // half seconds in the column unit
				if c.Type.TimeUnit() == arrow.Microsecond {
					per = 1000000
				}
				v := int64(r.IntN(5)) * per / 2
				if r.IntN(4) == 0 {
					v++ // a sub-literal-precision value
				}
				if tb, ok := b.(*array.Time32Builder); ok {
					tb.Append(arrow.Time32(v))
				} else {
					b.(*array.Time64Builder).Append(arrow.Time64(v))
				}
			case record.KindTimestamp, record.KindTimestampLTZ:
				perSec := int64(1e9) / unitNanos[c.Type.TimeUnit()]
				v := (int64(r.IntN(9)) - 4) * perSec / 2
				if r.IntN(4) == 0 {
					v += int64(r.IntN(3)) - 1
				}
				b.(*array.TimestampBuilder).Append(arrow.Timestamp(v))
			}
		}
		a := b.NewArray()
		b.Release()
		if pad > 0 {
			sl := array.NewSlice(a, int64(pad), int64(pad+rows))
			a.Release()
			a = sl
		}
		ri := nc - 1 - ci
		arrs[ri] = a
		fields[ri] = arrow.Field{Name: c.Name, Type: dt, Nullable: true}
	}
	return array.NewRecord(arrow.NewSchema(fields, nil), arrs, int64(rows))
}

func reverseIndex(n int) func(int) int { return func(c int) int { return n - 1 - c } }

// genLiteral returns a literal text likely to hit the values genRecord makes
// for the column, including NULL, fractional and out-of-range values.
func genLiteral(r *rand.Rand, c record.Column) string {
	if r.IntN(12) == 0 {
		return "NULL"
	}
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	switch c.Type.Kind {
	case record.KindBoolean:
		return pick("TRUE", "FALSE")
	case record.KindTinyInt, record.KindSmallInt, record.KindInt, record.KindBigInt:
		return pick("-3", "-1", "0", "1", "2", "3", "1.5", "-0.5", "2.0", "1e0", "-127", "127", "-128", "300", "-40000",
			"2147483647", "-2147483648", "9223372036854775807", "-9223372036854775808", "9223372036854775808",
			"-9223372036854775809", "99999999999999999999.5", "1e30")
	case record.KindFloat, record.KindDouble:
		return pick("-1.5", "-1", "0", "0.5", "1", "2.5", "1e0", "0.1", "-0.0", "3", "1e400", "-1e400")
	case record.KindDecimal:
		return pick("0", "1", "-1", "1.5", "1.505", "-2.25", "0.01", "2.999", "3", "-3", "1e1", "1e-2", "1e50")
	case record.KindString, record.KindBytes:
		return quoteLit(pick(genStrings...) + pick("", "", "", "c"))
	case record.KindDate:
		return pick("DATE '1970-01-02'", "DATE '1969-12-31'", "'1970-01-01'", "DATE '1970-01-03'",
			"TIMESTAMP '1970-01-01 12:00:00'", "TIMESTAMP '1970-01-02 00:00:00'")
	case record.KindTime:
		return pick("TIME '00:00:01'", "TIME '00:00:00.5'", "TIME '00:00:00.0005'", "'00:00:01.000001'",
			"TIME '00:00:00'", "TIME '00:00:02'", "TIME '00:00:01.0000001'")
	case record.KindTimestamp, record.KindTimestampLTZ:
		return pick("TIMESTAMP '1970-01-01 00:00:01.5'", "TIMESTAMP '1969-12-31 23:59:59'", "'1970-01-01 00:00:00'",
			"1000", "-500", "0.5", "0", "DATE '1970-01-01'", "TIMESTAMP '1970-01-01 00:00:00.000000001'",
			"'1970-01-01T00:00:01.000001Z'", "-1999.999")
	}
	return "NULL"
}

// genFilter returns random filter text over s.
func genFilter(r *rand.Rand, s *record.Schema, depth int) string {
	if depth > 0 {
		switch r.IntN(6) {
		case 0:
			return "(" + genFilter(r, s, depth-1) + ") AND (" + genFilter(r, s, depth-1) + ")"
		case 1:
			return "(" + genFilter(r, s, depth-1) + ") OR (" + genFilter(r, s, depth-1) + ")"
		case 2:
			return "NOT (" + genFilter(r, s, depth-1) + ")"
		}
	}
	c := s.Columns[r.IntN(len(s.Columns))]
	switch r.IntN(9) {
	case 8:
		if c.Type.Kind == record.KindString && r.IntN(2) == 0 {
			return c.Name + genLike(r)
		}
		if c.Type.Kind == record.KindBoolean {
			return c.Name
		}
		between := " BETWEEN "
		if r.IntN(2) == 0 {
			between = " NOT BETWEEN "
		}
		return c.Name + between + genLiteral(r, c) + " AND " + genLiteral(r, c)
	case 0:
		return c.Name + " IS NULL"
	case 1:
		return c.Name + " IS NOT NULL"
	case 2, 3:
		list := genLiteral(r, c)
		for n := r.IntN(12); n > 0; n-- {
			list += ", " + genLiteral(r, c)
		}
		if r.IntN(2) == 0 {
			return c.Name + " NOT IN (" + list + ")"
		}
		return c.Name + " IN (" + list + ")"
	}
	ops := []string{"=", "!=", "<>", "<", "<=", ">", ">="}
	op := ops[r.IntN(len(ops))]
	if r.IntN(3) == 0 {
		return genLiteral(r, c) + " " + op + " " + c.Name
	}
	return c.Name + " " + op + " " + genLiteral(r, c)
}

// genLike returns " [NOT] [I]LIKE 'pattern' [ESCAPE '!']" with pieces of
// genStrings (in either case), wildcards and, with ESCAPE, escaped
// wildcards.
func genLike(r *rand.Rand) string {
	pieces := []string{"a", "b", "é", "'", "%", "%", "_", "it", "B", "É", "IT"}
	escape := r.IntN(4) == 0
	if escape {
		pieces = append(pieces, "!%", "!_", "!!")
	}
	var p string
	for n := r.IntN(5); n > 0; n-- {
		p += pieces[r.IntN(len(pieces))]
	}
	out := " LIKE " + quoteLit(p)
	if r.IntN(3) == 0 {
		out = " ILIKE " + quoteLit(p)
	}
	if r.IntN(3) == 0 {
		out = " NOT" + out
	}
	if escape {
		out += " ESCAPE '!'"
	}
	return out
}

// tri is a three-valued truth value.
type tri int8

const (
	fls tri = iota
	unk
	tru
)

func triOf(b bool) tri {
	if b {
		return tru
	}
	return fls
}

func (x tri) not() tri { return 2 - x }

// naive evaluates e on one row, boxing values, straight from the SQL
// definitions: exact rational comparison for integer-like kinds (no
// floor/ceil rewriting, no range clamping), IEEE for floats.
type naive struct {
	s   *record.Schema
	rec arrow.Record
	idx func(int) int
}

func (n *naive) eval(t *testing.T, e Expr, row int) tri {
	switch e := e.(type) {
	case *And:
		return min(n.eval(t, e.L, row), n.eval(t, e.R, row))
	case *Or:
		return max(n.eval(t, e.L, row), n.eval(t, e.R, row))
	case *Not:
		return n.eval(t, e.X, row).not()
	case *IsNull:
		_, null := n.value(t, e.Column, row)
		if e.Not {
			return triOf(!null)
		}
		return triOf(null)
	case *Compare:
		v, null := n.value(t, e.Column, row)
		if null || e.Value.Kind == LitNull {
			return unk
		}
		return triOf(cmpResult(n.cmp(t, e.Column, v, e.Value), e.Op) && !isNaNCmp(v, e.Op))
	case *In:
		v, null := n.value(t, e.Column, row)
		res := fls
		if null {
			res = unk
		} else {
			for _, l := range e.Values {
				if l.Kind == LitNull {
					res = max(res, unk)
				} else if n.cmp(t, e.Column, v, l) == 0 && !isNaNCmp(v, OpEq) {
					res = tru
				}
			}
		}
		if e.Not {
			return res.not()
		}
		return res
	case *Like:
		v, null := n.value(t, e.Column, row)
		if null {
			return unk
		}
		re, err := likeRegexp(e.Pattern, e.Escape, e.Fold)
		if err != nil {
			t.Fatalf("naive: %v", err)
		}
		res := triOf(re.MatchString(v.(string)))
		if e.Not {
			return res.not()
		}
		return res
	}
	t.Fatalf("naive: unknown node %T", e)
	return unk
}

// likeRegexp is LIKE by its definition, as a regular expression: % is
// .*, _ is one character, everything else (and what the escape character
// guards) is itself; with fold (ILIKE), in any case.
func likeRegexp(pattern, escape string, fold bool) (*regexp.Regexp, error) {
	var b strings.Builder
	if fold {
		b.WriteString(`(?i)`)
	}
	b.WriteString(`(?s)\A`)
	esc := []rune(escape)
	pending := false
	for _, r := range pattern {
		switch {
		case pending:
			b.WriteString(regexp.QuoteMeta(string(r)))
			pending = false
		case len(esc) == 1 && r == esc[0]:
			pending = true
		case r == '%':
			b.WriteString(".*")
		case r == '_':
			b.WriteString(".")
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	b.WriteString(`\z`)
	return regexp.Compile(b.String())
}

func isNaNCmp(v any, op Op) bool {
	f, ok := v.(float64)
	return ok && math.IsNaN(f) && op != OpNe
}

// value returns the row's value: *big.Rat (stored units) for integer-like
// and DECIMAL kinds, float64, or string.
func (n *naive) value(t *testing.T, col string, row int) (any, bool) {
	ci := n.s.Index(col)
	a := n.rec.Column(n.idx(ci))
	if a.IsNull(row) {
		return nil, true
	}
	if d, ok := a.(*array.Dictionary); ok {
		return d.Dictionary().(*array.String).Value(d.GetValueIndex(row)), false
	}
	switch a := a.(type) {
	case *array.Boolean:
		if a.Value(row) {
			return big.NewRat(1, 1), false
		}
		return big.NewRat(0, 1), false
	case *array.Int8:
		return big.NewRat(int64(a.Value(row)), 1), false
	case *array.Int16:
		return big.NewRat(int64(a.Value(row)), 1), false
	case *array.Int32:
		return big.NewRat(int64(a.Value(row)), 1), false
	case *array.Int64:
		return big.NewRat(a.Value(row), 1), false
	case *array.Date32:
		return big.NewRat(int64(a.Value(row)), 1), false
	case *array.Time32:
		return big.NewRat(int64(a.Value(row)), 1), false
	case *array.Time64:
		return big.NewRat(int64(a.Value(row)), 1), false
	case *array.Timestamp:
		return big.NewRat(int64(a.Value(row)), 1), false
	case *array.Decimal128:
		return new(big.Rat).SetInt(a.Value(row).BigInt()), false
	case *array.Float32:
		return float64(a.Value(row)), false
	case *array.Float64:
		return a.Value(row), false
	case *array.String:
		return a.Value(row), false
	case *array.Binary:
		return string(a.Value(row)), false
	}
	t.Fatalf("naive: unexpected array %T", a)
	return nil, true
}

// cmp compares a non-null value with a non-null literal.
func (n *naive) cmp(t *testing.T, col string, v any, l Literal) int {
	c := n.s.Columns[n.s.Index(col)]
	switch v := v.(type) {
	case *big.Rat:
		r, err := exactValue(l, c.Type, c.Name)
		if err != nil {
			t.Fatalf("naive: %v", err)
		}
		return v.Cmp(r)
	case float64:
		f, err := floatValue(l, c.Type, c.Name)
		if err != nil {
			t.Fatalf("naive: %v", err)
		}
		switch {
		case v < f:
			return -1
		case v > f:
			return 1
		case v == f:
			return 0
		}
		return 2 // NaN: unordered; isNaNCmp handles the result
	case string:
		switch {
		case v < l.Text:
			return -1
		case v > l.Text:
			return 1
		}
		return 0
	}
	t.Fatalf("naive: value %T", v)
	return 0
}

// statsOf computes per-schema-column stats the way the batch writer is
// specified to (record.ColumnStats).
func statsOf(s *record.Schema, rec arrow.Record, idx func(int) int) []record.ColumnStats {
	out := make([]record.ColumnStats, len(s.Columns))
	for ci := range s.Columns {
		a := rec.Column(idx(ci))
		st := &out[ci]
		for i := 0; i < a.Len(); i++ {
			if a.IsNull(i) {
				st.NullCount++
				continue
			}
			var (
				iv    int64
				fv    float64
				dv    decimal128.Num
				bv    []byte
				isInt bool
				isF   bool
				isD   bool
			)
			switch a := a.(type) {
			case *array.Boolean:
				iv, isInt = int64(b2u(a.Value(i))), true
			case *array.Int8:
				iv, isInt = int64(a.Value(i)), true
			case *array.Int16:
				iv, isInt = int64(a.Value(i)), true
			case *array.Int32:
				iv, isInt = int64(a.Value(i)), true
			case *array.Int64:
				iv, isInt = a.Value(i), true
			case *array.Date32:
				iv, isInt = int64(a.Value(i)), true
			case *array.Time32:
				iv, isInt = int64(a.Value(i)), true
			case *array.Time64:
				iv, isInt = int64(a.Value(i)), true
			case *array.Timestamp:
				iv, isInt = int64(a.Value(i)), true
			case *array.Float32:
				fv, isF = float64(a.Value(i)), true
			case *array.Float64:
				fv, isF = a.Value(i), true
			case *array.Decimal128:
				dv, isD = a.Value(i), true
			case *array.String:
				bv = []byte(a.Value(i))
			case *array.Binary:
				bv = a.Value(i)
			case *array.Dictionary:
				bv = []byte(a.Dictionary().(*array.String).Value(a.GetValueIndex(i)))
			}
			switch {
			case isInt:
				if !st.HasMinMax || iv < st.MinInt {
					st.MinInt = iv
				}
				if !st.HasMinMax || iv > st.MaxInt {
					st.MaxInt = iv
				}
			case isF:
				if math.IsNaN(fv) {
					continue
				}
				if !st.HasMinMax || fv < st.MinFloat {
					st.MinFloat = fv
				}
				if !st.HasMinMax || fv > st.MaxFloat {
					st.MaxFloat = fv
				}
			case isD:
				if !st.HasMinMax || dv.Less(st.MinDecimal) {
					st.MinDecimal = dv
				}
				if !st.HasMinMax || dv.Greater(st.MaxDecimal) {
					st.MaxDecimal = dv
				}
			default:
				if !st.HasMinMax || string(bv) < string(st.MinBytes) {
					st.MinBytes = append([]byte(nil), bv...)
				}
				if !st.HasMinMax || string(bv) > string(st.MaxBytes) {
					st.MaxBytes = append([]byte(nil), bv...)
				}
			}
			st.HasMinMax = true
		}
	}
	return out
}
