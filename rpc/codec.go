package rpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/fluss-node/fluss-node/logstore/record"
	flussv1 "github.com/fluss-node/fluss-node/proto/flussv1"
)

// ErrBadJSON wraps every error of the JSON codec (malformed JSON, unknown
// fields, rows that are not an array of objects).
var ErrBadJSON = errors.New("bad JSON request")

// JSONCodec is the Connect codec for "application/json": protojson for every
// field, except bytes fields marked [(fluss.v1.json_rows) = true], which
// travel inline as a JSON array (`"rows": [{"id": 1}]`) and hold the raw text
// of that array in the message. Pass it to handlers and clients with
// connect.WithCodec (it replaces connect-go's own "json" codec); see Codecs.
//
// Invariants: Unmarshal copies everything it keeps (the input buffer may be
// reused by connect); an empty bytes field is marshaled as `[]` and `[]` (or
// null) unmarshals to an empty field, so JSON round trips are exact.
type JSONCodec struct{ name string }

// Codecs returns the JSON codecs for both content types connect-go knows
// ("json" and "json; charset=utf-8").
func Codecs() []connect.Codec {
	return []connect.Codec{&JSONCodec{name: "json"}, &JSONCodec{name: "json; charset=utf-8"}}
}

// Name implements connect.Codec.
func (c *JSONCodec) Name() string {
	if c.name == "" {
		return "json"
	}
	return c.name
}

// IsBinary reports false: the codec writes text.
func (c *JSONCodec) IsBinary() bool { return false }

// Marshal implements connect.Codec.
func (c *JSONCodec) Marshal(msg any) ([]byte, error) { return c.MarshalAppend(nil, msg) }

// MarshalAppend appends the JSON form of msg to dst.
func (c *JSONCodec) MarshalAppend(dst []byte, msg any) ([]byte, error) {
	m, ok := msg.(proto.Message)
	if !ok {
		return dst, fmt.Errorf("%w: %T is not a proto.Message", ErrBadJSON, msg)
	}
	return appendMessageJSON(dst, m.ProtoReflect())
}

// Unmarshal implements connect.Codec.
func (c *JSONCodec) Unmarshal(data []byte, msg any) error {
	m, ok := msg.(proto.Message)
	if !ok {
		return fmt.Errorf("%w: %T is not a proto.Message", ErrBadJSON, msg)
	}
	return unmarshalMessageJSON(data, m.ProtoReflect())
}

// msgInfo caches, per message type, where json_rows fields are.
type msgInfo struct {
	rows     []protoreflect.FieldDescriptor // json_rows bytes fields of this message
	nested   []protoreflect.FieldDescriptor // message fields whose type holds json_rows fields
	byName   map[string]protoreflect.FieldDescriptor
	special  bool // rows or nested non-empty
	nullRows bool // rows may hold null elements (LookupResponse)
}

var msgInfos sync.Map // protoreflect.FullName → *msgInfo

func infoOf(md protoreflect.MessageDescriptor) *msgInfo {
	if v, ok := msgInfos.Load(md.FullName()); ok {
		return v.(*msgInfo)
	}
	mi := buildInfo(md, map[protoreflect.FullName]bool{})
	v, _ := msgInfos.LoadOrStore(md.FullName(), mi)
	return v.(*msgInfo)
}

func buildInfo(md protoreflect.MessageDescriptor, visiting map[protoreflect.FullName]bool) *msgInfo {
	visiting[md.FullName()] = true
	mi := &msgInfo{byName: map[string]protoreflect.FieldDescriptor{}}
	mi.nullRows = md.FullName() == "fluss.v1.LookupResponse"
	fields := md.Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		mi.byName[fd.JSONName()] = fd
		mi.byName[string(fd.Name())] = fd
		if isRowsField(fd) {
			mi.rows = append(mi.rows, fd)
			continue
		}
		if fd.Kind() == protoreflect.MessageKind && !fd.IsMap() {
			sub := fd.Message()
			if visiting[sub.FullName()] {
				continue // recursion: fluss.v1 has none; never loop
			}
			if buildInfo(sub, visiting).special {
				mi.nested = append(mi.nested, fd)
			}
		}
	}
	delete(visiting, md.FullName())
	mi.special = len(mi.rows) > 0 || len(mi.nested) > 0
	return mi
}

func isRowsField(fd protoreflect.FieldDescriptor) bool {
	if fd.Kind() != protoreflect.BytesKind || fd.IsList() {
		return false
	}
	opts := fd.Options()
	if opts == nil {
		return false
	}
	v, ok := proto.GetExtension(opts, flussv1.E_JsonRows).(bool)
	return ok && v
}

var (
	// Zero offsets and bucket 0 are real answers: responses show every
	// field, set or not (appendUnpopulated does the same for messages with
	// json_rows fields).
	pjMarshal   = protojson.MarshalOptions{EmitUnpopulated: true}
	pjPlain     = protojson.MarshalOptions{}
	pjUnmarshal = protojson.UnmarshalOptions{}
)

// appendMessageJSON writes m as JSON. Messages without json_rows fields go
// through protojson as they are; the others are written as an object whose
// plain fields come from protojson (a shallow copy without the special
// fields) and whose special fields are spliced in.
func appendMessageJSON(dst []byte, m protoreflect.Message) ([]byte, error) {
	mi := infoOf(m.Descriptor())
	if !mi.special {
		return pjMarshal.MarshalAppend(dst, m.Interface())
	}
	plain := m.New()
	isSpecial := func(fd protoreflect.FieldDescriptor) bool {
		for _, f := range mi.rows {
			if f == fd {
				return true
			}
		}
		for _, f := range mi.nested {
			if f == fd {
				return true
			}
		}
		return false
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if !isSpecial(fd) {
			plain.Set(fd, v)
		}
		return true
	})
	inner, err := pjPlain.Marshal(plain.Interface())
	if err != nil {
		return dst, err
	}
	inner = bytes.TrimSpace(inner)
	inner = bytes.TrimSpace(inner[1 : len(inner)-1]) // strip { }
	dst = append(dst, '{')
	dst = append(dst, inner...)
	sep := len(inner) > 0
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if isSpecial(fd) || m.Has(fd) || fd.HasPresence() {
			continue
		}
		if sep {
			dst = append(dst, ',')
		}
		sep = true
		dst = appendJSONKey(dst, fd.JSONName())
		dst = appendZeroJSON(dst, fd)
	}
	for _, fd := range mi.rows {
		if sep {
			dst = append(dst, ',')
		}
		sep = true
		dst = appendJSONKey(dst, fd.JSONName())
		raw := m.Get(fd).Bytes()
		if len(raw) == 0 {
			dst = append(dst, '[', ']')
		} else {
			dst = append(dst, raw...)
		}
	}
	for _, fd := range mi.nested {
		if fd.IsList() {
			l := m.Get(fd).List()
			if sep {
				dst = append(dst, ',')
			}
			sep = true
			dst = appendJSONKey(dst, fd.JSONName())
			dst = append(dst, '[')
			for i := 0; i < l.Len(); i++ {
				if i > 0 {
					dst = append(dst, ',')
				}
				if dst, err = appendMessageJSON(dst, l.Get(i).Message()); err != nil {
					return dst, err
				}
			}
			dst = append(dst, ']')
			continue
		}
		if !m.Has(fd) {
			continue
		}
		if sep {
			dst = append(dst, ',')
		}
		sep = true
		dst = appendJSONKey(dst, fd.JSONName())
		if dst, err = appendMessageJSON(dst, m.Get(fd).Message()); err != nil {
			return dst, err
		}
	}
	return append(dst, '}'), nil
}

// appendZeroJSON writes the protojson form of an unset field without
// presence, as EmitUnpopulated would.
func appendZeroJSON(dst []byte, fd protoreflect.FieldDescriptor) []byte {
	switch {
	case fd.IsList():
		return append(dst, '[', ']')
	case fd.IsMap():
		return append(dst, '{', '}')
	}
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return append(dst, "false"...)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind,
		protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return append(dst, `"0"`...)
	case protoreflect.StringKind, protoreflect.BytesKind:
		return append(dst, `""`...)
	case protoreflect.EnumKind:
		dst = append(dst, '"')
		dst = append(dst, fd.Enum().Values().ByNumber(0).Name()...)
		return append(dst, '"')
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return append(dst, "null"...)
	}
	return append(dst, '0')
}

func appendJSONKey(dst []byte, name string) []byte {
	dst = append(dst, '"')
	dst = append(dst, name...) // JSON names of fluss.v1 are plain identifiers
	return append(dst, '"', ':')
}

// unmarshalMessageJSON fills m from data. Plain fields go through protojson;
// json_rows fields are checked to be arrays of objects and their raw text is
// copied into the bytes field.
func unmarshalMessageJSON(data []byte, m protoreflect.Message) error {
	mi := infoOf(m.Descriptor())
	if !mi.special {
		if err := pjUnmarshal.Unmarshal(data, m.Interface()); err != nil {
			return fmt.Errorf("%w: %v", ErrBadJSON, err)
		}
		return nil
	}
	obj, err := scanObject(data)
	if err != nil {
		return err
	}
	plain := make([]byte, 0, 64)
	plain = append(plain, '{')
	var specials []specialField
	seen := make(map[protoreflect.FieldDescriptor]bool, len(obj))
	for _, kv := range obj {
		name, err := unquoteKey(kv.key)
		if err != nil {
			return err
		}
		fd, ok := mi.byName[name]
		if !ok {
			return fmt.Errorf("%w: unknown field %q in %s", ErrBadJSON, name, m.Descriptor().Name())
		}
		if seen[fd] {
			return fmt.Errorf("%w: field %q appears twice in %s", ErrBadJSON, name, m.Descriptor().Name())
		}
		seen[fd] = true
		if isRowsField(fd) || containsFD(mi.nested, fd) {
			specials = append(specials, specialField{fd, kv.val})
			continue
		}
		if len(plain) > 1 {
			plain = append(plain, ',')
		}
		plain = append(plain, kv.key...)
		plain = append(plain, ':')
		plain = append(plain, kv.val...)
	}
	plain = append(plain, '}')
	if len(plain) > 2 {
		if err := pjUnmarshal.Unmarshal(plain, m.Interface()); err != nil {
			return fmt.Errorf("%w: %v", ErrBadJSON, err)
		}
	}
	for _, s := range specials {
		if isRowsField(s.fd) {
			raw, err := checkRows(s.raw, s.fd, mi.nullRows)
			if err != nil {
				return err
			}
			if raw != nil {
				m.Set(s.fd, protoreflect.ValueOfBytes(raw))
			}
			continue
		}
		if err := unmarshalNested(s.raw, m, s.fd); err != nil {
			return err
		}
	}
	return nil
}

type specialField struct {
	fd  protoreflect.FieldDescriptor
	raw []byte
}

func containsFD(list []protoreflect.FieldDescriptor, fd protoreflect.FieldDescriptor) bool {
	for _, f := range list {
		if f == fd {
			return true
		}
	}
	return false
}

// unmarshalNested fills a (repeated) message field whose type holds
// json_rows fields.
func unmarshalNested(raw []byte, m protoreflect.Message, fd protoreflect.FieldDescriptor) error {
	raw = bytes.TrimSpace(raw)
	if string(raw) == "null" {
		return nil
	}
	if !fd.IsList() {
		sub := m.Mutable(fd).Message()
		return unmarshalMessageJSON(raw, sub)
	}
	elems, err := scanArray(raw)
	if err != nil {
		return fmt.Errorf("%w: field %q: %v", ErrBadJSON, fd.JSONName(), err)
	}
	l := m.Mutable(fd).List()
	for _, e := range elems {
		v := l.NewElement()
		if err := unmarshalMessageJSON(e, v.Message()); err != nil {
			return err
		}
		l.Append(v)
	}
	return nil
}

// checkRows validates a json_rows value and returns a copy of its raw text
// (nil for null or an empty array).
func checkRows(raw []byte, fd protoreflect.FieldDescriptor, nullOK bool) ([]byte, error) {
	raw = bytes.TrimSpace(raw)
	if string(raw) == "null" {
		return nil, nil
	}
	if len(raw) == 0 || raw[0] != '[' {
		return nil, fmt.Errorf("%w: field %q must be a JSON array of row objects like [{\"id\":1}]", ErrBadJSON, fd.JSONName())
	}
	var notObject error
	n, err := eachElement(raw, func(i int, e []byte) bool {
		switch {
		case e[0] == '{':
		case nullOK && e[0] == 'n':
		default:
			notObject = fmt.Errorf("%w: field %q: element %d is not a JSON object (each row is {\"column\": value})", ErrBadJSON, fd.JSONName(), i)
			return false
		}
		return true
	})
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: field %q: %v", ErrBadJSON, fd.JSONName(), err)
	case notObject != nil:
		return nil, notObject
	case n == 0:
		return nil, nil
	}
	return bytes.Clone(raw), nil
}

// ---------------------------------------------------------------- scanner
//
// A strict, allocation-light JSON scanner: it finds value boundaries and
// validates syntax (RFC 8259) without building values.

type keyVal struct {
	key []byte // quoted key, as written
	val []byte // raw value, trimmed
}

var errJSONSyntax = errors.New("malformed JSON")

func syntaxErr(data []byte, i int, what string) error {
	return fmt.Errorf("%w: %w at byte %d: %s", ErrBadJSON, errJSONSyntax, i, what)
}

func skipWS(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// scanObject splits a JSON object into its members in one validating pass.
func scanObject(data []byte) ([]keyVal, error) {
	i := skipWS(data, 0)
	if i >= len(data) || data[i] != '{' {
		return nil, syntaxErr(data, i, "expected a JSON object")
	}
	var out []keyVal
	i = skipWS(data, i+1)
	if i < len(data) && data[i] == '}' {
		i++
	} else {
		for {
			i = skipWS(data, i)
			if i >= len(data) || data[i] != '"' {
				return nil, syntaxErr(data, i, "expected a quoted object key")
			}
			ks := i
			ke, err := skipString(data, i)
			if err != nil {
				return nil, err
			}
			i = skipWS(data, ke)
			if i >= len(data) || data[i] != ':' {
				return nil, syntaxErr(data, i, "expected ':' after an object key")
			}
			vs := skipWS(data, i+1)
			ve, err := skipValue(data, vs, 1)
			if err != nil {
				return nil, err
			}
			out = append(out, keyVal{key: data[ks:ke], val: data[vs:ve]})
			i = skipWS(data, ve)
			if i >= len(data) {
				return nil, syntaxErr(data, i, "unterminated object")
			}
			if data[i] == '}' {
				i++
				break
			}
			if data[i] != ',' {
				return nil, syntaxErr(data, i, "expected ',' or '}' in an object")
			}
			i++
		}
	}
	if j := skipWS(data, i); j != len(data) {
		return nil, syntaxErr(data, j, "unexpected data after the object")
	}
	return out, nil
}

// scanArray splits an already validated JSON array (a value scanObject
// returned) into its elements.
func scanArray(data []byte) ([][]byte, error) {
	var out [][]byte
	_, err := eachElement(data, func(_ int, e []byte) bool {
		out = append(out, e)
		return true
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// eachElement calls fn with each element of the JSON array data, in order,
// until fn returns false, and returns how many elements it passed. A
// syntax error is reported only up to where fn stopped it.
func eachElement(data []byte, fn func(i int, elem []byte) bool) (int, error) {
	i := skipWS(data, 0)
	if i >= len(data) || data[i] != '[' {
		return 0, syntaxErr(data, i, "expected a JSON array")
	}
	i = skipWS(data, i+1)
	if i < len(data) && data[i] == ']' {
		return 0, nil
	}
	for n := 0; ; n++ {
		i = skipWS(data, i)
		vs := i
		ve, err := skipValue(data, i, 1)
		if err != nil {
			return n, err
		}
		if !fn(n, data[vs:ve]) {
			return n + 1, nil
		}
		i = skipWS(data, ve)
		if i >= len(data) {
			return n + 1, syntaxErr(data, i, "unterminated array")
		}
		if data[i] == ']' {
			return n + 1, nil
		}
		if data[i] != ',' {
			return n + 1, syntaxErr(data, i, "expected ',' or ']' in an array")
		}
		i++
	}
}

const maxJSONDepth = 256

// skipValue returns the index just after the JSON value that starts at i
// (no leading whitespace).
func skipValue(data []byte, i, depth int) (int, error) {
	if depth > maxJSONDepth {
		return i, syntaxErr(data, i, "nested too deeply")
	}
	if i >= len(data) {
		return i, syntaxErr(data, i, "unexpected end of input")
	}
	switch c := data[i]; {
	case c == '{':
		i = skipWS(data, i+1)
		if i < len(data) && data[i] == '}' {
			return i + 1, nil
		}
		for {
			i = skipWS(data, i)
			if i >= len(data) || data[i] != '"' {
				return i, syntaxErr(data, i, "expected a quoted object key")
			}
			var err error
			if i, err = skipString(data, i); err != nil {
				return i, err
			}
			i = skipWS(data, i)
			if i >= len(data) || data[i] != ':' {
				return i, syntaxErr(data, i, "expected ':' after an object key")
			}
			i = skipWS(data, i+1)
			if i, err = skipValue(data, i, depth+1); err != nil {
				return i, err
			}
			i = skipWS(data, i)
			if i >= len(data) {
				return i, syntaxErr(data, i, "unterminated object")
			}
			if data[i] == '}' {
				return i + 1, nil
			}
			if data[i] != ',' {
				return i, syntaxErr(data, i, "expected ',' or '}' in an object")
			}
			i++
		}
	case c == '[':
		i = skipWS(data, i+1)
		if i < len(data) && data[i] == ']' {
			return i + 1, nil
		}
		for {
			i = skipWS(data, i)
			var err error
			if i, err = skipValue(data, i, depth+1); err != nil {
				return i, err
			}
			i = skipWS(data, i)
			if i >= len(data) {
				return i, syntaxErr(data, i, "unterminated array")
			}
			if data[i] == ']' {
				return i + 1, nil
			}
			if data[i] != ',' {
				return i, syntaxErr(data, i, "expected ',' or ']' in an array")
			}
			i++
		}
	case c == '"':
		return skipString(data, i)
	case c == 't':
		return skipLiteral(data, i, "true")
	case c == 'f':
		return skipLiteral(data, i, "false")
	case c == 'n':
		return skipLiteral(data, i, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		return skipNumber(data, i)
	default:
		return i, syntaxErr(data, i, fmt.Sprintf("unexpected character %q", c))
	}
}

func skipLiteral(data []byte, i int, lit string) (int, error) {
	if len(data)-i < len(lit) || string(data[i:i+len(lit)]) != lit {
		return i, syntaxErr(data, i, "invalid literal (want true, false or null)")
	}
	return i + len(lit), nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func skipNumber(data []byte, i int) (int, error) {
	start := i
	if data[i] == '-' {
		i++
	}
	switch {
	case i < len(data) && data[i] == '0':
		i++
	case i < len(data) && isDigit(data[i]):
		for i < len(data) && isDigit(data[i]) {
			i++
		}
	default:
		return i, syntaxErr(data, start, "invalid number")
	}
	if i < len(data) && data[i] == '.' {
		i++
		if i >= len(data) || !isDigit(data[i]) {
			return i, syntaxErr(data, start, "invalid number")
		}
		for i < len(data) && isDigit(data[i]) {
			i++
		}
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if i >= len(data) || !isDigit(data[i]) {
			return i, syntaxErr(data, start, "invalid number")
		}
		for i < len(data) && isDigit(data[i]) {
			i++
		}
	}
	return i, nil
}

// skipString returns the index after the closing quote of the string at i.
func skipString(data []byte, i int) (int, error) {
	start := i
	if i >= len(data) || data[i] != '"' {
		return i, syntaxErr(data, i, "expected a string")
	}
	i++
	for i < len(data) {
		c := data[i]
		switch {
		case c == '"':
			return i + 1, nil
		case c == '\\':
			n, msg := record.JSONEscapeLen(data[i:])
			if msg != "" {
				return i, syntaxErr(data, i, msg)
			}
			i += n
		case c < 0x20:
			return i, syntaxErr(data, i, "control character in a string")
		default:
			i++
		}
	}
	return i, syntaxErr(data, start, "unterminated string")
}

// unquoteKey decodes a quoted object key. Keys with escapes are rare; they
// take the slow path through protojson-compatible decoding.
func unquoteKey(q []byte) (string, error) {
	if bytes.IndexByte(q, '\\') < 0 {
		return string(q[1 : len(q)-1]), nil
	}
	var s string
	if err := jsonUnmarshalString(q, &s); err != nil {
		return "", fmt.Errorf("%w: bad object key %s", ErrBadJSON, q)
	}
	return s, nil
}

func jsonUnmarshalString(q []byte, s *string) error { return json.Unmarshal(q, s) }
