package logstore

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"time"

	"github.com/hashicorp/raft"
)

const (
	frameHeaderLen = 59        // bytes before extensions
	frameBodyFixed = 51        // fixed part of the body (after len and crc)
	frameVersion   = 1         //
	maxFrameBody   = 256 << 20 // body_len limit
	flagRecords    = 1 << 0
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// frameMeta is the decoded fixed part of a frame.
type frameMeta struct {
	bodyLen    uint32
	typ        raft.LogType
	flags      uint8
	index      uint64
	term       uint64
	appendedAt int64
	offset     int64 // base offset, or next offset when !hasRecords
	count      int32
	maxTs      int64
	extLen     uint32
}

func (m *frameMeta) hasRecords() bool { return m.flags&flagRecords != 0 }
func (m *frameMeta) size() int64      { return int64(m.bodyLen) + 8 }

// nextOffset is the data offset after this frame.
func (m *frameMeta) nextOffset() int64 {
	if m.hasRecords() {
		return m.offset + int64(m.count)
	}
	return m.offset
}

var (
	errShortFrame = errors.New("short frame")
	errBadLength  = errors.New("bad frame length")
	errBadCRC     = errors.New("frame checksum mismatch")
	errBadHeader  = errors.New("bad frame header")
)

// appendFrame appends the frame of l to dst.
func appendFrame(dst []byte, l *raft.Log, offset int64, count int32, maxTs int64, records bool) []byte {
	bodyLen := frameBodyFixed + len(l.Extensions) + len(l.Data)
	start := len(dst)
	var h [frameHeaderLen]byte
	binary.LittleEndian.PutUint32(h[0:], uint32(bodyLen))
	h[8] = frameVersion
	h[9] = byte(l.Type)
	if records {
		h[10] = flagRecords
	} else {
		count, maxTs = 0, 0
	}
	binary.LittleEndian.PutUint64(h[11:], l.Index)
	binary.LittleEndian.PutUint64(h[19:], l.Term)
	var at int64
	if !l.AppendedAt.IsZero() {
		at = l.AppendedAt.UnixNano()
	}
	binary.LittleEndian.PutUint64(h[27:], uint64(at))
	binary.LittleEndian.PutUint64(h[35:], uint64(offset))
	binary.LittleEndian.PutUint32(h[43:], uint32(count))
	binary.LittleEndian.PutUint64(h[47:], uint64(maxTs))
	binary.LittleEndian.PutUint32(h[55:], uint32(len(l.Extensions)))
	dst = append(dst, h[:]...)
	dst = append(dst, l.Extensions...)
	dst = append(dst, l.Data...)
	crc := crc32.Checksum(dst[start+8:], castagnoli)
	binary.LittleEndian.PutUint32(dst[start+4:], crc)
	return dst
}

// decodeFrameHeader checks the fixed header (not the CRC). b must hold at
// least frameHeaderLen bytes or errShortFrame is returned.
func decodeFrameHeader(b []byte, m *frameMeta) error {
	if len(b) < frameHeaderLen {
		return errShortFrame
	}
	m.bodyLen = binary.LittleEndian.Uint32(b[0:])
	if m.bodyLen < frameBodyFixed || m.bodyLen > maxFrameBody {
		return errBadLength
	}
	if b[8] != frameVersion || b[10]&^flagRecords != 0 {
		return errBadHeader
	}
	m.typ = raft.LogType(b[9])
	m.flags = b[10]
	m.index = binary.LittleEndian.Uint64(b[11:])
	m.term = binary.LittleEndian.Uint64(b[19:])
	m.appendedAt = int64(binary.LittleEndian.Uint64(b[27:]))
	m.offset = int64(binary.LittleEndian.Uint64(b[35:]))
	m.count = int32(binary.LittleEndian.Uint32(b[43:]))
	m.maxTs = int64(binary.LittleEndian.Uint64(b[47:]))
	m.extLen = binary.LittleEndian.Uint32(b[55:])
	if m.extLen > m.bodyLen-frameBodyFixed {
		return errBadHeader
	}
	if m.offset < 0 || m.count < 0 || (!m.hasRecords() && (m.count != 0 || m.maxTs != 0)) {
		return errBadHeader
	}
	if m.hasRecords() && m.offset > (1<<62)-int64(m.count) {
		return errBadHeader
	}
	return nil
}

// decodeFrame decodes one complete frame at the start of b and verifies
// its CRC. It never panics on arbitrary input. ext and data alias b.
func decodeFrame(b []byte, m *frameMeta) (ext, data []byte, err error) {
	if err := decodeFrameHeader(b, m); err != nil {
		return nil, nil, err
	}
	total := m.size()
	if int64(len(b)) < total {
		return nil, nil, errShortFrame
	}
	body := b[8:total]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(b[4:]) {
		return nil, nil, errBadCRC
	}
	ext = b[frameHeaderLen : frameHeaderLen+int(m.extLen)]
	data = b[frameHeaderLen+int(m.extLen) : total]
	return ext, data, nil
}

// fill copies a decoded frame into a raft.Log. ext and data are retained.
func (m *frameMeta) fill(l *raft.Log, ext, data []byte) {
	l.Index = m.index
	l.Term = m.term
	l.Type = m.typ
	l.Extensions = ext
	l.Data = data
	if len(ext) == 0 {
		l.Extensions = nil
	}
	if len(data) == 0 {
		l.Data = nil
	}
	if m.appendedAt == 0 {
		l.AppendedAt = time.Time{}
	} else {
		l.AppendedAt = time.Unix(0, m.appendedAt)
	}
}
