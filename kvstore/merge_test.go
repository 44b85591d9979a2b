package kvstore

import (
	"errors"
	"math"
	"testing"
)

func TestMergeEngines(t *testing.T) {
	s := mkSchema(t, []string{"id"}, "id INT NOT NULL", "name STRING", "ver BIGINT")
	r := func(id int64, name any, ver any) Row {
		row := Row{Int(id), Null(), Null()}
		if name != nil {
			row[1] = Str(name.(string))
		}
		if ver != nil {
			row[2] = Int(int64(ver.(int)))
		}
		return row
	}
	type tc struct {
		name    string
		props   map[string]string
		target  []int
		old, in Row
		want    Row
		changes string
		err     error
	}
	versioned := map[string]string{PropMergeEngine: "versioned", PropVerColumn: "ver"}
	cases := []tc{
		{name: "last_row insert", old: nil, in: r(1, "a", 1), want: r(1, "a", 1), changes: `+I(1,"a",1)`},
		{name: "last_row update", old: r(1, "a", 1), in: r(1, "b", nil), want: r(1, "b", nil), changes: `-U(1,"a",1) +U(1,"b",NULL)`},
		{name: "last_row identical row still emits -U/+U", old: r(1, "a", 1), in: r(1, "a", 1), want: r(1, "a", 1), changes: `-U(1,"a",1) +U(1,"a",1)`},
		{name: "last_row WAL image", props: map[string]string{PropChangelogImage: "WAL"}, old: r(1, "a", 1), in: r(1, "b", 2), want: r(1, "b", 2), changes: `+U(1,"b",2)`},
		{name: "last_row WAL insert is +I", props: map[string]string{PropChangelogImage: "wal"}, in: r(1, "b", 2), want: r(1, "b", 2), changes: `+I(1,"b",2)`},
		{name: "partial update keeps other columns", target: []int{0, 1}, old: r(1, "a", 7), in: r(1, "b", 99), want: r(1, "b", 7), changes: `-U(1,"a",7) +U(1,"b",7)`},
		{name: "partial update of new key nulls other columns", target: []int{0, 2}, in: r(1, "x", 5), want: r(1, nil, 5), changes: `+I(1,NULL,5)`},
		{name: "partial update without key column", target: []int{1}, old: r(1, "a", 1), in: r(1, "b", 1), want: r(1, "a", 1), err: ErrBadRow},
		{name: "null key rejected", in: Row{Null(), Str("a"), Int(1)}, err: ErrNullKey},
		{name: "wrong arity", in: Row{Int(1)}, err: ErrBadRow},
		{name: "first_row insert", props: map[string]string{PropMergeEngine: "first_row"}, in: r(1, "a", 1), want: r(1, "a", 1), changes: `+I(1,"a",1)`},
		{name: "first_row ignores update", props: map[string]string{PropMergeEngine: "first_row"}, old: r(1, "a", 1), in: r(1, "b", 2), want: r(1, "a", 1), changes: ``},
		{name: "first_row rejects partial update", props: map[string]string{PropMergeEngine: "first_row"}, target: []int{0, 1}, old: r(1, "a", 1), in: r(1, "b", 2), want: r(1, "a", 1), err: ErrUnsupported},
		{name: "versioned insert", props: versioned, in: r(1, "a", 5), want: r(1, "a", 5), changes: `+I(1,"a",5)`},
		{name: "versioned new key with null version is inserted", props: versioned, in: r(1, "a", nil), want: r(1, "a", nil), changes: `+I(1,"a",NULL)`},
		{name: "versioned higher wins", props: versioned, old: r(1, "a", 5), in: r(1, "b", 6), want: r(1, "b", 6), changes: `-U(1,"a",5) +U(1,"b",6)`},
		{name: "versioned equal wins (>=)", props: versioned, old: r(1, "a", 5), in: r(1, "b", 5), want: r(1, "b", 5), changes: `-U(1,"a",5) +U(1,"b",5)`},
		{name: "versioned lower ignored", props: versioned, old: r(1, "a", 5), in: r(1, "b", 4), want: r(1, "a", 5), changes: ``},
		{name: "versioned null ignored", props: versioned, old: r(1, "a", 5), in: r(1, "b", nil), want: r(1, "a", 5), changes: ``},
		{name: "versioned replaces null stored version", props: versioned, old: r(1, "a", nil), in: r(1, "b", -3), want: r(1, "b", -3), changes: `-U(1,"a",NULL) +U(1,"b",-3)`},
		{name: "versioned WAL", props: map[string]string{PropMergeEngine: "versioned", PropVerColumn: "ver", PropChangelogImage: "WAL"}, old: r(1, "a", 5), in: r(1, "b", 9), want: r(1, "b", 9), changes: `+U(1,"b",9)`},
		{name: "versioned rejects partial update", props: versioned, target: []int{0, 2}, old: r(1, "a", 5), in: r(1, "b", 9), want: r(1, "a", 5), err: ErrUnsupported},
		{name: "aggregation default last_value_ignore_nulls", props: map[string]string{PropMergeEngine: "aggregation"}, old: r(1, "a", 5), in: r(1, nil, 9), want: r(1, "a", 9), changes: `-U(1,"a",5) +U(1,"a",9)`},
		{name: "aggregation partial keeps non-target", props: map[string]string{PropMergeEngine: "aggregation", "fields.ver.agg": "sum"}, target: []int{0, 2}, old: r(1, "a", 5), in: r(1, "zzz", 9), want: r(1, "a", 14), changes: `-U(1,"a",5) +U(1,"a",14)`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := NewMerger(s, c.props)
			if err != nil {
				t.Fatal(err)
			}
			got, changes, err := m.Upsert(nil, c.old, c.in, c.target)
			if c.err != nil {
				if !errors.Is(err, c.err) {
					t.Fatalf("err = %v, want %v", err, c.err)
				}
				if len(changes) != 0 {
					t.Fatalf("error path emitted %s", fmtChanges(s, changes))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmtRow(s, got) != fmtRow(s, c.want) {
				t.Errorf("row = %s, want %s", fmtRow(s, got), fmtRow(s, c.want))
			}
			if fmtChanges(s, changes) != c.changes {
				t.Errorf("changes = %q, want %q", fmtChanges(s, changes), c.changes)
			}
		})
	}
}

func TestAggregationFunctions(t *testing.T) {
	type tc struct {
		fn, typ       string
		props         map[string]string
		old, in, want Value
		err           error
	}
	n := Null()
	cases := []tc{
		{fn: "sum", typ: "BIGINT", old: Int(5), in: Int(7), want: Int(12)},
		{fn: "sum", typ: "BIGINT", old: n, in: Int(7), want: Int(7)},
		{fn: "sum", typ: "BIGINT", old: Int(5), in: n, want: Int(5)},
		{fn: "sum", typ: "BIGINT", old: n, in: n, want: n},
		{fn: "sum", typ: "TINYINT", old: Int(127), in: Int(1), want: Int(-128)}, // Java byte wrap
		{fn: "sum", typ: "INT", old: Int(math.MaxInt32), in: Int(1), want: Int(math.MinInt32)},
		{fn: "sum", typ: "DOUBLE", old: Float(1.5), in: Float(2.25), want: Float(3.75)},
		{fn: "sum", typ: "FLOAT", old: Float(0.5), in: Float(0.25), want: Float(0.75)},
		{fn: "sum", typ: "DECIMAL(5,2)", old: Dec(0, 12345), in: Dec(-1, math.MaxUint64-44), want: Dec(0, 12300)}, // 123.45 + -0.45
		{fn: "sum", typ: "DECIMAL(3,0)", old: Dec(0, 999), in: Dec(0, 1), want: Dec(0, 999), err: ErrOverflow},
		{fn: "product", typ: "BIGINT", old: Int(-3), in: Int(7), want: Int(-21)},
		{fn: "product", typ: "SMALLINT", old: Int(300), in: Int(300), want: Int(int64(int16(90000 & 0xffff)))},
		{fn: "product", typ: "DOUBLE", old: n, in: Float(2), want: Float(2)},
		{fn: "product", typ: "DECIMAL(10,2)", old: Dec(0, 150), in: Dec(0, 250), want: Dec(0, 375)},                              // 1.50*2.50=3.75
		{fn: "product", typ: "DECIMAL(10,2)", old: Dec(0, 105), in: Dec(0, 105), want: Dec(0, 110)},                              // 1.05*1.05=1.1025 → 1.10
		{fn: "product", typ: "DECIMAL(10,1)", old: Dec(0, 15), in: Dec(0, 15), want: Dec(0, 23)},                                 // 1.5*1.5=2.25 → 2.3 half-up
		{fn: "product", typ: "DECIMAL(10,1)", old: Dec(-1, math.MaxUint64-14), in: Dec(0, 15), want: Dec(-1, math.MaxUint64-22)}, // -2.25 → -2.3
		{fn: "max", typ: "INT", old: Int(3), in: Int(9), want: Int(9)},
		{fn: "max", typ: "INT", old: Int(3), in: Int(-9), want: Int(3)},
		{fn: "max", typ: "STRING", old: Str("b"), in: Str("a"), want: Str("b")},
		{fn: "max", typ: "DOUBLE", old: n, in: Float(-1), want: Float(-1)},
		{fn: "max", typ: "TIMESTAMP(3)", old: Int(100), in: n, want: Int(100)},
		{fn: "max", typ: "DECIMAL(20,0)", old: Dec(-1, 0), in: Dec(0, 1), want: Dec(0, 1)},
		{fn: "min", typ: "INT", old: Int(3), in: Int(-9), want: Int(-9)},
		{fn: "min", typ: "STRING", old: Str("b"), in: Str("a"), want: Str("a")},
		{fn: "min", typ: "DATE", old: n, in: Int(10), want: Int(10)},
		{fn: "last_value", typ: "STRING", old: Str("a"), in: Str("b"), want: Str("b")},
		{fn: "last_value", typ: "STRING", old: Str("a"), in: n, want: n},
		{fn: "last_value_ignore_nulls", typ: "STRING", old: Str("a"), in: n, want: Str("a")},
		{fn: "last_value_ignore_nulls", typ: "STRING", old: Str("a"), in: Str("c"), want: Str("c")},
		{fn: "last_non_null_value", typ: "INT", old: Int(1), in: n, want: Int(1)},
		{fn: "first_value", typ: "INT", old: Int(1), in: Int(2), want: Int(1)},
		{fn: "first_value", typ: "INT", old: n, in: Int(2), want: n}, // the first value was NULL and stays
		{fn: "first_value_ignore_nulls", typ: "INT", old: n, in: Int(2), want: Int(2)},
		{fn: "first_value_ignore_nulls", typ: "INT", old: Int(1), in: Int(2), want: Int(1)},
		{fn: "first_non_null_value", typ: "INT", old: n, in: n, want: n},
		{fn: "listagg", typ: "STRING", old: Str("a"), in: Str("b"), want: Str("a,b")},
		{fn: "listagg", typ: "STRING", old: n, in: Str("b"), want: Str("b")},
		{fn: "listagg", typ: "STRING", old: Str("a"), in: n, want: Str("a")},
		{fn: "listagg", typ: "STRING", props: map[string]string{"fields.v.listagg-delimiter": " | "}, old: Str("a"), in: Str("b"), want: Str("a | b")},
		{fn: "listagg", typ: "STRING", props: map[string]string{"fields.v.listagg.delimiter": ";"}, old: Str("a"), in: Str("b"), want: Str("a;b")},
		{fn: "string_agg", typ: "STRING", old: Str("a"), in: Str(""), want: Str("a,")},
		{fn: "bool_and", typ: "BOOLEAN", old: Bool(true), in: Bool(false), want: Bool(false)},
		{fn: "bool_and", typ: "BOOLEAN", old: Bool(true), in: Bool(true), want: Bool(true)},
		{fn: "bool_and", typ: "BOOLEAN", old: n, in: Bool(false), want: Bool(false)},
		{fn: "bool_or", typ: "BOOLEAN", old: Bool(false), in: Bool(true), want: Bool(true)},
		{fn: "bool_or", typ: "BOOLEAN", old: Bool(false), in: n, want: Bool(false)},
		{fn: "bool_or", typ: "BOOLEAN", old: Bool(false), in: Bool(false), want: Bool(false)},
	}
	for _, c := range cases {
		t.Run(c.fn+"/"+c.typ+"/"+fmtValue(0, c.old)+"_"+fmtValue(0, c.in), func(t *testing.T) {
			s := mkSchema(t, []string{"k"}, "k INT NOT NULL", "v "+c.typ)
			props := map[string]string{PropMergeEngine: "aggregation", "fields.v.agg": c.fn}
			for k, v := range c.props {
				props[k] = v
			}
			m, err := NewMerger(s, props)
			if err != nil {
				t.Fatal(err)
			}
			old := Row{Int(1), c.old}
			got, changes, err := m.Upsert(nil, old, Row{Int(1), c.in}, nil)
			if c.err != nil {
				if !errors.Is(err, c.err) || len(changes) != 0 {
					t.Fatalf("err = %v changes=%d, want %v and none", err, len(changes), c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := Row{Int(1), c.want}
			if fmtRow(s, got) != fmtRow(s, want) {
				t.Errorf("row = %s, want %s", fmtRow(s, got), fmtRow(s, want))
			}
			wantCh := "-U" + fmtRow(s, old) + " +U" + fmtRow(s, want)
			if fmtChanges(s, changes) != wantCh {
				t.Errorf("changes = %s, want %s", fmtChanges(s, changes), wantCh)
			}
		})
	}
}

func TestDeleteBehavior(t *testing.T) {
	s := mkSchema(t, []string{"id"}, "id INT NOT NULL", "v STRING", "w INT")
	old := Row{Int(1), Str("a"), Int(5)}
	cases := []struct {
		name    string
		props   map[string]string
		target  []int
		old     Row
		want    Row
		changes string
		err     error
	}{
		{name: "allow default", old: old, want: nil, changes: `-D(1,"a",5)`},
		{name: "allow absent key emits nothing", old: nil, want: nil, changes: ``},
		{name: "allow WAL still emits -D", props: map[string]string{PropChangelogImage: "WAL"}, old: old, want: nil, changes: `-D(1,"a",5)`},
		{name: "partial delete nulls target columns", target: []int{0, 1}, old: old, want: Row{Int(1), Null(), Int(5)}, changes: `-U(1,"a",5) +U(1,NULL,5)`},
		{name: "partial delete WAL", props: map[string]string{PropChangelogImage: "WAL"}, target: []int{0, 2}, old: old, want: Row{Int(1), Str("a"), Null()}, changes: `+U(1,"a",NULL)`},
		{name: "partial delete of all non-key columns deletes", target: []int{0, 1, 2}, old: old, want: nil, changes: `-D(1,"a",5)`},
		{name: "partial delete deletes when others already NULL", target: []int{0, 1}, old: Row{Int(1), Str("a"), Null()}, want: nil, changes: `-D(1,"a",NULL)`},
		{name: "partial delete without key column", target: []int{1}, old: old, want: old, err: ErrBadRow},
		{name: "partial delete ignored", props: map[string]string{PropDeleteBehavior: "ignore"}, target: []int{0, 1}, old: old, want: old, changes: ``},
		{name: "ignore", props: map[string]string{PropDeleteBehavior: "ignore"}, old: old, want: old, changes: ``},
		{name: "disable", props: map[string]string{PropDeleteBehavior: "DISABLE"}, old: old, want: old, err: ErrDeleteDisabled},
		{name: "first_row defaults to ignore", props: map[string]string{PropMergeEngine: "first_row"}, old: old, want: old, changes: ``},
		{name: "versioned defaults to ignore", props: map[string]string{PropMergeEngine: "versioned", PropVerColumn: "id"}, old: old, want: old, changes: ``},
		{name: "aggregation defaults to ignore", props: map[string]string{PropMergeEngine: "aggregation"}, old: old, want: old, changes: ``},
		{name: "aggregation allow removes the whole row", props: map[string]string{PropMergeEngine: "aggregation", PropDeleteBehavior: "allow"}, old: old, want: nil, changes: `-D(1,"a",5)`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := NewMerger(s, c.props)
			if err != nil {
				t.Fatal(err)
			}
			got, changes, err := m.Delete(nil, c.old, c.target)
			if !errors.Is(err, c.err) {
				t.Fatalf("err = %v, want %v", err, c.err)
			}
			if fmtRow(s, got) != fmtRow(s, c.want) {
				t.Errorf("row = %s, want %s", fmtRow(s, got), fmtRow(s, c.want))
			}
			if fmtChanges(s, changes) != c.changes {
				t.Errorf("changes = %q, want %q", fmtChanges(s, changes), c.changes)
			}
		})
	}
}

func TestNewMergerRejects(t *testing.T) {
	s := mkSchema(t, []string{"id"}, "id INT NOT NULL", "v STRING", "b BOOLEAN", "d DOUBLE")
	cases := map[string]map[string]string{
		"unknown engine":           {PropMergeEngine: "newest"},
		"versioned without column": {PropMergeEngine: "versioned"},
		"versioned bad column":     {PropMergeEngine: "versioned", PropVerColumn: "nope"},
		"versioned string column":  {PropMergeEngine: "versioned", PropVerColumn: "v"},
		"first_row allow delete":   {PropMergeEngine: "first_row", PropDeleteBehavior: "allow"},
		"bad delete behavior":      {PropDeleteBehavior: "sometimes"},
		"bad changelog image":      {PropChangelogImage: "PARTIAL"},
		"agg without engine":       {"fields.v.agg": "listagg"},
		"unknown agg":              {PropMergeEngine: "aggregation", "fields.v.agg": "median"},
		"sum on string":            {PropMergeEngine: "aggregation", "fields.v.agg": "sum"},
		"listagg on double":        {PropMergeEngine: "aggregation", "fields.d.agg": "listagg"},
		"bool_and on string":       {PropMergeEngine: "aggregation", "fields.v.agg": "bool_and"},
		"max on boolean":           {PropMergeEngine: "aggregation", "fields.b.agg": "max"},
		"agg on key":               {PropMergeEngine: "aggregation", "fields.id.agg": "sum"},
	}
	for name, props := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := NewMerger(s, props); !errors.Is(err, ErrBadProperty) {
				t.Fatalf("err = %v, want ErrBadProperty", err)
			}
		})
	}
}
