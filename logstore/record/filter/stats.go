package filter

import (
	"cmp"

	"github.com/fluss-node/fluss-node/logstore/record"
)

// MayMatch reports whether some row of a batch with these per-column stats
// (indexed by schema column) may pass the filter. It returns false only when
// no row can: a nil or short stats slice, or a column without min/max,
// counts as "anything is possible".
func (f *Filter) MayMatch(stats []record.ColumnStats) bool {
	if stats == nil {
		return true
	}
	mayT, _ := f.root.may(stats)
	return mayT
}

func (a *andNode) may(st []record.ColumnStats) (bool, bool) {
	lt, lf := a.l.may(st)
	rt, rf := a.r.may(st)
	return lt && rt, lf || rf
}

func (o *orNode) may(st []record.ColumnStats) (bool, bool) {
	lt, lf := o.l.may(st)
	rt, rf := o.r.may(st)
	return lt || rt, lf && rf
}

func (x *notNode) may(st []record.ColumnStats) (bool, bool) {
	t, f := x.x.may(st)
	return f, t
}

func (x *isNullNode) may(st []record.ColumnStats) (bool, bool) {
	if x.col >= len(st) {
		return true, true
	}
	hasNull := st[x.col].NullCount > 0
	// Without a row count we cannot tell "all null"; a min/max proves a
	// non-null value exists.
	if x.not {
		return true, hasNull
	}
	return hasNull, true
}

// rangeMay is "may TRUE" of `x op v` for x in [lo, hi], given cmpLo =
// cmp(lo, v) and cmpHi = cmp(hi, v).
func rangeMay(op Op, cmpLo, cmpHi int) bool {
	switch op {
	case OpEq:
		return cmpLo <= 0 && cmpHi >= 0
	case OpNe:
		return cmpLo != 0 || cmpHi != 0
	case OpLt:
		return cmpLo < 0
	case OpLe:
		return cmpLo <= 0
	case OpGt:
		return cmpHi > 0
	default:
		return cmpHi >= 0
	}
}

var negate = [...]Op{OpEq: OpNe, OpNe: OpEq, OpLt: OpGe, OpLe: OpGt, OpGt: OpLe, OpGe: OpLt}

func (l *leaf) may(st []record.ColumnStats) (bool, bool) {
	switch l.konst {
	case kUnknown:
		return false, false
	case kAlways:
		return true, false
	case kNever:
		return false, true
	}
	if l.col >= len(st) || !st[l.col].HasMinMax {
		return true, true
	}
	s := &st[l.col]
	if l.like != nil {
		return l.like.may(s), true
	}
	// cmpAt returns cmp(min, v), cmp(max, v) for the literal v (or the i-th
	// IN value).
	var cmpAt func(i int) (int, int)
	switch l.dom {
	case dInt:
		cmpAt = func(i int) (int, int) {
			v := l.i64
			if l.in {
				v = l.ints[i]
			}
			return cmp.Compare(s.MinInt, v), cmp.Compare(s.MaxInt, v)
		}
	case dFloat:
		cmpAt = func(i int) (int, int) {
			v := l.f64
			if l.in {
				v = l.floats[i]
			}
			return cmp.Compare(s.MinFloat, v), cmp.Compare(s.MaxFloat, v)
		}
	case dDecimal:
		cmpAt = func(i int) (int, int) {
			v := l.dec
			if l.in {
				v = l.decs[i]
			}
			return s.MinDecimal.Cmp(v), s.MaxDecimal.Cmp(v)
		}
	case dBytes:
		cmpAt = func(i int) (int, int) {
			v := l.str
			if l.in {
				v = l.strs[i]
			}
			return compareBytes(s.MinBytes, v), compareBytes(s.MaxBytes, v)
		}
	}
	// NaN is excluded from float stats but makes every comparison FALSE
	// (and != TRUE), so for floats FALSE (and !=) stay possible.
	isFloat := l.dom == dFloat
	if !l.in {
		lo, hi := cmpAt(0)
		if isFloat && l.op == OpNe {
			return true, true
		}
		mayT := rangeMay(l.op, lo, hi)
		mayF := isFloat || rangeMay(negate[l.op], lo, hi)
		return mayT, mayF
	}
	n := len(l.ints) + len(l.floats) + len(l.decs) + len(l.strs)
	mayT, single := false, false
	for i := 0; i < n; i++ {
		lo, hi := cmpAt(i)
		if rangeMay(OpEq, lo, hi) {
			mayT = true
		}
		if lo == 0 && hi == 0 {
			single = true // every non-null value equals this element
		}
	}
	mayF := !l.inNull && (isFloat || !single)
	return mayT, mayF
}

// may is "may TRUE" of LIKE for a batch whose values lie in
// [MinBytes, MaxBytes]: some value there must start with the prefix.
func (p *likePattern) may(s *record.ColumnStats) bool {
	if p.prefix == "" {
		return true
	}
	end, unbounded := prefixEnd(p.prefix)
	return compareBytes(s.MaxBytes, p.prefix) >= 0 && (unbounded || compareBytes(s.MinBytes, end) < 0)
}
