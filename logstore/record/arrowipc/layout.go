package arrowipc

import "fmt"

const (
	// Schema table slots.
	schemaEndianness     = 0
	schemaFields         = 1
	schemaCustomMetadata = 2
	schemaFeatures       = 3

	// Field table slots.
	fieldName           = 0
	fieldTypeType       = 2
	fieldDictionary     = 4
	fieldChildren       = 5
	fieldCustomMetadata = 6

	// DictionaryEncoding table slots.
	dictEncID        = 0
	dictEncIndexType = 1

	// Int table slots.
	intBitWidth = 0
	intSigned   = 1

	// KeyValue table slots.
	keyValueKey   = 0
	keyValueValue = 1

	// Type union tags (Schema.fbs Type).
	typeNull            = 1
	typeInt             = 2
	typeFloatingPoint   = 3
	typeBinary          = 4
	typeUtf8            = 5
	typeBool            = 6
	typeDecimal         = 7
	typeDate            = 8
	typeTime            = 9
	typeTimestamp       = 10
	typeInterval        = 11
	typeList            = 12
	typeStruct          = 13
	typeUnion           = 14
	typeFixedSizeBinary = 15
	typeFixedSizeList   = 16
	typeMap             = 17
	typeDuration        = 18
	typeLargeBinary     = 19
	typeLargeUtf8       = 20
	typeLargeList       = 21
	typeRunEndEncoded   = 22
	typeBinaryView      = 23
	typeUtf8View        = 24
	typeListView        = 25
	typeLargeListView   = 26

	// maxFieldDepth bounds the recursion over nested fields; flatbuffer
	// offsets can form cycles, so a hostile schema must not recurse forever.
	maxFieldDepth = 64
)

// Layout tells, for each top-level field of a schema, which field nodes and
// buffers of a record batch belong to it. It is derived from a schema message
// by LayoutOf, is immutable, and is safe for concurrent use.
type Layout struct {
	// nodeStart[i] and bufStart[i] are the index of field i's first field
	// node and first buffer; index NumFields() holds the totals.
	nodeStart []int
	bufStart  []int
	// dicts lists the dictionary-encoded top-level fields in field order.
	dicts []dictField
}

// dictField is a dictionary-encoded top-level field: its index, its
// dictionary id and how many field nodes and buffers a dictionary batch of
// its value type holds.
type dictField struct {
	field       int
	id          int64
	nodes, bufs int
}

// DictionaryID returns the id of top-level field i's dictionary, and false
// when the field is not dictionary-encoded.
func (l *Layout) DictionaryID(i int) (int64, bool) {
	for _, d := range l.dicts {
		if d.field == i {
			return d.id, true
		}
	}
	return 0, false
}

// dictByID returns the dictionary-encoded field with dictionary id id.
func (l *Layout) dictByID(id int64) (dictField, bool) {
	for _, d := range l.dicts {
		if d.id == id {
			return d, true
		}
	}
	return dictField{}, false
}

// NumFields returns the number of top-level fields.
func (l *Layout) NumFields() int { return len(l.nodeStart) - 1 }

// NumNodes returns the number of field nodes a record batch of this schema holds.
func (l *Layout) NumNodes() int { return l.nodeStart[len(l.nodeStart)-1] }

// NumBuffers returns the number of buffers a record batch of this schema holds.
func (l *Layout) NumBuffers() int { return l.bufStart[len(l.bufStart)-1] }

// Span returns the field nodes [nodeFrom, nodeTo) and buffers [bufFrom,
// bufTo) that top-level field i spans. It panics if i is out of range, like
// a slice index.
func (l *Layout) Span(i int) (nodeFrom, nodeTo, bufFrom, bufTo int) {
	return l.nodeStart[i], l.nodeStart[i+1], l.bufStart[i], l.bufStart[i+1]
}

// LayoutOf parses an encapsulated schema message (as returned by SplitStream
// or SchemaMessage) and derives the batch layout of its fields. Fields of the
// flat types, Null, and the nested List, LargeList, FixedSizeList, Map and
// Struct types are supported, and top-level fields dictionary-encoded with
// integer indices (a record batch holds their indices: one field node, two
// buffers; the values come in dictionary batches). Dictionaries nested in
// other fields, two fields sharing a dictionary id, unions, run-end encoded
// and view types fail with ErrUnsupported, as does big-endian data.
//
// A schema message LayoutOf accepts is safe to hand to arrow-go's reader:
// every vector arrow-go sizes an allocation by (fields, children, custom
// metadata, features) and every name, key and value string lies inside the
// message. arrow-go trusts those lengths, so a few hundred hostile bytes
// could otherwise make it allocate hundreds of gigabytes.
func LayoutOf(schemaMsg []byte) (*Layout, error) {
	m, err := parseOne(schemaMsg, hdrSchema)
	if err != nil {
		return nil, fmt.Errorf("layout: %w", err)
	}
	endian, err := m.hdr.i16(schemaEndianness, 0)
	if err != nil {
		return nil, fmt.Errorf("layout: schema endianness: %w", err)
	}
	if endian != 0 {
		return nil, fmt.Errorf("layout: %w: big-endian schema", ErrUnsupported)
	}
	fields, err := m.hdr.vector(schemaFields, 4)
	if err != nil {
		return nil, fmt.Errorf("layout: schema fields: %w", err)
	}
	if err := checkMetadata(m.hdr, schemaCustomMetadata); err != nil {
		return nil, fmt.Errorf("layout: schema custom metadata: %w", err)
	}
	if _, err := m.hdr.vector(schemaFeatures, 8); err != nil {
		return nil, fmt.Errorf("layout: schema features: %w", err)
	}
	w := walker{budget: len(schemaMsg) / 4}
	l := &Layout{nodeStart: make([]int, 1, fields.n+1), bufStart: make([]int, 1, fields.n+1)}
	for i := 0; i < fields.n; i++ {
		f, err := fields.tableAt(i)
		if err != nil {
			return nil, fmt.Errorf("layout: field %d: %w", i, err)
		}
		nodes, bufs, err := w.walk(f, 0)
		if err != nil {
			return nil, fmt.Errorf("layout: field %d: %w", i, err)
		}
		if w.dict != nil {
			if _, dup := l.dictByID(w.dict.id); dup {
				return nil, fmt.Errorf("layout: field %d: %w: shares dictionary id %d with another field", i, ErrUnsupported, w.dict.id)
			}
			d := *w.dict
			d.field, d.nodes, d.bufs = i, nodes, bufs
			l.dicts = append(l.dicts, d)
			nodes, bufs = 1, 2 // the indices: validity, data
			w.dict = nil
		}
		l.nodeStart = append(l.nodeStart, l.nodeStart[i]+nodes)
		l.bufStart = append(l.bufStart, l.bufStart[i]+bufs)
	}
	return l, nil
}

type walker struct {
	budget int // fields left to visit; honest schemas spend >= 4 bytes per field
	// dict is set by walk for a dictionary-encoded top-level field; the
	// counts walk returns are then those of its value type.
	dict *dictField
}

// walk returns how many field nodes and buffers field f and its descendants
// occupy in a record batch (for a dictionary-encoded top-level field: in a
// dictionary batch of its values, and w.dict is set).
func (w *walker) walk(f fbTable, depth int) (nodes, bufs int, err error) {
	if depth > maxFieldDepth {
		return 0, 0, fmt.Errorf("%w: fields nested deeper than %d", ErrMalformed, maxFieldDepth)
	}
	if w.budget--; w.budget < 0 {
		return 0, 0, fmt.Errorf("%w: more fields than the schema message can hold", ErrMalformed)
	}
	name, _, err := f.str(fieldName)
	if err != nil {
		return 0, 0, fmt.Errorf("name: %w", err)
	}
	if enc, ok, err := f.table(fieldDictionary); err != nil || ok {
		if err != nil {
			return 0, 0, fmt.Errorf("field %q dictionary: %w", name, err)
		}
		if depth > 0 {
			return 0, 0, fmt.Errorf("%w: dictionary-encoded field %q inside another field", ErrUnsupported, name)
		}
		if w.dict, err = dictionaryOf(enc); err != nil {
			return 0, 0, fmt.Errorf("field %q dictionary: %w", name, err)
		}
	}
	typ, err := f.u8(fieldTypeType, 0)
	if err != nil {
		return 0, 0, fmt.Errorf("field %q type: %w", name, err)
	}
	children, err := f.vector(fieldChildren, 4)
	if err != nil {
		return 0, 0, fmt.Errorf("field %q children: %w", name, err)
	}
	if err := checkMetadata(f, fieldCustomMetadata); err != nil {
		return 0, 0, fmt.Errorf("field %q custom metadata: %w", name, err)
	}
	wantChildren := 0
	switch typ {
	case typeNull:
		bufs = 0
	case typeInt, typeFloatingPoint, typeBool, typeDecimal, typeDate, typeTime,
		typeTimestamp, typeInterval, typeFixedSizeBinary, typeDuration:
		bufs = 2 // validity, data
	case typeBinary, typeUtf8, typeLargeBinary, typeLargeUtf8:
		bufs = 3 // validity, offsets, data
	case typeList, typeLargeList, typeMap:
		bufs, wantChildren = 2, 1 // validity, offsets
	case typeFixedSizeList:
		bufs, wantChildren = 1, 1 // validity
	case typeStruct:
		bufs, wantChildren = 1, -1 // validity; any number of children
	case typeUnion, typeRunEndEncoded, typeBinaryView, typeUtf8View, typeListView, typeLargeListView:
		return 0, 0, fmt.Errorf("%w: field %q has Arrow type tag %d (unions, run-end encoded and view types)", ErrUnsupported, name, typ)
	default:
		return 0, 0, fmt.Errorf("%w: field %q has unknown Arrow type tag %d", ErrMalformed, name, typ)
	}
	if wantChildren >= 0 && children.n != wantChildren {
		return 0, 0, fmt.Errorf("%w: field %q of type tag %d has %d children, want %d", ErrMalformed, name, typ, children.n, wantChildren)
	}
	nodes = 1
	for i := 0; i < children.n; i++ {
		c, err := children.tableAt(i)
		if err != nil {
			return 0, 0, fmt.Errorf("field %q child %d: %w", name, i, err)
		}
		cn, cb, err := w.walk(c, depth+1)
		if err != nil {
			return 0, 0, fmt.Errorf("field %q child %d: %w", name, i, err)
		}
		nodes += cn
		bufs += cb
	}
	return nodes, bufs, nil
}

// dictionaryOf reads a DictionaryEncoding table: its id and its index
// type, which must be an integer type (absent: signed 32-bit).
func dictionaryOf(enc fbTable) (*dictField, error) {
	id, err := enc.i64(dictEncID, 0)
	if err != nil {
		return nil, fmt.Errorf("id: %w", err)
	}
	idx, ok, err := enc.table(dictEncIndexType)
	if err != nil {
		return nil, fmt.Errorf("index type: %w", err)
	}
	if ok {
		width, err := idx.i32(intBitWidth, 0)
		if err != nil {
			return nil, fmt.Errorf("index type: %w", err)
		}
		if _, err := idx.u8(intSigned, 0); err != nil {
			return nil, fmt.Errorf("index type: %w", err)
		}
		switch width {
		case 8, 16, 32, 64:
		default:
			return nil, fmt.Errorf("%w: index type of %d bits", ErrMalformed, width)
		}
	}
	return &dictField{id: id}, nil
}

// checkMetadata checks the custom metadata vector in slot of t (a vector
// of KeyValue tables), its tables and their key and value strings.
func checkMetadata(t fbTable, slot int) error {
	kvs, err := t.vector(slot, 4)
	if err != nil {
		return err
	}
	for i := 0; i < kvs.n; i++ {
		kv, err := kvs.tableAt(i)
		if err != nil {
			return fmt.Errorf("entry %d: %w", i, err)
		}
		if _, _, err := kv.str(keyValueKey); err != nil {
			return fmt.Errorf("entry %d key: %w", i, err)
		}
		if _, _, err := kv.str(keyValueValue); err != nil {
			return fmt.Errorf("entry %d value: %w", i, err)
		}
	}
	return nil
}
