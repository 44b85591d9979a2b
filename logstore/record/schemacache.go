package record

import (
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// schemaState is the derived, read-only state of one *Schema that the write
// path needs on every request: its Arrow schema, the column index by name
// and a pool of record builders on the Go allocator. It is built once per
// *Schema (schemas are immutable once published) and shared.
type schemaState struct {
	cols     *Column // &Columns[0] when built: a cheap staleness check
	ncols    int
	arrow    *arrow.Schema
	index    map[string]int
	builders sync.Pool // *array.RecordBuilder on memory.DefaultAllocator
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

// getBuilder returns an empty record builder for the schema on mem; put it
// back with putBuilder once its record has been built.
func (st *schemaState) getBuilder(mem memory.Allocator) *array.RecordBuilder {
	if mem == memory.DefaultAllocator {
		if rb, ok := st.builders.Get().(*array.RecordBuilder); ok {
			return rb
		}
	}
	return array.NewRecordBuilder(mem, st.arrow)
}

// putBuilder recycles rb (from getBuilder with mem). A builder holding
// values (a failed decode) is emptied first.
func (st *schemaState) putBuilder(rb *array.RecordBuilder, mem memory.Allocator) {
	if mem != memory.DefaultAllocator {
		rb.Release()
		return
	}
	for _, f := range rb.Fields() {
		if f.Len() > 0 {
			f.NewArray().Release()
		}
	}
	st.builders.Put(rb)
}
