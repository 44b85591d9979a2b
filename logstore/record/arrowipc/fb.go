package arrowipc

import (
	"encoding/binary"
	"fmt"
)

// This file is a bounds-checked reader of just enough of the flatbuffers wire
// format to walk Arrow's Message, Schema, Field and RecordBatch tables. The
// generated flatbuffers accessors trust their input and panic (or read out of
// bounds) on hostile bytes; every accessor here returns ErrMalformed instead.
//
// Flatbuffers recap: a buffer starts with a uoffset (u32) to the root table.
// A table starts with an soffset (i32); table_pos - soffset is its vtable.
// A vtable is u16 vtable_size, u16 table_size, then one u16 per field slot:
// the field's offset from the table start, 0 if absent. Offset-typed fields
// (table, vector, string) hold a u32 relative to the field's own position. A
// vector is a u32 element count followed by its elements.

var le = binary.LittleEndian

type fbTable struct {
	buf   []byte
	pos   uint64 // table start
	vt    uint64 // vtable start
	vtLen uint64 // vtable size in bytes
}

func fbErr(format string, args ...any) error {
	return fmt.Errorf("%w: flatbuffer: "+format, append([]any{ErrMalformed}, args...)...)
}

func fbRoot(buf []byte) (fbTable, error) {
	if len(buf) < 4 {
		return fbTable{}, fbErr("%d bytes is too short for a root offset", len(buf))
	}
	return fbTableAt(buf, uint64(le.Uint32(buf)))
}

func fbTableAt(buf []byte, pos uint64) (fbTable, error) {
	n := uint64(len(buf))
	if pos+4 > n {
		return fbTable{}, fbErr("table at %d beyond %d bytes", pos, n)
	}
	vt := int64(pos) - int64(int32(le.Uint32(buf[pos:])))
	if vt < 0 || uint64(vt)+4 > n {
		return fbTable{}, fbErr("vtable at %d outside %d bytes", vt, n)
	}
	vtLen := uint64(le.Uint16(buf[vt:]))
	tblLen := uint64(le.Uint16(buf[vt+2:]))
	if vtLen < 4 || vtLen%2 != 0 || uint64(vt)+vtLen > n {
		return fbTable{}, fbErr("vtable at %d has bad size %d", vt, vtLen)
	}
	if tblLen < 4 || pos+tblLen > n {
		return fbTable{}, fbErr("table at %d has bad size %d", pos, tblLen)
	}
	return fbTable{buf: buf, pos: pos, vt: uint64(vt), vtLen: vtLen}, nil
}

// field returns the absolute position of slot's inline value of the given
// size, or ok=false if the field is absent (the reader uses its default).
func (t fbTable) field(slot int, size uint64) (pos uint64, ok bool, err error) {
	vo := 4 + 2*uint64(slot)
	if vo+2 > t.vtLen {
		return 0, false, nil
	}
	off := uint64(le.Uint16(t.buf[t.vt+vo:]))
	if off == 0 {
		return 0, false, nil
	}
	p := t.pos + off
	if p+size > uint64(len(t.buf)) {
		return 0, false, fbErr("field %d at %d overruns %d bytes", slot, p, len(t.buf))
	}
	return p, true, nil
}

func (t fbTable) u8(slot int, def uint8) (uint8, error) {
	p, ok, err := t.field(slot, 1)
	if !ok {
		return def, err
	}
	return t.buf[p], nil
}

func (t fbTable) i16(slot int, def int16) (int16, error) {
	p, ok, err := t.field(slot, 2)
	if !ok {
		return def, err
	}
	return int16(le.Uint16(t.buf[p:])), nil
}

func (t fbTable) i32(slot int, def int32) (int32, error) {
	p, ok, err := t.field(slot, 4)
	if !ok {
		return def, err
	}
	return int32(le.Uint32(t.buf[p:])), nil
}

func (t fbTable) i64(slot int, def int64) (int64, error) {
	p, ok, err := t.field(slot, 8)
	if !ok {
		return def, err
	}
	return int64(le.Uint64(t.buf[p:])), nil
}

// deref follows the uoffset stored at slot.
func (t fbTable) deref(slot int) (uint64, bool, error) {
	p, ok, err := t.field(slot, 4)
	if !ok {
		return 0, false, err
	}
	return p + uint64(le.Uint32(t.buf[p:])), true, nil
}

func (t fbTable) table(slot int) (fbTable, bool, error) {
	p, ok, err := t.deref(slot)
	if !ok {
		return fbTable{}, false, err
	}
	sub, err := fbTableAt(t.buf, p)
	return sub, err == nil, err
}

// fbVector is a bounds-checked vector: its n elements of elemSize bytes
// starting at start lie inside buf.
type fbVector struct {
	buf   []byte
	start uint64
	n     int
}

func (t fbTable) vector(slot int, elemSize uint64) (fbVector, error) {
	p, ok, err := t.deref(slot)
	if !ok {
		return fbVector{buf: t.buf}, err
	}
	size := uint64(len(t.buf))
	if p+4 > size {
		return fbVector{}, fbErr("vector at %d beyond %d bytes", p, size)
	}
	n := uint64(le.Uint32(t.buf[p:]))
	if n*elemSize > size-(p+4) {
		return fbVector{}, fbErr("vector at %d of %d×%d bytes overruns %d bytes", p, n, elemSize, size)
	}
	return fbVector{buf: t.buf, start: p + 4, n: int(n)}, nil
}

// tableAt reads element i of a vector of tables.
func (v fbVector) tableAt(i int) (fbTable, error) {
	p := v.start + 4*uint64(i)
	return fbTableAt(v.buf, p+uint64(le.Uint32(v.buf[p:])))
}

// i64At reads the k-th int64 of element i of a vector of 16-byte structs.
func (v fbVector) i64At(i, k int) int64 {
	return int64(le.Uint64(v.buf[v.start+16*uint64(i)+8*uint64(k):]))
}

// str reads a string (or [ubyte]) field.
func (t fbTable) str(slot int) ([]byte, bool, error) {
	v, err := t.vector(slot, 1)
	if err != nil || v.start == 0 {
		return nil, false, err
	}
	return v.buf[v.start : v.start+uint64(v.n)], true, nil
}
