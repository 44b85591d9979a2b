package record

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func mustType(t testing.TB, s string) Type {
	t.Helper()
	ty, _, err := ParseType(s)
	if err != nil {
		t.Fatal(err)
	}
	return ty
}

// allTypesSchema has one column of every type (and several precisions).
func allTypesSchema(t testing.TB) *Schema {
	cols := []struct{ name, typ string }{
		{"b", "BOOLEAN"}, {"ti", "TINYINT"}, {"si", "SMALLINT"}, {"i", "INT"}, {"bi", "BIGINT NOT NULL"},
		{"f", "FLOAT"}, {"d", "DOUBLE"}, {"dec", "DECIMAL(38,10)"}, {"dec2", "DECIMAL(5,2)"},
		{"s", "STRING"}, {"by", "BYTES"}, {"dt", "DATE"},
		{"t0", "TIME(0)"}, {"t3", "TIME(3)"}, {"t6", "TIME(6)"}, {"t9", "TIME(9)"},
		{"ts0", "TIMESTAMP(0)"}, {"ts3", "TIMESTAMP(3)"}, {"ts6", "TIMESTAMP(6)"}, {"ts9", "TIMESTAMP(9)"},
		{"ltz3", "TIMESTAMP_LTZ(3)"}, {"ltz9", "TIMESTAMP_LTZ(9)"},
	}
	s := &Schema{ID: 7}
	for _, c := range cols {
		ty, nn, err := ParseType(c.typ)
		if err != nil {
			t.Fatal(err)
		}
		s.Columns = append(s.Columns, Column{Name: c.name, Type: ty, Nullable: !nn})
	}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	return s
}

func schemaTypes(s *Schema) []Type {
	ts := make([]Type, len(s.Columns))
	for i, c := range s.Columns {
		ts[i] = c.Type
	}
	return ts
}

// canonicalRows are written exactly as AppendJSONRows emits them, so the
// whole pipeline must give them back byte for byte.
var canonicalRows = []string{
	`{"b":true,"ti":127,"si":32767,"i":2147483647,"bi":9223372036854775807,"f":3.4028235e+38,"d":1.7976931348623157e+308,` +
		`"dec":"9999999999999999999999999999.9999999999","dec2":"999.99","s":"héllo \"q\" \\ \n\t\u0001 ☃ 𝄞","by":"AAEC/w==",` +
		`"dt":"9999-12-31","t0":"23:59:59","t3":"23:59:59.999","t6":"23:59:59.999999","t9":"23:59:59.999999999",` +
		`"ts0":"9999-12-31T23:59:59","ts3":"9999-12-31T23:59:59.999","ts6":"9999-12-31T23:59:59.999999","ts9":"2262-04-11T23:47:16.854775807",` +
		`"ltz3":"9999-12-31T23:59:59.999Z","ltz9":"2262-04-11T23:47:16.854775807Z"}`,
	`{"b":false,"ti":-128,"si":-32768,"i":-2147483648,"bi":-9223372036854775808,"f":-1e-45,"d":5e-324,` +
		`"dec":"-9999999999999999999999999999.9999999999","dec2":"-999.99","s":"","by":"",` +
		`"dt":"0000-01-01","t0":"00:00:00","t3":"00:00:00.000","t6":"00:00:00.000000","t9":"00:00:00.000000000",` +
		`"ts0":"0000-01-01T00:00:00","ts3":"0000-01-01T00:00:00.000","ts6":"0000-01-01T00:00:00.000000","ts9":"1677-09-21T00:12:43.145224192",` +
		`"ltz3":"0000-01-01T00:00:00.000Z","ltz9":"1677-09-21T00:12:43.145224192Z"}`,
	`{"b":null,"ti":null,"si":null,"i":null,"bi":0,"f":null,"d":null,"dec":null,"dec2":null,"s":null,"by":null,"dt":null,` +
		`"t0":null,"t3":null,"t6":null,"t9":null,"ts0":null,"ts3":null,"ts6":null,"ts9":null,"ltz3":null,"ltz9":null}`,
	`{"b":true,"ti":0,"si":1,"i":-1,"bi":1,"f":"NaN","d":"-Infinity","dec":"0.0000000000","dec2":"0.05","s":"x","by":"AA==",` +
		`"dt":"1970-01-01","t0":"12:34:56","t3":"12:34:56.789","t6":"12:34:56.789012","t9":"12:34:56.789012345",` +
		`"ts0":"1969-12-31T23:59:59","ts3":"2024-05-01T12:00:00.123","ts6":"1900-02-28T01:02:03.000004","ts9":"1970-01-01T00:00:00.000000001",` +
		`"ltz3":"1969-12-31T23:59:59.999Z","ltz9":"2024-02-29T00:00:00.000000000Z"}`,
	`{"b":false,"ti":1,"si":2,"i":3,"bi":4,"f":"Infinity","d":-0,"dec":"-0.0000000001","dec2":"-0.01","s":"\u0000\u001f","by":"/+8=",` +
		`"dt":"2000-02-29","t0":"00:00:01","t3":"00:00:00.001","t6":"00:00:00.000001","t9":"00:00:00.000000001",` +
		`"ts0":"2024-05-01T12:00:00","ts3":"2024-05-01T12:00:00.000","ts6":"2024-05-01T12:00:00.000000","ts9":"2024-05-01T12:00:00.000000000",` +
		`"ltz3":null,"ltz9":null}`,
}

func TestJSONRoundTripEveryTypeAndCompression(t *testing.T) {
	s := allTypesSchema(t)
	in := "[" + strings.Join(canonicalRows, ",") + "]"
	rec, err := DecodeJSONRows(s, []byte(in), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	if err := ValidateRecord(s, rec); err != nil {
		t.Fatal(err)
	}
	if got := int(rec.NumRows()); got != len(canonicalRows) {
		t.Fatalf("rows = %d, want %d", got, len(canonicalRows))
	}
	opts := &JSONOptions{Types: schemaTypes(s)}
	if out := string(AppendJSONRows(nil, rec, 0, int(rec.NumRows()), opts)); out != in {
		t.Fatalf("JSON out differs:\n got %s\nwant %s", out, in)
	}
	for _, c := range []Compression{CompressionNone, CompressionLZ4Frame, CompressionZSTD} {
		t.Run(c.String(), func(t *testing.T) {
			body, err := EncodeBody(rec, c, 3)
			if err != nil {
				t.Fatal(err)
			}
			h := BatchHeader{Attributes: uint16(c), BaseOffset: 42, RecordCount: int32(rec.NumRows()), CommitTimestamp: 1700000000000, WriterID: 9, BatchSequence: 3, SchemaID: s.ID}
			stats := ComputeStats(rec)
			batch := AppendBatch(nil, h, stats, body)
			bt, n, err := ParseBatch(batch)
			if err != nil {
				t.Fatal(err)
			}
			if n != len(batch) || bt.BatchHeader != (BatchHeader{Attributes: uint16(c) | AttrStats, BaseOffset: 42, RecordCount: h.RecordCount, CommitTimestamp: h.CommitTimestamp, WriterID: 9, BatchSequence: 3, SchemaID: 7}) {
				t.Fatalf("header %+v n=%d", bt.BatchHeader, n)
			}
			if bt.Compression() != c {
				t.Fatalf("compression %v", bt.Compression())
			}
			got, err := DecodeBody(s.ArrowSchema(), bt.Body, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer got.Release()
			if !array.RecordApproxEqual(rec, got, array.WithNaNsEqual(true)) {
				t.Fatalf("decoded record differs")
			}
			if out := string(AppendJSONRows(nil, got, 0, int(got.NumRows()), opts)); out != in {
				t.Fatalf("JSON after body round trip differs:\n got %s\nwant %s", out, in)
			}
			// decode → encode → decode is the identity.
			again, err := DecodeJSONRows(s, AppendJSONRows(nil, got, 0, int(got.NumRows()), opts), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer again.Release()
			if !array.RecordApproxEqual(rec, again, array.WithNaNsEqual(true)) {
				t.Fatalf("JSON re-decode differs")
			}
		})
	}
}

// TestJSONAcceptedForms checks the non-canonical inputs each type accepts,
// by the canonical form they come out as.
func TestJSONAcceptedForms(t *testing.T) {
	tests := []struct {
		typ, in, want string
	}{
		{"BIGINT", `"9223372036854775807"`, `9223372036854775807`},
		{"BIGINT", `"-42"`, `-42`},
		{"BIGINT", `-0`, `0`},
		{"INT", `"+7"`, `7`},
		{"DECIMAL(10,2)", `12.5`, `"12.50"`},
		{"DECIMAL(10,2)", `"1.2e1"`, `"12.00"`},
		{"DECIMAL(10,2)", `1.500`, `"1.50"`},
		{"DECIMAL(10,2)", `-3`, `"-3.00"`},
		{"DECIMAL(10,2)", `"12345678.9"`, `"12345678.90"`},
		{"DECIMAL(38,0)", `99999999999999999999999999999999999999`, `"99999999999999999999999999999999999999"`},
		{"DOUBLE", `1`, `1`},
		{"DOUBLE", `"2.5"`, `2.5`},
		{"DOUBLE", `"-inf"`, `"-Infinity"`},
		{"FLOAT", `0.1`, `0.1`},
		{"TIMESTAMP(3)", `1714564800123`, `"2024-05-01T12:00:00.123"`},
		{"TIMESTAMP(3)", `-1`, `"1969-12-31T23:59:59.999"`},
		{"TIMESTAMP(3)", `"2024-05-01 12:00:00.123"`, `"2024-05-01T12:00:00.123"`},
		{"TIMESTAMP(3)", `"2024-05-01T14:00:00.123+02:00"`, `"2024-05-01T12:00:00.123"`},
		{"TIMESTAMP(3)", `"2024-05-01T12:00Z"`, `"2024-05-01T12:00:00.000"`},
		{"TIMESTAMP(6)", `"2024-05-01T12:00:00.1"`, `"2024-05-01T12:00:00.100000"`},
		{"TIMESTAMP(9)", `1714564800123`, `"2024-05-01T12:00:00.123000000"`},
		{"TIMESTAMP_LTZ(3)", `"2024-05-01T12:00:00.123"`, `"2024-05-01T12:00:00.123Z"`},
		{"TIMESTAMP_LTZ(3)", `"2024-05-01T07:00:00.123-0500"`, `"2024-05-01T12:00:00.123Z"`},
		{"TIMESTAMP(0)", `"2024-05-01T12:00:00.000"`, `"2024-05-01T12:00:00"`},
		{"TIME(3)", `"01:02:03.4"`, `"01:02:03.400"`},
		{"TIME(0)", `"01:02:03.000"`, `"01:02:03"`},
		{"STRING", `"\ud83d\ude00"`, `"😀"`},
	}
	for _, tc := range tests {
		t.Run(tc.typ+" "+tc.in, func(t *testing.T) {
			s := &Schema{ID: 1, Columns: []Column{{Name: "c", Type: mustType(t, tc.typ), Nullable: true}}}
			rec, err := DecodeJSONRows(s, []byte(`[{"c":`+tc.in+`}]`), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer rec.Release()
			got := string(AppendJSONRows(nil, rec, 0, 1, &JSONOptions{Types: schemaTypes(s)}))
			if want := `[{"c":` + tc.want + `}]`; got != want {
				t.Fatalf("got %s, want %s", got, want)
			}
		})
	}
}

func TestJSONBadRows(t *testing.T) {
	s := &Schema{ID: 1, Columns: []Column{
		{Name: "id", Type: Type{Kind: KindBigInt}},
		{Name: "n", Type: mustType(t, "TINYINT"), Nullable: true},
		{Name: "amt", Type: mustType(t, "DECIMAL(5,2)"), Nullable: true},
		{Name: "ts", Type: mustType(t, "TIMESTAMP(3)"), Nullable: true},
		{Name: "ts9", Type: mustType(t, "TIMESTAMP(9)"), Nullable: true},
		{Name: "dt", Type: mustType(t, "DATE"), Nullable: true},
		{Name: "tm", Type: mustType(t, "TIME(0)"), Nullable: true},
		{Name: "by", Type: mustType(t, "BYTES"), Nullable: true},
		{Name: "s", Type: mustType(t, "STRING"), Nullable: true},
		{Name: "f", Type: mustType(t, "FLOAT"), Nullable: true},
		{Name: "ok", Type: mustType(t, "BOOLEAN"), Nullable: true},
		{Name: "code", Type: mustType(t, "CHAR(3)"), Nullable: true},
		{Name: "tag", Type: mustType(t, "VARBINARY(2)"), Nullable: true},
	}}
	tests := []struct {
		name, rows string
		want       []string // substrings of the message
	}{
		{"string too long", `[{"id":1,"code":"abc"},{"id":2,"code":"abcd"}]`, []string{"row 1", `"code"`, "4 characters", "longer than VARCHAR(3)"}},
		{"characters, not bytes", `[{"id":1,"code":"äöüß"}]`, []string{`"code"`, "4 characters", "VARCHAR(3)"}},
		{"bytes too long", `[{"id":1,"tag":"AQID"}]`, []string{`"tag"`, "3 bytes", "longer than VARBINARY(2)"}},
		{"not json", `[{"id":1`, []string{"not valid JSON"}},
		{"not an array", `{"id":1}`, []string{"JSON array", "object"}},
		{"not an object", `[{"id":1}, 5]`, []string{"row 1", "not an object"}},
		{"unknown column", `[{"id":1,"nope":2}]`, []string{"row 0", `"nope"`, "unknown column"}},
		{"twice", `[{"id":1,"id":2}]`, []string{"row 0", `"id"`, "twice"}},
		{"missing not null", `[{"id":1},{"n":1}]`, []string{"row 1", `"id"`, "missing NOT NULL"}},
		{"null in not null", `[{"id":null}]`, []string{"row 0", `"id"`, "null in a NOT NULL"}},
		{"wrong type int", `[{"id":true}]`, []string{"row 0", `"id"`, "want an integer"}},
		{"float for int", `[{"id":1.5}]`, []string{`"id"`, "not an integer"}},
		{"exponent for int", `[{"id":1e3}]`, []string{`"id"`, "not an integer"}},
		{"bigint overflow", `[{"id":9223372036854775808}]`, []string{`"id"`, "out of range"}},
		{"bigint underflow", `[{"id":"-9223372036854775809"}]`, []string{`"id"`, "out of range"}},
		{"tinyint range", `[{"id":1,"n":128}]`, []string{`"n"`, "out of range for TINYINT"}},
		{"decimal scale", `[{"id":1,"amt":1.234}]`, []string{`"amt"`, "more than 2 fraction digits"}},
		{"decimal precision", `[{"id":1,"amt":"1234.5"}]`, []string{`"amt"`, "does not fit DECIMAL(5,2)"}},
		{"decimal syntax", `[{"id":1,"amt":"1.2.3"}]`, []string{`"amt"`, "not a decimal"}},
		{"decimal type", `[{"id":1,"amt":[1]}]`, []string{`"amt"`, "want a decimal"}},
		{"bad number syntax", `[{"id":01}]`, []string{`"id"`, "not a JSON number"}},
		{"nan bare", `[{"id":1,"f":nan}]`, []string{`"f"`, "not a JSON number"}},
		{"float range", `[{"id":1,"f":1e39}]`, []string{`"f"`, "out of range for FLOAT"}},
		{"float string", `[{"id":1,"f":"abc"}]`, []string{`"f"`, "not a number"}},
		{"bool type", `[{"id":1,"ok":1}]`, []string{`"ok"`, "true or false"}},
		{"ts syntax", `[{"id":1,"ts":"2024-13-01T00:00:00"}]`, []string{`"ts"`, "not a timestamp"}},
		{"ts precision", `[{"id":1,"ts":"2024-01-01T00:00:00.1234"}]`, []string{`"ts"`, "more fractional"}},
		{"ts float ms", `[{"id":1,"ts":1.5}]`, []string{`"ts"`, "epoch milliseconds"}},
		{"ts years", `[{"id":1,"ts":-62167219200001}]`, []string{`"ts"`, "0000..9999"}},
		{"ts9 range", `[{"id":1,"ts9":"2300-01-01T00:00:00"}]`, []string{`"ts9"`, "out of range"}},
		{"ts type", `[{"id":1,"ts":false}]`, []string{`"ts"`, "ISO-8601"}},
		{"date", `[{"id":1,"dt":"2023-02-29"}]`, []string{`"dt"`, "not a date"}},
		{"date trailing", `[{"id":1,"dt":"2023-02-28x"}]`, []string{`"dt"`, "not a date"}},
		{"time", `[{"id":1,"tm":"24:00:00"}]`, []string{`"tm"`, "not a time"}},
		{"time precision", `[{"id":1,"tm":"01:00:00.5"}]`, []string{`"tm"`, "more fractional"}},
		{"base64", `[{"id":1,"by":"!!"}]`, []string{`"by"`, "base64"}},
		{"string type", `[{"id":1,"s":5}]`, []string{`"s"`, "want a string"}},
		{"invalid utf8", "[{\"id\":1,\"s\":\"\xff\"}]", []string{`"s"`, "UTF-8"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec, err := DecodeJSONRows(s, []byte(tc.rows), nil)
			if err == nil {
				rec.Release()
				t.Fatalf("no error for %s", tc.rows)
			}
			if !errors.Is(err, ErrBadRow) {
				t.Fatalf("error %v does not wrap ErrBadRow", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// Values up to a VARCHAR's length in characters (not bytes) and a
// VARBINARY's in bytes are taken, nulls too.
func TestJSONLengthsFit(t *testing.T) {
	s := &Schema{ID: 1, Columns: []Column{
		{Name: "code", Type: mustType(t, "VARCHAR(3)"), Nullable: true},
		{Name: "tag", Type: mustType(t, "BINARY(2)"), Nullable: true},
	}}
	rows := `[{"code":"äöü","tag":"AQI="},{"code":"","tag":""},{"code":null,"tag":null},{"code":"ab"}]`
	rec, err := DecodeJSONRows(s, []byte(rows), nil)
	if err != nil {
		t.Fatalf("rows that fit: %v", err)
	}
	defer rec.Release()
	if rec.NumRows() != 4 {
		t.Fatalf("%d rows, want 4", rec.NumRows())
	}
	if err := ValidateRecord(s, rec); err != nil {
		t.Errorf("ValidateRecord of rows that fit: %v", err)
	}
}

// ValidateRecord, which checks a client's Arrow batches, refuses a value
// longer than its column allows and names the row.
func TestValidateRecordLengths(t *testing.T) {
	wide := &Schema{ID: 1, Columns: []Column{
		{Name: "code", Type: mustType(t, "STRING"), Nullable: true},
		{Name: "tag", Type: mustType(t, "BYTES"), Nullable: true},
	}}
	for _, tc := range []struct {
		rows, code, tag, want string
	}{
		{rows: `[{"code":"ab"},{"code":"abcd"}]`, code: "VARCHAR(3)", tag: "BYTES", want: `row 1, column "code": a string of 4 characters is longer than VARCHAR(3) allows`},
		{rows: `[{"tag":"AQIDBA=="},{"tag":null}]`, code: "STRING", tag: "VARBINARY(3)", want: `row 0, column "tag": a value of 4 bytes is longer than VARBINARY(3) allows`},
	} {
		rec, err := DecodeJSONRows(wide, []byte(tc.rows), nil)
		if err != nil {
			t.Fatal(err)
		}
		narrow := &Schema{ID: 1, Columns: []Column{
			{Name: "code", Type: mustType(t, tc.code), Nullable: true},
			{Name: "tag", Type: mustType(t, tc.tag), Nullable: true},
		}}
		err = ValidateRecord(narrow, rec)
		rec.Release()
		if !errors.Is(err, ErrRecordMismatch) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ValidateRecord of %s against %s, %s: %v; want %q", tc.rows, tc.code, tc.tag, err, tc.want)
		}
	}
}

func TestJSONPartialRows(t *testing.T) {
	s := &Schema{ID: 1, PrimaryKey: []string{"id"}, Columns: []Column{
		{Name: "id", Type: Type{Kind: KindBigInt}},
		{Name: "a", Type: Type{Kind: KindString}},
		{Name: "b", Type: Type{Kind: KindInt}, Nullable: true},
	}}
	rec, err := DecodeJSONRowsPartial(s, []byte(`[{"id":1,"b":2},{"id":3}]`), []int{0, 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	if got := string(AppendJSONRows(nil, rec, 0, 2, nil)); got != `[{"id":1,"a":null,"b":2},{"id":3,"a":null,"b":null}]` {
		t.Fatalf("got %s", got)
	}
	for _, tc := range []struct{ rows, want string }{
		{`[{"id":1,"a":"x"}]`, "not one of the target columns"},
		{`[{"b":1}]`, `missing NOT NULL column "id"`},
	} {
		if _, err := DecodeJSONRowsPartial(s, []byte(tc.rows), []int{0, 2}, nil); !errors.Is(err, ErrBadRow) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.rows, err, tc.want)
		}
	}
}

func TestJSONOutputOptions(t *testing.T) {
	s := &Schema{ID: 1, Columns: []Column{{Name: "id", Type: Type{Kind: KindBigInt}}, {Name: "s", Type: Type{Kind: KindString}, Nullable: true}}}
	rec, err := DecodeJSONRows(s, []byte(`[{"id":1,"s":"a"},{"id":2},{"id":3,"s":"c"}]`), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	changeTypes := []string{"+I", "-U", "+U"}
	o := &JSONOptions{
		Columns: []int{1, 0},
		Names:   []string{"S", "ID"},
		Rows:    []int{2, 0},
		Trailing: ExtraColumns{Names: []string{"_change_type", "_log_offset"}, Append: func(dst []byte, row, i int) []byte {
			if i == 0 {
				return appendJSONString(dst, changeTypes[row])
			}
			return append(dst, byte('0'+row))
		}},
		Leading: ExtraColumns{Names: []string{"lead"}, Append: func(dst []byte, row, i int) []byte { return append(dst, "null"...) }},
	}
	want := `[{"lead":null,"S":"c","ID":3,"_change_type":"+U","_log_offset":2},{"lead":null,"S":"a","ID":1,"_change_type":"+I","_log_offset":0}]`
	if got := string(AppendJSONRows([]byte{}, rec, 0, 0, o)); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if got := string(AppendJSONRows(nil, rec, 1, 3, &JSONOptions{NDJSON: true})); got != "{\"id\":2,\"s\":null}\n{\"id\":3,\"s\":\"c\"}\n" {
		t.Fatalf("ndjson: %q", got)
	}
}

func TestAppendJSONStringInvalidUTF8(t *testing.T) {
	for in, want := range map[string]string{
		"a\xffb":       `"a` + "\ufffd" + `b"`,
		"\x7f<>&":      "\"\x7f<>&\"",
		"\u2028":       "\"\u2028\"",
		"\xe2\x82":     "\"\ufffd\ufffd\"",
		"tab\tq\"\\\r": `"tab\tq\"\\\r"`,
	} {
		if got := string(appendJSONString(nil, in)); got != want {
			t.Errorf("%q: got %s want %s", in, got, want)
		}
	}
}

func TestSampleRecordRoundTrip(t *testing.T) {
	s := SampleSchema()
	js := SampleJSON(500, 1)
	rec, err := DecodeJSONRows(s, js, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	want := SampleRecord(500, 1)
	defer want.Release()
	if err := ValidateRecord(s, want); err != nil {
		t.Fatal(err)
	}
	if !array.RecordEqual(rec, want) {
		t.Fatal("SampleJSON does not decode to SampleRecord")
	}
}

// checkJSONBatch: the batch DecodeJSON's rows encode straight from the
// decoder's buffers is byte for byte the one of the decoded record rec,
// appended after other bytes.
func checkJSONBatch(t *testing.T, s *Schema, rows []byte, rec arrow.Record, c Compression) {
	t.Helper()
	h := BatchHeader{BaseOffset: 7, RecordCount: int32(rec.NumRows()), CommitTimestamp: 1700000000000, WriterID: 3, BatchSequence: 9, SchemaID: s.ID}
	prefix := []byte("prefix")
	want, err := AppendRecordBatch(bytes.Clone(prefix), h, rec, c, 3)
	if err != nil {
		t.Fatal(err)
	}
	r, err := DecodeJSON(s, rows)
	if err != nil {
		t.Fatalf("DecodeJSON: %v (DecodeJSONRows accepted the rows)", err)
	}
	defer r.Release()
	if r.Len() != int(rec.NumRows()) {
		t.Fatalf("Len %d, record %d rows", r.Len(), rec.NumRows())
	}
	got, err := r.AppendBatch(bytes.Clone(prefix), h, c, 3)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%v batch of %d rows from the decoder's buffers differs from the record's:\n got %x\nwant %x", c, rec.NumRows(), got, want)
	}
}

// jsonInput is rows of a table, as a JSON array.
type jsonInput struct {
	s    *Schema
	rows []byte
}

// jsonInputs are every run of the canonical rows (none included) of the
// every-type table and sample rows of 1 to 1,000.
func jsonInputs(t *testing.T) []jsonInput {
	var ins []jsonInput
	all := allTypesSchema(t)
	for lo := 0; lo <= len(canonicalRows); lo++ {
		for hi := lo; hi <= len(canonicalRows); hi++ {
			ins = append(ins, jsonInput{all, []byte("[" + strings.Join(canonicalRows[lo:hi], ",") + "]")})
		}
	}
	for _, n := range []int{1, 7, 31, 32, 1000} {
		ins = append(ins, jsonInput{SampleSchema(), SampleJSON(n, int64(n))})
	}
	return ins
}

// TestJSONRowsAppendBatch: for every type, every run of the canonical rows
// (none included), random sample rows, and every compression, the batch
// encoded from the decoder's buffers equals the record's.
func TestJSONRowsAppendBatch(t *testing.T) {
	for _, in := range jsonInputs(t) {
		rec, err := DecodeJSONRows(in.s, in.rows, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []Compression{CompressionNone, CompressionLZ4Frame, CompressionZSTD} {
			checkJSONBatch(t, in.s, in.rows, rec, c)
		}
		rec.Release()
	}
}

// TestJSONRowsSizeHint: the size hint covers the uncompressed batch of
// rows (so its buffer does not grow) without being far above it.
func TestJSONRowsSizeHint(t *testing.T) {
	for _, in := range jsonInputs(t) {
		r, err := DecodeJSON(in.s, in.rows)
		if err != nil {
			t.Fatal(err)
		}
		b, err := r.AppendBatch(nil, BatchHeader{}, CompressionNone, 0)
		if err != nil {
			t.Fatal(err)
		}
		if hint := r.SizeHint(); r.Len() > 0 && (hint < len(b) || hint > len(b)*3/2) {
			t.Errorf("%d rows of %d columns: hint %d for a batch of %d bytes", r.Len(), len(in.s.Columns), hint, len(b))
		}
		r.Release()
	}
}

// FuzzDecodeJSONRows: never panics; success implies a schema-valid record
// whose JSON decodes to the same record.
func FuzzDecodeJSONRows(f *testing.F) {
	for _, r := range canonicalRows {
		f.Add([]byte("[" + r + "]"))
	}
	f.Add([]byte(`[{"bi":1,"dec":"1e5","ts3":1714564800123,"ltz9":"2024-05-01 12:00:00+01:00"}]`))
	f.Add([]byte(`[{"bi":"-0","f":"nan","d":1e308,"dec2":-0.5}]`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`[{"bi":1},{"bi":2,"s":"\ud800"}]`))
	f.Add([]byte(`[{"bi":1,"vc":"äöüß","vb":"AQID"},{"bi":2,"vc":"abcde"}]`))
	// Every type, and bounded strings and bytes: what JSON accepts, the
	// Arrow check (ValidateRecord) must accept too.
	s := allTypesSchema(f)
	s.Columns = append(s.Columns, Column{Name: "vc", Type: mustType(f, "VARCHAR(4)"), Nullable: true},
		Column{Name: "vb", Type: mustType(f, "VARBINARY(3)"), Nullable: true})
	types := schemaTypes(s)
	f.Fuzz(func(t *testing.T, data []byte) {
		rec, err := DecodeJSONRows(s, data, nil)
		// The row-by-row parse of large row sets accepts and refuses the
		// same rows, and decodes them the same.
		byRow, rerr := decodeRowByRow(s, data)
		if (err == nil) != (rerr == nil) {
			t.Fatalf("whole parse: %v; row by row: %v", err, rerr)
		}
		if err != nil {
			if !errors.Is(err, ErrBadRow) || !errors.Is(rerr, ErrBadRow) {
				t.Fatalf("errors %v and %v do not both wrap ErrBadRow", err, rerr)
			}
			return
		}
		defer rec.Release()
		defer byRow.Release()
		if !array.RecordApproxEqual(rec, byRow, array.WithNaNsEqual(true), array.WithAbsTolerance(0)) {
			t.Fatalf("row-by-row decode of %q differs", data)
		}
		if !json.Valid(data) {
			t.Fatalf("accepted rows encoding/json finds invalid: %q", data)
		}
		if err := ValidateRecord(s, rec); err != nil {
			t.Fatal(err)
		}
		checkJSONBatch(t, s, data, rec, CompressionNone)
		checkStringsAsEncodingJSON(t, data, rec, s.Index("s"))
		out := AppendJSONRows(nil, rec, 0, int(rec.NumRows()), &JSONOptions{Types: types})
		again, err := DecodeJSONRows(s, out, nil)
		if err != nil {
			t.Fatalf("re-decode of %s: %v", out, err)
		}
		defer again.Release()
		if !array.RecordApproxEqual(rec, again, array.WithNaNsEqual(true)) {
			t.Fatalf("round trip differs for %s", out)
		}
	})
}

var _ arrow.Record // keep import when trimming tests

// decodeRowByRow decodes rows with decodeJSONRowByRow, whatever their size.
func decodeRowByRow(s *Schema, rows []byte) (arrow.Record, error) {
	r, err := decodeJSONRowByRow(s, rows, nil)
	if err != nil {
		return nil, err
	}
	defer r.Release()
	return r.Record(nil), nil
}

// checkStringsAsEncodingJSON: every value of the STRING column ci that the
// decoder accepted is the string encoding/json reads from the same rows.
// (encoding/json turns an unpaired surrogate into U+FFFD; the decoder
// refuses it.) Rows encoding/json refuses (a raw control character in a
// string) are not compared.
func checkStringsAsEncodingJSON(t *testing.T, data []byte, rec arrow.Record, ci int) {
	t.Helper()
	var rows []map[string]any
	if json.Unmarshal(data, &rows) != nil {
		return
	}
	col := rec.Column(ci).(*array.String)
	name := rec.Schema().Field(ci).Name
	for i, row := range rows {
		want, ok := row[name].(string)
		if !ok {
			continue
		}
		if got := col.Value(i); got != want {
			t.Fatalf("row %d: column %s is %q, encoding/json reads %q from %s", i, name, got, want, data)
		}
	}
}

// TestJSONEscapes: escapes decode as RFC 8259 says; an escape that is not
// JSON or not Unicode text (a lone UTF-16 surrogate) is refused with where
// it is, never stored as written.
func TestJSONEscapes(t *testing.T) {
	s := allTypesSchema(t)
	for _, tt := range []struct{ in, want string }{
		{`"\ud83d\ude00 ok"`, "😀 ok"},
		{`"\uD83D\uDE00"`, "😀"},
		{`"a\u0000b"`, "a\x00b"},
		{`"\\ud800"`, `\ud800`}, // an escaped backslash, then text
		{`"q\"\\\/\b\f\n\r\t"`, "q\"\\/\b\f\n\r\t"},
		{`"\u00e9\u4E2D"`, "é中"},
	} {
		rec, err := DecodeJSONRows(s, []byte(`[{"bi":1,"s":`+tt.in+`}]`), nil)
		if err != nil {
			t.Errorf("%s: %v", tt.in, err)
			continue
		}
		if got := rec.Column(s.Index("s")).(*array.String).Value(0); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.in, got, tt.want)
		}
		rec.Release()
	}
	// Whitespace between tokens is not a control character in a string.
	pretty, err := DecodeJSONRows(s, []byte("[\n  {\"bi\": 1,\n\t\"s\": \"x\"}\r\n]"), nil)
	if err != nil {
		t.Fatalf("pretty-printed rows: %v", err)
	}
	pretty.Release()
	for _, tt := range []struct{ row, msg string }{
		{`{"bi":1,"s":"\ud800"}`, `unpaired UTF-16 surrogate \ud800 at byte 14`},
		{`{"bi":1,"s":"x\udfff"}`, `unpaired UTF-16 surrogate \udfff at byte 15`},
		{`{"bi":1,"s":"\ud800\u0041"}`, `unpaired UTF-16 surrogate \ud800`},
		{`{"bi":1,"s":"\ude00\ud83d"}`, `unpaired UTF-16 surrogate \ude00`},
		{`{"bi":1,"s":"\ud800x"}`, `unpaired UTF-16 surrogate \ud800`},
		{`{"bi":1,"s":"ok"},{"bi":2,"s":"\q"}`, `unknown escape "\\q" at byte 32`},
		{`{"bi":1,"s":"\u12g4"}`, `"\\u12g4" is not \u and four hex digits`},
		{`{"bi":1,"s":"\u12"}`, `"\\u12\"}" is not \u and four hex digits`},
		{`{"b\qi":1}`, `unknown escape "\\q"`},
		{`{"bi":1,"by":"\ud800"}`, `unpaired UTF-16 surrogate`},
		{"{\"bi\":1,\"s\":\"a\nb\"}", `control character U+000A in a string at byte 15 (write it escaped, as \u000a)`},
		{"{\"bi\":1,\"s\":\"\\u0041\x00\"}", `control character U+0000 in a string at byte 20`},
		{"{\"b\ti\":1}", `control character U+0009 in a string at byte 4`},
	} {
		_, err := DecodeJSONRows(s, []byte("["+tt.row+"]"), nil)
		if !errors.Is(err, ErrBadRow) || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("%s: got %v, want an error with %q", tt.row, err, tt.msg)
		}
	}
}

// TestRowErrorsClipLongValues: an error quotes at most maxShown bytes of a
// rejected value or key, and says how long it was: a value can be as long
// as the request, and the message goes back to the client and into logs.
func TestRowErrorsClipLongValues(t *testing.T) {
	s := allTypesSchema(t)
	long := strings.Repeat("9", 100_000)
	for _, row := range []string{
		`{"` + long + `": 1}`,
		`{"bi": 1, "dt": "` + long + `"}`,
		`{"bi": ` + long + `}`,
		`{"bi": 1, "dec2": "` + long + `"}`,
		`{"bi": 1, "ts3": "` + long + `"}`,
		`{"bi": 1, "t3": "` + long + `"}`,
		`{"bi": 1, "d": ` + long + `e9999}`,
	} {
		_, err := DecodeJSONRows(s, []byte("["+row+"]"), nil)
		if err == nil {
			t.Fatalf("row %.40s…: accepted", row)
		}
		if msg := err.Error(); len(msg) > 300 || !strings.Contains(msg, "… (1000") {
			t.Errorf("row %.40s…: error of %d bytes: %.300s", row, len(msg), msg)
		}
	}
}

// TestDecodeJSONLargeRowSets: row sets over maxPooledParserInput are parsed
// one row at a time; they decode as the whole parse does, and their errors
// name the row or the byte.
func TestDecodeJSONLargeRowSets(t *testing.T) {
	s := allTypesSchema(t)
	var rows []string
	size := 0
	for i := 0; size <= 2*maxPooledParserInput; i++ {
		r := fmt.Sprintf(`{"bi": %d, "s": "row \"%d\" \u00e4\\n", "dec2": "%d.25", "dt": "2026-12-06", "d": %d.5e-3}`, i, i, i%1000, i)
		if i%7 == 0 {
			r = fmt.Sprintf(` {"bi":%d,"s":null,"b":true,"ts3":"2026-12-06T10:00:00.123"}`+"\n", i)
		}
		rows = append(rows, r)
		size += len(r) + 1
	}
	data := []byte("[\n" + strings.Join(rows, ",") + "\n] ")
	// Whole rows, and partial rows (upserts of some columns).
	target := []int{s.Index("bi"), s.Index("s"), s.Index("dec2"), s.Index("dt"), s.Index("d"), s.Index("b"), s.Index("ts3")}
	for _, target := range [][]int{nil, target} {
		got, err := decodeJSONRows(s, data, target, nil) // row by row: data is over the threshold
		if err != nil {
			t.Fatal(err)
		}
		whole, err := decodeJSONWhole(s, data, target)
		if err != nil {
			t.Fatal(err)
		}
		want := whole.Record(nil)
		whole.Release()
		if got.NumRows() != int64(len(rows)) || !array.RecordEqual(got, want) {
			t.Fatalf("row-by-row decode of %d rows (%d bytes, target %v) differs from the whole parse", len(rows), len(data), target)
		}
		got.Release()
		want.Release()
	}
	// A column outside the target is named.
	if _, err := DecodeJSONRowsPartial(s, data, target[:4], nil); err == nil || !strings.Contains(err.Error(), `row 0: column "b" is not one of the target columns`) {
		t.Fatalf("partial decode with a column outside the target: %v", err)
	}

	last := len(rows) - 1
	mid := len(data)/2 + bytes.Index(data[len(data)/2:], []byte("},")) + 2 // a row starts here
	withRow := func(i int, row string) []byte {
		r := slices.Clone(rows)
		r[i] = row
		return []byte("[" + strings.Join(r, ",") + "]")
	}
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"wrong type in the last row", withRow(last, `{"bi": "x"}`), fmt.Sprintf("row %d, column \"bi\"", last)},
		{"not JSON in a row", withRow(1500, `{"bi": 1,}`), "rows are not valid JSON: row 1500:"},
		{"a row that is no object", withRow(3, `[1]`), "row 3: not an object but array"},
		{"raw control character", withRow(last, "{\"bi\": 1, \"s\": \"a\tb\"}"), "control character U+0009"},
		{"bad escape", withRow(2, `{"bi": 1, "s": "\x"}`), `unknown escape`},
		{"missing ]", data[:len(data)-3], "unterminated array"},
		{"after the array", append(slices.Clone(data), '1'), "unexpected data after the array"},
		{"empty element", []byte(strings.Replace(string(data), "},", "},,", 1)), "expected a value"},
		{"no array", []byte(`{"rows": ` + string(data) + `}`), "rows must be a JSON array of objects"},
		{"unterminated string", append(slices.Clone(data[:mid]), `{"s": "abc`...), "unterminated string"},
	} {
		rec, err := DecodeJSONRows(s, tc.data, nil)
		if err == nil {
			rec.Release()
			t.Errorf("%s: accepted", tc.name)
			continue
		}
		if !errors.Is(err, ErrBadRow) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an ErrBadRow saying %q", tc.name, err, tc.want)
		}
	}
}
