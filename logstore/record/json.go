package record

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/valyala/fastjson"
)

// ErrBadRow wraps every JSON row decoding failure. Messages name the row
// (0-based) and the column.
var ErrBadRow = errors.New("bad row")

var jsonParsers fastjson.ParserPool

// maxPooledParserInput: parsers that parsed more JSON are not kept.
// Larger row sets are parsed one row at a time (decodeJSONRowByRow).
const maxPooledParserInput = 256 << 10

// DecodeJSONRows converts rows, a JSON array of objects {"column": value},
// into an Arrow record with schema s.ArrowSchema(). Conversions are exact
// (FORMAT.md §2); errors wrap ErrBadRow. mem nil means the Go allocator. The
// record is owned by the caller.
func DecodeJSONRows(s *Schema, rows []byte, mem memory.Allocator) (arrow.Record, error) {
	return decodeJSONRows(s, rows, nil, mem)
}

// DecodeJSONRowsPartial is DecodeJSONRows for partial updates: only the
// columns whose indexes are in target may appear in a row (NOT NULL ones
// among them must); every other column is null in the result, whatever its
// nullability. The result therefore does not pass ValidateRecord when a
// NOT NULL column is outside target. Checking that target holds the primary
// key is the caller's business.
func DecodeJSONRowsPartial(s *Schema, rows []byte, target []int, mem memory.Allocator) (arrow.Record, error) {
	if target == nil {
		target = []int{}
	}
	return decodeJSONRows(s, rows, target, mem)
}

type jsonDecoder struct {
	s       *Schema
	cols    []colAcc
	index   map[string]int
	seen    []int
	allowed []bool
	scratch []byte
	row     int   // the row being decoded
	ferr    error // the first error of visit
	visitFn func(key []byte, v *fastjson.Value)
}

// visit decodes one key/value of row d.row (fastjson's Object.Visit
// callback; d.visitFn is bound once per pooled decoder).
func (d *jsonDecoder) visit(key []byte, v *fastjson.Value) {
	if d.ferr != nil {
		return
	}
	row := d.row
	ci, ok := d.index[string(key)]
	if !ok {
		d.ferr = fmt.Errorf("%w: row %d: unknown column %q", ErrBadRow, row, clip(key))
		return
	}
	if len(d.allowed) > 0 && !d.allowed[ci] {
		d.ferr = fmt.Errorf("%w: row %d: column %q is not one of the target columns", ErrBadRow, row, clip(key))
		return
	}
	if d.seen[ci] == row+1 {
		d.ferr = fmt.Errorf("%w: row %d: column %q given twice", ErrBadRow, row, key)
		return
	}
	d.seen[ci] = row + 1
	if msg := d.appendValue(ci, v); msg != "" {
		d.ferr = fmt.Errorf("%w: row %d, column %q: %s", ErrBadRow, row, key, msg)
	}
}

func decodeJSONRows(s *Schema, rows []byte, target []int, mem memory.Allocator) (arrow.Record, error) {
	r, err := decodeJSON(s, rows, target)
	if err != nil {
		return nil, err
	}
	defer r.Release()
	return r.Record(mem), nil
}

// decodeJSON decodes rows into a pooled decoder's column buffers.
func decodeJSON(s *Schema, rows []byte, target []int) (JSONRows, error) {
	if len(rows) > maxPooledParserInput {
		return decodeJSONRowByRow(s, rows, target)
	}
	return decodeJSONWhole(s, rows, target)
}

// decodeJSONWhole parses rows in one go, then decodes the values. rows are
// at most maxPooledParserInput here (decodeJSON), so the parser, which
// keeps the values of its largest input, goes back to the pool.
func decodeJSONWhole(s *Schema, rows []byte, target []int) (JSONRows, error) {
	p := jsonParsers.Get()
	defer jsonParsers.Put(p)
	v, err := p.ParseBytes(rows)
	if err != nil {
		return JSONRows{}, fmt.Errorf("%w: rows are not valid JSON: %v", ErrBadRow, err)
	}
	if err := checkStrings(rows); err != nil {
		return JSONRows{}, err
	}
	arr, err := v.Array()
	if err != nil {
		return JSONRows{}, fmt.Errorf("%w: rows must be a JSON array of objects, got %s", ErrBadRow, v.Type())
	}
	st := s.state()
	d := getJSONDecoder(s, st)
	if err := d.decode(arr, target); err != nil {
		putJSONDecoder(d)
		return JSONRows{}, err
	}
	return JSONRows{d: d, st: st, n: len(arr)}, nil
}

// decodeJSONRowByRow is decodeJSON for large row sets: fastjson's values
// of a whole array take ~7 times its size (a 50 MB request allocated 330
// MB of them), so each row is parsed on its own with one parser's values
// reused, and only the array's own structure is scanned here
// (eachArrayElement). Same results and error classes as decodeJSON.
func decodeJSONRowByRow(s *Schema, rows []byte, target []int) (JSONRows, error) {
	st := s.state()
	d := getJSONDecoder(s, st)
	if err := d.begin(target); err != nil {
		putJSONDecoder(d)
		return JSONRows{}, err
	}
	p := jsonParsers.Get()
	largest := 0
	n, err := eachArrayElement(rows, func(i int, elem []byte) error {
		largest = max(largest, len(elem))
		v, err := p.ParseBytes(elem)
		if err != nil {
			return fmt.Errorf("%w: rows are not valid JSON: row %d: %v", ErrBadRow, i, err)
		}
		return d.decodeRow(i, v)
	})
	if largest <= maxPooledParserInput {
		jsonParsers.Put(p) // a parser keeps the values of its largest input
	}
	if err == nil {
		err = checkStrings(rows)
	}
	if err != nil {
		putJSONDecoder(d)
		return JSONRows{}, err
	}
	return JSONRows{d: d, st: st, n: n}, nil
}

// eachArrayElement calls fn with each element of the JSON array data, in
// order, whitespace trimmed, and returns how many there were. It checks the
// array's own structure (brackets, commas, strings, nothing after it) and
// finds where each element ends; fn parses the element. A string's bytes
// are skipped, not checked (an escaped quote does not end it).
func eachArrayElement(data []byte, fn func(i int, elem []byte) error) (int, error) {
	bad := func(i int, what string) error {
		return fmt.Errorf("%w: rows are not valid JSON: %s at byte %d", ErrBadRow, what, i)
	}
	i := skipJSONSpace(data, 0)
	if i == len(data) || data[i] != '[' {
		return 0, fmt.Errorf("%w: rows must be a JSON array of objects", ErrBadRow)
	}
	i = skipJSONSpace(data, i+1)
	n := 0
	if i < len(data) && data[i] == ']' {
		i++
	} else {
		for {
			start, depth := i, 0
		scan:
			for ; i < len(data); i++ {
				switch data[i] {
				case '"':
					for i++; i < len(data) && data[i] != '"'; i++ {
						if data[i] == '\\' {
							i++
						}
					}
					if i >= len(data) {
						return n, bad(start, "unterminated string in the element")
					}
				case '{', '[':
					depth++
				case '}', ']':
					if depth == 0 {
						break scan
					}
					depth--
				case ',':
					if depth == 0 {
						break scan
					}
				}
			}
			if i == len(data) {
				return n, bad(i, "unterminated array")
			}
			elem := bytes.TrimRight(data[start:i], " \t\r\n")
			if len(elem) == 0 {
				return n, bad(start, "expected a value")
			}
			if err := fn(n, elem); err != nil {
				return n, err
			}
			n++
			if data[i] == ']' {
				i++
				break
			}
			if data[i] != ',' {
				return n, bad(i, "expected ',' or ']'")
			}
			i = skipJSONSpace(data, i+1)
		}
	}
	if i = skipJSONSpace(data, i); i != len(data) {
		return n, bad(i, "unexpected data after the array")
	}
	return n, nil
}

// skipJSONSpace returns the index of the first byte at or after i that is
// not JSON whitespace.
func skipJSONSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\r' || data[i] == '\n') {
		i++
	}
	return i
}

// decode fills d's column buffers with the rows of arr.
func (d *jsonDecoder) decode(arr []*fastjson.Value, target []int) error {
	if err := d.begin(target); err != nil {
		return err
	}
	for i, rv := range arr {
		if err := d.decodeRow(i, rv); err != nil {
			return err
		}
	}
	return nil
}

// begin readies d for a row set whose rows may hold only the columns in
// target (nil: any).
func (d *jsonDecoder) begin(target []int) error {
	s := d.s
	if target != nil {
		// allowed is non-empty whenever the schema has columns, so
		// len(d.allowed) > 0 means "partial".
		if cap(d.allowed) < len(s.Columns) {
			d.allowed = make([]bool, len(s.Columns))
		}
		d.allowed = d.allowed[:len(s.Columns)]
		clear(d.allowed)
		for _, t := range target {
			if t < 0 || t >= len(s.Columns) {
				return fmt.Errorf("%w: target column index %d out of range", ErrBadRow, t)
			}
			d.allowed[t] = true
		}
	}
	if d.visitFn == nil {
		d.visitFn = d.visit
	}
	return nil
}

// decodeRow appends row i, the JSON value rv, to d's column buffers.
func (d *jsonDecoder) decodeRow(i int, rv *fastjson.Value) error {
	d.row = i
	obj, oerr := rv.Object()
	if oerr != nil {
		return fmt.Errorf("%w: row %d: not an object but %s", ErrBadRow, i, rv.Type())
	}
	obj.Visit(d.visitFn)
	if d.ferr != nil {
		return d.ferr
	}
	partial := len(d.allowed) > 0
	for ci := range d.seen {
		if d.seen[ci] == i+1 {
			continue
		}
		c := &d.s.Columns[ci]
		if !c.Nullable && (!partial || d.allowed[ci]) {
			return fmt.Errorf("%w: row %d: missing NOT NULL column %q", ErrBadRow, i, c.Name)
		}
		d.cols[ci].appendNull(i)
	}
	return nil
}

// checkStrings finds the first thing in the strings of rows that RFC 8259
// does not allow and fastjson lets through: an unknown escape, \u without
// four hex digits, a UTF-16 surrogate without its other half (no Unicode
// text), or a raw control character (U+0000-U+001F must be escaped).
// fastjson unescapes a bad escape by keeping it as written, which would
// store a value the client never sent (a lone "\ud800" would become six
// characters), and keeps raw control characters, which the JSON codec of
// the client API refuses: a proto request would store what a JSON one
// cannot. rows has parsed as JSON, so outside a string every '"' opens one;
// the loop jumps from string to string and reads only their bytes.
func checkStrings(rows []byte) error {
	for i := 0; i < len(rows); i++ {
		open := bytes.IndexByte(rows[i:], '"')
		if open < 0 {
			return nil
		}
		for i += open + 1; i < len(rows) && rows[i] != '"'; i++ {
			if c := rows[i]; c < 0x20 {
				return fmt.Errorf("%w: rows are not valid JSON: control character U+%04X in a string at byte %d (write it escaped, as \\u%04x)", ErrBadRow, c, i, c)
			} else if c != '\\' {
				continue
			}
			n, msg := JSONEscapeLen(rows[i:])
			if msg != "" {
				return fmt.Errorf("%w: rows are not valid JSON: %s at byte %d", ErrBadRow, msg, i)
			}
			i += n - 1
		}
	}
	return nil
}

// JSONEscapeLen returns the length of the JSON string escape at the start
// of b (b[0] is a backslash), or why it is not one RFC 8259 allows or not
// Unicode text (a UTF-16 surrogate must come as a pair).
func JSONEscapeLen(b []byte) (int, string) {
	if len(b) < 2 {
		return 0, "unterminated escape"
	}
	switch b[1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2, ""
	case 'u':
	default:
		return 0, fmt.Sprintf("unknown escape %q", b[:2])
	}
	r, ok := hexRune(b[2:])
	if !ok {
		return 0, fmt.Sprintf("%q is not \\u and four hex digits", clip(b[:min(len(b), 6)]))
	}
	if !utf16.IsSurrogate(r) {
		return 6, ""
	}
	if len(b) >= 12 && b[6] == '\\' && b[7] == 'u' {
		if lo, ok := hexRune(b[8:]); ok && utf16.DecodeRune(r, lo) != unicode.ReplacementChar {
			return 12, ""
		}
	}
	return 0, fmt.Sprintf("unpaired UTF-16 surrogate %s", b[:6]) // \u and four hex digits
}

// hexRune decodes the four hex digits at the start of b.
func hexRune(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// appendValue appends v to column ci; it returns a non-empty message when
// v does not fit.
func (d *jsonDecoder) appendValue(ci int, v *fastjson.Value) string {
	c := &d.s.Columns[ci]
	b := &d.cols[ci]
	row := d.row
	t := v.Type()
	if t == fastjson.TypeNull {
		if !c.Nullable {
			return "null in a NOT NULL column"
		}
		b.appendNull(row)
		return ""
	}
	switch c.Type.Kind {
	case KindBoolean:
		switch t {
		case fastjson.TypeTrue:
			b.appendBool(row, true)
		case fastjson.TypeFalse:
			b.appendBool(row, false)
		default:
			return wrongType("true or false", v)
		}
	case KindTinyInt, KindSmallInt, KindInt, KindBigInt:
		text, msg := d.numberText(v, "an integer (JSON number or string)")
		if msg != "" {
			return msg
		}
		n, msg := parseInt64Text(text)
		if msg != "" {
			return msg
		}
		switch c.Type.Kind {
		case KindTinyInt:
			if n < math.MinInt8 || n > math.MaxInt8 {
				return fmt.Sprintf("%d is out of range for TINYINT (-128..127)", n)
			}
			b.appendFixed(row, uint64(n))
		case KindSmallInt:
			if n < math.MinInt16 || n > math.MaxInt16 {
				return fmt.Sprintf("%d is out of range for SMALLINT (-32768..32767)", n)
			}
			b.appendFixed(row, uint64(n))
		case KindInt:
			if n < math.MinInt32 || n > math.MaxInt32 {
				return fmt.Sprintf("%d is out of range for INT (-2147483648..2147483647)", n)
			}
			b.appendFixed(row, uint64(n))
		default:
			b.appendFixed(row, uint64(n))
		}
	case KindFloat, KindDouble:
		f, msg := d.parseFloat(v, c.Type.Kind == KindFloat)
		if msg != "" {
			return msg
		}
		if c.Type.Kind == KindFloat {
			b.appendFixed(row, uint64(math.Float32bits(float32(f))))
		} else {
			b.appendFixed(row, math.Float64bits(f))
		}
	case KindDecimal:
		text, msg := d.numberText(v, "a decimal (JSON number or string)")
		if msg != "" {
			return msg
		}
		n, msg := parseDecimalText(text, c.Type.Precision, c.Type.Scale, &d.scratch)
		if msg != "" {
			return msg
		}
		b.appendDecimal(row, n)
	case KindString:
		sb, msg := stringBytes(v, "a string")
		if msg != "" {
			return msg
		}
		if !utf8.Valid(sb) {
			return "string is not valid UTF-8"
		}
		if msg := c.Type.checkLength(sb); msg != "" {
			return msg
		}
		if !b.appendBytes(row, sb) {
			return "too much string data in one request (over 2 GiB in a column)"
		}
	case KindBytes:
		sb, msg := stringBytes(v, "a base64 string")
		if msg != "" {
			return msg
		}
		n := base64.StdEncoding.DecodedLen(len(sb))
		if cap(d.scratch) < n {
			d.scratch = make([]byte, n)
		}
		n, err := base64.StdEncoding.Decode(d.scratch[:n], sb)
		if err != nil {
			return "not valid base64 (standard alphabet, padded): " + err.Error()
		}
		if msg := c.Type.checkLength(d.scratch[:n]); msg != "" {
			return msg
		}
		if !b.appendBytes(row, d.scratch[:n]) {
			return "too much bytes data in one request (over 2 GiB in a column)"
		}
	case KindDate:
		sb, msg := stringBytes(v, `a date string "YYYY-MM-DD"`)
		if msg != "" {
			return msg
		}
		days, ok := parseDate(sb)
		if !ok || len(sb) != 10 {
			return fmt.Sprintf("%q is not a date YYYY-MM-DD", clip(sb))
		}
		b.appendFixed(row, uint64(uint32(days)))
	case KindTime:
		sb, msg := stringBytes(v, `a time string "HH:MM:SS[.fff]"`)
		if msg != "" {
			return msg
		}
		nanos, n, ok := parseClock(sb, true)
		if !ok || n != len(sb) {
			return fmt.Sprintf("%q is not a time HH:MM:SS[.fffffffff]", clip(sb))
		}
		if nanos%pow10[9-c.Type.Precision] != 0 {
			return fmt.Sprintf("%q has more fractional digits than %s holds", clip(sb), c.Type)
		}
		switch c.Type.TimeUnit() {
		case arrow.Millisecond:
			b.appendFixed(row, uint64(nanos/1e6))
		case arrow.Microsecond:
			b.appendFixed(row, uint64(nanos/1e3))
		default:
			b.appendFixed(row, uint64(nanos))
		}
	case KindTimestamp, KindTimestampLTZ:
		ts, msg := d.parseTimestamp(v, c.Type)
		if msg != "" {
			return msg
		}
		b.appendFixed(row, uint64(ts))
	default:
		return fmt.Sprintf("type %s is not supported in JSON rows", c.Type)
	}
	return ""
}

func wrongType(want string, v *fastjson.Value) string {
	return "want " + want + ", got " + v.Type().String()
}

func stringBytes(v *fastjson.Value, want string) ([]byte, string) {
	if v.Type() != fastjson.TypeString {
		return nil, wrongType(want, v)
	}
	sb, _ := v.StringBytes()
	return sb, ""
}

// numberText returns the text of a JSON number (validated against the JSON
// grammar: fastjson itself is lenient) or of a JSON string.
func (d *jsonDecoder) numberText(v *fastjson.Value, want string) ([]byte, string) {
	switch v.Type() {
	case fastjson.TypeNumber:
		d.scratch = v.MarshalTo(d.scratch[:0])
		if !validJSONNumber(d.scratch) {
			return nil, fmt.Sprintf("%q is not a JSON number", clip(d.scratch))
		}
		return d.scratch, ""
	case fastjson.TypeString:
		sb, _ := v.StringBytes()
		return sb, ""
	}
	return nil, wrongType(want, v)
}

// validJSONNumber checks RFC 8259 number syntax.
func validJSONNumber(s []byte) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		j := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == j {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		j := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == j {
			return false
		}
	}
	return i == len(s)
}

// parseInt64Text parses an optionally signed run of decimal digits exactly.
func parseInt64Text(s []byte) (int64, string) {
	i, neg := 0, false
	if len(s) > 0 && (s[0] == '-' || s[0] == '+') {
		neg = s[0] == '-'
		i++
	}
	if i == len(s) {
		return 0, fmt.Sprintf("%q is not an integer", clip(s))
	}
	var u uint64
	for ; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, fmt.Sprintf("%q is not an integer (no fraction or exponent allowed)", clip(s))
		}
		if u > (math.MaxUint64-9)/10 {
			return 0, fmt.Sprintf("%s is out of range for BIGINT", clip(s))
		}
		u = u*10 + uint64(c-'0')
	}
	if neg {
		if u > 1<<63 {
			return 0, fmt.Sprintf("%s is out of range for BIGINT", clip(s))
		}
		return int64(-u), ""
	}
	if u > math.MaxInt64 {
		return 0, fmt.Sprintf("%s is out of range for BIGINT", clip(s))
	}
	return int64(u), ""
}

func (d *jsonDecoder) parseFloat(v *fastjson.Value, is32 bool) (float64, string) {
	bitSize := 64
	if is32 {
		bitSize = 32
	}
	var text []byte
	switch v.Type() {
	case fastjson.TypeNumber:
		d.scratch = v.MarshalTo(d.scratch[:0])
		if !validJSONNumber(d.scratch) {
			return 0, fmt.Sprintf("%q is not a JSON number", clip(d.scratch))
		}
		text = d.scratch
	case fastjson.TypeString:
		sb, _ := v.StringBytes()
		switch strings.ToLower(string(sb)) {
		case "nan":
			return math.NaN(), ""
		case "infinity", "+infinity", "inf":
			return math.Inf(1), ""
		case "-infinity", "-inf":
			return math.Inf(-1), ""
		}
		if !validJSONNumber(sb) {
			return 0, fmt.Sprintf("%q is not a number (or \"NaN\", \"Infinity\", \"-Infinity\")", clip(sb))
		}
		text = sb
	default:
		return 0, wrongType("a number", v)
	}
	f, err := strconv.ParseFloat(string(text), bitSize)
	if err != nil {
		return 0, fmt.Sprintf("%s is out of range for %s", clip(text), map[bool]string{true: "FLOAT", false: "DOUBLE"}[is32])
	}
	return f, ""
}

// parseDecimalText parses [sign] digits [. digits] [e [sign] digits] into
// the unscaled value at scale, exactly. scratch is reused for digits.
func parseDecimalText(s []byte, precision, scale int, scratch *[]byte) (decimal128.Num, string) {
	bad := func() (decimal128.Num, string) {
		return decimal128.Num{}, fmt.Sprintf("%q is not a decimal number", clip(s))
	}
	i, neg := 0, false
	if len(s) > 0 && (s[0] == '-' || s[0] == '+') {
		neg = s[0] == '-'
		i++
	}
	dg := (*scratch)[:0]
	frac, nd := 0, 0
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		dg = append(dg, s[i])
		nd++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			dg = append(dg, s[i])
			frac++
			nd++
		}
	}
	if nd == 0 {
		return bad()
	}
	exp := 0
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		eneg := false
		if i < len(s) && (s[i] == '-' || s[i] == '+') {
			eneg = s[i] == '-'
			i++
		}
		j := i
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			if exp > 1000 {
				return decimal128.Num{}, fmt.Sprintf("%s: exponent out of range", clip(s))
			}
			exp = exp*10 + int(s[i]-'0')
		}
		if i == j {
			return bad()
		}
		if eneg {
			exp = -exp
		}
	}
	if i != len(s) {
		return bad()
	}
	*scratch = dg
	// value = dg × 10^(exp-frac); the input's scale is frac-exp.
	inScale := frac - exp
	for len(dg) > 0 && dg[0] == '0' {
		dg = dg[1:]
	}
	if inScale > scale {
		drop := inScale - scale
		if drop > len(dg) {
			drop = len(dg)
		}
		for _, c := range dg[len(dg)-drop:] {
			if c != '0' {
				return decimal128.Num{}, fmt.Sprintf("%s has more than %d fraction digits", clip(s), scale)
			}
		}
		dg = dg[:len(dg)-drop]
		inScale = scale
	}
	pad := scale - inScale
	if len(dg)+pad > precision && len(dg) > 0 {
		return decimal128.Num{}, fmt.Sprintf("%s does not fit DECIMAL(%d,%d) (more than %d digits)", clip(s), precision, scale, precision)
	}
	var hi, lo uint64
	mul10add := func(d uint64) {
		h1, l1 := bits.Mul64(lo, 10)
		var c uint64
		lo, c = bits.Add64(l1, d, 0)
		hi = hi*10 + h1 + c
	}
	for _, c := range dg {
		mul10add(uint64(c - '0'))
	}
	if len(dg) > 0 {
		for k := 0; k < pad; k++ {
			mul10add(0)
		}
	}
	n := decimal128.New(int64(hi), lo)
	if neg {
		n = n.Negate()
	}
	return n, ""
}

// unitsPerSecond of an Arrow time unit.
func unitsPerSecond(u arrow.TimeUnit) int64 {
	switch u {
	case arrow.Second:
		return 1
	case arrow.Millisecond:
		return 1e3
	case arrow.Microsecond:
		return 1e6
	}
	return 1e9
}

// parseTimestamp returns the value of a TIMESTAMP(_LTZ) column in its unit.
func (d *jsonDecoder) parseTimestamp(v *fastjson.Value, t Type) (int64, string) {
	ups := unitsPerSecond(t.TimeUnit())
	var sec, nanos int64
	switch v.Type() {
	case fastjson.TypeNumber:
		d.scratch = v.MarshalTo(d.scratch[:0])
		ms, msg := parseInt64Text(d.scratch)
		if msg != "" || !validJSONNumber(d.scratch) {
			return 0, fmt.Sprintf("%s is not an integer count of epoch milliseconds", clip(d.scratch))
		}
		var r int64
		sec, r = floorDiv(ms, 1000)
		nanos = r * 1e6
	case fastjson.TypeString:
		sb, _ := v.StringBytes()
		var ok bool
		sec, nanos, ok = parseTimestampText(sb)
		if !ok {
			return 0, fmt.Sprintf("%q is not a timestamp YYYY-MM-DDTHH:MM:SS[.fffffffff][Z|+HH:MM]", clip(sb))
		}
	default:
		return 0, wrongType("an ISO-8601 string or epoch milliseconds", v)
	}
	if day, _ := floorDiv(sec, secondsPerDay); day < minDay || day > maxDay {
		return 0, "timestamp is outside years 0000..9999"
	}
	if nanos%pow10[9-t.Precision] != 0 {
		return 0, fmt.Sprintf("more fractional seconds than %s holds", t)
	}
	frac := nanos / (nanosPerSec / ups)
	rangeErr := func() string {
		return fmt.Sprintf("timestamp is out of range for %s (stored as int64 %ss)", t, t.TimeUnit())
	}
	if sec >= 0 {
		if sec > (math.MaxInt64-frac)/ups {
			return 0, rangeErr()
		}
		return sec*ups + frac, ""
	}
	// sec*ups + frac == (sec+1)*ups + (frac-ups), which cannot overflow
	// early at the bottom of the range.
	s1 := sec + 1
	if s1 < math.MinInt64/ups {
		return 0, rangeErr()
	}
	val, add := s1*ups, frac-ups
	if val < math.MinInt64-add {
		return 0, rangeErr()
	}
	return val + add, ""
}

// parseTimestampText parses an ISO-8601 local or offset date-time and
// returns UTC epoch seconds and nanoseconds.
func parseTimestampText(s []byte) (sec, nanos int64, ok bool) {
	days, ok := parseDate(s)
	if !ok || len(s) < 11 || (s[10] != 'T' && s[10] != 't' && s[10] != ' ') {
		return 0, 0, false
	}
	clock, n, ok := parseClock(s[11:], false)
	if !ok {
		return 0, 0, false
	}
	rest := s[11+n:]
	var off int64
	switch {
	case len(rest) == 0:
	case len(rest) == 1 && (rest[0] == 'Z' || rest[0] == 'z'):
	case rest[0] == '+' || rest[0] == '-':
		oh, ok1 := digits(rest, 1, 2)
		var om int64
		var ok2 bool
		switch len(rest) {
		case 6:
			if rest[3] != ':' {
				return 0, 0, false
			}
			om, ok2 = digits(rest, 4, 2)
		case 5:
			om, ok2 = digits(rest, 3, 2)
		case 3:
			ok2 = true
		}
		if !ok1 || !ok2 || oh > 18 || om > 59 {
			return 0, 0, false
		}
		off = oh*3600 + om*60
		if rest[0] == '-' {
			off = -off
		}
	default:
		return 0, 0, false
	}
	sec = days*secondsPerDay + clock/nanosPerSec - off
	return sec, clock % nanosPerSec, true
}

// maxShown is how much of a rejected value an error message quotes: the
// value can be as long as the request.
const maxShown = 64

// clip returns v for an error message: whole, or its first maxShown bytes
// and how long it was.
func clip[T string | []byte](v T) string {
	if len(v) <= maxShown {
		return string(v)
	}
	return fmt.Sprintf("%s… (%d bytes)", v[:maxShown], len(v))
}
