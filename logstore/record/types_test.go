package record

import (
	"errors"
	"testing"
)

// FuzzParseType: column types are a client's strings (CreateTable, the
// CLI's --schema). ParseType refuses with ErrBadType or returns a type
// whose String parses back to the same type.
func FuzzParseType(f *testing.F) {
	for _, s := range []string{"BIGINT", "decimal(10, 2)", "TIMESTAMP(3) NOT NULL", "TIMESTAMP_LTZ(9)", "TIME", "STRING NULL",
		"VARCHAR(20)", "CHAR(1) NOT NULL", "VARBINARY(16)", "STRING(3)", "DECIMAL(38,38)", "DECIMAL(", "INT()", "BYTES NOT NULL", "DATE", "TIMESTAMP(10)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		typ, notNull, err := ParseType(s)
		if err != nil {
			if !errors.Is(err, ErrBadType) {
				t.Fatalf("ParseType(%q): error %v does not wrap ErrBadType", s, err)
			}
			return
		}
		again, notNull2, err := ParseType(typ.String())
		if err != nil || again != typ || notNull2 {
			t.Fatalf("ParseType(%q) = %v (not null %v); its String %q parses to %v, %v, %v", s, typ, notNull, typ.String(), again, notNull2, err)
		}
	})
}

func TestParseTypeLengths(t *testing.T) {
	for _, tc := range []struct {
		in, want string // want: the canonical form; "" for an error
	}{
		{"VARCHAR(20)", "VARCHAR(20)"},
		{"char(3)", "VARCHAR(3)"}, // not padded: at most 3 characters
		{"VARBINARY(16)", "VARBINARY(16)"},
		{"BINARY(4)", "VARBINARY(4)"},
		{"VARCHAR", "STRING"},
		{"BINARY", "BYTES"},
		{"VARCHAR(0)", ""},
		{"VARCHAR(1,2)", ""},
		{"VARCHAR(-1)", ""},
		{"STRING(5)", ""},
		{"BYTES(5)", ""},
	} {
		typ, _, err := ParseType(tc.in)
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("ParseType(%q) = %v, want an error", tc.in, typ)
		case tc.want != "" && (err != nil || typ.String() != tc.want):
			t.Errorf("ParseType(%q) = %v, %v; want %s", tc.in, typ, err, tc.want)
		}
	}
}
