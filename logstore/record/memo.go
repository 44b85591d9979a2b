package record

import (
	"sync"
	"sync/atomic"
)

// DefaultMemoMax is how many entries a Memo holds before it forgets them
// all.
const DefaultMemoMax = 4096

// Memo caches values derived from immutable keys (catalog schemas and
// tables, which are never changed once built; a new version is a new
// pointer; or the bytes of a message, as a string) for hot paths that would
// otherwise rebuild them per request.
// Tables are created, altered and dropped for as long as a node runs, and
// the keys of a dropped or superseded version are never asked for again;
// so, rather than grow without bound, a Memo forgets everything once it
// holds Max entries (DefaultMemoMax when zero). A catalog holds far fewer
// live versions, so the working set is rebuilt at most once per Max new
// keys. The zero Memo is ready to use and safe for concurrent use.
type Memo[K comparable, V any] struct {
	Max int64

	m sync.Map // K → V
	n atomic.Int64
}

// Get returns the value cached for k, or builds, caches and returns it.
// Two callers may build the same key at once; both get the first value
// cached.
func (m *Memo[K, V]) Get(k K, build func() V) V {
	if v, ok := m.m.Load(k); ok {
		return v.(V)
	}
	return m.put(k, build())
}

// GetErr is Get for builders that can fail; a failed build caches nothing.
func (m *Memo[K, V]) GetErr(k K, build func() (V, error)) (V, error) {
	if v, ok := m.m.Load(k); ok {
		return v.(V), nil
	}
	v, err := build()
	if err != nil {
		return v, err
	}
	return m.put(k, v), nil
}

func (m *Memo[K, V]) put(k K, v V) V {
	limit := m.Max
	if limit <= 0 {
		limit = DefaultMemoMax
	}
	if m.n.Add(1) > limit {
		m.m.Clear()
		m.n.Store(1)
	}
	got, _ := m.m.LoadOrStore(k, v)
	return got.(V)
}

// Len reports about how many entries the Memo holds (for tests).
func (m *Memo[K, V]) Len() int64 { return m.n.Load() }
