package rpc

import (
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/fluss-node/fluss-node/logstore/record"
)

// readSchemaMessage parses a schema message once per distinct bytes (up to
// arrowSchemaCacheMax), never caches a failure, and answers what a fresh
// parse would.
func TestReadSchemaMessageCache(t *testing.T) {
	schema := func(fields int, name string) *arrow.Schema {
		fs := make([]arrow.Field, fields)
		for i := range fs {
			fs[i] = arrow.Field{Name: name + strings.Repeat("x", i%7), Type: arrow.PrimitiveTypes.Int64, Nullable: true}
		}
		return arrow.NewSchema(fs, nil)
	}
	small := record.SchemaMessage(schema(3, "cache_test_small"))
	a, err := readSchemaMessage(small)
	if err != nil {
		t.Fatal(err)
	}
	b, err := readSchemaMessage(append([]byte(nil), small...))
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatal("the same schema message was parsed twice")
	}
	if want := schema(3, "cache_test_small"); !a.Equal(want) {
		t.Fatalf("parsed %v, want %v", a, want)
	}

	big := record.SchemaMessage(schema(600, "cache_test_big"))
	if len(big) <= arrowSchemaCacheMax {
		t.Fatalf("test schema message is %d bytes, want more than %d", len(big), arrowSchemaCacheMax)
	}
	c, err1 := readSchemaMessage(big)
	d, err2 := readSchemaMessage(big)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if c == d || !c.Equal(d) || c.NumFields() != 600 {
		t.Fatalf("a message over %d bytes: want equal schemas parsed each time, got same=%v equal=%v fields=%d", arrowSchemaCacheMax, c == d, c.Equal(d), c.NumFields())
	}

	bad := append([]byte(nil), small...)
	bad = bad[:len(bad)/2]
	for i := range 2 {
		if _, err := readSchemaMessage(bad); err == nil {
			t.Fatalf("call %d: a truncated schema message parsed", i+1)
		}
	}
}
