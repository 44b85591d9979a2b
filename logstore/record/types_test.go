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
		"VARCHAR(20)", "DECIMAL(38,38)", "DECIMAL(", "INT()", "BYTES NOT NULL", "DATE", "TIMESTAMP(10)"} {
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
