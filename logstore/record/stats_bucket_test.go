package record

import (
	"bytes"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
)

func TestComputeStats(t *testing.T) {
	s := &Schema{ID: 1, Columns: []Column{
		{Name: "i", Type: mustType(t, "BIGINT"), Nullable: true},
		{Name: "f", Type: mustType(t, "DOUBLE"), Nullable: true},
		{Name: "dec", Type: mustType(t, "DECIMAL(10,2)"), Nullable: true},
		{Name: "s", Type: mustType(t, "STRING"), Nullable: true},
		{Name: "b", Type: mustType(t, "BOOLEAN"), Nullable: true},
		{Name: "ts", Type: mustType(t, "TIMESTAMP(3)"), Nullable: true},
		{Name: "nul", Type: mustType(t, "INT"), Nullable: true},
		{Name: "long", Type: mustType(t, "STRING"), Nullable: true},
	}}
	long := string(bytes.Repeat([]byte("x"), MaxStatBytes+1))
	rows := `[{"i":5,"f":"NaN","dec":"-1.50","s":"pear","b":true,"ts":1000,"long":"` + long + `"},
	          {"i":-3,"f":2.5,"dec":"7.25","s":"apple","b":true,"ts":-1000},
	          {"f":-1,"s":"zoo"}]`
	rec, err := DecodeJSONRows(s, []byte(rows), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	st := ComputeStats(rec)
	check := func(name string, ok bool) {
		t.Helper()
		if !ok {
			t.Errorf("%s: %+v", name, st)
		}
	}
	check("i", st[0].HasMinMax && st[0].MinInt == -3 && st[0].MaxInt == 5 && st[0].NullCount == 1)
	check("f", st[1].HasMinMax && st[1].MinFloat == -1 && st[1].MaxFloat == 2.5 && st[1].NullCount == 0)
	check("dec", st[2].HasMinMax && st[2].MinDecimal == decimal128.FromI64(-150) && st[2].MaxDecimal == decimal128.FromI64(725))
	check("s", st[3].HasMinMax && string(st[3].MinBytes) == "apple" && string(st[3].MaxBytes) == "zoo")
	check("b", st[4].HasMinMax && st[4].MinInt == 1 && st[4].MaxInt == 1 && st[4].NullCount == 1)
	check("ts", st[5].HasMinMax && st[5].MinInt == -1000 && st[5].MaxInt == 1000)
	check("nul", !st[6].HasMinMax && st[6].NullCount == 3)
	check("long", !st[7].HasMinMax && st[7].NullCount == 2)
	// Through the batch header and back.
	b := AppendBatch(nil, BatchHeader{RecordCount: 3}, st, nil)
	bt, _, err := ParseBatch(b)
	if err != nil {
		t.Fatal(err)
	}
	if bt.Stats[0].MinInt != -3 || bt.Stats[1].MaxFloat != 2.5 || bt.Stats[2].MinDecimal != decimal128.FromI64(-150) ||
		string(bt.Stats[3].MaxBytes) != "zoo" || bt.Stats[6].HasMinMax || bt.Stats[6].NullCount != 3 {
		t.Fatalf("parsed stats %+v", bt.Stats)
	}
}

// TestComputeStatsOfSlices: stats of a sliced record (arrays with an
// offset) equal those of the same rows decoded on their own, for every type
// and every slice of the canonical rows (nulls, NaN, infinities, -0, empty
// strings included).
func TestComputeStatsOfSlices(t *testing.T) {
	s := allTypesSchema(t)
	rec, err := DecodeJSONRows(s, []byte("["+strings.Join(canonicalRows, ",")+"]"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	for lo := 0; lo < len(canonicalRows); lo++ {
		for hi := lo + 1; hi <= len(canonicalRows); hi++ {
			own, err := DecodeJSONRows(s, []byte("["+strings.Join(canonicalRows[lo:hi], ",")+"]"), nil)
			if err != nil {
				t.Fatal(err)
			}
			want := ComputeStats(own)
			own.Release()
			slice := rec.NewSlice(int64(lo), int64(hi))
			got := ComputeStats(slice)
			slice.Release()
			for i := range want {
				if !reflect.DeepEqual(got[i], want[i]) {
					t.Errorf("rows [%d,%d) column %q: stats of the slice %+v, of the rows alone %+v", lo, hi, s.Columns[i].Name, got[i], want[i])
				}
			}
		}
	}
}

func TestBucketKeyEncodingIsPinned(t *testing.T) {
	s := &Schema{ID: 1, Columns: []Column{
		{Name: "id", Type: mustType(t, "BIGINT")},
		{Name: "s", Type: mustType(t, "STRING"), Nullable: true},
		{Name: "n", Type: mustType(t, "INT"), Nullable: true},
		{Name: "d", Type: mustType(t, "DOUBLE"), Nullable: true},
	}}
	rec, err := DecodeJSONRows(s, []byte(`[{"id":1,"s":"ab","d":-0},{"id":1,"s":"ab","d":0}]`), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	got := AppendBucketKey(nil, rec, 0, []int{0, 1, 2, 3})
	want := []byte{1, 1, 0, 0, 0, 0, 0, 0, 0, 1, 2, 0, 0, 0, 'a', 'b', 0, 1, 0, 0, 0, 0, 0, 0, 0, 0}
	if !bytes.Equal(got, want) {
		t.Fatalf("key %v\nwant %v", got, want)
	}
	if BucketOf(rec, 0, []int{0, 1, 2, 3}, 1000) != BucketOf(rec, 1, []int{0, 1, 2, 3}, 1000) {
		t.Fatal("-0 and +0 hash differently")
	}
	// xxhash64("") = 0xef46db3751d8e999: pins the hash function and seed.
	if got, want := BucketOfKey(nil, 1_000_003), int32(uint64(0xef46db3751d8e999)%1_000_003); got != want {
		t.Fatalf("BucketOfKey(empty) = %d, want %d", got, want)
	}
	if canonicalFloatBits(math.NaN()) != canonicalFloatBits(-math.NaN()) {
		t.Fatal("NaNs differ")
	}
}

func TestSplitByBucket(t *testing.T) {
	rec := SampleRecord(1000, 3)
	defer rec.Release()
	keys := []int{1} // user_id
	parts, err := SplitByBucket(rec, keys, 8, nil)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	seen := map[int64]bool{}
	for b, p := range parts {
		if p == nil {
			continue
		}
		total += int(p.NumRows())
		ids := p.Column(0).(*array.Int64)
		for r := 0; r < int(p.NumRows()); r++ {
			if got := BucketOf(p, r, keys, 8); got != int32(b) {
				t.Fatalf("row in bucket %d hashes to %d", b, got)
			}
			seen[ids.Value(r)] = true
		}
		p.Release()
	}
	if total != 1000 || len(seen) != 1000 {
		t.Fatalf("rows %d distinct %d", total, len(seen))
	}
	one, err := SplitByBucket(rec, keys, 1, nil)
	if err != nil || len(one) != 1 || one[0] != rec {
		t.Fatalf("single bucket: %v %v", one, err)
	}
	one[0].Release()
	if _, err := SplitByBucket(rec, keys, 0, nil); err == nil {
		t.Fatal("0 buckets accepted")
	}
}

func TestTakeRowsAllTypes(t *testing.T) {
	s := allTypesSchema(t)
	in := "[" + canonicalRows[0] + "," + canonicalRows[1] + "," + canonicalRows[2] + "]"
	rec, err := DecodeJSONRows(s, []byte(in), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	got, err := TakeRows(rec, []int{2, 0, 0}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	opts := &JSONOptions{Types: schemaTypes(s)}
	want := "[" + canonicalRows[2] + "," + canonicalRows[0] + "," + canonicalRows[0] + "]"
	if out := string(AppendJSONRows(nil, got, 0, 3, opts)); out != want {
		t.Fatalf("got %s\nwant %s", out, want)
	}
	var _ arrow.Record = got
}

func TestValidateRecord(t *testing.T) {
	s := SampleSchema()
	rec := SampleRecord(3, 1)
	defer rec.Release()
	if err := ValidateRecord(s, rec); err != nil {
		t.Fatal(err)
	}
	bad := *s
	bad.Columns = append([]Column{}, s.Columns...)
	bad.Columns[3].Name = "kind"
	if err := ValidateRecord(&bad, rec); err == nil || !bytes.Contains([]byte(err.Error()), []byte(`"kind"`)) {
		t.Fatalf("renamed column: %v", err)
	}
	bad.Columns[3].Name = "event_type"
	bad.Columns[6].Type = mustType(t, "BIGINT")
	if err := ValidateRecord(&bad, rec); err == nil || !bytes.Contains([]byte(err.Error()), []byte(`"quantity"`)) {
		t.Fatalf("retyped column: %v", err)
	}
	bad.Columns[6] = s.Columns[6]
	bad.Columns[5].Nullable = false
	withNull := SampleRecord(100, 1) // 1 in 4 amounts is null
	defer withNull.Release()
	if err := ValidateRecord(&bad, withNull); err == nil || !bytes.Contains([]byte(err.Error()), []byte(`"amount" is NOT NULL`)) {
		t.Fatalf("null in NOT NULL: %v", err)
	}
}
