package record

import (
	"math/rand"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// This file is exported for tests and benchmark tooling: a realistic
// 10-column event table and a seeded generator of its rows.

// SampleSchema is a 10-column event table: ids, a timestamp, enums,
// amounts and short strings.
func SampleSchema() *Schema {
	return &Schema{ID: 1, Columns: []Column{
		{Name: "event_id", Type: Type{Kind: KindBigInt}},
		{Name: "user_id", Type: Type{Kind: KindBigInt}},
		{Name: "ts", Type: Type{Kind: KindTimestamp, Precision: 3}},
		{Name: "event_type", Type: Type{Kind: KindString}},
		{Name: "country", Type: Type{Kind: KindString}, Nullable: true},
		{Name: "amount", Type: Type{Kind: KindDecimal, Precision: 12, Scale: 2}, Nullable: true},
		{Name: "quantity", Type: Type{Kind: KindInt}, Nullable: true},
		{Name: "price", Type: Type{Kind: KindDouble}, Nullable: true},
		{Name: "session", Type: Type{Kind: KindString}, Nullable: true},
		{Name: "is_mobile", Type: Type{Kind: KindBoolean}, Nullable: true},
	}}
}

var (
	sampleEventTypes = []string{"view", "click", "add_to_cart", "purchase", "search", "logout"}
	sampleCountries  = []string{"US", "DE", "FR", "JP", "BR", "IN", "GB", "CN"}
)

const sampleBaseMs = 1714564800000 // 2024-05-01T12:00:00Z

// SampleRecord returns n rows of SampleSchema, deterministic in seed. The
// caller releases it.
func SampleRecord(n int, seed int64) arrow.Record {
	rnd := rand.New(rand.NewSource(seed))
	rb := array.NewRecordBuilder(memory.DefaultAllocator, SampleSchema().ArrowSchema())
	defer rb.Release()
	rb.Reserve(n)
	sess := make([]byte, 0, 16)
	for i := 0; i < n; i++ {
		rb.Field(0).(*array.Int64Builder).Append(seed<<32 + int64(i))
		rb.Field(1).(*array.Int64Builder).Append(1 + rnd.Int63n(1_000_000))
		rb.Field(2).(*array.TimestampBuilder).Append(arrow.Timestamp(sampleBaseMs + int64(i)*17 + rnd.Int63n(1000)))
		rb.Field(3).(*array.StringBuilder).Append(sampleEventTypes[rnd.Intn(len(sampleEventTypes))])
		if rnd.Intn(20) == 0 {
			rb.Field(4).AppendNull()
		} else {
			rb.Field(4).(*array.StringBuilder).Append(sampleCountries[rnd.Intn(len(sampleCountries))])
		}
		if rnd.Intn(4) == 0 {
			rb.Field(5).AppendNull()
			rb.Field(6).AppendNull()
			rb.Field(7).AppendNull()
		} else {
			rb.Field(5).(*array.Decimal128Builder).Append(decimal128.FromI64(rnd.Int63n(10_000_000)))
			rb.Field(6).(*array.Int32Builder).Append(int32(1 + rnd.Intn(10)))
			rb.Field(7).(*array.Float64Builder).Append(float64(rnd.Intn(100000)) / 100)
		}
		sess = append(sess[:0], "s-"...)
		sess = strconv.AppendInt(sess, rnd.Int63n(1<<40), 36)
		rb.Field(8).(*array.StringBuilder).BinaryBuilder.Append(sess)
		rb.Field(9).(*array.BooleanBuilder).Append(rnd.Intn(3) == 0)
	}
	return rb.NewRecordBatch()
}

// SampleJSON returns the rows of SampleRecord(n, seed) as a JSON array, as
// a client would send them.
func SampleJSON(n int, seed int64) []byte {
	rec := SampleRecord(n, seed)
	defer rec.Release()
	return AppendJSONRows(nil, rec, 0, n, nil)
}
