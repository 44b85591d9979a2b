package record

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
)

// Kind is a column's logical type family.
type Kind uint8

const (
	KindInvalid Kind = iota
	KindBoolean
	KindTinyInt
	KindSmallInt
	KindInt
	KindBigInt
	KindFloat
	KindDouble
	KindDecimal
	KindString
	KindBytes
	KindDate
	KindTime
	KindTimestamp
	KindTimestampLTZ
)

var kindNames = [...]string{
	KindInvalid:      "INVALID",
	KindBoolean:      "BOOLEAN",
	KindTinyInt:      "TINYINT",
	KindSmallInt:     "SMALLINT",
	KindInt:          "INT",
	KindBigInt:       "BIGINT",
	KindFloat:        "FLOAT",
	KindDouble:       "DOUBLE",
	KindDecimal:      "DECIMAL",
	KindString:       "STRING",
	KindBytes:        "BYTES",
	KindDate:         "DATE",
	KindTime:         "TIME",
	KindTimestamp:    "TIMESTAMP",
	KindTimestampLTZ: "TIMESTAMP_LTZ",
}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Type is a column type. Precision and Scale matter only for DECIMAL
// (precision 1..38, scale 0..precision) and for TIME, TIMESTAMP and
// TIMESTAMP_LTZ (fractional-second precision 0..9). Length bounds STRING
// values in characters (VARCHAR(n); CHAR(n) is taken as VARCHAR(n): not
// padded) and BYTES values in bytes (VARBINARY(n), BINARY(n)); 0 is
// unbounded. It changes only what a write accepts, not how values are
// stored.
type Type struct {
	Kind      Kind
	Precision int
	Scale     int
	Length    int
}

// Defaults follow Fluss: DECIMAL is DECIMAL(10,0), TIMESTAMP is TIMESTAMP(6),
// TIME is TIME(0).
const (
	defaultDecimalPrecision   = 10
	defaultTimestampPrecision = 6
	maxDecimalPrecision       = 38
	maxTimePrecision          = 9
)

// ErrBadType reports a type string that does not parse.
var ErrBadType = errors.New("bad type")

// ParseType parses a type string such as "BIGINT", "DECIMAL(10,2)",
// "TIMESTAMP(3)" or "STRING NOT NULL" (case-insensitive). notNull reports a
// trailing NOT NULL; a trailing NULL is accepted and means nullable.
func ParseType(s string) (t Type, notNull bool, err error) {
	src := s
	s = strings.ToUpper(strings.TrimSpace(s))
	switch {
	case strings.HasSuffix(s, " NOT NULL"):
		notNull = true
		s = strings.TrimSpace(strings.TrimSuffix(s, " NOT NULL"))
	case strings.HasSuffix(s, " NULL"):
		s = strings.TrimSpace(strings.TrimSuffix(s, " NULL"))
	}
	name, args := s, ""
	if i := strings.IndexByte(s, '('); i >= 0 {
		if !strings.HasSuffix(s, ")") {
			return Type{}, false, fmt.Errorf("%w %q: missing ')'", ErrBadType, src)
		}
		name, args = strings.TrimSpace(s[:i]), s[i+1:len(s)-1]
	}
	var params []int
	if args != "" || strings.Contains(s, "(") {
		for _, a := range strings.Split(args, ",") {
			n, perr := strconv.Atoi(strings.TrimSpace(a))
			if perr != nil || n < 0 {
				return Type{}, false, fmt.Errorf("%w %q: parameter %q is not a non-negative integer", ErrBadType, src, strings.TrimSpace(a))
			}
			params = append(params, n)
		}
	}
	switch name {
	case "BOOLEAN", "BOOL":
		t.Kind = KindBoolean
	case "TINYINT":
		t.Kind = KindTinyInt
	case "SMALLINT":
		t.Kind = KindSmallInt
	case "INT", "INTEGER":
		t.Kind = KindInt
	case "BIGINT":
		t.Kind = KindBigInt
	case "FLOAT":
		t.Kind = KindFloat
	case "DOUBLE":
		t.Kind = KindDouble
	case "VARCHAR", "CHAR", "VARBINARY", "BINARY":
		t.Kind = KindString
		if name == "VARBINARY" || name == "BINARY" {
			t.Kind = KindBytes
		}
		switch len(params) {
		case 0: // unbounded: STRING, BYTES
		case 1:
			if params[0] < 1 {
				return Type{}, false, fmt.Errorf("%w %q: the length must be at least 1", ErrBadType, src)
			}
			t.Length = params[0]
		default:
			return Type{}, false, fmt.Errorf("%w %q: %s takes one length", ErrBadType, src, name)
		}
		return t, notNull, nil
	case "STRING":
		t.Kind = KindString
	case "BYTES":
		t.Kind = KindBytes
	case "DATE":
		t.Kind = KindDate
	case "DECIMAL", "NUMERIC":
		t = Type{Kind: KindDecimal, Precision: defaultDecimalPrecision}
		switch len(params) {
		case 0:
		case 1:
			t.Precision = params[0]
		case 2:
			t.Precision, t.Scale = params[0], params[1]
		default:
			return Type{}, false, fmt.Errorf("%w %q: DECIMAL takes (precision, scale)", ErrBadType, src)
		}
		if t.Precision < 1 || t.Precision > maxDecimalPrecision || t.Scale > t.Precision {
			return Type{}, false, fmt.Errorf("%w %q: DECIMAL needs 1 <= precision <= 38 and 0 <= scale <= precision", ErrBadType, src)
		}
		return t, notNull, nil
	case "TIME", "TIMESTAMP", "TIMESTAMP_LTZ", "TIMESTAMP WITH LOCAL TIME ZONE":
		switch name {
		case "TIME":
			t = Type{Kind: KindTime, Precision: 0}
		case "TIMESTAMP":
			t = Type{Kind: KindTimestamp, Precision: defaultTimestampPrecision}
		default:
			t = Type{Kind: KindTimestampLTZ, Precision: defaultTimestampPrecision}
		}
		switch len(params) {
		case 0:
		case 1:
			t.Precision = params[0]
		default:
			return Type{}, false, fmt.Errorf("%w %q: %s takes one precision", ErrBadType, src, name)
		}
		if t.Precision > maxTimePrecision {
			return Type{}, false, fmt.Errorf("%w %q: precision must be 0..9", ErrBadType, src)
		}
		return t, notNull, nil
	default:
		return Type{}, false, fmt.Errorf("%w %q: unknown type (want BOOLEAN, TINYINT, SMALLINT, INT, BIGINT, FLOAT, DOUBLE, DECIMAL(p,s), STRING, BYTES, DATE, TIME, TIMESTAMP(p) or TIMESTAMP_LTZ(p))", ErrBadType, src)
	}
	if len(params) != 0 {
		return Type{}, false, fmt.Errorf("%w %q: %s takes no parameters", ErrBadType, src, name)
	}
	return t, notNull, nil
}

// checkLength returns a message when v, a STRING value's UTF-8 or a BYTES
// value, is longer than t.Length allows, and "" when it fits.
func (t Type) checkLength(v []byte) string {
	if t.Length == 0 || len(v) <= t.Length { // never fewer bytes than characters
		return ""
	}
	return t.tooLong(len(v), func() int { return utf8.RuneCount(v) })
}

// CheckLength reports a STRING or BYTES value, held as a string, that is
// longer than t.Length allows (nil when it fits or t has no length).
func (t Type) CheckLength(v string) error {
	if msg := t.checkLengthString(v); msg != "" {
		return errors.New(msg)
	}
	return nil
}

// checkLengthString is checkLength of a value held as a string.
func (t Type) checkLengthString(v string) string {
	if t.Length == 0 || len(v) <= t.Length {
		return ""
	}
	return t.tooLong(len(v), func() int { return utf8.RuneCountInString(v) })
}

// tooLong words the check of a value of size bytes (and runes characters)
// that may not fit t.Length.
func (t Type) tooLong(size int, runes func() int) string {
	if t.Kind == KindBytes {
		return fmt.Sprintf("a value of %d bytes is longer than %s allows", size, t)
	}
	if n := runes(); n > t.Length {
		return fmt.Sprintf("a string of %d characters is longer than %s allows", n, t)
	}
	return ""
}

// String renders the canonical form that ParseType accepts.
func (t Type) String() string {
	switch t.Kind {
	case KindDecimal:
		return fmt.Sprintf("DECIMAL(%d,%d)", t.Precision, t.Scale)
	case KindTime, KindTimestamp, KindTimestampLTZ:
		return fmt.Sprintf("%s(%d)", t.Kind, t.Precision)
	case KindString:
		if t.Length > 0 {
			return fmt.Sprintf("VARCHAR(%d)", t.Length)
		}
	case KindBytes:
		if t.Length > 0 {
			return fmt.Sprintf("VARBINARY(%d)", t.Length)
		}
	}
	return t.Kind.String()
}

// TimeUnit is the Arrow unit that holds a TIME/TIMESTAMP of this precision:
// 0..3 milliseconds, 4..6 microseconds, 7..9 nanoseconds (as Fluss does).
// TIME always uses 32-bit milliseconds when precision <= 3.
func (t Type) TimeUnit() arrow.TimeUnit {
	switch {
	case t.Precision <= 3:
		return arrow.Millisecond
	case t.Precision <= 6:
		return arrow.Microsecond
	default:
		return arrow.Nanosecond
	}
}

// ArrowType is the Arrow data type that stores values of t.
func (t Type) ArrowType() arrow.DataType {
	switch t.Kind {
	case KindBoolean:
		return arrow.FixedWidthTypes.Boolean
	case KindTinyInt:
		return arrow.PrimitiveTypes.Int8
	case KindSmallInt:
		return arrow.PrimitiveTypes.Int16
	case KindInt:
		return arrow.PrimitiveTypes.Int32
	case KindBigInt:
		return arrow.PrimitiveTypes.Int64
	case KindFloat:
		return arrow.PrimitiveTypes.Float32
	case KindDouble:
		return arrow.PrimitiveTypes.Float64
	case KindDecimal:
		return &arrow.Decimal128Type{Precision: int32(t.Precision), Scale: int32(t.Scale)}
	case KindString:
		return arrow.BinaryTypes.String
	case KindBytes:
		return arrow.BinaryTypes.Binary
	case KindDate:
		return arrow.FixedWidthTypes.Date32
	case KindTime:
		switch t.TimeUnit() {
		case arrow.Millisecond:
			return arrow.FixedWidthTypes.Time32ms
		case arrow.Microsecond:
			return arrow.FixedWidthTypes.Time64us
		default:
			return arrow.FixedWidthTypes.Time64ns
		}
	case KindTimestamp:
		return &arrow.TimestampType{Unit: t.TimeUnit()}
	case KindTimestampLTZ:
		return &arrow.TimestampType{Unit: t.TimeUnit(), TimeZone: "UTC"}
	}
	return nil
}
