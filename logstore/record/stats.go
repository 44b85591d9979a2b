package record

import "github.com/apache/arrow-go/v18/arrow/decimal128"

// ColumnStats summarises one column of one batch so that a filter can skip
// the whole batch without decoding it. Which Min/Max pair is meaningful
// depends on the column's Kind:
//
//	BOOLEAN (0/1), TINYINT..BIGINT, DATE (days), TIME and TIMESTAMP(_LTZ)
//	(in the column's Arrow unit)                      MinInt, MaxInt
//	FLOAT, DOUBLE (NaN excluded; all-NaN means no min/max)  MinFloat, MaxFloat
//	DECIMAL (unscaled, at the column's scale)          MinDecimal, MaxDecimal
//	STRING, BYTES                                      MinBytes, MaxBytes
//
// HasMinMax is false when the column is all null, when the kind has no
// ordering kept, or when a string/bytes bound would exceed MaxStatBytes.
type ColumnStats struct {
	NullCount  int32
	HasMinMax  bool
	MinInt     int64
	MaxInt     int64
	MinFloat   float64
	MaxFloat   float64
	MinDecimal decimal128.Num
	MaxDecimal decimal128.Num
	MinBytes   []byte
	MaxBytes   []byte
}

// MaxStatBytes bounds a STRING/BYTES min or max kept in a batch header.
const MaxStatBytes = 64
