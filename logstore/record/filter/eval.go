package filter

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
)

// ErrRecord is wrapped when a record handed to Eval does not match the
// schema the filter was bound to (missing column, wrong Arrow type or unit).
var ErrRecord = errors.New("record does not match the filter's schema")

// scratch recycles bitmaps between Eval calls.
type scratch struct {
	free [][]uint64
	ctx  evalCtx // kept here so that it does not escape per call
}

func (s *scratch) get(nw int) []uint64 {
	for i := len(s.free) - 1; i >= 0; i-- {
		if cap(s.free[i]) >= nw {
			b := s.free[i][:nw]
			s.free[i] = s.free[len(s.free)-1]
			s.free = s.free[:len(s.free)-1]
			clear(b)
			return b
		}
	}
	return make([]uint64, nw, max(nw, 16))
}

func (s *scratch) put(b ...[]uint64) { s.free = append(s.free, b...) }

type evalCtx struct {
	rec      arrow.Record
	colIndex func(int) int
	n        int // rows
	nw       int // words per bitmap
	s        *scratch
}

func (c *evalCtx) column(col int) (arrow.Array, error) {
	rc := col
	if c.colIndex != nil {
		rc = c.colIndex(col)
	}
	if rc == -1 {
		return nil, nil // absent from this batch: all NULL
	}
	if rc < 0 || int64(rc) >= c.rec.NumCols() {
		return nil, fmt.Errorf("%w: schema column %d is not in the record (record column %d of %d)", ErrRecord, col, rc, c.rec.NumCols())
	}
	a := c.rec.Column(rc)
	if a.Len() != c.n {
		return nil, fmt.Errorf("%w: column %d has %d values, the record %d rows", ErrRecord, col, a.Len(), c.n)
	}
	return a, nil
}

// Eval appends to sel the indexes of the rows of rec for which the filter is
// TRUE, in ascending order. colIndex maps a schema column to its position
// in rec (nil means the identity); -1 means the batch predates the column
// (schema evolution appends nullable columns), which then reads as all NULL.
// A record that does not match the bound schema returns an error wrapping
// ErrRecord; sel is then returned as given.
func (f *Filter) Eval(rec arrow.Record, colIndex func(schemaCol int) int, sel []int32) (out []int32, err error) {
	if rec == nil {
		return sel, fmt.Errorf("%w: nil record", ErrRecord)
	}
	n := int(rec.NumRows())
	if n == 0 {
		return sel, nil
	}
	s := f.pool.Get().(*scratch)
	orig := sel
	defer func() {
		// Request paths never panic: a malformed Arrow array (for example
		// a validity bitmap shorter than the rows) surfaces as an error.
		if r := recover(); r != nil {
			out, err = orig, fmt.Errorf("%w: %v", ErrRecord, r)
			return // do not reuse a scratch whose state is unknown
		}
		f.pool.Put(s)
	}()
	c := &s.ctx
	*c = evalCtx{rec: rec, colIndex: colIndex, n: n, nw: (n + 63) / 64, s: s}
	defer func() { c.rec, c.colIndex = nil, nil }() // do not pin the record from the pool
	t, fb, care := s.get(c.nw), s.get(c.nw), s.get(c.nw)
	defer s.put(t, fb, care)
	setAll(care, n)
	if err := f.root.eval(c, care, t, fb); err != nil {
		return sel, err
	}
	sel = slices.Grow(sel, popcount(t))
	for w, word := range t {
		for word != 0 {
			sel = append(sel, int32(w*64+bits.TrailingZeros64(word)))
			word &= word - 1
		}
	}
	return sel, nil
}

func popcount(b []uint64) int {
	n := 0
	for _, w := range b {
		n += bits.OnesCount64(w)
	}
	return n
}

// setAll sets the first n bits of b and clears the rest.
func setAll(b []uint64, n int) {
	for i := range b {
		b[i] = ^uint64(0)
	}
	maskTail(b, n)
}

// covered reports whether every bit of care is also set in b.
func covered(care, b []uint64) bool {
	for i, w := range care {
		if w&^b[i] != 0 {
			return false
		}
	}
	return true
}

// Every eval computes only the rows set in care; the bits of t and f for
// other rows are unspecified and ignored by the caller. AND evaluates its
// right side only where the left is not FALSE, OR only where it is not TRUE.

func (a *andNode) eval(c *evalCtx, care, t, f []uint64) error {
	if err := a.l.eval(c, care, t, f); err != nil {
		return err
	}
	if covered(care, f) { // FALSE AND x is FALSE
		return nil
	}
	care2, t2, f2 := c.s.get(c.nw), c.s.get(c.nw), c.s.get(c.nw)
	defer c.s.put(care2, t2, f2)
	for i := range care2 {
		care2[i] = care[i] &^ f[i]
	}
	if err := a.r.eval(c, care2, t2, f2); err != nil {
		return err
	}
	for i := range t {
		t[i] &= t2[i]
		f[i] |= f2[i]
	}
	return nil
}

func (o *orNode) eval(c *evalCtx, care, t, f []uint64) error {
	if err := o.l.eval(c, care, t, f); err != nil {
		return err
	}
	if covered(care, t) { // TRUE OR x is TRUE
		return nil
	}
	care2, t2, f2 := c.s.get(c.nw), c.s.get(c.nw), c.s.get(c.nw)
	defer c.s.put(care2, t2, f2)
	for i := range care2 {
		care2[i] = care[i] &^ t[i]
	}
	if err := o.r.eval(c, care2, t2, f2); err != nil {
		return err
	}
	for i := range t {
		t[i] |= t2[i]
		f[i] &= f2[i]
	}
	return nil
}

func (x *notNode) eval(c *evalCtx, care, t, f []uint64) error {
	// Evaluate the child with the roles of t and f swapped.
	return x.x.eval(c, care, f, t)
}

func (x *isNullNode) eval(c *evalCtx, _, t, f []uint64) error {
	a, err := c.column(x.col)
	if err != nil {
		return err
	}
	valid, null := f, t
	if x.not {
		valid, null = t, f
	}
	if a == nil {
		clear(valid)
	} else {
		validBits(a, c.n, valid)
	}
	for i := range null {
		null[i] = ^valid[i]
	}
	maskTail(null, c.n)
	return nil
}

// maskTail clears the bits past n in the last word.
func maskTail(b []uint64, n int) {
	if r := n % 64; r != 0 {
		b[len(b)-1] &= uint64(1)<<r - 1
	}
}

// validBits sets dst to the non-null rows of a (n rows).
func validBits(a arrow.Array, n int, dst []uint64) {
	if d, ok := a.(*array.Dictionary); ok && d.Dictionary().NullN() > 0 {
		// A row is also null when its index points at a null entry.
		indexValidBits(d.Indices(), n, dst)
		dict := d.Dictionary()
		for w, word := range dst {
			for ; word != 0; word &= word - 1 {
				i := w*64 + bits.TrailingZeros64(word)
				if k := d.GetValueIndex(i); k < 0 || k >= dict.Len() || dict.IsNull(k) {
					dst[w] &^= 1 << (uint(i) & 63)
				}
			}
		}
		return
	}
	indexValidBits(a, n, dst)
}

// indexValidBits reads a's own validity bitmap.
func indexValidBits(a arrow.Array, n int, dst []uint64) {
	if a.NullN() == 0 {
		for i := range dst {
			dst[i] = ^uint64(0)
		}
		maskTail(dst, n)
		return
	}
	if a.DataType().ID() == arrow.NULL {
		clear(dst)
		return
	}
	bm := a.NullBitmapBytes()
	off := a.Data().Offset()
	if bm == nil {
		clear(dst)
		for i := 0; i < n; i++ {
			if a.IsValid(i) {
				dst[i>>6] |= 1 << (uint(i) & 63)
			}
		}
		return
	}
	for w := range dst {
		var word uint64
		base := off + w*64
		end := min(64, n-w*64)
		if base%8 == 0 && end == 64 && base/8+8 <= len(bm) {
			b := bm[base/8 : base/8+8]
			word = uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
				uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
		} else {
			for j := 0; j < end; j++ {
				p := base + j
				word |= uint64(bm[p>>3]>>(p&7)&1) << j
			}
		}
		dst[w] = word
	}
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

func (l *leaf) eval(c *evalCtx, care, t, f []uint64) error {
	a, err := c.column(l.col)
	if err != nil || a == nil { // an absent column is NULL: every row UNKNOWN
		return err
	}
	return l.evalArray(c, a, care, t, f)
}

// evalArray evaluates the leaf over a (c.n rows is not assumed: a may be a
// dictionary of any length) into t and f sized for a.Len().
func (l *leaf) evalArray(c *evalCtx, a arrow.Array, care, t, f []uint64) error {
	n := a.Len()
	if l.konst == kUnknown {
		return nil
	}
	if d, ok := a.(*array.Dictionary); ok {
		return l.evalDict(c, d, care, t, f)
	}
	validBits(a, n, f)
	switch l.konst {
	case kAlways:
		copy(t, f)
		clear(f)
		return nil
	case kNever:
		return nil
	}
	if err := l.kernel(a, n, care, t); err != nil {
		return err
	}
	for i := range t {
		t[i] &= f[i]
		if l.inNull {
			f[i] = 0 // x IN (.., NULL) is never FALSE
		} else {
			f[i] &^= t[i]
		}
	}
	return nil
}

// evalDict evaluates the leaf once per dictionary entry, then maps rows
// through the indices.
func (l *leaf) evalDict(c *evalCtx, d *array.Dictionary, care, t, f []uint64) error {
	dict := d.Dictionary()
	dw := (dict.Len() + 63) / 64
	dcare, dt, df, valid := c.s.get(dw), c.s.get(dw), c.s.get(dw), c.s.get(len(t))
	defer c.s.put(dcare, dt, df, valid)
	setAll(dcare, dict.Len())
	if err := l.evalArray(c, dict, dcare, dt, df); err != nil {
		return err
	}
	validBits(d, d.Len(), valid)
	for i := range valid {
		valid[i] &= care[i]
	}
	m := dictMapper{dt: dt, df: df, t: t, f: f, valid: valid, dn: dict.Len()}
	var ok bool
	switch ix := d.Indices().(type) {
	case *array.Int8:
		ok = mapDict(&m, ix.Int8Values())
	case *array.Int16:
		ok = mapDict(&m, ix.Int16Values())
	case *array.Int32:
		ok = mapDict(&m, ix.Int32Values())
	case *array.Int64:
		ok = mapDict(&m, ix.Int64Values())
	case *array.Uint8:
		ok = mapDict(&m, ix.Uint8Values())
	case *array.Uint16:
		ok = mapDict(&m, ix.Uint16Values())
	case *array.Uint32:
		ok = mapDict(&m, ix.Uint32Values())
	case *array.Uint64:
		ok = mapDict(&m, ix.Uint64Values())
	default:
		return fmt.Errorf("%w: column %q: dictionary indices of type %s", ErrRecord, l.name, d.Indices().DataType())
	}
	if !ok {
		return fmt.Errorf("%w: column %q: dictionary index out of range", ErrRecord, l.name)
	}
	return nil
}

type dictMapper struct {
	dt, df, t, f, valid []uint64
	dn                  int
}

func mapDict[I ~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64](m *dictMapper, idx []I) bool {
	for w, word := range m.valid {
		for ; word != 0; word &= word - 1 {
			i := w*64 + bits.TrailingZeros64(word)
			if i >= len(idx) {
				return false
			}
			k := uint64(idx[i])
			if k >= uint64(m.dn) { // also catches negative indices
				return false
			}
			m.t[w] |= (m.dt[k>>6] >> (k & 63) & 1) << (uint(i) & 63)
			m.f[w] |= (m.df[k>>6] >> (k & 63) & 1) << (uint(i) & 63)
		}
	}
	return true
}

func (l *leaf) mismatch(a arrow.Array) error {
	return fmt.Errorf("%w: column %q is %s but the record holds Arrow %s", ErrRecord, l.name, l.typ, a.DataType())
}

// kernel sets t for every row (nulls included) where the predicate holds on
// the stored value.
func (l *leaf) kernel(a arrow.Array, n int, care, t []uint64) error {
	switch l.dom {
	case dInt:
		return l.intKernel(a, n, care, t)
	case dFloat:
		switch a := a.(type) {
		case *array.Float32:
			floatKernel(l, a.Float32Values(), care, t)
		case *array.Float64:
			floatKernel(l, a.Float64Values(), care, t)
		default:
			return l.mismatch(a)
		}
	case dDecimal:
		a, ok := a.(*array.Decimal128)
		if !ok {
			return l.mismatch(a)
		}
		if dt := a.DataType().(*arrow.Decimal128Type); int(dt.Scale) != l.typ.Scale {
			return fmt.Errorf("%w: column %q has scale %d but the record holds scale %d", ErrRecord, l.name, l.typ.Scale, dt.Scale)
		}
		decKernel(l, a.Values(), care, t)
	case dBytes:
		switch a := a.(type) {
		case *array.String:
			return strKernel(l, a.ValueOffsets(), a.ValueBytes(), care, t)
		case *array.LargeString:
			return strKernel(l, a.ValueOffsets(), a.ValueBytes(), care, t)
		case *array.Binary:
			return strKernel(l, a.ValueOffsets(), a.ValueBytes(), care, t)
		case *array.LargeBinary:
			return strKernel(l, a.ValueOffsets(), a.ValueBytes(), care, t)
		default:
			return l.mismatch(a)
		}
	}
	return nil
}

func (l *leaf) checkUnit(a arrow.Array, u arrow.TimeUnit) error {
	if want := l.typ.TimeUnit(); u != want {
		return fmt.Errorf("%w: column %q is %s (unit %s) but the record holds Arrow %s", ErrRecord, l.name, l.typ, want, a.DataType())
	}
	return nil
}

func (l *leaf) intKernel(a arrow.Array, n int, care, t []uint64) error {
	switch a := a.(type) {
	case *array.Int8:
		intKernel(l, a.Int8Values(), care, t)
	case *array.Int16:
		intKernel(l, a.Int16Values(), care, t)
	case *array.Int32:
		intKernel(l, a.Int32Values(), care, t)
	case *array.Int64:
		intKernel(l, a.Int64Values(), care, t)
	case *array.Date32:
		intKernel(l, a.Date32Values(), care, t)
	case *array.Time32:
		if err := l.checkUnit(a, a.DataType().(*arrow.Time32Type).Unit); err != nil {
			return err
		}
		intKernel(l, a.Time32Values(), care, t)
	case *array.Time64:
		if err := l.checkUnit(a, a.DataType().(*arrow.Time64Type).Unit); err != nil {
			return err
		}
		intKernel(l, a.Time64Values(), care, t)
	case *array.Timestamp:
		if err := l.checkUnit(a, a.DataType().(*arrow.TimestampType).Unit); err != nil {
			return err
		}
		intKernel(l, a.TimestampValues(), care, t)
	case *array.Boolean:
		boolKernel(l, a, care, t)
	default:
		return l.mismatch(a)
	}
	return nil
}

type integer interface {
	~int8 | ~int16 | ~int32 | ~int64
}

// numKernel is the typed fast path of integer and float columns: one tight
// loop per operator, one word of results at a time. Values are compared as
// V: int64 for integer columns (l.i64), float64 for floats (l.f64); in
// answers an IN list.
func numKernel[T integer | float32 | float64, V int64 | float64](l *leaf, vals []T, v V, in func(V) bool, care, t []uint64) {
	for w := 0; w < len(vals); w += 64 {
		if care[w>>6] == 0 {
			continue
		}
		chunk := vals[w:min(w+64, len(vals))]
		var word uint64
		if l.in {
			for j, x := range chunk {
				word |= b2u(in(V(x))) << j
			}
			t[w>>6] = word
			continue
		}
		switch l.op {
		case OpEq:
			for j, x := range chunk {
				word |= b2u(V(x) == v) << j
			}
		case OpNe:
			for j, x := range chunk {
				word |= b2u(V(x) != v) << j
			}
		case OpLt:
			for j, x := range chunk {
				word |= b2u(V(x) < v) << j
			}
		case OpLe:
			for j, x := range chunk {
				word |= b2u(V(x) <= v) << j
			}
		case OpGt:
			for j, x := range chunk {
				word |= b2u(V(x) > v) << j
			}
		case OpGe:
			for j, x := range chunk {
				word |= b2u(V(x) >= v) << j
			}
		}
		t[w>>6] = word
	}
}

func intKernel[T integer](l *leaf, vals []T, care, t []uint64) {
	numKernel(l, vals, l.i64, func(x int64) bool { return containsInt(l.ints, x) }, care, t)
}

func floatKernel[T float32 | float64](l *leaf, vals []T, care, t []uint64) {
	numKernel(l, vals, l.f64, func(x float64) bool { return slices.Contains(l.floats, x) }, care, t)
}

func containsInt(list []int64, x int64) bool {
	if len(list) <= 8 {
		for _, v := range list {
			if v == x {
				return true
			}
		}
		return false
	}
	_, ok := slices.BinarySearch(list, x)
	return ok
}

func boolKernel(l *leaf, a *array.Boolean, care, t []uint64) {
	for w, word := range care {
		for ; word != 0; word &= word - 1 {
			i := w*64 + bits.TrailingZeros64(word)
			x := int64(b2u(a.Value(i)))
			var ok bool
			if l.in {
				ok = containsInt(l.ints, x)
			} else {
				ok = cmpOrdered(x, l.i64, l.op)
			}
			t[w] |= b2u(ok) << (uint(i) & 63)
		}
	}
}

func cmpOrdered[T int64 | float64 | string](x, v T, op Op) bool {
	switch op {
	case OpEq:
		return x == v
	case OpNe:
		return x != v
	case OpLt:
		return x < v
	case OpLe:
		return x <= v
	case OpGt:
		return x > v
	default:
		return x >= v
	}
}

func cmpResult(c int, op Op) bool {
	switch op {
	case OpEq:
		return c == 0
	case OpNe:
		return c != 0
	case OpLt:
		return c < 0
	case OpLe:
		return c <= 0
	case OpGt:
		return c > 0
	default:
		return c >= 0
	}
}

func decKernel(l *leaf, vals []decimal128.Num, care, t []uint64) {
	for w, word := range care {
		for ; word != 0; word &= word - 1 {
			i := w*64 + bits.TrailingZeros64(word)
			x := vals[i]
			var ok bool
			if l.in {
				_, ok = slices.BinarySearchFunc(l.decs, x, func(a, b decimal128.Num) int { return a.Cmp(b) })
			} else {
				ok = cmpResult(x.Cmp(l.dec), l.op)
			}
			t[w] |= b2u(ok) << (uint(i) & 63)
		}
	}
}

// strKernel reads the offsets and data buffers directly (no per-row method
// call); offsets has one entry per row plus one, data starts at offsets[0].
func strKernel[O int32 | int64](l *leaf, offsets []O, data []byte, care, t []uint64) error {
	if len(offsets) == 0 {
		return nil
	}
	base := offsets[0]
	if last := offsets[len(offsets)-1]; last < base || int64(last-base) > int64(len(data)) {
		return fmt.Errorf("%w: column %q: string offsets past the data", ErrRecord, l.name)
	}
	n := len(offsets) - 1
	for w, word := range care {
		for ; word != 0; word &= word - 1 {
			i := w*64 + bits.TrailingZeros64(word)
			if i >= n {
				return fmt.Errorf("%w: column %q: fewer string offsets than rows", ErrRecord, l.name)
			}
			lo, hi := offsets[i]-base, offsets[i+1]-base
			if lo > hi || hi > O(len(data)) {
				return fmt.Errorf("%w: column %q: bad string offsets at row %d", ErrRecord, l.name, i)
			}
			x := data[lo:hi]
			var ok bool
			switch {
			case l.like != nil:
				ok = l.like.match(x)
			case !l.in:
				ok = cmpResult(compareBytes(x, l.str), l.op)
			case l.strSet != nil:
				_, ok = l.strSet[string(x)] // no allocation for a map lookup
			default:
				for _, s := range l.strs {
					if len(s) == len(x) && string(x) == s {
						ok = true
						break
					}
				}
			}
			t[w] |= b2u(ok) << (uint(i) & 63)
		}
	}
	return nil
}
