package arrowipc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"

	flatbuffers "github.com/google/flatbuffers/go"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Codec is an Arrow IPC body compression codec. The values match the
// record package's Compression (FORMAT.md §1 attribute bits 0-1), not the
// flatbuffer enum (LZ4_FRAME = 0, ZSTD = 1), so the zero value means none.
type Codec uint8

const (
	CodecNone     Codec = 0
	CodecLZ4Frame Codec = 1
	CodecZSTD     Codec = 2
)

func (c Codec) String() string {
	switch c {
	case CodecNone:
		return "NONE"
	case CodecLZ4Frame:
		return "LZ4_FRAME"
	case CodecZSTD:
		return "ZSTD"
	}
	return fmt.Sprintf("Codec(%d)", uint8(c))
}

const (
	// Arrow's CompressionType enum (Message.fbs) and BodyCompressionMethod.
	fbLZ4Frame     = 0
	fbZSTD         = 1
	methodBuffer   = 0
	uncompressedID = -1 // an 8-byte prefix of -1: buffer stored raw

	// DefaultZSTDLevel is Fluss's default table.log.arrow.compression.zstd.level.
	DefaultZSTDLevel = 3
	// MinZSTDLevel and MaxZSTDLevel bound the zstd level (as in Fluss).
	MinZSTDLevel = 1
	MaxZSTDLevel = 22
)

// DefaultMaxDecompressed bounds the decompressed body of one record-batch
// message when Decompress is given no limit (maxBody <= 0).
const DefaultMaxDecompressed = 256 << 20

// ErrTooLarge reports input that would take more memory than a limit to
// decode: a compressed batch that declares more uncompressed bytes than
// the caller's limit (a possible decompression bomb), or a stream whose
// dictionaries SplitStream would repeat into too many bytes.
var ErrTooLarge = errors.New("arrowipc: decoded size over the limit")

// ErrInvalidCodec reports an unknown codec or a zstd level outside 1..22.
var ErrInvalidCodec = errors.New("arrowipc: invalid compression codec or level")

// zstd: one shared encoder per klauspost speed (Fluss levels map with
// zstd.EncoderLevelFromZstd: 1-2 fastest, 3-5 default, 6-9 better, 10-22
// best). EncodeAll is concurrency-safe and, unlike the streaming encoder
// arrow-go uses per buffer, does not reset its tables per call.
var zstdEncoders [zstd.SpeedBestCompression + 1]struct {
	once sync.Once
	enc  *zstd.Encoder
	err  error
}

// codecConcurrency is how many zstd encoder/decoder states each shared
// codec holds: EncodeAll/DecodeAll calls beyond it wait.
func codecConcurrency() int { return min(runtime.GOMAXPROCS(0), 4) }

func zstdEncoder(level int) (*zstd.Encoder, error) {
	if level == 0 {
		level = DefaultZSTDLevel
	}
	if level < MinZSTDLevel || level > MaxZSTDLevel {
		return nil, fmt.Errorf("%w: zstd level %d, want %d..%d", ErrInvalidCodec, level, MinZSTDLevel, MaxZSTDLevel)
	}
	speed := zstd.EncoderLevelFromZstd(level)
	e := &zstdEncoders[speed]
	e.once.Do(func() {
		e.enc, e.err = zstd.NewWriter(nil,
			zstd.WithEncoderLevel(speed),
			zstd.WithEncoderConcurrency(codecConcurrency()),
			zstd.WithEncoderCRC(false),
			zstd.WithLowerEncoderMem(true),
			// Entropy-code the literals of blocks without matches, as the
			// reference zstd does at every level: klauspost's fastest and
			// default speeds store them raw, which left random ids and the
			// offsets of short strings uncompressed (-19% bytes per row of
			// the sample rows for ~20% more encoding time; BENCHMARKS.md).
			zstd.WithAllLitEntropyCompression(true),
			zstd.WithZeroFrames(true))
	})
	if e.err != nil {
		return nil, fmt.Errorf("arrowipc: zstd encoder: %w", e.err)
	}
	return e.enc, nil
}

var zstdDecoder = sync.OnceValues(func() (*zstd.Decoder, error) {
	return zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(codecConcurrency()),
		zstd.WithDecodeAllCapLimit(true),
		zstd.WithDecoderMaxMemory(DefaultMaxDecompressed),
		zstd.WithDecoderMaxWindow(64<<20))
})

// lz4 frame writers and readers are stateful: pool them. The writer options
// match arrow-go and Arrow C++ (64 KiB independent blocks, no checksum).
var lz4Writers = sync.Pool{New: func() any {
	w := lz4.NewWriter(nil)
	_ = w.Apply(lz4.ChecksumOption(false), lz4.BlockSizeOption(lz4.Block64Kb))
	return w
}}

var lz4Readers = sync.Pool{New: func() any { return lz4.NewReader(nil) }}

type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// compressBuf appends to dst the Arrow compressed form of raw (len > 0):
// the int64 uncompressed length and the compressed bytes, or -1 and raw
// when compression does not make it smaller.
func compressBuf(dst, raw []byte, codec Codec, zenc *zstd.Encoder) ([]byte, error) {
	start := len(dst)
	dst = le.AppendUint64(dst, uint64(len(raw)))
	switch codec {
	case CodecZSTD:
		dst = zenc.EncodeAll(raw, dst)
	case CodecLZ4Frame:
		w := lz4Writers.Get().(*lz4.Writer)
		sink := appendWriter{b: dst}
		w.Reset(&sink)
		_, err := w.Write(raw)
		if err == nil {
			err = w.Close()
		}
		w.Reset(nil)
		lz4Writers.Put(w)
		if err != nil {
			return dst[:start], fmt.Errorf("arrowipc: lz4 compress: %w", err)
		}
		dst = sink.b
	}
	if len(dst)-start-8 >= len(raw) {
		dst = le.AppendUint64(dst[:start], ^uint64(0)) // int64 -1: stored raw
		dst = append(dst, raw...)
	}
	return dst, nil
}

var scratchPool = sync.Pool{New: func() any { return new([]byte) }}

// batchView is a parsed record-batch or dictionary-batch message with its
// buffers checked to lie inside the body without overlapping.
type batchView struct {
	m              message
	dict           dictHeader // set for a dictionary batch
	length         int64
	nodes, bufs    fbVector
	hasCompression bool
	codec, method  uint8
}

// dictHeader is what a DictionaryBatch adds to the RecordBatch it wraps.
type dictHeader struct {
	ok      bool
	id      int64
	isDelta bool
}

// viewBatch parses the record-batch message at the start of batchMsg.
func viewBatch(batchMsg []byte) (batchView, error) {
	m, err := parseOne(batchMsg, hdrRecordBatch)
	if err != nil {
		return batchView{}, err
	}
	return viewMessage(m)
}

// viewMessage checks a parsed RecordBatch or DictionaryBatch message.
func viewMessage(m message) (batchView, error) {
	v := batchView{m: m}
	rb := m.hdr
	if m.hdrType == hdrDictionaryBatch {
		var err error
		v.dict.ok = true
		if v.dict.id, err = m.hdr.i64(dbID, 0); err != nil {
			return v, fmt.Errorf("dictionary id: %w", err)
		}
		delta, err := m.hdr.u8(dbIsDelta, 0)
		if err != nil {
			return v, fmt.Errorf("dictionary delta flag: %w", err)
		}
		v.dict.isDelta = delta != 0
		var ok bool
		if rb, ok, err = m.hdr.table(dbData); err != nil {
			return v, fmt.Errorf("dictionary data: %w", err)
		} else if !ok {
			return v, fmt.Errorf("%w: dictionary batch %d without data", ErrMalformed, v.dict.id)
		}
	}
	var err error
	if v.length, err = rb.i64(rbLength, 0); err != nil {
		return v, fmt.Errorf("record count: %w", err)
	}
	if v.nodes, err = rb.vector(rbNodes, structSize); err != nil {
		return v, fmt.Errorf("field nodes: %w", err)
	}
	if v.bufs, err = rb.vector(rbBuffers, structSize); err != nil {
		return v, fmt.Errorf("buffers: %w", err)
	}
	variadic, err := rb.vector(rbVariadic, 8)
	if err != nil {
		return v, fmt.Errorf("variadic buffer counts: %w", err)
	}
	if variadic.n != 0 {
		return v, fmt.Errorf("%w: view types (variadic buffer counts)", ErrUnsupported)
	}
	if bc, ok, err := rb.table(rbCompression); err != nil {
		return v, fmt.Errorf("body compression: %w", err)
	} else if ok {
		v.hasCompression = true
		if v.codec, err = bc.u8(bcCodec, 0); err != nil {
			return v, fmt.Errorf("compression codec: %w", err)
		}
		if v.method, err = bc.u8(bcMethod, 0); err != nil {
			return v, fmt.Errorf("compression method: %w", err)
		}
	}
	bodyLen := uint64(len(m.body))
	var total uint64
	for i := 0; i < v.bufs.n; i++ {
		off, n := v.bufs.i64At(i, 0), v.bufs.i64At(i, 1)
		if off < 0 || n < 0 || uint64(n) > bodyLen || uint64(off) > bodyLen-uint64(n) {
			return v, fmt.Errorf("%w: buffer %d [%d, +%d) outside the %d-byte body", ErrMalformed, i, off, n, bodyLen)
		}
		if total += uint64(n); total > bodyLen {
			return v, fmt.Errorf("%w: buffers overlap: their lengths exceed the %d-byte body", ErrMalformed, bodyLen)
		}
	}
	return v, nil
}

// maxBodyDictionaries bounds the dictionary batches in front of one record
// batch; a stored body has one per dictionary-encoded column.
const maxBodyDictionaries = 1024

// viewBody parses a batch body: the dictionary batches it carries (none
// for a schema without dictionary-encoded fields), then one record batch,
// which ends it (bytes after it are ignored, as after any one message).
func viewBody(body []byte) (dicts []batchView, rb batchView, err error) {
	off := 0
	for i := 0; ; i++ {
		m, n, eos, err := parseMessage(body[off:])
		if err != nil {
			return nil, rb, fmt.Errorf("message %d: %w", i, err)
		}
		if eos {
			return nil, rb, fmt.Errorf("%w: end-of-stream marker where a %s message was expected", ErrMalformed, headerName(hdrRecordBatch))
		}
		switch m.hdrType {
		case hdrRecordBatch, hdrDictionaryBatch:
		default:
			return nil, rb, fmt.Errorf("message %d: %w", i, unexpectedHeader(m.hdrType, hdrRecordBatch))
		}
		v, err := viewMessage(m)
		if err != nil {
			return nil, rb, fmt.Errorf("message %d: %w", i, err)
		}
		if !v.dict.ok {
			return dicts, v, nil
		}
		if len(dicts) == maxBodyDictionaries {
			return nil, rb, fmt.Errorf("%w: more than %d dictionary batches before a record batch", ErrMalformed, maxBodyDictionaries)
		}
		dicts = append(dicts, v)
		off += n
	}
}

func (v *batchView) buf(i int) []byte {
	off, n := v.bufs.i64At(i, 0), v.bufs.i64At(i, 1)
	return v.m.body[off : off+n]
}

// Compress appends to dst the batch body body (a record-batch message,
// uncompressed, either framing, after the dictionary batches it carries,
// if any) with every body buffer of every message compressed by codec as
// Arrow's BodyCompression (method BUFFER) says: an int64 uncompressed
// length then the LZ4 frame or zstd frame, or -1 then the raw bytes when
// compression does not make the buffer smaller; empty buffers stay empty.
// Buffers are re-aligned to 8 bytes. Field nodes, record count, dictionary
// id and delta flag, metadata version and custom metadata are kept. level
// is the zstd level 1..22 (0 = 3) and is ignored for LZ4_FRAME. CodecNone
// appends the messages re-framed, unchanged.
//
// The codecs are shared and safe for concurrent use. On error dst is
// returned unchanged in length; errors wrap ErrMalformed, ErrUnsupported
// (already compressed input, view types) or ErrInvalidCodec.
func Compress(dst, body []byte, codec Codec, level int) ([]byte, error) {
	var zenc *zstd.Encoder
	switch codec {
	case CodecNone, CodecLZ4Frame:
	case CodecZSTD:
		var err error
		if zenc, err = zstdEncoder(level); err != nil {
			return dst, err
		}
	default:
		return dst, fmt.Errorf("%w: %s", ErrInvalidCodec, codec)
	}
	dicts, rb, err := viewBody(body)
	if err != nil {
		return dst, fmt.Errorf("compress: %w", err)
	}
	start := len(dst)
	for i := range dicts {
		if dst, err = compressOne(dst, &dicts[i], codec, zenc); err != nil {
			return dst[:start], fmt.Errorf("compress: dictionary %d: %w", dicts[i].dict.id, err)
		}
	}
	if dst, err = compressOne(dst, &rb, codec, zenc); err != nil {
		return dst[:start], fmt.Errorf("compress: %w", err)
	}
	return dst, nil
}

// compressOne appends one message of Compress.
func compressOne(dst []byte, v *batchView, codec Codec, zenc *zstd.Encoder) ([]byte, error) {
	if v.hasCompression {
		return dst, fmt.Errorf("%w: the batch is already compressed; Decompress it first", ErrUnsupported)
	}
	if codec == CodecNone {
		return appendFramed(dst, v.m.raw), nil
	}

	sp := scratchPool.Get().(*[]byte)
	defer func() {
		if cap(*sp) <= 16<<20 {
			scratchPool.Put(sp)
		}
	}()
	body := (*sp)[:0]
	var lenStack [32]int64
	lens := lenStack[:0]
	var err error
	for i := 0; i < v.bufs.n; i++ {
		raw := v.buf(i)
		start := len(body)
		if len(raw) > 0 {
			if body, err = compressBuf(body, raw, codec, zenc); err != nil {
				*sp = body
				return dst, err
			}
		}
		n := len(body) - start
		lens = append(lens, int64(n))
		body = append(body, zeros[:pad8(int64(n))-int64(n)]...)
	}
	*sp = body
	fbCodec := uint8(fbLZ4Frame)
	if codec == CodecZSTD {
		fbCodec = fbZSTD
	}
	return appendBatch(dst, v, lens, true, fbCodec, func(out []byte) error {
		copy(out, body)
		return nil
	})
}

// CompressStream appends to dst the Arrow IPC stream stream (uncompressed
// record batches, as arrow-go's writer emits them without a codec option)
// with every batch compressed by Compress: what a producer sends instead of
// compressing with arrow-go's writer, whose per-buffer streaming encoder
// rebuilds its tables for every buffer. Errors are those of SplitStream and
// Compress; on error dst is returned unchanged in length.
func CompressStream(dst, stream []byte, codec Codec, level int) ([]byte, error) {
	schemaMsg, batches, err := SplitStream(stream)
	if err != nil {
		return dst, err
	}
	start := len(dst)
	dst = appendFramed(dst, schemaMsg)
	for i, b := range batches {
		if dst, err = Compress(dst, b, codec, level); err != nil {
			return dst[:start], fmt.Errorf("batch %d: %w", i, err)
		}
	}
	return le.AppendUint64(dst, continuation), nil
}

var zeros [8]byte

// Decompress appends to dst the batch body body (a record-batch message,
// either framing, after the dictionary batches it carries, if any) with the
// buffers of every message decompressed and no BodyCompression: messages
// any Arrow reader decodes without a codec. Uncompressed messages are
// appended re-framed, unchanged.
//
// Before anything is decompressed, the uncompressed lengths the buffers
// declare are summed (each padded to 8) and checked against maxBody
// (DefaultMaxDecompressed when maxBody <= 0), over all the messages of the
// body: a larger total fails with ErrTooLarge, and no buffer may decode to
// more or fewer bytes than it declares (ErrMalformed), so output and work
// are bounded by maxBody plus the metadata. On error dst is returned
// unchanged in length.
func Decompress(dst, body []byte, maxBody int64) ([]byte, error) {
	if maxBody <= 0 {
		maxBody = DefaultMaxDecompressed
	}
	dicts, rb, err := viewBody(body)
	if err != nil {
		return dst, fmt.Errorf("decompress: %w", err)
	}
	start := len(dst)
	for i := range dicts {
		if dst, err = decompressOne(dst, &dicts[i], &maxBody); err != nil {
			return dst[:start], fmt.Errorf("decompress: dictionary %d: %w", dicts[i].dict.id, err)
		}
	}
	if dst, err = decompressOne(dst, &rb, &maxBody); err != nil {
		return dst[:start], fmt.Errorf("decompress: %w", err)
	}
	return dst, nil
}

// decompressOne appends one message of Decompress and takes its
// uncompressed size from *budget.
func decompressOne(dst []byte, v *batchView, budget *int64) ([]byte, error) {
	if !v.hasCompression {
		return appendFramed(dst, v.m.raw), nil
	}
	if v.method != methodBuffer {
		return dst, fmt.Errorf("%w: body compression method %d (only BUFFER)", ErrUnsupported, v.method)
	}
	if v.codec != fbLZ4Frame && v.codec != fbZSTD {
		return dst, fmt.Errorf("%w: compression codec %d (want LZ4_FRAME or ZSTD)", ErrUnsupported, v.codec)
	}
	maxBody := *budget
	var lenStack [32]int64
	lens := lenStack[:0]
	var total int64
	for i := 0; i < v.bufs.n; i++ {
		b := v.buf(i)
		var n int64
		switch {
		case len(b) == 0:
		case len(b) < 8:
			return dst, fmt.Errorf("%w: compressed buffer %d has %d bytes, less than its 8-byte length prefix", ErrMalformed, i, len(b))
		default:
			n = int64(le.Uint64(b))
			if n == uncompressedID {
				n = int64(len(b) - 8)
			} else if n < 0 {
				return dst, fmt.Errorf("%w: compressed buffer %d declares %d uncompressed bytes", ErrMalformed, i, n)
			}
		}
		if n > maxBody-total {
			return dst, fmt.Errorf("%w: buffer %d declares %d bytes, over the %d-byte limit for the body", ErrTooLarge, i, n, maxBody)
		}
		if len(b) >= 8 && int64(le.Uint64(b)) != uncompressedID {
			if err := checkDeclared(b[8:], n, v.codec); err != nil {
				return dst, fmt.Errorf("compressed buffer %d: %w", i, err)
			}
		}
		lens = append(lens, n)
		total += pad8(n)
	}
	*budget -= total
	var dec *zstd.Decoder
	if v.codec == fbZSTD {
		var err error
		if dec, err = zstdDecoder(); err != nil {
			return dst, fmt.Errorf("arrowipc: zstd decoder: %w", err)
		}
	}
	return appendBatch(dst, v, lens, false, 0, func(out []byte) error {
		p := 0
		for i, n := range lens {
			if n > 0 {
				b := v.buf(i)
				if err := decompressBuf(out[p:p+int(n):p+int(n)], b, v.codec, dec); err != nil {
					return fmt.Errorf("decompress buffer %d: %w", i, err)
				}
			}
			p += int(pad8(n))
			clear(out[p-int(pad8(n)-n) : p])
		}
		return nil
	})
}

// checkDeclared rejects, before anything is allocated, a declared
// uncompressed size n that the frame src cannot hold: more than the codec's
// maximum expansion of len(src) bytes (LZ4 sequences expand at most ~255×;
// a zstd block of 3+ bytes decodes to at most 128 KiB), or, for zstd, less
// than the content size the first frame's header states (a buffer may hold
// several frames, so only a larger size is certainly wrong).
func checkDeclared(src []byte, n int64, codec uint8) error {
	srcLen := int64(len(src))
	var most int64
	switch codec {
	case fbLZ4Frame:
		most = 256*srcLen + 64<<10
	case fbZSTD:
		most = (srcLen/3 + 1) * (128 << 10)
		var h zstd.Header
		if err := h.Decode(src); err == nil && h.HasFCS && h.FrameContentSize > uint64(n) {
			return fmt.Errorf("%w: its zstd frame holds %d bytes, the buffer declares %d", ErrMalformed, h.FrameContentSize, n)
		}
	}
	if n > most {
		return fmt.Errorf("%w: %d compressed bytes cannot decode to the %d declared", ErrMalformed, srcLen, n)
	}
	return nil
}

// decompressBuf fills out (exactly its declared size) from the compressed
// buffer b (8-byte prefix included).
func decompressBuf(out, b []byte, codec uint8, dec *zstd.Decoder) error {
	if int64(le.Uint64(b)) == uncompressedID {
		copy(out, b[8:])
		return nil
	}
	src := b[8:]
	switch codec {
	case fbZSTD:
		got, err := dec.DecodeAll(src, out[:0])
		if err != nil {
			return fmt.Errorf("%w: zstd: %v", ErrMalformed, err)
		}
		if len(got) != len(out) {
			return fmt.Errorf("%w: zstd frame holds %d bytes, the buffer declares %d", ErrMalformed, len(got), len(out))
		}
		if &got[0] != &out[0] {
			copy(out, got)
		}
	case fbLZ4Frame:
		r := lz4Readers.Get().(*lz4.Reader)
		defer lz4Readers.Put(r)
		br := bytes.NewReader(src)
		r.Reset(br)
		defer r.Reset(nil)
		if _, err := io.ReadFull(r, out); err != nil {
			return fmt.Errorf("%w: lz4 frame shorter than the %d bytes the buffer declares: %v", ErrMalformed, len(out), err)
		}
		var one [1]byte
		if n, err := r.Read(one[:]); n != 0 || err != io.EOF {
			return fmt.Errorf("%w: lz4 frame longer than the %d bytes the buffer declares", ErrMalformed, len(out))
		}
	}
	return nil
}

// appendBatch appends a modern-framed record-batch message with v's field
// nodes, record count, version and custom metadata, the given buffer
// lengths (each placed 8-aligned, in order) and, if compressed, a
// BodyCompression of fbCodec. fill writes the body into its exact slot.
func appendBatch(dst []byte, v *batchView, lens []int64, compressed bool, fbCodec uint8, fill func(body []byte) error) ([]byte, error) {
	b := builders.Get().(*flatbuffers.Builder)
	defer builders.Put(b)
	b.Reset()

	customMeta, err := copyCustomMetadata(b, v.m.msg)
	if err != nil {
		return dst, fmt.Errorf("custom metadata: %w", err)
	}
	var newBody int64
	for _, n := range lens {
		newBody += pad8(n)
	}
	b.StartVector(structSize, len(lens), 8)
	off := newBody
	for i := len(lens) - 1; i >= 0; i-- {
		off -= pad8(lens[i])
		b.Prep(8, structSize)
		b.PrependInt64(lens[i])
		b.PrependInt64(off)
	}
	buffersVec := b.EndVector(len(lens))

	b.StartVector(structSize, v.nodes.n, 8)
	for i := v.nodes.n - 1; i >= 0; i-- {
		b.Prep(8, structSize)
		b.PrependInt64(v.nodes.i64At(i, 1))
		b.PrependInt64(v.nodes.i64At(i, 0))
	}
	nodesVec := b.EndVector(v.nodes.n)

	start := len(dst)
	dst, body := appendBatchMessage(dst, b, v.m.version, v.dict, v.length, nodesVec, buffersVec,
		compressed, fbCodec, methodBuffer, customMeta, newBody)
	if err := fill(body); err != nil {
		return dst[:start], err
	}
	return dst, nil
}
