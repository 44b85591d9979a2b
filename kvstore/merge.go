package kvstore

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"

	"github.com/fluss-node/fluss-node/logstore/record"
)

// ChangeType is the kind of one changelog entry.
type ChangeType uint8

const (
	Insert       ChangeType = iota // +I
	UpdateBefore                   // -U
	UpdateAfter                    // +U
	Delete                         // -D
)

func (t ChangeType) String() string {
	switch t {
	case Insert:
		return "+I"
	case UpdateBefore:
		return "-U"
	case UpdateAfter:
		return "+U"
	case Delete:
		return "-D"
	}
	return fmt.Sprintf("ChangeType(%d)", uint8(t))
}

// Change is one changelog entry: the change type and the full row it
// carries (the before image for -U/-D, the after image for +I/+U).
type Change struct {
	Type ChangeType
	Row  Row
}

// Table property names and values (API.md).
const (
	PropMergeEngine    = "table.merge-engine"
	PropVerColumn      = "table.merge-engine.versioned.ver-column"
	PropDeleteBehavior = "table.delete.behavior"
	PropChangelogImage = "table.changelog.image"
)

// Merge engines.
const (
	EngineLastRow     = "last_row"
	EngineFirstRow    = "first_row"
	EngineVersioned   = "versioned"
	EngineAggregation = "aggregation"
)

// Errors returned by NewMerger and the merge functions.
var (
	// ErrBadProperty reports an invalid merge-related table property.
	ErrBadProperty = errors.New("kvstore: bad table property")
	// ErrDeleteDisabled is returned by Delete when table.delete.behavior=disable.
	ErrDeleteDisabled = errors.New("kvstore: deletes are disabled for this table (table.delete.behavior=disable)")
	// ErrUnsupported reports an operation the table's merge engine does not support.
	ErrUnsupported = errors.New("kvstore: operation not supported by the merge engine")
	// ErrOverflow reports an aggregation result that does not fit its column type.
	ErrOverflow = errors.New("kvstore: aggregation overflow")
)

type deleteBehavior uint8

const (
	deleteAllow deleteBehavior = iota
	deleteIgnore
	deleteDisable
)

// aggregation functions
type aggFunc uint8

const (
	aggLastValueIgnoreNulls aggFunc = iota // default
	aggLastValue
	aggFirstValue
	aggFirstValueIgnoreNulls
	aggSum
	aggProduct
	aggMax
	aggMin
	aggListagg
	aggBoolAnd
	aggBoolOr
)

var aggNames = map[string]aggFunc{
	"last_value_ignore_nulls":  aggLastValueIgnoreNulls,
	"last_non_null_value":      aggLastValueIgnoreNulls,
	"last_value":               aggLastValue,
	"first_value":              aggFirstValue,
	"first_value_ignore_nulls": aggFirstValueIgnoreNulls,
	"first_non_null_value":     aggFirstValueIgnoreNulls,
	"sum":                      aggSum,
	"product":                  aggProduct,
	"max":                      aggMax,
	"min":                      aggMin,
	"listagg":                  aggListagg,
	"string_agg":               aggListagg,
	"bool_and":                 aggBoolAnd,
	"bool_or":                  aggBoolOr,
}

// Merger runs a table's merge engine over decoded rows. It is pure and
// deterministic (no clock, no randomness) and safe for concurrent use.
type Merger struct {
	schema  *record.Schema
	kinds   []record.Kind
	isKey   []bool
	engine  string
	verCol  int
	del     deleteBehavior
	walOnly bool // table.changelog.image=WAL: updates emit only +U
	agg     []aggFunc
	delim   [][]byte
}

// NewMerger validates the merge-related properties of a PK table and returns
// its Merger. Recognised: table.merge-engine (default last_row),
// table.merge-engine.versioned.ver-column, fields.<col>.agg (default
// last_value_ignore_nulls), fields.<col>.listagg-delimiter (or Fluss's
// fields.<col>.listagg.delimiter / fields.<col>.string_agg.delimiter;
// default ","), table.delete.behavior (allow|ignore|disable; default allow
// for last_row, ignore for first_row, versioned and aggregation; first_row
// and versioned do not accept allow — as Fluss), and
// table.changelog.image (FULL|WAL, default FULL). Other keys are ignored.
func NewMerger(s *record.Schema, props map[string]string) (*Merger, error) {
	if s == nil || len(s.PrimaryKey) == 0 {
		return nil, fmt.Errorf("%w: merge engines need a primary-key table", ErrBadProperty)
	}
	m := &Merger{schema: s, verCol: -1, kinds: make([]record.Kind, len(s.Columns)), isKey: make([]bool, len(s.Columns))}
	for i, c := range s.Columns {
		m.kinds[i] = c.Type.Kind
	}
	for _, pk := range s.PrimaryKey {
		i := s.Index(pk)
		if i < 0 {
			return nil, fmt.Errorf("%w: primary-key column %q not in schema", ErrBadProperty, pk)
		}
		m.isKey[i] = true
	}
	m.engine = strings.ToLower(strings.TrimSpace(props[PropMergeEngine]))
	switch m.engine {
	case "", "last_row", "last-row", "default":
		m.engine = EngineLastRow
	case EngineFirstRow, EngineVersioned, EngineAggregation:
	default:
		return nil, fmt.Errorf("%w: %s=%q (want first_row, versioned or aggregation; unset means last-row)", ErrBadProperty, PropMergeEngine, props[PropMergeEngine])
	}
	if m.engine == EngineVersioned {
		name := props[PropVerColumn]
		m.verCol = s.Index(name)
		if m.verCol < 0 {
			return nil, fmt.Errorf("%w: versioned merge engine needs %s naming a column (got %q)", ErrBadProperty, PropVerColumn, name)
		}
		switch m.kinds[m.verCol] {
		case record.KindInt, record.KindBigInt, record.KindTimestamp, record.KindTimestampLTZ:
		default:
			return nil, fmt.Errorf("%w: version column %q is %s; want INT, BIGINT, TIMESTAMP or TIMESTAMP_LTZ", ErrBadProperty, name, m.kinds[m.verCol])
		}
	}
	switch strings.ToLower(props[PropDeleteBehavior]) {
	case "":
		// Fluss defaults: first_row and versioned ignore deletes; aggregation
		// ignores them too (no retraction: a delete cannot be subtracted from
		// an aggregate), allow there removes the whole row.
		if m.engine != EngineLastRow {
			m.del = deleteIgnore
		}
	case "allow":
		if m.engine == EngineFirstRow || m.engine == EngineVersioned {
			return nil, fmt.Errorf("%w: %s=allow is not supported by the %s merge engine (use ignore or disable)", ErrBadProperty, PropDeleteBehavior, m.engine)
		}
	case "ignore":
		m.del = deleteIgnore
	case "disable":
		m.del = deleteDisable
	default:
		return nil, fmt.Errorf("%w: %s=%q (want allow, ignore or disable)", ErrBadProperty, PropDeleteBehavior, props[PropDeleteBehavior])
	}
	switch strings.ToUpper(props[PropChangelogImage]) {
	case "", "FULL":
	case "WAL":
		m.walOnly = true
	default:
		return nil, fmt.Errorf("%w: %s=%q (want FULL or WAL)", ErrBadProperty, PropChangelogImage, props[PropChangelogImage])
	}
	m.agg = make([]aggFunc, len(s.Columns))
	m.delim = make([][]byte, len(s.Columns))
	for i, c := range s.Columns {
		m.delim[i] = []byte(",")
		for _, suffix := range []string{".listagg-delimiter", ".listagg.delimiter", ".string_agg.delimiter"} {
			if d, ok := props["fields."+c.Name+suffix]; ok {
				m.delim[i] = []byte(d)
			}
		}
		name, ok := props["fields."+c.Name+".agg"]
		if !ok {
			continue
		}
		if m.engine != EngineAggregation {
			return nil, fmt.Errorf("%w: fields.%s.agg needs table.merge-engine=aggregation", ErrBadProperty, c.Name)
		}
		if m.isKey[i] {
			return nil, fmt.Errorf("%w: fields.%s.agg: primary-key columns are not aggregated", ErrBadProperty, c.Name)
		}
		f, ok := aggNames[strings.ToLower(name)]
		if !ok {
			return nil, fmt.Errorf("%w: fields.%s.agg=%q is not an aggregation function", ErrBadProperty, c.Name, name)
		}
		if err := checkAggType(f, c.Type.Kind); err != nil {
			return nil, fmt.Errorf("%w: fields.%s.agg=%s: %v", ErrBadProperty, c.Name, name, err)
		}
		m.agg[i] = f
	}
	return m, nil
}

func isNumeric(k record.Kind) bool {
	switch k {
	case record.KindTinyInt, record.KindSmallInt, record.KindInt, record.KindBigInt,
		record.KindFloat, record.KindDouble, record.KindDecimal:
		return true
	}
	return false
}

func checkAggType(f aggFunc, k record.Kind) error {
	switch f {
	case aggSum, aggProduct:
		if !isNumeric(k) {
			return fmt.Errorf("column type %s is not numeric", k)
		}
	case aggMax, aggMin:
		if k == record.KindBytes || k == record.KindBoolean {
			return fmt.Errorf("column type %s is not orderable for max/min", k)
		}
	case aggListagg:
		if k != record.KindString {
			return fmt.Errorf("column type %s: listagg needs STRING", k)
		}
	case aggBoolAnd, aggBoolOr:
		if k != record.KindBoolean {
			return fmt.Errorf("column type %s: bool_and/bool_or need BOOLEAN", k)
		}
	}
	return nil
}

// Engine returns the merge engine name.
func (m *Merger) Engine() string { return m.engine }

func (m *Merger) checkRow(in Row) error {
	if len(in) != len(m.kinds) {
		return fmt.Errorf("%w: %d values for %d columns", ErrBadRow, len(in), len(m.kinds))
	}
	return nil
}

func (m *Merger) checkNotNull(r Row) error {
	for i, v := range r {
		if v.Null && (m.isKey[i] || !m.schema.Columns[i].Nullable) {
			if m.isKey[i] {
				return fmt.Errorf("%w: column %q", ErrNullKey, m.schema.Columns[i].Name)
			}
			return fmt.Errorf("%w: column %q is NOT NULL", ErrBadRow, m.schema.Columns[i].Name)
		}
	}
	return nil
}

// Upsert merges the incoming row in against old (nil when the key is absent)
// and appends the resulting changelog to dst. It returns the new stored row
// (old itself when nothing changes) and dst. targetCols (schema indexes)
// makes it a partial update: it must include every primary-key column;
// non-target columns keep their old values, or are NULL for a new key (and
// must then be nullable). in must already have the key of old. The returned
// row may alias in and old; neither is modified.
//
// Semantics (Fluss):
//   - last_row: new key → +I; existing → -U old, +U new (WAL image: +U only).
//   - first_row: new key → +I; existing key → no change (insert-only changelog).
//   - versioned: new key → +I; existing key → replaced (-U/+U) only when the
//     incoming version is non-NULL and >= the stored one (a NULL stored
//     version is replaced by any non-NULL one); otherwise no change.
//   - aggregation: new key → +I of in as is; existing key → each non-key
//     column aggregated with its fields.<col>.agg function, -U/+U.
//
// first_row and versioned reject partial updates (ErrUnsupported), as Fluss.
func (m *Merger) Upsert(dst []Change, old, in Row, targetCols []int) (Row, []Change, error) {
	if err := m.checkRow(in); err != nil {
		return old, dst, err
	}
	if old != nil {
		if err := m.checkRow(old); err != nil {
			return old, dst, err
		}
	}
	var target []bool
	if targetCols != nil {
		if m.engine == EngineFirstRow || m.engine == EngineVersioned {
			return old, dst, fmt.Errorf("%w: partial update on a %s table", ErrUnsupported, m.engine)
		}
		var err error
		if target, err = m.targets(targetCols); err != nil {
			return old, dst, err
		}
	}
	if old == nil {
		nw := in
		if target != nil {
			nw = make(Row, len(in))
			for i := range in {
				if target[i] {
					nw[i] = in[i]
				} else {
					nw[i] = Value{Null: true}
				}
			}
		}
		if err := m.checkNotNull(nw); err != nil {
			return nil, dst, err
		}
		return nw, append(dst, Change{Insert, nw}), nil
	}
	if err := m.checkNotNull(in); err != nil && target == nil {
		return old, dst, err
	}
	var nw Row
	switch m.engine {
	case EngineFirstRow:
		return old, dst, nil
	case EngineVersioned:
		nv, ov := in[m.verCol], old[m.verCol]
		if nv.Null || (!ov.Null && nv.I < ov.I) {
			return old, dst, nil
		}
		nw = in
	case EngineLastRow:
		if target == nil {
			nw = in
			break
		}
		nw = make(Row, len(in))
		for i := range in {
			if target[i] {
				nw[i] = in[i]
			} else {
				nw[i] = old[i]
			}
		}
	case EngineAggregation:
		nw = make(Row, len(in))
		for i := range in {
			switch {
			case m.isKey[i]:
				nw[i] = in[i]
			case target != nil && !target[i]:
				nw[i] = old[i]
			default:
				v, err := m.aggregate(i, old[i], in[i])
				if err != nil {
					return old, dst, fmt.Errorf("column %q: %w", m.schema.Columns[i].Name, err)
				}
				nw[i] = v
			}
		}
	}
	if err := m.checkNotNull(nw); err != nil {
		return old, dst, err
	}
	if !m.walOnly {
		dst = append(dst, Change{UpdateBefore, old})
	}
	return nw, append(dst, Change{UpdateAfter, nw}), nil
}

// Delete applies a delete of the row old (nil when the key is absent) and
// appends the changelog to dst. It returns the new stored row (nil when
// deleted, old when unchanged). Behaviour by table.delete.behavior: allow
// emits -D with the stored row (nothing for an absent key); ignore is a
// no-op; disable returns ErrDeleteDisabled.
//
// targetCols non-nil makes it a partial delete (Fluss PartialUpdater
// semantics): it must include every primary-key column; the target non-key
// columns are set to NULL, and when every non-key column is then NULL the
// row is deleted (-D), otherwise updated (-U/+U, or +U with the WAL image).
func (m *Merger) Delete(dst []Change, old Row, targetCols []int) (Row, []Change, error) {
	switch m.del {
	case deleteDisable:
		return old, dst, ErrDeleteDisabled
	case deleteIgnore:
		return old, dst, nil
	}
	if old == nil {
		return nil, dst, nil
	}
	if err := m.checkRow(old); err != nil {
		return old, dst, err
	}
	if targetCols == nil {
		return nil, append(dst, Change{Delete, old}), nil
	}
	target, err := m.targets(targetCols)
	if err != nil {
		return old, dst, err
	}
	nw := make(Row, len(old))
	allNull := true
	for i := range old {
		nw[i] = old[i]
		if m.isKey[i] {
			continue
		}
		if target[i] {
			nw[i] = Value{Null: true}
		}
		if !nw[i].Null {
			allNull = false
		}
	}
	if allNull {
		return nil, append(dst, Change{Delete, old}), nil
	}
	if err := m.checkNotNull(nw); err != nil {
		return old, dst, err
	}
	if !m.walOnly {
		dst = append(dst, Change{UpdateBefore, old})
	}
	return nw, append(dst, Change{UpdateAfter, nw}), nil
}

// targets validates partial-update target columns: in range and including
// every primary-key column.
func (m *Merger) targets(targetCols []int) ([]bool, error) {
	target := make([]bool, len(m.kinds))
	for _, c := range targetCols {
		if c < 0 || c >= len(m.kinds) {
			return nil, fmt.Errorf("%w: target column %d out of range", ErrBadRow, c)
		}
		target[c] = true
	}
	for i := range m.kinds {
		if m.isKey[i] && !target[i] {
			return nil, fmt.Errorf("%w: partial update target columns must include primary-key column %q", ErrBadRow, m.schema.Columns[i].Name)
		}
	}
	return target, nil
}

// aggregate combines the stored value acc with the incoming value in for
// column i. Null rules (Fluss/Paimon aggregate functions): sum, product,
// max, min, listagg, bool_and, bool_or ignore a NULL input and take the input
// when the stored value is NULL; last_value takes the input even when NULL;
// last_value_ignore_nulls keeps the stored value for a NULL input;
// first_value keeps the stored value (the row's first, even NULL);
// first_value_ignore_nulls keeps the first non-NULL value.
func (m *Merger) aggregate(i int, acc, in Value) (Value, error) {
	f, k := m.agg[i], m.kinds[i]
	switch f {
	case aggLastValue:
		return in, nil
	case aggLastValueIgnoreNulls:
		if in.Null {
			return acc, nil
		}
		return in, nil
	case aggFirstValue:
		return acc, nil
	case aggFirstValueIgnoreNulls:
		if acc.Null {
			return in, nil
		}
		return acc, nil
	}
	if in.Null {
		return acc, nil
	}
	if acc.Null {
		return in, nil
	}
	switch f {
	case aggSum, aggProduct:
		return m.arith(i, f, acc, in)
	case aggMax, aggMin:
		c := compareValue(k, acc, in)
		if (f == aggMax && c >= 0) || (f == aggMin && c <= 0) {
			return acc, nil
		}
		return in, nil
	case aggListagg:
		b := make([]byte, 0, len(acc.B)+len(m.delim[i])+len(in.B))
		b = append(append(append(b, acc.B...), m.delim[i]...), in.B...)
		return Value{B: b}, nil
	case aggBoolAnd:
		return Value{I: acc.I & in.I & 1}, nil
	case aggBoolOr:
		return Value{I: (acc.I | in.I) & 1}, nil
	}
	return acc, fmt.Errorf("%w: aggregation function %d", ErrUnsupported, f)
}

// arith is sum/product. Integer kinds wrap at their width as Java's
// arithmetic does (Fluss's FieldSumAgg/FieldProductAgg); FLOAT is rounded to
// float32; DECIMAL is exact and returns ErrOverflow past its precision
// (product rounds half-up back to the column scale).
func (m *Merger) arith(i int, f aggFunc, a, b Value) (Value, error) {
	k := m.kinds[i]
	switch k {
	case record.KindFloat, record.KindDouble:
		r := a.F + b.F
		if f == aggProduct {
			r = a.F * b.F
		}
		if k == record.KindFloat {
			r = float64(float32(r))
		}
		return Value{F: r}, nil
	case record.KindDecimal:
		x, y := decToBig(a), decToBig(b)
		t := m.schema.Columns[i].Type
		if f == aggSum {
			x.Add(x, y)
		} else {
			x.Mul(x, y)
			scale := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(t.Scale)), nil)
			neg := x.Sign() < 0
			x.Abs(x)
			q, r := new(big.Int).QuoRem(x, scale, new(big.Int))
			if r.Lsh(r, 1).Cmp(scale) >= 0 {
				q.Add(q, big.NewInt(1))
			}
			if neg {
				q.Neg(q)
			}
			x = q
		}
		limit := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(t.Precision)), nil)
		if new(big.Int).Abs(x).Cmp(limit) >= 0 {
			return a, fmt.Errorf("%w: result exceeds DECIMAL(%d,%d)", ErrOverflow, t.Precision, t.Scale)
		}
		return bigToDec(x), nil
	}
	r := a.I + b.I
	if f == aggProduct {
		r = a.I * b.I
	}
	switch k {
	case record.KindTinyInt:
		r = int64(int8(r))
	case record.KindSmallInt:
		r = int64(int16(r))
	case record.KindInt:
		r = int64(int32(r))
	}
	return Value{I: r}, nil
}

func decToBig(v Value) *big.Int {
	x := new(big.Int).SetInt64(v.Hi)
	x.Lsh(x, 64)
	return x.Or(x, new(big.Int).SetUint64(uint64(v.I)))
}

func bigToDec(x *big.Int) Value {
	// x fits in 128-bit two's complement (|x| < 10^38).
	mod := new(big.Int).Lsh(big.NewInt(1), 128)
	if x.Sign() < 0 {
		x = new(big.Int).Add(x, mod)
	}
	lo := new(big.Int).And(x, new(big.Int).SetUint64(math.MaxUint64)).Uint64()
	hi := new(big.Int).Rsh(x, 64).Uint64()
	return Value{Hi: int64(hi), I: int64(lo)}
}

// compareValue orders two non-NULL values of kind k.
func compareValue(k record.Kind, a, b Value) int {
	switch k {
	case record.KindFloat, record.KindDouble:
		switch {
		case a.F < b.F:
			return -1
		case a.F > b.F:
			return 1
		}
		return 0
	case record.KindString, record.KindBytes:
		return bytes.Compare(a.B, b.B)
	case record.KindDecimal:
		return decToBig(a).Cmp(decToBig(b))
	}
	switch {
	case a.I < b.I:
		return -1
	case a.I > b.I:
		return 1
	}
	return 0
}
