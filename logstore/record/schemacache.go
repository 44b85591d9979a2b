package record

import (
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
)

// schemaState is the derived, read-only state of one *Schema that the write
// path needs on every request: its Arrow schema and the column index by
// name. It is built once per *Schema (schemas are immutable once
// published) and shared.
type schemaState struct {
	cols  *Column // &Columns[0] when built: a cheap staleness check
	ncols int
	arrow *arrow.Schema
	index map[string]int
}

// schemaStates caches schemaState per *Schema. It is cleared when it grows
// past maxSchemaStates (a catalog holds few schema versions; this only
// bounds callers that build a fresh *Schema per call).
var (
	schemaStates    sync.Map // *Schema -> *schemaState
	schemaStateN    atomic.Int64
	maxSchemaStates int64 = 4096
)

// state returns the cached derived state of s, building it on first use.
// A *Schema whose Columns slice was replaced after first use gets a fresh
// state.
func (s *Schema) state() *schemaState {
	var first *Column
	if len(s.Columns) > 0 {
		first = &s.Columns[0]
	}
	if v, ok := schemaStates.Load(s); ok {
		st := v.(*schemaState)
		if st.cols == first && st.ncols == len(s.Columns) {
			return st
		}
	}
	st := &schemaState{cols: first, ncols: len(s.Columns), arrow: s.buildArrowSchema(), index: make(map[string]int, len(s.Columns))}
	for i, c := range s.Columns {
		st.index[c.Name] = i
	}
	if schemaStateN.Add(1) > maxSchemaStates {
		schemaStates.Clear()
		schemaStateN.Store(1)
	}
	schemaStates.Store(s, st)
	return st
}
