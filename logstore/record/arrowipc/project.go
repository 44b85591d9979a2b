package arrowipc

import (
	"fmt"
	"slices"
	"sync"

	flatbuffers "github.com/google/flatbuffers/go"
)

const (
	// RecordBatch table slots.
	rbLength      = 0
	rbNodes       = 1
	rbBuffers     = 2
	rbCompression = 3
	rbVariadic    = 4

	// BodyCompression table slots.
	bcCodec  = 0
	bcMethod = 1

	// KeyValue table slots.
	kvKey   = 0
	kvValue = 1

	structSize = 16 // FieldNode{length, null_count} and Buffer{offset, length}
)

var builders = sync.Pool{New: func() any { return flatbuffers.NewBuilder(1024) }}

// Project appends to dst a new batch body (modern framing) that holds only
// the top-level fields listed in keep, which must be strictly ascending
// indexes below layout.NumFields(). The kept fields' field nodes are copied,
// and their buffers are copied byte for byte as stored, so compressed
// buffers stay compressed and are never decoded; each buffer is re-aligned
// to 8 bytes in the new body. The BodyCompression, the metadata version and
// the message's custom metadata are kept.
//
// body is a record-batch message (either framing) of the schema layout was
// derived from, after the dictionary batches of its dictionary-encoded
// fields. The dictionary batches of kept fields are copied the same way and
// renumbered as arrow-go numbers the dictionaries of a schema of only the
// kept fields: 0, 1, … in field order; the others are dropped. Every offset
// and length used is checked against the message, so arbitrary input yields
// an error wrapping ErrMalformed (or ErrUnsupported), never a panic or an
// out-of-range read. On error dst is returned unchanged in length.
//
// The record batch's body is exactly the sum of the kept buffers' lengths,
// each rounded up to a multiple of 8. Decode the result with the schema
// projected the same way (arrow.Schema fields in keep order, see
// SchemaMessage).
func Project(dst []byte, body []byte, keep []int, layout *Layout) ([]byte, error) {
	if layout == nil || len(layout.nodeStart) == 0 {
		return dst, fmt.Errorf("%w: nil Layout; derive it with LayoutOf", ErrInvalidProjection)
	}
	nf := layout.NumFields()
	for i, k := range keep {
		if k < 0 || k >= nf || (i > 0 && k <= keep[i-1]) {
			return dst, fmt.Errorf("%w: keep %v must be strictly ascending field indexes in [0, %d)", ErrInvalidProjection, keep, nf)
		}
	}
	dicts, v, err := checkedBody(body, layout)
	if err != nil {
		return dst, fmt.Errorf("project: %w", err)
	}
	start := len(dst)
	for i := range dicts {
		d := &dicts[i]
		f, _ := layout.dictByID(d.dict.id)
		if !slices.Contains(keep, f.field) {
			continue
		}
		d.dict.id = 0 // the rank of f among the kept dictionary-encoded fields
		for _, k := range keep[:slices.Index(keep, f.field)] {
			if _, ok := layout.DictionaryID(k); ok {
				d.dict.id++
			}
		}
		if dst, err = copyMessage(dst, d); err != nil {
			return dst[:start], fmt.Errorf("project: dictionary batch: %w", err)
		}
	}
	if dst, err = projectBatch(dst, &v, keep, layout); err != nil {
		return dst[:start], fmt.Errorf("project: %w", err)
	}
	return dst, nil
}

// CheckBody checks that body is a batch body of the schema layout was
// derived from, as Project needs it: a record batch with exactly the
// schema's field nodes and buffers, each inside the body, after exactly
// one whole (not delta) dictionary batch per dictionary-encoded field,
// each with its field's value layout. Errors wrap ErrMalformed or
// ErrUnsupported. Arrow readers accept more (extra trailing nodes and
// buffers, say): a body that is to be stored must pass this too, or
// projected reads of it would fail.
func CheckBody(body []byte, layout *Layout) error {
	if layout == nil || len(layout.nodeStart) == 0 {
		return fmt.Errorf("%w: nil Layout; derive it with LayoutOf", ErrInvalidProjection)
	}
	_, _, err := checkedBody(body, layout)
	return err
}

// checkedBody is viewBody with the checks of CheckBody.
func checkedBody(body []byte, layout *Layout) (dicts []batchView, v batchView, err error) {
	if dicts, v, err = viewBody(body); err != nil {
		return nil, v, err
	}
	if v.nodes.n != layout.NumNodes() || v.bufs.n != layout.NumBuffers() {
		return nil, v, fmt.Errorf("%w: batch has %d field nodes and %d buffers, its schema needs %d and %d",
			ErrMalformed, v.nodes.n, v.bufs.n, layout.NumNodes(), layout.NumBuffers())
	}
	for i := range dicts {
		d := &dicts[i]
		f, ok := layout.dictByID(d.dict.id)
		if !ok {
			return nil, v, fmt.Errorf("%w: dictionary batch %d: no field of the schema has that dictionary", ErrMalformed, d.dict.id)
		}
		if d.nodes.n != f.nodes || d.bufs.n != f.bufs {
			return nil, v, fmt.Errorf("%w: dictionary batch %d has %d field nodes and %d buffers, its field needs %d and %d",
				ErrMalformed, d.dict.id, d.nodes.n, d.bufs.n, f.nodes, f.bufs)
		}
		if d.dict.isDelta {
			return nil, v, fmt.Errorf("%w: dictionary batch %d is a delta; a body carries whole dictionaries", ErrUnsupported, d.dict.id)
		}
		for _, e := range dicts[:i] {
			if e.dict.id == d.dict.id {
				return nil, v, fmt.Errorf("%w: dictionary %d twice", ErrMalformed, d.dict.id)
			}
		}
	}
	if len(dicts) != len(layout.dicts) {
		return nil, v, fmt.Errorf("%w: %d dictionary batches, the schema has %d dictionary-encoded fields", ErrMalformed, len(dicts), len(layout.dicts))
	}
	return dicts, v, nil
}

// copyMessage appends the message of v, with v's dictionary header, its
// buffers copied as they are.
func copyMessage(dst []byte, v *batchView) ([]byte, error) {
	if v.hasCompression && v.method != methodBuffer {
		return dst, fmt.Errorf("%w: body compression method %d (only BUFFER)", ErrUnsupported, v.method)
	}
	var lenStack [8]int64
	lens := lenStack[:0]
	for i := 0; i < v.bufs.n; i++ {
		lens = append(lens, v.bufs.i64At(i, 1))
	}
	return appendBatch(dst, v, lens, v.hasCompression, v.codec, func(out []byte) error {
		p := 0
		for i, n := range lens {
			p += copy(out[p:], v.buf(i))
			p += clear8(out[p : p+int(pad8(n)-n)])
		}
		return nil
	})
}

// projectBatch appends the record batch v with only the fields in keep.
func projectBatch(dst []byte, v *batchView, keep []int, layout *Layout) ([]byte, error) {
	m, nodes, bufs := &v.m, v.nodes, v.bufs
	b := builders.Get().(*flatbuffers.Builder)
	defer builders.Put(b)
	b.Reset()

	// Custom metadata of the message, rebuilt first (flatbuffers build back
	// to front, and vectors cannot nest inside an open table).
	customMeta, err := copyCustomMetadata(b, m.msg)
	if err != nil {
		return dst, fmt.Errorf("custom metadata: %w", err)
	}

	nKeptNodes, nKeptBufs := 0, 0
	for _, k := range keep {
		nodeFrom, nodeTo, bufFrom, bufTo := layout.Span(k)
		nKeptNodes += nodeTo - nodeFrom
		nKeptBufs += bufTo - bufFrom
	}

	// Buffers vector: new offsets are assigned front to back, but the vector
	// is written back to front, so compute the new body length first.
	var newBody int64
	for _, k := range keep {
		_, _, bufFrom, bufTo := layout.Span(k)
		for i := bufFrom; i < bufTo; i++ {
			newBody += pad8(bufs.i64At(i, 1))
		}
	}
	b.StartVector(structSize, nKeptBufs, 8)
	off := newBody
	for j := len(keep) - 1; j >= 0; j-- {
		_, _, bufFrom, bufTo := layout.Span(keep[j])
		for i := bufTo - 1; i >= bufFrom; i-- {
			n := bufs.i64At(i, 1)
			off -= pad8(n)
			b.Prep(8, structSize)
			b.PrependInt64(n)
			b.PrependInt64(off)
		}
	}
	buffersVec := b.EndVector(nKeptBufs)

	b.StartVector(structSize, nKeptNodes, 8)
	for j := len(keep) - 1; j >= 0; j-- {
		nodeFrom, nodeTo, _, _ := layout.Span(keep[j])
		for i := nodeTo - 1; i >= nodeFrom; i-- {
			b.Prep(8, structSize)
			b.PrependInt64(nodes.i64At(i, 1)) // null_count
			b.PrependInt64(nodes.i64At(i, 0)) // length
		}
	}
	nodesVec := b.EndVector(nKeptNodes)

	dst, body := appendBatchMessage(dst, b, m.version, dictHeader{}, v.length, nodesVec, buffersVec,
		v.hasCompression, v.codec, v.method, customMeta, newBody)
	p := 0
	for _, k := range keep {
		_, _, bufFrom, bufTo := layout.Span(k)
		for i := bufFrom; i < bufTo; i++ {
			o, n := bufs.i64At(i, 0), bufs.i64At(i, 1)
			p += copy(body[p:], m.body[o:o+n])
			p += clear8(body[p : p+int(pad8(n)-n)])
		}
	}
	return dst, nil
}

// copyCustomMetadata rebuilds the Message's custom_metadata vector in b and
// returns its offset, or 0 if there is none.
func copyCustomMetadata(b *flatbuffers.Builder, msg fbTable) (flatbuffers.UOffsetT, error) {
	kvs, err := msg.vector(msgCustomMetadata, 4)
	if err != nil || kvs.n == 0 {
		return 0, err
	}
	// Build the KeyValue tables back to front; their offsets go on a small
	// stack array for the common case.
	var stack [8]flatbuffers.UOffsetT
	offs := stack[:0]
	// Keys and values may share bytes in a hostile message; copy no more
	// than the metadata holds so the output cannot blow up.
	budget := len(msg.buf)
	for i := 0; i < kvs.n; i++ {
		kv, err := kvs.tableAt(i)
		if err != nil {
			return 0, err
		}
		key, hasKey, err := kv.str(kvKey)
		if err != nil {
			return 0, err
		}
		val, hasVal, err := kv.str(kvValue)
		if err != nil {
			return 0, err
		}
		if budget -= len(key) + len(val); budget < 0 {
			return 0, fmt.Errorf("%w: custom metadata larger than its message", ErrMalformed)
		}
		var ko, vo flatbuffers.UOffsetT
		if hasKey {
			ko = b.CreateByteString(key)
		}
		if hasVal {
			vo = b.CreateByteString(val)
		}
		b.StartObject(2)
		if hasKey {
			b.PrependUOffsetTSlot(kvKey, ko, 0)
		}
		if hasVal {
			b.PrependUOffsetTSlot(kvValue, vo, 0)
		}
		offs = append(offs, b.EndObject())
	}
	b.StartVector(4, len(offs), 4)
	for i := len(offs) - 1; i >= 0; i-- {
		b.PrependUOffsetT(offs[i])
	}
	return b.EndVector(len(offs)), nil
}

// appendBatchMessage finishes a RecordBatch message in b (the optional
// BodyCompression, the RecordBatch table over nodesVec and buffersVec, the
// DictionaryBatch around it when dict.ok, and the Message) and appends it to dst framed as an encapsulated message
// (continuation, metadata length, metadata zero-padded to 8), followed by
// bodyLen bytes of room for the body. It returns dst and that body slice,
// which the caller fills.
func appendBatchMessage(dst []byte, b *flatbuffers.Builder, version int16, dict dictHeader, length int64,
	nodesVec, buffersVec flatbuffers.UOffsetT, compressed bool, codec, method uint8,
	customMeta flatbuffers.UOffsetT, bodyLen int64) ([]byte, []byte) {
	var compression flatbuffers.UOffsetT
	if compressed {
		b.StartObject(2)
		b.PrependByteSlot(bcCodec, codec, 0)
		b.PrependByteSlot(bcMethod, method, 0)
		compression = b.EndObject()
	}
	b.StartObject(5)
	b.PrependInt64Slot(rbLength, length, 0)
	b.PrependUOffsetTSlot(rbNodes, nodesVec, 0)
	b.PrependUOffsetTSlot(rbBuffers, buffersVec, 0)
	if compressed {
		b.PrependUOffsetTSlot(rbCompression, compression, 0)
	}
	batch := b.EndObject()
	hdrType := uint8(hdrRecordBatch)
	if dict.ok {
		b.StartObject(3)
		b.PrependInt64Slot(dbID, dict.id, 0)
		b.PrependUOffsetTSlot(dbData, batch, 0)
		b.PrependBoolSlot(dbIsDelta, dict.isDelta, false)
		batch, hdrType = b.EndObject(), hdrDictionaryBatch
	}

	b.StartObject(5)
	b.PrependInt16Slot(msgVersion, version, 0)
	b.PrependByteSlot(msgHeaderType, hdrType, 0)
	b.PrependUOffsetTSlot(msgHeader, batch, 0)
	b.PrependInt64Slot(msgBodyLength, bodyLen, 0)
	if customMeta != 0 {
		b.PrependUOffsetTSlot(msgCustomMetadata, customMeta, 0)
	}
	b.Finish(b.EndObject())
	meta := b.FinishedBytes()

	metaLen := int(pad8(int64(8+len(meta)))) - 8
	start := len(dst)
	dst = grow(dst, 8+metaLen+int(bodyLen))
	out := dst[start:]
	le.PutUint32(out, continuation)
	le.PutUint32(out[4:], uint32(metaLen))
	p := 8 + copy(out[8:], meta)
	clear8(out[p : 8+metaLen])
	return dst, out[8+metaLen:]
}

func pad8(n int64) int64 { return (n + 7) &^ 7 }

// clear8 zeroes b (at most 7 bytes of padding) and returns its length.
func clear8(b []byte) int {
	clear(b)
	return len(b)
}

// grow extends dst by n bytes, reallocating at most once.
func grow(dst []byte, n int) []byte {
	if cap(dst)-len(dst) < n {
		nd := make([]byte, len(dst), len(dst)+n)
		copy(nd, dst)
		dst = nd
	}
	return dst[:len(dst)+n]
}
