package kvstore

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fluss-node/fluss-node/logstore/record"
)

// mkSchema builds a schema from "name TYPE[ NOT NULL]" specs; pk names the key.
func mkSchema(t testing.TB, pk []string, cols ...string) *record.Schema {
	t.Helper()
	s := &record.Schema{ID: 1, PrimaryKey: pk}
	for _, c := range cols {
		name, typ, _ := strings.Cut(c, " ")
		ty, notNull, err := record.ParseType(typ)
		if err != nil {
			t.Fatal(err)
		}
		s.Columns = append(s.Columns, record.Column{Name: name, Type: ty, Nullable: !notNull})
	}
	return s
}

func fmtValue(k record.Kind, v Value) string {
	if v.Null {
		return "NULL"
	}
	switch k {
	case record.KindFloat, record.KindDouble:
		return fmt.Sprint(v.F)
	case record.KindString, record.KindBytes:
		return fmt.Sprintf("%q", v.B)
	case record.KindDecimal:
		return decToBig(v).String()
	case record.KindBoolean:
		return fmt.Sprint(v.I == 1)
	}
	return fmt.Sprint(v.I)
}

func fmtRow(s *record.Schema, r Row) string {
	if r == nil {
		return "<nil>"
	}
	parts := make([]string, len(r))
	for i, v := range r {
		parts[i] = fmtValue(s.Columns[i].Type.Kind, v)
	}
	return "(" + strings.Join(parts, ",") + ")"
}

func fmtChanges(s *record.Schema, cs []Change) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = c.Type.String() + fmtRow(s, c.Row)
	}
	return strings.Join(parts, " ")
}
