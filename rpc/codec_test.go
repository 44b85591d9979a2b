package rpc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/fluss-node/fluss-node/logstore/record"
	"github.com/fluss-node/fluss-node/logstore/record/filter"
	flussv1 "github.com/fluss-node/fluss-node/proto/flussv1"
	"github.com/fluss-node/fluss-node/raftmeta"
)

func TestCodecRowsInline(t *testing.T) {
	c := &JSONCodec{}
	for _, tc := range []struct {
		name string
		msg  proto.Message
		want string
	}{
		// Unset fields are shown with their zero value (offset 0 and bucket 0
		// are answers); optional fields only when set.
		{"append rows", &flussv1.AppendRequest{Table: "a.b", Rows: []byte(`[{"id":1}]`)},
			`{"table":"a.b","partition":"","arrow":"","writerId":"0","batchSequence":0,"rows":[{"id":1}]}`},
		{"empty rows", &flussv1.FetchResponse{NextOffset: 5},
			`{"nextOffset":"5","arrow":"","highWatermark":"0","logStartOffset":"0","rows":[]}`},
		{"lookup nulls", &flussv1.LookupResponse{Rows: []byte(`[null,{"id":2}]`)}, `{"rows":[null,{"id":2}]}`},
		{"nested", &flussv1.PrefixLookupResponse{Results: []*flussv1.PrefixLookupResult{{Rows: []byte(`[{"a":1}]`)}, {}}}, `{"results":[{"rows":[{"a":1}]},{"rows":[]}]}`},
		{"plain message", &flussv1.CreateDatabaseRequest{Name: "x"}, `{"name":"x","comment":"","ignoreIfExists":false}`},
		{"zero enum and list", &flussv1.ListOffsetsRequest{Table: "a.b"},
			`{"table":"a.b","partition":"","buckets":[],"spec":"EARLIEST","timestampMs":"0"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := c.Marshal(tc.msg)
			if err != nil {
				t.Fatal(err)
			}
			if compact(got) != tc.want {
				t.Fatalf("Marshal = %s, want %s", got, tc.want)
			}
			back := tc.msg.ProtoReflect().New().Interface()
			if err := c.Unmarshal(got, back); err != nil {
				t.Fatalf("Unmarshal(%s): %v", got, err)
			}
			if !proto.Equal(back, tc.msg) {
				t.Fatalf("round trip: got %v, want %v", back, tc.msg)
			}
		})
	}
}

// compact removes the random spaces protojson adds.
func compact(b []byte) string { return strings.ReplaceAll(string(b), " ", "") }

func TestCodecBytesInProto(t *testing.T) {
	// In Connect proto the rows field is the UTF-8 text of the array.
	m := &flussv1.AppendRequest{Table: "a.b", Rows: []byte(`[{"id":1}]`)}
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`[{"id":1}]`)) {
		t.Fatalf("proto bytes lack the rows text: %q", b)
	}
	var back flussv1.AppendRequest
	if err := proto.Unmarshal(b, &back); err != nil || string(back.Rows) != `[{"id":1}]` {
		t.Fatalf("proto round trip: %q %v", back.Rows, err)
	}
}

func TestCodecUnmarshal(t *testing.T) {
	c := &JSONCodec{}
	for _, tc := range []struct {
		name, in string
		rows     string // expected rows when ok
		err      string // expected error substring
	}{
		{"inline rows", `{"table":"a.b","rows":[{"id":1},{"id":"x"}]}`, `[{"id":1},{"id":"x"}]`, ""},
		{"proto names", `{"table":"a.b","writer_id":"7","rows":[]}`, ``, ""},
		{"null rows", `{"table":"a.b","rows":null}`, ``, ""},
		{"whitespace", " {\n\"rows\" : [ {\"a\" : [1,2,{\"b\":\"\\u00e9\\\"\"}]} ] } ", `[ {"a" : [1,2,{"b":"\u00e9\""}]} ]`, ""},
		{"rows object", `{"rows":{"id":1}}`, "", "must be a JSON array"},
		{"rows string", `{"rows":"W10="}`, "", "must be a JSON array"},
		{"rows of numbers", `{"rows":[1,2]}`, "", "element 0 is not a JSON object"},
		{"rows with null", `{"rows":[null]}`, "", "element 0 is not a JSON object"},
		{"unknown field", `{"table":"a.b","nope":1}`, "", `unknown field "nope"`},
		{"duplicate field", `{"table":"a.b","table":"c.d"}`, "", "appears twice"},
		{"truncated", `{"table":"a.b","rows":[{"id":1}`, "", "malformed JSON"},
		{"trailing", `{"table":"a.b"} x`, "", "unexpected data"},
		{"bad number", `{"rows":[{"id":01}]}`, "", "malformed JSON"},
		{"bad literal", `{"rows":[{"id":tru}]}`, "", "malformed JSON"},
		{"bad escape", `{"rows":[{"id":"\x"}]}`, "", "malformed JSON"},
		{"short \\u escape", `{"rows":[{"id":"\u12"}]}`, "", "is not \\u and four hex digits"},
		{"surrogate pair", `{"rows":[{"s":"\ud83d\ude00"}]}`, `[{"s":"\ud83d\ude00"}]`, ""},
		{"unpaired surrogate in rows", `{"rows":[{"s":"\ud83d"}]}`, "", "malformed JSON at byte 15: unpaired UTF-16 surrogate \\ud83d"},
		{"unpaired surrogate in a field", `{"table":"a\udc00"}`, "", "unpaired UTF-16 surrogate \\udc00"},
		{"wrong plain type", `{"table":5}`, "", "bad JSON request"},
		{"not an object", `[1]`, "", "expected a JSON object"},
		{"empty", ``, "", "expected a JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m flussv1.AppendRequest
			err := c.Unmarshal([]byte(tc.in), &m)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, ErrBadJSON) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(m.Rows) != tc.rows {
				t.Fatalf("rows = %q, want %q", m.Rows, tc.rows)
			}
		})
	}
	// Lookup responses may hold nulls.
	var lr flussv1.LookupResponse
	if err := c.Unmarshal([]byte(`{"rows":[null,{"a":1}]}`), &lr); err != nil || string(lr.Rows) != `[null,{"a":1}]` {
		t.Fatalf("lookup nulls: %q %v", lr.Rows, err)
	}
	// The codec copies: mutating the input afterwards leaves the message intact.
	in := []byte(`{"rows":[{"a":1}]}`)
	var m flussv1.AppendRequest
	if err := c.Unmarshal(in, &m); err != nil {
		t.Fatal(err)
	}
	in[10] = 'X'
	if string(m.Rows) != `[{"a":1}]` {
		t.Fatalf("rows alias the input: %q", m.Rows)
	}
}

func FuzzCodecUnmarshal(f *testing.F) {
	for _, s := range []string{
		`{"table":"a.b","rows":[{"id":1},{"id":"x"}]}`, `{"rows":null}`, `{"rows":[]}`,
		`{"table":"a.b","bucket":3,"arrow":"AAAA","writerId":"1","batchSequence":2}`,
		`{"rows":[{"a":[1,{"b":null}],"c":"\u00e9"}]}`, `{"rows":[1]}`, `{`, `{"x":1}`, `[]`,
		`{"results":[{"rows":[{"a":1}]}]}`,
	} {
		f.Add([]byte(s))
	}
	c := &JSONCodec{}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, m := range []proto.Message{&flussv1.AppendRequest{}, &flussv1.PrefixLookupResponse{}, &flussv1.LookupResponse{}} {
			if err := c.Unmarshal(data, m); err != nil {
				continue
			}
			// Success implies a stable round trip.
			out, err := c.Marshal(m)
			if err != nil {
				t.Fatalf("Marshal after Unmarshal(%q): %v", data, err)
			}
			back := m.ProtoReflect().New().Interface()
			if err := c.Unmarshal(out, back); err != nil {
				t.Fatalf("re-Unmarshal(%q) of %q: %v", out, data, err)
			}
			if !proto.Equal(back, m) {
				t.Fatalf("round trip of %q: %v != %v", data, back, m)
			}
		}
	})
}

func TestToConnectError(t *testing.T) {
	filterErr := func() error {
		_, err := filter.Parse("a >")
		return err
	}()
	for _, tc := range []struct {
		err  error
		code connect.Code
	}{
		{fmt.Errorf("x: %w", raftmeta.ErrInvalid), connect.CodeInvalidArgument},
		{fmt.Errorf("x: %w", raftmeta.ErrTableNotFound), connect.CodeNotFound},
		{raftmeta.ErrDatabaseNotFound, connect.CodeNotFound},
		{raftmeta.ErrPartitionNotFound, connect.CodeNotFound},
		{raftmeta.ErrTableExists, connect.CodeAlreadyExists},
		{raftmeta.ErrDatabaseExists, connect.CodeAlreadyExists},
		{raftmeta.ErrDatabaseNotEmpty, connect.CodeFailedPrecondition},
		{raftmeta.ErrNotLeader, connect.CodeUnavailable},
		{raftmeta.ErrNoLeader, connect.CodeUnavailable},
		{ErrOffsetOutOfRange, connect.CodeOutOfRange},
		{ErrResourceExhausted, connect.CodeResourceExhausted},
		{ErrWrongTableKind, connect.CodeFailedPrecondition},
		{ErrNotLeader, connect.CodeUnavailable},
		{ErrNoBucketLeader, connect.CodeUnavailable},
		{ErrBucketNotFound, connect.CodeNotFound},
		{fmt.Errorf("row 3: %w", record.ErrBadRow), connect.CodeInvalidArgument},
		{record.ErrBadType, connect.CodeInvalidArgument},
		{record.ErrBadSchema, connect.CodeInvalidArgument},
		{filterErr, connect.CodeInvalidArgument},
		{filter.ErrUnknownColumn, connect.CodeInvalidArgument},
		{context.DeadlineExceeded, connect.CodeDeadlineExceeded},
		{fmt.Errorf("wait: %w", context.Canceled), connect.CodeCanceled},
		{ErrUnimplemented, connect.CodeUnimplemented},
		{errors.New("disk on fire"), connect.CodeInternal},
		{connect.NewError(connect.CodePermissionDenied, errors.New("no")), connect.CodePermissionDenied},
	} {
		t.Run(tc.err.Error(), func(t *testing.T) {
			got := toConnectErrorLog(tc.err, nil)
			if got.Code() != tc.code {
				t.Fatalf("code = %v, want %v", got.Code(), tc.code)
			}
			if !strings.Contains(got.Error(), strings.SplitN(tc.err.Error(), ": ", 2)[0]) {
				t.Fatalf("message %q lost the cause %q", got.Message(), tc.err)
			}
		})
	}
	if toConnectError(nil) != nil {
		t.Fatal("nil error mapped to non-nil")
	}
}

// FuzzReadSchemaMessage: the schema message of an Arrow append is a
// client's bytes, parsed by arrow-go; a malformed one is an error, never a
// panic.
func FuzzReadSchemaMessage(f *testing.F) {
	f.Add(record.SchemaMessage(record.SampleSchema().ArrowSchema()))
	f.Add([]byte{0xFF, 0xFF, 0xFF, 0xFF, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, msg []byte) {
		s, err := readSchemaMessage(msg)
		if err == nil && s == nil {
			t.Fatal("no schema and no error")
		}
	})
}
