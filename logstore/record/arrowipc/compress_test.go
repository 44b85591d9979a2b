package arrowipc

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

type codecLevel struct {
	codec Codec
	level int
}

var codecLevels = []codecLevel{
	{CodecLZ4Frame, 0},
	{CodecZSTD, 0}, {CodecZSTD, 1}, {CodecZSTD, 3}, {CodecZSTD, 6}, {CodecZSTD, 9}, {CodecZSTD, 22},
}

// uncompressedBatch writes rec with arrow-go (no compression) and returns
// the schema message and the batch message.
func uncompressedBatch(t testing.TB, schema *arrow.Schema, rec arrow.RecordBatch) (schemaMsg, batch []byte) {
	t.Helper()
	schemaMsg, batches, err := SplitStream(writeStream(t, schema, nil, rec))
	if err != nil || len(batches) != 1 {
		t.Fatalf("split: %d batches, %v", len(batches), err)
	}
	return schemaMsg, batches[0]
}

// compressionOf returns the (codec, method) of a batch, ok=false if none.
// compressionOf returns the compression of a body's record batch, and
// whether any of its messages is compressed.
func compressionOf(t testing.TB, body []byte) (codec, method uint8, ok bool) {
	t.Helper()
	dicts, v, err := viewBody(body)
	if err != nil {
		t.Fatal(err)
	}
	ok = v.hasCompression
	for _, d := range dicts {
		ok = ok || d.hasCompression
	}
	return v.codec, v.method, ok
}

// bodyBuffers returns the buffers of every message of a body, in order.
func bodyBuffers(t testing.TB, body []byte) [][]byte {
	t.Helper()
	dicts, v, err := viewBody(body)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, m := range append(dicts, v) {
		for i := range m.bufs.n {
			out = append(out, m.buf(i))
		}
	}
	return out
}

func TestCompressRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, fields := range [][]arrow.Field{flatFields, nestedFields} {
		schema := arrow.NewSchema(fields, nil)
		for _, rows := range []int{0, 1, 7, 1000} {
			rec := randomRecord(t, rng, schema, rows, 20)
			schemaMsg, raw := uncompressedBatch(t, schema, rec)
			for _, cl := range codecLevels {
				t.Run(fmt.Sprintf("%s/%d-rows/%s-%d", fields[0].Name, rows, cl.codec, cl.level), func(t *testing.T) {
					prefix := []byte("keep")
					comp, err := Compress(bytes.Clone(prefix), raw, cl.codec, cl.level)
					if err != nil {
						t.Fatalf("Compress: %v", err)
					}
					if !bytes.Equal(comp[:4], prefix) {
						t.Fatalf("Compress clobbered dst")
					}
					comp = comp[4:]
					if len(comp)%8 != 0 {
						t.Fatalf("compressed message is %d bytes, not 8-aligned", len(comp))
					}
					codec, method, ok := compressionOf(t, comp)
					wantCodec := uint8(fbLZ4Frame)
					if cl.codec == CodecZSTD {
						wantCodec = fbZSTD
					}
					if !ok || codec != wantCodec || method != methodBuffer {
						t.Fatalf("BodyCompression = %v %d %d, want codec %d", ok, codec, method, wantCodec)
					}
					// arrow-go reads the compressed batch.
					_, got := readStream(t, AppendStream(nil, schemaMsg, comp))
					if len(got) != 1 || !array.RecordEqual(got[0], rec) {
						t.Fatalf("arrow-go decoded a different record from the compressed batch")
					}
					got[0].Release()
					// Decompress restores arrow-go's exact uncompressed body.
					back, err := Decompress(nil, comp, 0)
					if err != nil {
						t.Fatalf("Decompress: %v", err)
					}
					if _, _, ok := compressionOf(t, back); ok {
						t.Fatalf("decompressed batch still has BodyCompression")
					}
					if !bytes.Equal(msgBody(t, back), msgBody(t, raw)) {
						t.Fatalf("decompressed body differs from arrow-go's uncompressed body")
					}
					if fmt.Sprint(bufferLengths(t, back)) != fmt.Sprint(bufferLengths(t, raw)) {
						t.Fatalf("buffer lengths %v, want %v", bufferLengths(t, back), bufferLengths(t, raw))
					}
					n1, _ := BatchLength(back)
					if n1 != int64(rows) {
						t.Fatalf("record count %d, want %d", n1, rows)
					}
				})
			}
			rec.Release()
		}
	}
}

func TestDecompressArrowGoBodies(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, fields := range [][]arrow.Field{flatFields, nestedFields} {
		schema := arrow.NewSchema(fields, nil)
		rec := randomRecord(t, rng, schema, 300, 20)
		_, raw := uncompressedBatch(t, schema, rec)
		for _, c := range compressions[1:] {
			t.Run(fields[0].Name+"/"+c.name, func(t *testing.T) {
				_, batches, err := SplitStream(writeStream(t, schema, c.opts, rec))
				if err != nil {
					t.Fatal(err)
				}
				back, err := Decompress(nil, toLegacy(t, batches[0]), 0)
				if err != nil {
					t.Fatalf("Decompress of arrow-go's %s batch: %v", c.name, err)
				}
				if !bytes.Equal(msgBody(t, back), msgBody(t, raw)) {
					t.Fatalf("decompressed body differs from arrow-go's uncompressed body")
				}
			})
		}
		rec.Release()
	}
}

func TestCompressIncompressibleStoredRaw(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int64}}, nil)
	bld := array.NewInt64Builder(memory.DefaultAllocator)
	rng := rand.New(rand.NewPCG(5, 6))
	for range 512 {
		bld.Append(int64(rng.Uint64()))
	}
	col := bld.NewArray()
	rec := array.NewRecordBatch(schema, []arrow.Array{col}, 512)
	defer rec.Release()
	col.Release()
	bld.Release()
	schemaMsg, raw := uncompressedBatch(t, schema, rec)
	for _, cl := range []codecLevel{{CodecLZ4Frame, 0}, {CodecZSTD, 3}} {
		comp, err := Compress(nil, raw, cl.codec, cl.level)
		if err != nil {
			t.Fatal(err)
		}
		v, err := viewBatch(comp)
		if err != nil {
			t.Fatal(err)
		}
		// Buffer 0 (validity) is empty, buffer 1 holds the random values.
		b := v.buf(1)
		if len(b) != 8+512*8 || int64(le.Uint64(b)) != -1 {
			t.Fatalf("%s: random buffer is %d bytes with prefix %d, want %d bytes stored raw (-1)", cl.codec, len(b), int64(le.Uint64(b)), 8+512*8)
		}
		_, got := readStream(t, AppendStream(nil, schemaMsg, comp))
		if !array.RecordEqual(got[0], rec) {
			t.Fatalf("%s: arrow-go decoded a different record", cl.codec)
		}
		got[0].Release()
	}
}

func TestCompressStream(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	schema := arrow.NewSchema(flatFields, nil)
	recs := []arrow.RecordBatch{randomRecord(t, rng, schema, 300, 10), randomRecord(t, rng, schema, 0, 0), randomRecord(t, rng, schema, 40, 50)}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	plain := writeStream(t, schema, nil, recs...)
	for _, cl := range codecLevels {
		out, err := CompressStream([]byte("keep"), plain, cl.codec, cl.level)
		if err != nil {
			t.Fatalf("%s-%d: %v", cl.codec, cl.level, err)
		}
		if string(out[:4]) != "keep" {
			t.Fatalf("%s-%d: dst clobbered", cl.codec, cl.level)
		}
		_, batches, err := SplitStream(out[4:])
		if err != nil || len(batches) != len(recs) {
			t.Fatalf("%s-%d: split: %d batches, %v", cl.codec, cl.level, len(batches), err)
		}
		for i, b := range batches {
			if _, _, ok := compressionOf(t, b); !ok {
				t.Fatalf("%s-%d: batch %d is not compressed", cl.codec, cl.level, i)
			}
		}
		gotSchema, got := readStream(t, out[4:])
		if !gotSchema.Equal(schema) || len(got) != len(recs) {
			t.Fatalf("%s-%d: arrow-go read %d batches of %v", cl.codec, cl.level, len(got), gotSchema)
		}
		for i := range got {
			if !array.RecordEqual(got[i], recs[i]) {
				t.Fatalf("%s-%d: batch %d differs", cl.codec, cl.level, i)
			}
			got[i].Release()
		}
	}

	// EncodeStream: one record in, the same record out, at every codec.
	for _, cl := range append(codecLevels, codecLevel{CodecNone, 0}) {
		out, err := EncodeStream([]byte("keep"), recs[0], cl.codec, cl.level)
		if err != nil || string(out[:4]) != "keep" {
			t.Fatalf("EncodeStream %s-%d: %v", cl.codec, cl.level, err)
		}
		_, got := readStream(t, out[4:])
		if len(got) != 1 || !array.RecordEqual(got[0], recs[0]) {
			t.Fatalf("EncodeStream %s-%d: arrow-go read back %d different batches", cl.codec, cl.level, len(got))
		}
		got[0].Release()
	}

	// Bad input leaves dst as it was.
	compressed, err := CompressStream(nil, plain, CodecZSTD, 0)
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		stream []byte
		want   error
	}{
		"already compressed": {compressed, ErrUnsupported},
		"not a stream":       {[]byte("not arrow at all"), ErrMalformed},
		"no schema":          {nil, ErrMalformed},
	} {
		out, err := CompressStream([]byte("keep"), tc.stream, CodecZSTD, 0)
		if !errors.Is(err, tc.want) || string(out) != "keep" {
			t.Errorf("%s: got %q, %v; want dst unchanged and %v", name, out, err, tc.want)
		}
	}
	if _, err := CompressStream(nil, plain, CodecZSTD, 23); !errors.Is(err, ErrInvalidCodec) {
		t.Errorf("level 23: %v, want ErrInvalidCodec", err)
	}
}

// TestCompressEntropyCodesMatchlessBuffers: a buffer with no repeats for
// ZSTD's match finder but a skewed byte distribution (random ids over a
// 36-letter alphabet, the offsets of short strings) still shrinks by its
// entropy at every level, as with the reference zstd. klauspost's fastest
// and default speeds store such blocks raw unless told otherwise, which
// kept session ids and string offsets uncompressed (37 against 30 bytes
// per row of the sample rows).
func TestCompressEntropyCodesMatchlessBuffers(t *testing.T) {
	const rows = 1000
	schema := arrow.NewSchema([]arrow.Field{{Name: "session", Type: arrow.BinaryTypes.String}}, nil)
	bld := array.NewStringBuilder(memory.DefaultAllocator)
	rng := rand.New(rand.NewPCG(7, 8))
	const alphabet = "0123456789abcdefghijklmnopqrstuvwxyz"
	id := make([]byte, 10)
	for range rows {
		for i := range id {
			id[i] = alphabet[rng.IntN(len(alphabet))]
		}
		bld.Append(string(id))
	}
	col := bld.NewArray()
	rec := array.NewRecordBatch(schema, []arrow.Array{col}, rows)
	defer rec.Release()
	col.Release()
	bld.Release()
	schemaMsg, raw := uncompressedBatch(t, schema, rec)
	for _, level := range []int{1, 3, 9} {
		comp, err := Compress(nil, raw, CodecZSTD, level)
		if err != nil {
			t.Fatal(err)
		}
		v, err := viewBatch(comp)
		if err != nil {
			t.Fatal(err)
		}
		// Buffer 1 holds the offsets, buffer 2 the characters:
		// log2(36) = 5.2 of 8 bits each, so at most ~65% plus tables.
		for i, name := range map[int]string{1: "offsets", 2: "characters"} {
			b := v.buf(i)
			rawLen := int(le.Uint64(b))
			if int64(rawLen) == -1 || len(b)-8 > rawLen*3/4 {
				t.Errorf("level %d: %s buffer compressed to %d bytes (uncompressed length %d), want at most 75%%", level, name, len(b)-8, int64(rawLen))
			}
		}
		_, got := readStream(t, AppendStream(nil, schemaMsg, comp))
		if !array.RecordEqual(got[0], rec) {
			t.Fatalf("level %d: arrow-go decoded a different record", level)
		}
		got[0].Release()
	}
}

// zeroBatch is a highly compressible batch of rows zero int64s.
func zeroBatch(t testing.TB, rows int) []byte {
	schema := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int64}}, nil)
	bld := array.NewInt64Builder(memory.DefaultAllocator)
	defer bld.Release()
	bld.AppendValues(make([]int64, rows), nil)
	col := bld.NewArray()
	defer col.Release()
	rec := array.NewRecordBatch(schema, []arrow.Array{col}, int64(rows))
	defer rec.Release()
	_, raw := uncompressedBatch(t, schema, rec)
	return raw
}

func TestDecompressBombs(t *testing.T) {
	raw := zeroBatch(t, 1<<17) // 1 MiB of zeros
	for _, cl := range []codecLevel{{CodecLZ4Frame, 0}, {CodecZSTD, 3}} {
		comp, err := Compress(nil, raw, cl.codec, cl.level)
		if err != nil {
			t.Fatal(err)
		}
		if len(comp) > 64<<10 {
			t.Fatalf("%s: 1 MiB of zeros compressed to %d bytes", cl.codec, len(comp))
		}
		v, err := viewBatch(comp)
		if err != nil {
			t.Fatal(err)
		}
		bufOff := len(comp) - len(v.m.body) + int(v.bufs.i64At(1, 0))
		withDeclared := func(n int64) []byte {
			c := bytes.Clone(comp)
			le.PutUint64(c[bufOff:], uint64(n))
			return c
		}
		tests := []struct {
			name  string
			msg   []byte
			limit int64
			want  error
		}{
			{"under the caller limit", comp, 1 << 20, nil},
			{"over the caller limit", comp, 1<<20 - 1, ErrTooLarge},
			{"declared 1 TiB", withDeclared(1 << 40), 0, ErrTooLarge},
			{"declared more than the frame", withDeclared(1<<20 + 8), 0, ErrMalformed},
			{"declared less than the frame", withDeclared(1<<20 - 8), 0, ErrMalformed},
			{"declared negative", withDeclared(-2), 0, ErrMalformed},
		}
		for _, tt := range tests {
			t.Run(cl.codec.String()+"/"+tt.name, func(t *testing.T) {
				dst := []byte("x")
				out, err := Decompress(dst, tt.msg, tt.limit)
				if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
					t.Fatalf("Decompress error %v, want %v", err, tt.want)
				}
				if err != nil && len(out) != 1 {
					t.Fatalf("failed Decompress grew dst to %d bytes", len(out))
				}
				if err == nil && !bytes.Equal(msgBody(t, out[1:]), msgBody(t, raw)) {
					t.Fatalf("wrong decompressed body")
				}
			})
		}
	}
}

func TestCompressErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	schema := arrow.NewSchema(flatFields, nil)
	rec := randomRecord(t, rng, schema, 10, 10)
	defer rec.Release()
	_, raw := uncompressedBatch(t, schema, rec)
	comp, err := Compress(nil, raw, CodecZSTD, 3)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		msg   []byte
		codec Codec
		level int
		want  error
	}{
		{"already compressed", comp, CodecLZ4Frame, 0, ErrUnsupported},
		{"zstd level 23", raw, CodecZSTD, 23, ErrInvalidCodec},
		{"zstd level -1", raw, CodecZSTD, -1, ErrInvalidCodec},
		{"unknown codec", raw, Codec(3), 0, ErrInvalidCodec},
		{"garbage", []byte("not an arrow message at all"), CodecZSTD, 3, ErrMalformed},
		{"truncated", raw[:len(raw)-9], CodecLZ4Frame, 0, ErrMalformed},
		{"schema message", SchemaMessageOrDie(t, schema), CodecZSTD, 3, ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := Compress([]byte("ab"), tt.msg, tt.codec, tt.level)
			if !errors.Is(err, tt.want) {
				t.Fatalf("error %v, want %v", err, tt.want)
			}
			if len(out) != 2 {
				t.Fatalf("failed Compress changed dst length to %d", len(out))
			}
		})
	}
	// CodecNone and Decompress of an uncompressed batch copy it unchanged.
	for name, f := range map[string]func() ([]byte, error){
		"Compress none":       func() ([]byte, error) { return Compress(nil, raw, CodecNone, 0) },
		"Decompress verbatim": func() ([]byte, error) { return Decompress(nil, raw, 0) },
	} {
		out, err := f()
		if err != nil || !bytes.Equal(out, raw) {
			t.Fatalf("%s: %v, equal=%v", name, err, bytes.Equal(out, raw))
		}
	}
}

func SchemaMessageOrDie(t *testing.T, s *arrow.Schema) []byte {
	t.Helper()
	m, err := SchemaMessage(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestCompressConcurrent(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	schema := arrow.NewSchema(flatFields, nil)
	rec := randomRecord(t, rng, schema, 200, 10)
	defer rec.Release()
	_, raw := uncompressedBatch(t, schema, rec)
	want := msgBody(t, raw)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			cl := codecLevels[g%len(codecLevels)]
			var buf, back []byte
			for range 20 {
				var err error
				if buf, err = Compress(buf[:0], raw, cl.codec, cl.level); err != nil {
					errs <- err
					return
				}
				if back, err = Decompress(back[:0], buf, 0); err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(msgBody(t, back), want) {
					errs <- fmt.Errorf("%s-%d: round trip changed the body", cl.codec, cl.level)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func FuzzDecompress(f *testing.F) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, s := range seedStreams(f) {
		_, batches, err := SplitStream(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(batches[0], int64(0))
		f.Add(toLegacy(f, batches[0]), int64(1<<10))
	}
	schema := arrow.NewSchema(flatFields, nil)
	rec := randomRecord(f, rng, schema, 20, 20)
	_, raw := uncompressedBatch(f, schema, rec)
	rec.Release()
	for _, cl := range []codecLevel{{CodecLZ4Frame, 0}, {CodecZSTD, 1}, {CodecZSTD, 9}} {
		c, err := Compress(nil, raw, cl.codec, cl.level)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(c, int64(0))
	}
	f.Add(zeroBatch(f, 4096), int64(100))
	f.Fuzz(func(t *testing.T, msg []byte, limit int64) {
		out, err := Decompress(nil, msg, limit)
		if err != nil && !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnsupported) && !errors.Is(err, ErrTooLarge) {
			t.Fatalf("error wraps no sentinel: %v", err)
		}
		if err != nil {
			return
		}
		if limit <= 0 {
			limit = DefaultMaxDecompressed
		}
		if _, _, ok := compressionOf(t, out); ok {
			t.Fatalf("Decompress output still compressed")
		}
		var body int64
		for _, b := range bodyBuffers(t, out) {
			body += pad8(int64(len(b)))
		}
		if body > max(limit, int64(len(msg))) {
			t.Fatalf("decompressed buffers %d bytes over the %d-byte limit", body, limit)
		}
		// The output is a fixed point, and survives a compression round trip.
		again, err := Decompress(nil, out, 0)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("Decompress of decompressed output: %v, equal=%v", err, bytes.Equal(again, out))
		}
		c, err := Compress(nil, out, CodecZSTD, 1)
		if err != nil {
			// An uncompressed input passes through Decompress unchecked
			// beyond its buffer ranges (custom metadata is not walked).
			if _, _, wasCompressed := compressionOf(t, msg); wasCompressed || !errors.Is(err, ErrMalformed) {
				t.Fatalf("Compress of decompressed output: %v", err)
			}
			return
		}
		back, err := Decompress(nil, c, 0)
		if err != nil {
			t.Fatalf("zstd round trip of decompressed output: %v", err)
		}
		// Compress re-lays buffers out 8-aligned: compare them one by one.
		bo, bb := bodyBuffers(t, out), bodyBuffers(t, back)
		if len(bo) != len(bb) {
			t.Fatalf("round trip has %d buffers, want %d", len(bb), len(bo))
		}
		for i := range bo {
			if !bytes.Equal(bo[i], bb[i]) {
				t.Fatalf("round trip changed buffer %d", i)
			}
		}
	})
}
