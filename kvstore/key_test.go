package kvstore

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"github.com/fluss-node/fluss-node/logstore/record"
)

// TestKeyOrder checks, for every key type, that the encoded byte order equals
// the value order and that DecodeKey inverts AppendKey.
func TestKeyOrder(t *testing.T) {
	cases := []struct {
		typ    string
		sorted []Value
	}{
		{"BOOLEAN", []Value{Bool(false), Bool(true)}},
		{"TINYINT", []Value{Int(-128), Int(-1), Int(0), Int(1), Int(127)}},
		{"SMALLINT", []Value{Int(math.MinInt16), Int(-256), Int(-1), Int(0), Int(255), Int(math.MaxInt16)}},
		{"INT", []Value{Int(math.MinInt32), Int(-65536), Int(-1), Int(0), Int(1), Int(65536), Int(math.MaxInt32)}},
		{"DATE", []Value{Int(-719162), Int(-1), Int(0), Int(19000)}},
		{"BIGINT", []Value{Int(math.MinInt64), Int(-1 << 40), Int(-1), Int(0), Int(1), Int(1 << 40), Int(math.MaxInt64)}},
		{"TIME(3)", []Value{Int(0), Int(1), Int(86399999)}},
		{"TIMESTAMP(6)", []Value{Int(-1e15), Int(-1), Int(0), Int(1.7e15)}},
		{"TIMESTAMP_LTZ(9)", []Value{Int(math.MinInt64), Int(0), Int(math.MaxInt64)}},
		{"FLOAT", []Value{Float(math.Inf(-1)), Float(-1e30), Float(-1.5), Float(-1e-30), Float(0), Float(1e-30), Float(1.5), Float(1e30), Float(math.Inf(1))}},
		{"DOUBLE", []Value{Float(math.Inf(-1)), Float(-math.MaxFloat64), Float(-1), Float(-math.SmallestNonzeroFloat64), Float(0), Float(math.SmallestNonzeroFloat64), Float(2.5), Float(math.MaxFloat64), Float(math.Inf(1))}},
		{"DECIMAL(38,2)", []Value{Dec(math.MinInt64, 0), Dec(-1, 0), Dec(-1, math.MaxUint64), Dec(0, 0), Dec(0, 1), Dec(0, math.MaxUint64), Dec(1, 0), Dec(math.MaxInt64, math.MaxUint64)}},
		{"STRING", []Value{Str(""), Str("\x00"), Str("\x00\x00"), Str("\x00\x01"), Str("\x01"), Str("a"), Str("a\x00"), Str("a\x00b"), Str("a\x01"), Str("ab"), Str("b"), Str("\xff"), Str("\xff\xff")}},
		{"BYTES", []Value{Bin(nil), Bin([]byte{0}), Bin([]byte{0, 0xff}), Bin([]byte{1}), Bin([]byte{0xff, 0})}},
	}
	for _, c := range cases {
		t.Run(c.typ, func(t *testing.T) {
			// two-column key so self-delimitation is exercised: (v, trailer INT)
			s := mkSchema(t, []string{"v", "z"}, "v "+c.typ+" NOT NULL", "z INT NOT NULL")
			codec, err := NewCodec(s, nil)
			if err != nil {
				t.Fatal(err)
			}
			k := s.Columns[0].Type.Kind
			var prev []byte
			for i, v := range c.sorted {
				for _, z := range []int64{math.MinInt32, 0, math.MaxInt32} {
					enc, err := codec.AppendKey(nil, Row{v, Int(z)})
					if err != nil {
						t.Fatal(err)
					}
					if prev != nil && bytes.Compare(prev, enc) >= 0 {
						t.Fatalf("value %d (%s, z=%d): encoding %x not above previous %x", i, fmtValue(k, v), z, enc, prev)
					}
					prev = enc
					dec, err := codec.DecodeKey(enc)
					if err != nil {
						t.Fatal(err)
					}
					if !equalValue(k, dec[0], v) || dec[1].I != z {
						t.Fatalf("round trip %s,%d → %s,%d", fmtValue(k, v), z, fmtValue(k, dec[0]), dec[1].I)
					}
				}
			}
		})
	}
}

func TestKeyErrors(t *testing.T) {
	s := mkSchema(t, []string{"a"}, "a STRING NOT NULL", "b INT")
	c, err := NewCodec(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.AppendKey(nil, Row{Null(), Int(1)}); !errors.Is(err, ErrNullKey) {
		t.Errorf("null key: %v", err)
	}
	for _, bad := range [][]byte{{}, {'a'}, {'a', 0}, {'a', 0, 2}, {'a', 0, 1, 'x'}} {
		if _, err := c.DecodeKey(bad); !errors.Is(err, ErrCorrupt) {
			t.Errorf("DecodeKey(%x) = %v, want ErrCorrupt", bad, err)
		}
	}
	if _, err := NewCodec(s, []string{"b"}); !errors.Is(err, ErrBadRow) {
		t.Errorf("bucket key outside primary key: %v", err)
	}
}

// TestBucketKeyLayout: with bucket key (region) and primary key (id, region)
// the key starts with region, so one prefix holds exactly one region's rows,
// even when another region's value extends this one ("eu" vs "eu\x00x", "eux").
func TestBucketKeyLayout(t *testing.T) {
	s := mkSchema(t, []string{"id", "region"}, "id BIGINT NOT NULL", "region STRING NOT NULL", "v INT")
	c, err := NewCodec(s, []string{"region"})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.KeyColumns(); len(got) != 2 || got[0] != 1 || got[1] != 0 {
		t.Fatalf("KeyColumns = %v, want [1 0]", got)
	}
	st := openTestStore(t)
	rep := st.Replica(7, c)
	regions := []string{"e", "eu", "eu\x00x", "eux", "f"}
	var changes []Change
	for i, reg := range regions {
		for id := int64(-2); id <= 2; id++ {
			changes = append(changes, Change{Insert, Row{Int(id), Str(reg), Int(int64(i))}})
		}
	}
	if err := rep.Apply(changes, 1); err != nil {
		t.Fatal(err)
	}
	for i, reg := range regions {
		p, err := c.AppendBucketKey(nil, []Value{Str(reg)})
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		err = rep.PrefixScan(p, func(key, value []byte) error {
			row, err := c.DecodeRow(nil, value)
			if err != nil {
				return err
			}
			if string(row[1].B) != reg || row[2].I != int64(i) {
				t.Errorf("prefix %q returned row %s", reg, fmtRow(s, row))
			}
			ids = append(ids, row[0].I)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) != 5 {
			t.Fatalf("prefix %q: %d rows, want 5", reg, len(ids))
		}
		for j := range ids {
			if ids[j] != int64(j-2) {
				t.Fatalf("prefix %q: ids %v not in key order", reg, ids)
			}
		}
	}
}

func TestRowRoundTrip(t *testing.T) {
	s := mkSchema(t, []string{"k"}, "k INT NOT NULL", "b BOOLEAN", "t TINYINT", "sm SMALLINT", "bi BIGINT",
		"f FLOAT", "d DOUBLE", "dec DECIMAL(38,4)", "s STRING", "by BYTES", "dt DATE", "tm TIME(9)", "ts TIMESTAMP(3)", "ltz TIMESTAMP_LTZ(6)")
	c, err := NewCodec(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	rows := []Row{
		{Int(1), Bool(true), Int(-128), Int(32767), Int(math.MinInt64), Float(1.5), Float(-math.MaxFloat64), Dec(-5, 77), Str("héllo\x00"), Bin([]byte{0, 1, 2}), Int(-1), Int(86399999999999), Int(1700000000000), Int(-1)},
		{Int(2), Null(), Null(), Null(), Null(), Null(), Null(), Null(), Null(), Null(), Null(), Null(), Null(), Null()},
		{Int(3), Bool(false), Int(0), Int(0), Int(0), Float(0), Float(math.Inf(-1)), Dec(0, 0), Str(""), Bin(nil), Int(0), Int(0), Int(0), Int(0)},
	}
	for i, r := range rows {
		enc, err := c.AppendRow([]byte("prefix"), r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.DecodeRow(nil, enc[len("prefix"):])
		if err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
		if fmtRow(s, got) != fmtRow(s, r) {
			t.Errorf("row %d: got %s want %s", i, fmtRow(s, got), fmtRow(s, r))
		}
		// Every truncation is an error, never a panic or a silent short row.
		body := enc[len("prefix"):]
		for n := 0; n < len(body); n++ {
			if _, err := c.DecodeRow(nil, body[:n]); err == nil {
				t.Fatalf("row %d truncated to %d bytes decoded without error", i, n)
			}
		}
	}
	// Schema evolution: a row written with the first 2 columns decodes with NULLs after.
	old := &record.Schema{ID: 1, Columns: s.Columns[:2], PrimaryKey: []string{"k"}}
	oc, err := NewCodec(old, nil)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := oc.AppendRow(nil, Row{Int(9), Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.DecodeRow(nil, enc)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(s.Columns) || got[1].I != 1 || !got[2].Null || !got[13].Null {
		t.Fatalf("evolved row = %s", fmtRow(s, got))
	}
	// The newer codec writes an older version's row as it is.
	enc2, err := c.AppendRow(nil, Row{Int(9), Bool(true)})
	if err != nil || !bytes.Equal(enc, enc2) {
		t.Fatalf("older row through the newer codec: %x, %v; want %x", enc2, err, enc)
	}
	// No narrower than the key columns, no wider than the schema.
	if _, err := c.AppendRow(nil, Row{}); !errors.Is(err, ErrBadRow) {
		t.Fatalf("empty row: %v", err)
	}
	if _, err := oc.AppendRow(nil, rows[0]); !errors.Is(err, ErrBadRow) {
		t.Fatalf("row wider than the codec: %v", err)
	}
	// A row wider than the schema was written by a later version: the
	// older codec says so instead of dropping its last columns.
	enc, _ = c.AppendRow(nil, rows[0])
	if _, err := oc.DecodeRow(nil, enc); !errors.Is(err, ErrNewerRow) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("wider row: %v", err)
	}
}

func fuzzCodec(t testing.TB) *Codec {
	s := mkSchema(t, []string{"k", "s"}, "k BIGINT NOT NULL", "s STRING NOT NULL", "b BOOLEAN", "f FLOAT", "d DOUBLE", "dec DECIMAL(20,2)", "by BYTES", "i INT")
	c, err := NewCodec(s, []string{"s"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func FuzzDecodeRow(f *testing.F) {
	c := fuzzCodec(f)
	for _, r := range []Row{
		{Int(1), Str("a"), Bool(true), Float(1), Float(2), Dec(0, 5), Bin([]byte{0}), Int(-7)},
		{Int(-1), Str(""), Null(), Null(), Null(), Null(), Null(), Null()},
	} {
		enc, _ := c.AppendRow(nil, r)
		f.Add(enc)
	}
	f.Add([]byte{1, 200})
	f.Fuzz(func(t *testing.T, data []byte) {
		row, err := c.DecodeRow(nil, data)
		if err != nil {
			return
		}
		// A decoded row re-encodes to a row that decodes to the same values.
		enc, err := c.AppendRow(nil, row)
		if err != nil {
			t.Fatal(err)
		}
		row2, err := c.DecodeRow(nil, enc)
		if err != nil {
			t.Fatal(err)
		}
		for i := range row {
			if !equalValue(c.kinds[i], row[i], row2[i]) {
				t.Fatalf("column %d differs after re-encode", i)
			}
		}
	})
}

func FuzzDecodeKey(f *testing.F) {
	c := fuzzCodec(f)
	for _, r := range []Row{{Int(1), Str("a\x00b")}, {Int(math.MinInt64), Str("")}} {
		full := append(r, Null(), Null(), Null(), Null(), Null(), Null())
		enc, _ := c.AppendKey(nil, full)
		f.Add(enc)
	}
	f.Add([]byte{0, 0xff, 0, 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		vals, err := c.DecodeKey(data)
		if err != nil {
			return
		}
		// Canonical: a decoded key re-encodes to the same bytes.
		row := make(Row, len(c.kinds))
		for j, ci := range c.keyCols {
			row[ci] = vals[j]
		}
		enc, err := c.AppendKey(nil, row)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(enc, data) {
			t.Fatalf("re-encoded %x != input %x", enc, data)
		}
	})
}
