package node

import (
	"testing"

	"github.com/fluss-node/fluss-node/kvstore"
	"github.com/fluss-node/fluss-node/logstore/record"
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
	f.Fuzz(func(t *testing.T, hdr, rowBytes []byte) {
		w, err := decodePKWriteWith(codec, [][]byte{hdr, rowBytes})
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
