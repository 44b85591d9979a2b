package peer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Wire constants; see WIRE.md.
const (
	magic0, magic1 = 'F', 'P'

	// Version is the stream header version this binary writes.
	Version byte = 1

	kindRaft byte = 1
	kindCall byte = 2

	headerFixedLen = 5 // magic(2) version(1) kind(1) name length(1)
	maxNameLen     = 255
	frameHdrLen    = 5 // length(4) type/status(1)

	// DefaultMaxFrameSize bounds one frame (an AppendEntries with its entries).
	DefaultMaxFrameSize = 64 << 20
)

// RPC types of kind raft streams.
const (
	typeCall            byte = 0
	typeAppendEntries   byte = 1
	typeRequestVote     byte = 2
	typeRequestPreVote  byte = 3
	typeTimeoutNow      byte = 4
	typeInstallSnapshot byte = 5
	typeMax                  = typeInstallSnapshot
)

// Response statuses.
const (
	statusOK             byte = 0
	statusError          byte = 1
	statusUnknownGroup   byte = 2
	statusUnknownHandler byte = 3
	statusBadHeader      byte = 4
	statusFenced         byte = 5
)

// Sentinel errors. Errors returned by this package wrap one of them where it applies.
var (
	// ErrUnknownGroup: the remote Mux has no transport registered for the Raft group.
	ErrUnknownGroup = errors.New("peer: raft group not registered on remote node")
	// ErrUnknownHandler: the remote Mux has no handler registered under the call name.
	ErrUnknownHandler = errors.New("peer: handler not registered on remote node")
	// ErrBadHeader: a stream header is malformed or of an unsupported version.
	ErrBadHeader = errors.New("peer: bad stream header")
	// ErrBadFrame: a frame is malformed or larger than the configured maximum.
	ErrBadFrame = errors.New("peer: bad frame")
	// ErrClosed: the Mux or the group transport is closed.
	ErrClosed = errors.New("peer: closed")
	// ErrGroupExists: Transport was called twice for one group.
	ErrGroupExists = errors.New("peer: raft group already registered")
	// ErrRemote: the remote handler or Raft returned an error; the message follows.
	ErrRemote = errors.New("peer: remote error")
	// ErrFenced: the remote node refuses this node's raft requests: it
	// was given up for lost (Options.Fenced on the remote).
	ErrFenced = errors.New("peer: fenced by the remote node")
)

// streamHeader is the decoded stream header.
type streamHeader struct {
	version byte
	kind    byte
	name    string
}

// appendHeader appends the stream header for (kind, name) to dst.
func appendHeader(dst []byte, kind byte, name string) ([]byte, error) {
	if len(name) == 0 || len(name) > maxNameLen {
		return dst, fmt.Errorf("%w: name length %d outside 1..%d", ErrBadHeader, len(name), maxNameLen)
	}
	dst = append(dst, magic0, magic1, Version, kind, byte(len(name)))
	return append(dst, name...), nil
}

// parseHeaderFixed checks the fixed part of a stream header and returns the name length.
// The version is returned even when it is unsupported so that the caller can answer.
func parseHeaderFixed(b []byte) (version, kind byte, nameLen int, err error) {
	if len(b) < headerFixedLen {
		return 0, 0, 0, fmt.Errorf("%w: %d bytes, want %d", ErrBadHeader, len(b), headerFixedLen)
	}
	if b[0] != magic0 || b[1] != magic1 {
		return 0, 0, 0, fmt.Errorf("%w: bad magic %#x%#x (not a fluss-node peer?)", ErrBadHeader, b[0], b[1])
	}
	version, kind, nameLen = b[2], b[3], int(b[4])
	if version != Version {
		return version, kind, nameLen, fmt.Errorf("%w: version %d, this node speaks %d", ErrBadHeader, version, Version)
	}
	if kind != kindRaft && kind != kindCall && kind != kindHeartbeats {
		return version, kind, nameLen, fmt.Errorf("%w: unknown stream kind %d", ErrBadHeader, kind)
	}
	if nameLen == 0 {
		return version, kind, nameLen, fmt.Errorf("%w: empty name", ErrBadHeader)
	}
	return version, kind, nameLen, nil
}

// parseHeader decodes a complete stream header held in b and returns the bytes consumed.
func parseHeader(b []byte) (streamHeader, int, error) {
	v, k, n, err := parseHeaderFixed(b)
	if err != nil {
		return streamHeader{version: v, kind: k}, 0, err
	}
	if len(b) < headerFixedLen+n {
		return streamHeader{}, 0, fmt.Errorf("%w: name truncated: %d of %d bytes", ErrBadHeader, len(b)-headerFixedLen, n)
	}
	return streamHeader{version: v, kind: k, name: string(b[headerFixedLen : headerFixedLen+n])}, headerFixedLen + n, nil
}

// readHeader reads one stream header from r.
func readHeader(r io.Reader) (streamHeader, error) {
	var buf [headerFixedLen + maxNameLen]byte
	if _, err := io.ReadFull(r, buf[:headerFixedLen]); err != nil {
		return streamHeader{}, fmt.Errorf("%w: %w", ErrBadHeader, err)
	}
	v, k, n, err := parseHeaderFixed(buf[:headerFixedLen])
	if err != nil {
		return streamHeader{version: v, kind: k}, err
	}
	if _, err := io.ReadFull(r, buf[headerFixedLen:headerFixedLen+n]); err != nil {
		return streamHeader{}, fmt.Errorf("%w: name: %w", ErrBadHeader, err)
	}
	h, _, err := parseHeader(buf[:headerFixedLen+n])
	return h, err
}

// beginFrame resets buf to an empty frame of type typ; the body is appended by the caller
// and endFrame patches the length.
func beginFrame(buf []byte, typ byte) []byte {
	return append(buf[:0], 0, 0, 0, 0, typ)
}

// endFrame writes the frame length into buf[0:4].
func endFrame(buf []byte) []byte { return finishFrame(buf, 0) }

// finishFrame writes the length of the frame that starts at buf[off] and runs to the end of buf.
func finishFrame(buf []byte, off int) []byte {
	binary.BigEndian.PutUint32(buf[off:off+4], uint32(len(buf)-off-4))
	return buf
}

// parseFrameHeader decodes the 5-byte frame header: the body length and the type/status byte.
func parseFrameHeader(b []byte, maxFrame int) (bodyLen int, typ byte, err error) {
	if len(b) < frameHdrLen {
		return 0, 0, fmt.Errorf("%w: %d header bytes, want %d", ErrBadFrame, len(b), frameHdrLen)
	}
	l := binary.BigEndian.Uint32(b[0:4])
	if l == 0 {
		return 0, 0, fmt.Errorf("%w: zero length", ErrBadFrame)
	}
	if uint64(l) > uint64(maxFrame) {
		return 0, 0, fmt.Errorf("%w: %d bytes exceeds the limit of %d (raise MaxFrameSize on both nodes)", ErrBadFrame, l, maxFrame)
	}
	return int(l) - 1, b[4], nil
}

// readFrame reads one frame from r into buf (grown as needed) and returns the type/status byte
// and the body, which aliases buf and is valid until the next readFrame with the same buf.
func readFrame(r io.Reader, buf *[]byte, maxFrame int) (typ byte, body []byte, err error) {
	var hdr [frameHdrLen]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n, typ, err := parseFrameHeader(hdr[:], maxFrame)
	if err != nil {
		return 0, nil, err
	}
	if cap(*buf) < n {
		*buf = make([]byte, n)
	}
	body = (*buf)[:n]
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, nil, fmt.Errorf("%w: body truncated: %w", ErrBadFrame, err)
	}
	return typ, body, nil
}

// statusError maps a non-OK response status and message to an error wrapping the sentinel.
func errorForStatus(status byte, msg []byte) error {
	switch status {
	case statusUnknownGroup:
		return fmt.Errorf("%w: %s", ErrUnknownGroup, msg)
	case statusUnknownHandler:
		return fmt.Errorf("%w: %s", ErrUnknownHandler, msg)
	case statusBadHeader:
		return fmt.Errorf("%w: remote says: %s", ErrBadHeader, msg)
	case statusFenced:
		return fmt.Errorf("%w: %s", ErrFenced, msg)
	case statusError:
		return fmt.Errorf("%w: %s", ErrRemote, msg)
	default:
		return fmt.Errorf("%w: unknown response status %d", ErrBadFrame, status)
	}
}
