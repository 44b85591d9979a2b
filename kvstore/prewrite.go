package kvstore

import "sync"

// PreWriteBuffer is the leader's view of rows proposed through Raft but not
// yet applied to the Store. The leader merges each incoming row against
// Lookup or LookupIn (buffer over store), records the result with
// Put/Delete under a tag that grows with every proposal (node/replica uses
// the log offset after the proposal's changelog, since the Raft index is
// not known when it proposes), and calls Applied(tag) once the FSM applied
// everything up to it; a new leader starts with an empty buffer after a
// Raft barrier (DESIGN §6). Safe for concurrent use.
type PreWriteBuffer struct {
	mu sync.Mutex
	m  map[string]pending
}

type pending struct {
	row   Row // nil: deleted
	index uint64
}

// NewPreWriteBuffer returns an empty buffer.
func NewPreWriteBuffer() *PreWriteBuffer {
	return &PreWriteBuffer{m: make(map[string]pending)}
}

// Put records that the proposal with the given tag sets key to row. The buffer
// keeps row; the caller must not modify it afterwards.
func (b *PreWriteBuffer) Put(key []byte, row Row, index uint64) {
	b.mu.Lock()
	b.m[string(key)] = pending{row: row, index: index}
	b.mu.Unlock()
}

// Delete records that the proposal with the given tag deletes key.
func (b *PreWriteBuffer) Delete(key []byte, index uint64) {
	b.mu.Lock()
	b.m[string(key)] = pending{index: index}
	b.mu.Unlock()
}

// Get returns the pending state of key: found=false when the buffer has
// nothing for it; otherwise row (nil when the pending change deletes it).
func (b *PreWriteBuffer) Get(key []byte) (row Row, found bool) {
	b.mu.Lock()
	p, ok := b.m[string(key)]
	b.mu.Unlock()
	return p.row, ok
}

// Lookup returns the current row of key as the leader must see it: the
// pending value when there is one, else the store's.
func (b *PreWriteBuffer) Lookup(r *Replica, key []byte) (Row, error) {
	if row, ok := b.Get(key); ok {
		return row, nil
	}
	row, _, err := r.Get(key)
	return row, err
}

// LookupIn is Lookup through a Reader. The caller must make sure that
// every entry Applied removed was applied before rd was created (remove,
// then open the reader), or rd would miss it.
func (b *PreWriteBuffer) LookupIn(rd *Reader, key []byte) (Row, error) {
	if row, ok := b.Get(key); ok {
		return row, nil
	}
	row, _, err := rd.Get(key)
	return row, err
}

// Applied removes every entry whose latest proposal has index <= index:
// the store now holds that state. Entries rewritten by a later, still
// unapplied proposal stay.
func (b *PreWriteBuffer) Applied(index uint64) {
	b.mu.Lock()
	for k, p := range b.m {
		if p.index <= index {
			delete(b.m, k)
		}
	}
	b.mu.Unlock()
}

// Reset drops every entry (leadership change).
func (b *PreWriteBuffer) Reset() {
	b.mu.Lock()
	clear(b.m)
	b.mu.Unlock()
}

// Len returns the number of pending keys.
func (b *PreWriteBuffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.m)
}
