package record

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cespare/xxhash/v2"
)

// AppendBucketKey appends the canonical encoding of the key columns of row
// (FORMAT.md §3) to dst.
func AppendBucketKey(dst []byte, rec arrow.Record, row int, keyCols []int) []byte {
	for _, ci := range keyCols {
		a := rec.Column(ci)
		if a.IsNull(row) {
			dst = append(dst, 0)
			continue
		}
		dst = append(dst, 1)
		switch c := a.(type) {
		case *array.Boolean:
			if c.Value(row) {
				dst = append(dst, 1)
			} else {
				dst = append(dst, 0)
			}
		case *array.Int8:
			dst = binary.LittleEndian.AppendUint64(dst, uint64(int64(c.Value(row))))
		case *array.Int16:
			dst = binary.LittleEndian.AppendUint64(dst, uint64(int64(c.Value(row))))
		case *array.Int32:
			dst = binary.LittleEndian.AppendUint64(dst, uint64(int64(c.Value(row))))
		case *array.Int64:
			dst = binary.LittleEndian.AppendUint64(dst, uint64(c.Value(row)))
		case *array.Date32:
			dst = binary.LittleEndian.AppendUint64(dst, uint64(int64(c.Value(row))))
		case *array.Time32:
			dst = binary.LittleEndian.AppendUint64(dst, uint64(int64(c.Value(row))))
		case *array.Time64:
			dst = binary.LittleEndian.AppendUint64(dst, uint64(int64(c.Value(row))))
		case *array.Timestamp:
			dst = binary.LittleEndian.AppendUint64(dst, uint64(int64(c.Value(row))))
		case *array.Float32:
			dst = binary.LittleEndian.AppendUint64(dst, canonicalFloatBits(float64(c.Value(row))))
		case *array.Float64:
			dst = binary.LittleEndian.AppendUint64(dst, canonicalFloatBits(c.Value(row)))
		case *array.Decimal128:
			v := c.Value(row)
			dst = binary.LittleEndian.AppendUint64(dst, v.LowBits())
			dst = binary.LittleEndian.AppendUint64(dst, uint64(v.HighBits()))
		case *array.String:
			v := c.Value(row)
			dst = binary.LittleEndian.AppendUint32(dst, uint32(len(v)))
			dst = append(dst, v...)
		case *array.Binary:
			v := c.Value(row)
			dst = binary.LittleEndian.AppendUint32(dst, uint32(len(v)))
			dst = append(dst, v...)
		}
	}
	return dst
}

func canonicalFloatBits(f float64) uint64 {
	switch {
	case f != f:
		return 0x7FF8000000000001
	case f == 0:
		return 0
	}
	return math.Float64bits(f)
}

// BucketOf returns the bucket of row: xxhash64 of its canonical key
// encoding modulo buckets (FORMAT.md §3). buckets must be > 0.
func BucketOf(rec arrow.Record, row int, keyCols []int, buckets int32) int32 {
	var buf [128]byte
	key := AppendBucketKey(buf[:0], rec, row, keyCols)
	return BucketOfKey(key, buckets)
}

// BucketOfKey maps a canonical key encoding to a bucket.
func BucketOfKey(key []byte, buckets int32) int32 {
	if buckets <= 1 {
		return 0
	}
	return int32(xxhash.Sum64(key) % uint64(buckets))
}

// SplitByBucket splits rec by the bucket of each row. The result has
// buckets entries; entry b is nil when no row falls in bucket b. With
// buckets <= 1 or no key columns, every row is in bucket 0 (and rec itself
// is returned, retained). The caller releases every non-nil record.
func SplitByBucket(rec arrow.Record, keyCols []int, buckets int32, mem memory.Allocator) ([]arrow.Record, error) {
	if buckets < 1 {
		return nil, fmt.Errorf("split by bucket: bucket count %d, want >= 1", buckets)
	}
	out := make([]arrow.Record, buckets)
	if buckets == 1 || len(keyCols) == 0 {
		rec.Retain()
		out[0] = rec
		return out, nil
	}
	for _, ci := range keyCols {
		if ci < 0 || ci >= int(rec.NumCols()) {
			return nil, fmt.Errorf("split by bucket: key column index %d out of range", ci)
		}
	}
	n := int(rec.NumRows())
	bucketOf := make([]int32, n)
	counts := make([]int, buckets)
	var key []byte
	for r := 0; r < n; r++ {
		key = AppendBucketKey(key[:0], rec, r, keyCols)
		b := BucketOfKey(key, buckets)
		bucketOf[r] = b
		counts[b]++
	}
	for b, c := range counts {
		if c == n {
			rec.Retain()
			out[b] = rec
			return out, nil
		}
	}
	idx := make([][]int, buckets)
	for b, c := range counts {
		if c > 0 {
			idx[b] = make([]int, 0, c)
		}
	}
	for r, b := range bucketOf {
		idx[b] = append(idx[b], r)
	}
	for b := range idx {
		if idx[b] == nil {
			continue
		}
		t, err := TakeRows(rec, idx[b], mem)
		if err != nil {
			for _, r := range out {
				if r != nil {
					r.Release()
				}
			}
			return nil, err
		}
		out[b] = t
	}
	return out, nil
}
