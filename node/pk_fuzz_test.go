package node

import (
	"errors"
	"slices"
	"testing"

	"github.com/fluss-node/fluss-node/kvstore"
	"github.com/fluss-node/fluss-node/logstore/record"
	"github.com/fluss-node/fluss-node/node/replica"
)

// FuzzDecodePKWrite: bucket.pkwrite payloads come from peers; the decoder
// must reject anything malformed without panicking, and what it accepts
// re-encodes to rows the codec reads back.
func FuzzDecodePKWrite(f *testing.F) {
	s := &record.Schema{ID: 1, PrimaryKey: []string{"id"}, Columns: []record.Column{
		{Name: "id", Type: record.Type{Kind: record.KindBigInt}},
		{Name: "v", Type: record.Type{Kind: record.KindString}, Nullable: true},
	}}
	codec, err := kvstore.NewCodec(s, nil)
	if err != nil {
		f.Fatal(err)
	}
	row, _ := codec.AppendRow(nil, kvstore.Row{kvstore.Int(7), kvstore.Str("x")})
	f.Add([]byte{0, 0}, row)
	f.Add([]byte{1, 2, 0, 1}, row)
	f.Add([]byte{0x80}, []byte{1, 2, 0})
	f.Add([]byte{0, 0, 1}, row)    // with schema id 1
	f.Add([]byte{0, 0, 2}, row)    // an unknown schema id
	f.Add([]byte{0, 0, 0x80}, row) // a truncated schema id
	codecOf := func(id int32) (*kvstore.Codec, error) {
		if id > 1 {
			return nil, replica.ErrSchemaUnknown
		}
		return codec, nil
	}
	f.Fuzz(func(t *testing.T, hdr, rowBytes []byte) {
		w, err := decodePKWriteWith(codecOf, [][]byte{hdr, rowBytes})
		if err != nil {
			return
		}
		for _, r := range w.Rows {
			b, err := codec.AppendRow(nil, r)
			if err != nil {
				t.Fatalf("decoded row does not encode: %v", err)
			}
			if _, err := codec.DecodeRow(nil, b); err != nil {
				t.Fatalf("re-encoded row does not decode: %v", err)
			}
		}
	})
}

// TestDecodePKWriteSchemaID: bucket.pkwrite rows decode with the codec of
// the schema version the header names, the receiver's current one when it
// names none (an earlier sender), and an unknown version is refused.
func TestDecodePKWriteSchemaID(t *testing.T) {
	v1 := &record.Schema{ID: 1, PrimaryKey: []string{"id"}, Columns: []record.Column{
		{Name: "id", Type: record.Type{Kind: record.KindBigInt}},
	}}
	v2 := &record.Schema{ID: 2, PrimaryKey: []string{"id"}, Columns: append(slices.Clone(v1.Columns),
		record.Column{Name: "v", Type: record.Type{Kind: record.KindString}, Nullable: true})}
	c1, _ := kvstore.NewCodec(v1, nil)
	c2, _ := kvstore.NewCodec(v2, nil)
	var asked []int32
	codecOf := func(id int32) (*kvstore.Codec, error) {
		asked = append(asked, id)
		switch id {
		case 0, 2:
			return c2, nil
		case 1:
			return c1, nil
		}
		return nil, replica.ErrSchemaUnknown
	}
	row2, _ := c2.AppendRow(nil, kvstore.Row{kvstore.Int(7), kvstore.Str("x")})
	for _, tc := range []struct {
		hdr  []byte
		id   int32
		cols int
		err  error
	}{
		{[]byte{0, 0}, 0, 2, nil},                    // no id: the current version
		{[]byte{0, 0, 2}, 2, 2, nil},                 // version 2
		{[]byte{0, 0, 1}, 1, 0, kvstore.ErrNewerRow}, // a v2 row is no v1 row
		{[]byte{0, 0, 3}, 3, 0, replica.ErrSchemaUnknown},
	} {
		asked = nil
		w, err := decodePKWriteWith(codecOf, [][]byte{tc.hdr, row2})
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("header %v: %v, want %v", tc.hdr, err, tc.err)
			}
			continue
		}
		if err != nil || w.SchemaID != tc.id || len(w.Rows) != 1 || len(w.Rows[0]) != tc.cols || !slices.Equal(asked, []int32{tc.id}) {
			t.Errorf("header %v: %+v, %v (asked for %v)", tc.hdr, w, err, asked)
		}
	}
}
