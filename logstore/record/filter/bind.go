package filter

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/decimal128"

	"github.com/fluss-node/fluss-node/logstore/record"
)

// Bind errors.
var (
	// ErrUnknownColumn: the filter names a column the schema does not have.
	ErrUnknownColumn = errors.New("unknown column in filter")
	// ErrType: a literal cannot be compared with the column's type.
	ErrType = errors.New("filter type mismatch")
)

// Filter is a filter bound to one schema. It is immutable and safe for
// concurrent use.
type Filter struct {
	expr   Expr
	root   node
	cols   []int
	schema *record.Schema
	pool   sync.Pool // *scratch
}

// String is the canonical text of the bound expression.
func (f *Filter) String() string { return f.expr.String() }

// Columns returns the schema columns the filter reads, ascending and
// without duplicates. The caller must not modify the slice.
func (f *Filter) Columns() []int { return f.cols }

// konst says how a leaf evaluates regardless of the column values.
type konst int8

const (
	kCompare konst = iota // evaluate the predicate on each non-null row
	kAlways               // TRUE for every non-null row (UNKNOWN for null)
	kNever                // FALSE for every non-null row (UNKNOWN for null)
	kUnknown              // UNKNOWN for every row (a NULL literal)
)

// domain is how a column's values are compared.
type domain uint8

const (
	dInt     domain = iota // BOOLEAN (0/1), integers, DATE, TIME, TIMESTAMP(_LTZ)
	dFloat                 // FLOAT, DOUBLE
	dDecimal               // DECIMAL (unscaled)
	dBytes                 // STRING, BYTES
)

// node is a bound expression.
type node interface {
	// eval sets t (rows that are TRUE) and f (rows that are FALSE) for the
	// rows set in care; t and f arrive zeroed, all three with c.nw words.
	eval(c *evalCtx, care, t, f []uint64) error
	// may reports whether some row of a batch with these stats may be TRUE
	// and whether some row may be FALSE.
	may(stats []record.ColumnStats) (mayT, mayF bool)
}

type andNode struct{ l, r node }
type orNode struct{ l, r node }
type notNode struct{ x node }

type isNullNode struct {
	col int
	not bool
}

// leaf is a comparison or IN list on one column, with its literal(s)
// converted to the column's domain.
type leaf struct {
	col    int
	name   string
	typ    record.Type
	dom    domain
	konst  konst
	op     Op
	in     bool // IN list (op unused)
	inNull bool // the IN list holds a NULL: a non-matching row is UNKNOWN

	i64 int64
	f64 float64
	dec decimal128.Num
	str string

	ints   []int64 // sorted, unique
	floats []float64
	decs   []decimal128.Num
	strs   []string
	strSet map[string]struct{} // for long string IN lists

	like *likePattern // LIKE (op and in unused)
}

// Bind resolves the columns of e against s and converts every literal to
// its column's type. Unknown columns wrap ErrUnknownColumn; literals that do
// not fit the column wrap ErrType.
func Bind(e Expr, s *record.Schema) (*Filter, error) {
	if e == nil || s == nil {
		return nil, fmt.Errorf("%w: Bind needs an expression and a schema", ErrType)
	}
	b := binder{s: s, seen: map[int]bool{}}
	root, err := b.bind(e)
	if err != nil {
		return nil, err
	}
	cols := make([]int, 0, len(b.seen))
	for c := range b.seen {
		cols = append(cols, c)
	}
	slices.Sort(cols)
	f := &Filter{expr: e, root: root, cols: cols, schema: s}
	f.pool.New = func() any { return new(scratch) }
	return f, nil
}

type binder struct {
	s    *record.Schema
	seen map[int]bool
}

func (b *binder) bind(e Expr) (node, error) {
	if isNilExpr(e) {
		return nil, fmt.Errorf("%w: empty sub-expression", ErrType)
	}
	switch e := e.(type) {
	case *And:
		l, err := b.bind(e.L)
		if err != nil {
			return nil, err
		}
		r, err := b.bind(e.R)
		if err != nil {
			return nil, err
		}
		return &andNode{l, r}, nil
	case *Or:
		l, err := b.bind(e.L)
		if err != nil {
			return nil, err
		}
		r, err := b.bind(e.R)
		if err != nil {
			return nil, err
		}
		return &orNode{l, r}, nil
	case *Not:
		x, err := b.bind(e.X)
		if err != nil {
			return nil, err
		}
		return &notNode{x}, nil
	case *IsNull:
		col, err := b.column(e.Column, e.Offset)
		if err != nil {
			return nil, err
		}
		return &isNullNode{col: col, not: e.Not}, nil
	case *Compare:
		col, err := b.column(e.Column, e.Offset)
		if err != nil {
			return nil, err
		}
		if t := b.s.Columns[col].Type; e.Bare && t.Kind != record.KindBoolean {
			return nil, fmt.Errorf("%w: column %q is %s: a column alone (position %d) is a condition only when it is BOOLEAN; compare it with a value",
				ErrType, e.Column, t, e.Offset+1)
		}
		return b.compare(col, e.Op, e.Value)
	case *Like:
		col, err := b.column(e.Column, e.Offset)
		if err != nil {
			return nil, err
		}
		l, err := b.like(col, e)
		if err != nil {
			return nil, err
		}
		if e.Not {
			return &notNode{l}, nil
		}
		return l, nil
	case *In:
		col, err := b.column(e.Column, e.Offset)
		if err != nil {
			return nil, err
		}
		l, err := b.in(col, e.Values)
		if err != nil {
			return nil, err
		}
		if e.Not {
			return &notNode{l}, nil
		}
		return l, nil
	}
	return nil, fmt.Errorf("%w: unsupported expression %T", ErrType, e)
}

// isNilExpr catches nil and typed-nil nodes of hand-built trees.
func isNilExpr(e Expr) bool {
	switch e := e.(type) {
	case nil:
		return true
	case *And:
		return e == nil || e.L == nil || e.R == nil
	case *Or:
		return e == nil || e.L == nil || e.R == nil
	case *Not:
		return e == nil || e.X == nil
	case *Compare:
		return e == nil
	case *In:
		return e == nil
	case *IsNull:
		return e == nil
	case *Like:
		return e == nil
	}
	return false
}

// column resolves a name: exact match first, then a unique
// case-insensitive match.
func (b *binder) column(name string, pos int) (int, error) {
	i := b.s.Index(name)
	if i < 0 {
		for j, c := range b.s.Columns {
			if strings.EqualFold(c.Name, name) {
				if i >= 0 {
					i = -2 // ambiguous
					break
				}
				i = j
			}
		}
	}
	if i < 0 {
		names := make([]string, 0, min(len(b.s.Columns), 20))
		for j, c := range b.s.Columns {
			if j == 20 {
				names = append(names, "...")
				break
			}
			names = append(names, c.Name)
		}
		return 0, fmt.Errorf("%w %q at position %d (the table has: %s)", ErrUnknownColumn, name, pos+1, strings.Join(names, ", "))
	}
	b.seen[i] = true
	return i, nil
}

func domainOf(k record.Kind) (domain, bool) {
	switch k {
	case record.KindBoolean, record.KindTinyInt, record.KindSmallInt, record.KindInt, record.KindBigInt,
		record.KindDate, record.KindTime, record.KindTimestamp, record.KindTimestampLTZ:
		return dInt, true
	case record.KindFloat, record.KindDouble:
		return dFloat, true
	case record.KindDecimal:
		return dDecimal, true
	case record.KindString, record.KindBytes:
		return dBytes, true
	}
	return 0, false
}

func (b *binder) newLeaf(col int) (*leaf, error) {
	c := b.s.Columns[col]
	dom, ok := domainOf(c.Type.Kind)
	if !ok {
		return nil, fmt.Errorf("%w: column %q has type %s, which filters do not support", ErrType, c.Name, c.Type)
	}
	return &leaf{col: col, name: c.Name, typ: c.Type, dom: dom}, nil
}

func (b *binder) compare(col int, op Op, lit Literal) (node, error) {
	l, err := b.newLeaf(col)
	if err != nil {
		return nil, err
	}
	l.op = op
	if lit.Kind == LitNull {
		l.konst = kUnknown
		return l, nil
	}
	switch l.dom {
	case dInt, dDecimal:
		r, err := exactValue(lit, l.typ, l.name)
		if err != nil {
			return nil, err
		}
		lo, hi := bigMinInt64, bigMaxInt64
		if l.dom == dDecimal {
			lo, hi = bigMinDec, bigMaxDec
		}
		var v *big.Int
		l.op, v, l.konst = reduce(op, r, lo, hi)
		if l.konst == kCompare {
			if l.dom == dInt {
				l.i64 = v.Int64()
			} else {
				l.dec = decimal128.FromBigInt(v)
			}
		}
	case dFloat:
		v, err := floatValue(lit, l.typ, l.name)
		if err != nil {
			return nil, err
		}
		l.f64 = v
	case dBytes:
		if lit.Kind != LitString {
			return nil, typeErr(lit, l.typ, l.name, "a quoted string such as 'abc'")
		}
		l.str = lit.Text
	}
	return l, nil
}

func (b *binder) like(col int, e *Like) (*leaf, error) {
	l, err := b.newLeaf(col)
	if err != nil {
		return nil, err
	}
	op := "LIKE"
	if e.Fold {
		op = "ILIKE"
	}
	if l.typ.Kind != record.KindString {
		return nil, fmt.Errorf("%w: column %q is %s: %s (position %d) applies to STRING columns", ErrType, l.name, l.typ, op, e.Offset+1)
	}
	if l.like, err = compileLike(e.Pattern, e.Escape, e.Fold); err != nil {
		return nil, fmt.Errorf("%w: %s at position %d: %v", ErrType, op, e.Offset+1, err)
	}
	return l, nil
}

func (b *binder) in(col int, lits []Literal) (*leaf, error) {
	l, err := b.newLeaf(col)
	if err != nil {
		return nil, err
	}
	l.in = true
	for _, lit := range lits {
		if lit.Kind == LitNull {
			l.inNull = true
			continue
		}
		switch l.dom {
		case dInt, dDecimal:
			r, err := exactValue(lit, l.typ, l.name)
			if err != nil {
				return nil, err
			}
			lo, hi := bigMinInt64, bigMaxInt64
			if l.dom == dDecimal {
				lo, hi = bigMinDec, bigMaxDec
			}
			_, v, k := reduce(OpEq, r, lo, hi)
			if k != kCompare {
				continue // never equal to any stored value
			}
			if l.dom == dInt {
				l.ints = append(l.ints, v.Int64())
			} else {
				l.decs = append(l.decs, decimal128.FromBigInt(v))
			}
		case dFloat:
			v, err := floatValue(lit, l.typ, l.name)
			if err != nil {
				return nil, err
			}
			l.floats = append(l.floats, v)
		case dBytes:
			if lit.Kind != LitString {
				return nil, typeErr(lit, l.typ, l.name, "a quoted string such as 'abc'")
			}
			l.strs = append(l.strs, lit.Text)
		}
	}
	slices.Sort(l.ints)
	l.ints = slices.Compact(l.ints)
	slices.SortFunc(l.decs, func(a, b decimal128.Num) int { return a.Cmp(b) })
	l.decs = slices.CompactFunc(l.decs, func(a, b decimal128.Num) bool { return a == b })
	slices.Sort(l.strs)
	l.strs = slices.Compact(l.strs)
	if len(l.strs) > 8 {
		l.strSet = make(map[string]struct{}, len(l.strs))
		for _, s := range l.strs {
			l.strSet[s] = struct{}{}
		}
	}
	if len(l.ints)+len(l.floats)+len(l.decs)+len(l.strs) == 0 {
		if l.inNull {
			l.konst = kUnknown
		} else {
			l.konst = kNever
		}
	}
	return l, nil
}

var (
	bigMinInt64 = big.NewInt(math.MinInt64)
	bigMaxInt64 = big.NewInt(math.MaxInt64)
	bigMaxDec   = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 127), big.NewInt(1))
	bigMinDec   = new(big.Int).Neg(new(big.Int).Lsh(big.NewInt(1), 127))
)

// reduce rewrites `x op r` over integers x in [lo, hi] into an equivalent
// `x op2 v` with integer v in [lo, hi], or into a constant.
func reduce(op Op, r *big.Rat, lo, hi *big.Int) (Op, *big.Int, konst) {
	var v *big.Int
	if r.IsInt() {
		v = new(big.Int).Set(r.Num())
	} else {
		fl := new(big.Int).Div(r.Num(), r.Denom()) // Euclidean: floor for a positive denominator
		switch op {
		case OpEq:
			return op, nil, kNever
		case OpNe:
			return op, nil, kAlways
		case OpLt, OpLe:
			op, v = OpLe, fl
		default:
			op, v = OpGe, fl.Add(fl, big.NewInt(1))
		}
	}
	switch {
	case v.Cmp(hi) > 0: // every x < v
		switch op {
		case OpNe, OpLt, OpLe:
			return op, nil, kAlways
		}
		return op, nil, kNever
	case v.Cmp(lo) < 0: // every x > v
		switch op {
		case OpNe, OpGt, OpGe:
			return op, nil, kAlways
		}
		return op, nil, kNever
	}
	return op, v, kCompare
}

func typeErr(lit Literal, t record.Type, col, want string) error {
	return fmt.Errorf("%w: column %q is %s, cannot compare it with %s at position %d; use %s",
		ErrType, col, t, lit, lit.Offset+1, want)
}

var unitNanos = map[arrow.TimeUnit]int64{arrow.Second: 1e9, arrow.Millisecond: 1e6, arrow.Microsecond: 1e3, arrow.Nanosecond: 1}

const nanosPerDay = 86400 * 1e9

// exactValue converts a literal to an exact rational in the stored unit of
// an integer-domain or DECIMAL column: the integer itself, 0/1 for BOOLEAN,
// the unscaled value for DECIMAL, days for DATE, the column's Arrow unit for
// TIME and TIMESTAMP.
func exactValue(lit Literal, t record.Type, col string) (*big.Rat, error) {
	isNum := lit.Kind == LitInt || lit.Kind == LitDecimal || lit.Kind == LitFloat
	switch t.Kind {
	case record.KindBoolean:
		if lit.Kind != LitBool {
			return nil, typeErr(lit, t, col, "TRUE or FALSE")
		}
		if lit.Text == "TRUE" {
			return big.NewRat(1, 1), nil
		}
		return big.NewRat(0, 1), nil
	case record.KindTinyInt, record.KindSmallInt, record.KindInt, record.KindBigInt:
		if !isNum {
			return nil, typeErr(lit, t, col, "a number such as 42")
		}
		return numberRat(lit, t, col)
	case record.KindDecimal:
		if !isNum {
			return nil, typeErr(lit, t, col, "a number such as 12.50")
		}
		r, err := numberRat(lit, t, col)
		if err != nil {
			return nil, err
		}
		scale := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(t.Scale)), nil)
		return r.Mul(r, new(big.Rat).SetInt(scale)), nil
	case record.KindDate:
		switch lit.Kind {
		case LitDate, LitString:
			days, err := parseDate(lit.Text)
			if err != nil {
				return nil, fmt.Errorf("%w: column %q is DATE: %v at position %d (want 'YYYY-MM-DD')", ErrType, col, err, lit.Offset+1)
			}
			return new(big.Rat).SetInt64(days), nil
		case LitTimestamp:
			ns, err := parseTimestamp(lit.Text)
			if err != nil {
				return nil, fmt.Errorf("%w: column %q: %v at position %d (want 'YYYY-MM-DD HH:MM:SS[.fffffffff]')", ErrType, col, err, lit.Offset+1)
			}
			return new(big.Rat).SetFrac(ns, big.NewInt(nanosPerDay)), nil
		}
		return nil, typeErr(lit, t, col, "DATE 'YYYY-MM-DD' or 'YYYY-MM-DD'")
	case record.KindTime:
		if lit.Kind != LitTime && lit.Kind != LitString {
			return nil, typeErr(lit, t, col, "TIME 'HH:MM:SS[.fff]' or 'HH:MM:SS[.fff]'")
		}
		ns, err := parseTime(lit.Text)
		if err != nil {
			return nil, fmt.Errorf("%w: column %q is TIME: %v at position %d (want 'HH:MM:SS[.fffffffff]')", ErrType, col, err, lit.Offset+1)
		}
		return big.NewRat(ns, unitNanos[t.TimeUnit()]), nil
	case record.KindTimestamp, record.KindTimestampLTZ:
		unit := big.NewInt(unitNanos[t.TimeUnit()])
		switch lit.Kind {
		case LitTimestamp, LitString:
			ns, err := parseTimestamp(lit.Text)
			if err != nil {
				return nil, fmt.Errorf("%w: column %q is %s: %v at position %d (want 'YYYY-MM-DD HH:MM:SS[.fffffffff]' or epoch milliseconds)", ErrType, col, t, err, lit.Offset+1)
			}
			return new(big.Rat).SetFrac(ns, unit), nil
		case LitDate:
			days, err := parseDate(lit.Text)
			if err != nil {
				return nil, fmt.Errorf("%w: column %q: %v at position %d (want 'YYYY-MM-DD')", ErrType, col, err, lit.Offset+1)
			}
			ns := new(big.Int).Mul(big.NewInt(days), big.NewInt(nanosPerDay))
			return new(big.Rat).SetFrac(ns, unit), nil
		case LitInt, LitDecimal, LitFloat: // epoch milliseconds
			r, err := numberRat(lit, t, col)
			if err != nil {
				return nil, err
			}
			return r.Mul(r, big.NewRat(1e6, unitNanos[t.TimeUnit()])), nil
		}
		return nil, typeErr(lit, t, col, "TIMESTAMP 'YYYY-MM-DD HH:MM:SS[.fff]', a quoted timestamp or epoch milliseconds")
	}
	return nil, typeErr(lit, t, col, "a value of the column's type")
}

// maxExponent bounds the decimal exponent of numeric literals so that exact
// conversion stays cheap; anything larger is out of every column's range.
const maxExponent = 400

func numberRat(lit Literal, t record.Type, col string) (*big.Rat, error) {
	text := lit.Text
	if i := strings.IndexAny(text, "eE"); i >= 0 {
		exp, err := strconv.Atoi(text[i+1:])
		if err != nil || exp > maxExponent || exp < -maxExponent {
			return nil, fmt.Errorf("%w: column %q is %s: number %s at position %d has an exponent outside ±%d", ErrType, col, t, text, lit.Offset+1, maxExponent)
		}
	}
	r, ok := new(big.Rat).SetString(strings.TrimPrefix(text, "+"))
	if !ok {
		return nil, fmt.Errorf("%w: column %q is %s: %q at position %d is not a number", ErrType, col, t, text, lit.Offset+1)
	}
	return r, nil
}

// floatValue converts a number to the column's float width (FLOAT literals
// are rounded to float32, then widened exactly).
func floatValue(lit Literal, t record.Type, col string) (float64, error) {
	if lit.Kind != LitInt && lit.Kind != LitDecimal && lit.Kind != LitFloat {
		return 0, typeErr(lit, t, col, "a number such as 1.5 or 2e-3")
	}
	bits := 64
	if t.Kind == record.KindFloat {
		bits = 32
	}
	v, err := strconv.ParseFloat(lit.Text, bits)
	if err != nil && !errors.Is(err, strconv.ErrRange) { // overflow gives ±Inf, which compares correctly
		return 0, fmt.Errorf("%w: column %q is %s: %q at position %d is not a number", ErrType, col, t, lit.Text, lit.Offset+1)
	}
	return v, nil
}

func parseDate(s string) (int64, error) {
	tm, err := time.Parse("2006-01-02", strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("%q is not a date", s)
	}
	return tm.Unix() / 86400, nil
}

var timestampLayouts = []string{
	"2006-01-02 15:04:05Z07:00", "2006-01-02T15:04:05Z07:00",
	"2006-01-02 15:04:05", "2006-01-02T15:04:05",
	"2006-01-02 15:04Z07:00", "2006-01-02T15:04Z07:00",
	"2006-01-02 15:04", "2006-01-02T15:04",
	"2006-01-02",
}

// parseTimestamp returns nanoseconds since the epoch (UTC unless the string
// carries an offset).
func parseTimestamp(s string) (*big.Int, error) {
	s = strings.TrimSpace(s)
	for _, layout := range timestampLayouts {
		tm, err := time.Parse(layout, s)
		if err == nil {
			ns := new(big.Int).Mul(big.NewInt(tm.Unix()), big.NewInt(1e9))
			return ns.Add(ns, big.NewInt(int64(tm.Nanosecond()))), nil
		}
	}
	return nil, fmt.Errorf("%q is not a timestamp", s)
}

// parseTime returns nanoseconds since midnight.
func parseTime(s string) (int64, error) {
	s = strings.TrimSpace(s)
	for _, layout := range []string{"15:04:05", "15:04"} {
		tm, err := time.Parse(layout, s)
		if err == nil {
			return int64(tm.Hour())*3600e9 + int64(tm.Minute())*60e9 + int64(tm.Second())*1e9 + int64(tm.Nanosecond()), nil
		}
	}
	return 0, fmt.Errorf("%q is not a time of day", s)
}

// compareBytes is bytes.Compare on a string literal without allocating.
func compareBytes(b []byte, s string) int {
	n := min(len(b), len(s))
	for i := 0; i < n; i++ {
		if b[i] != s[i] {
			if b[i] < s[i] {
				return -1
			}
			return 1
		}
	}
	switch {
	case len(b) < len(s):
		return -1
	case len(b) > len(s):
		return 1
	}
	return 0
}
