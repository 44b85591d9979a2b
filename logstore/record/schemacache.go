package record

import "github.com/apache/arrow-go/v18/arrow"

// schemaState is the derived, read-only state of one *Schema that the write
// path needs on every request: its Arrow schema and the column index by
// name. It is built once per *Schema (schemas are immutable once
// published) and shared.
type schemaState struct {
	arrow *arrow.Schema
	index map[string]int
}

// schemaStateKey names a *Schema with its Columns slice as it was when the
// state was built: a *Schema whose Columns slice was replaced after first
// use gets a fresh state.
type schemaStateKey struct {
	s     *Schema
	cols  *Column // &Columns[0]
	ncols int
}

var schemaStates Memo[schemaStateKey, *schemaState]

// state returns the cached derived state of s, building it on first use.
func (s *Schema) state() *schemaState {
	k := schemaStateKey{s: s, ncols: len(s.Columns)}
	if len(s.Columns) > 0 {
		k.cols = &s.Columns[0]
	}
	return schemaStates.Get(k, func() *schemaState {
		st := &schemaState{arrow: s.buildArrowSchema(), index: make(map[string]int, len(s.Columns))}
		for i, c := range s.Columns {
			st.index[c.Name] = i
		}
		return st
	})
}
