package membership

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/hashicorp/memberlist"
)

// Node lifecycle states carried in Meta.State (DESIGN §8).
const (
	StateJoining  = "joining"  // gossiping in, not yet serving replicas
	StateActive   = "active"   // a full member: holds replicas, may lead
	StateDraining = "draining" // moving leaderships away; no new placements
	StateLeft     = "left"     // removed from the cluster on purpose
)

// MetaFormat is the leading version byte of an encoded Meta.
const MetaFormat byte = 1

// MaxMetaSize is the largest encoded Meta memberlist carries.
const MaxMetaSize = memberlist.MetaMaxSize

// Field tags of the Meta encoding (see doc.go). Never reuse a tag.
const (
	tagID           = 1
	tagClientAddr   = 2
	tagPeerAddr     = 3
	tagVersion      = 4
	tagState        = 5
	tagFeatureLevel = 6
)

// Errors of the Meta codec and validation.
var (
	ErrMetaCorrupt  = errors.New("membership: corrupt node meta")
	ErrMetaVersion  = errors.New("membership: unsupported node meta format")
	ErrMetaTooLarge = errors.New("membership: node meta too large")
	ErrInvalidMeta  = errors.New("membership: invalid node meta")
)

// Meta is what every node gossips about itself.
type Meta struct {
	ID           int32  // node id, > 0; also the memberlist node name
	ClientAddr   string // Connect API address (host:port) clients use
	PeerAddr     string // peer (Raft, node RPC) address (host:port)
	Version      string // binary version, e.g. "0.3.1"
	State        string // StateJoining, StateActive, StateDraining or StateLeft
	FeatureLevel uint32 // highest cluster feature level this binary supports
}

// KnownState reports whether s is one of the states this binary knows.
func KnownState(s string) bool {
	switch s {
	case StateJoining, StateActive, StateDraining, StateLeft:
		return true
	}
	return false
}

// Validate checks a local Meta before it is gossiped: id > 0, a known state,
// and an encoding that fits memberlist's limit.
func (m Meta) Validate() error {
	if m.ID <= 0 {
		return fmt.Errorf("%w: node id must be > 0, got %d", ErrInvalidMeta, m.ID)
	}
	if !KnownState(m.State) {
		return fmt.Errorf("%w: state %q is not one of joining, active, draining, left", ErrInvalidMeta, m.State)
	}
	_, err := m.AppendBinary(nil)
	return err
}

// AppendBinary appends the encoding of m to dst (encoding.BinaryAppender).
// It fails only when the result would exceed MaxMetaSize or the id is not
// positive; dst is returned unchanged then.
func (m Meta) AppendBinary(dst []byte) ([]byte, error) {
	if m.ID <= 0 {
		return dst, fmt.Errorf("%w: node id must be > 0, got %d", ErrInvalidMeta, m.ID)
	}
	start := len(dst)
	dst = append(dst, MetaFormat)
	dst = appendUintField(dst, tagID, uint64(m.ID))
	dst = appendStringField(dst, tagClientAddr, m.ClientAddr)
	dst = appendStringField(dst, tagPeerAddr, m.PeerAddr)
	dst = appendStringField(dst, tagVersion, m.Version)
	dst = appendStringField(dst, tagState, m.State)
	if m.FeatureLevel != 0 {
		dst = appendUintField(dst, tagFeatureLevel, uint64(m.FeatureLevel))
	}
	if n := len(dst) - start; n > MaxMetaSize {
		return dst[:start], fmt.Errorf("%w: %d bytes, memberlist carries at most %d: shorten the addresses or version", ErrMetaTooLarge, n, MaxMetaSize)
	}
	return dst, nil
}

// MarshalBinary returns the encoding of m.
func (m Meta) MarshalBinary() ([]byte, error) { return m.AppendBinary(nil) }

func appendStringField(dst []byte, tag uint64, s string) []byte {
	if s == "" {
		return dst
	}
	dst = binary.AppendUvarint(dst, tag)
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendUintField(dst []byte, tag, v uint64) []byte {
	var tmp [binary.MaxVarintLen64]byte
	n := binary.PutUvarint(tmp[:], v)
	dst = binary.AppendUvarint(dst, tag)
	dst = binary.AppendUvarint(dst, uint64(n))
	return append(dst, tmp[:n]...)
}

// DecodeMeta decodes bytes written by AppendBinary of this or a newer
// binary. It never panics; unknown fields are skipped. The result does not
// alias b. The state is not checked against the known states, so a newer
// binary's state survives (callers treat an unknown state as not active).
func DecodeMeta(b []byte) (Meta, error) {
	var m Meta
	if len(b) == 0 {
		return m, fmt.Errorf("%w: empty", ErrMetaCorrupt)
	}
	if b[0] != MetaFormat {
		return m, fmt.Errorf("%w: format %d, this binary reads format %d", ErrMetaVersion, b[0], MetaFormat)
	}
	var last uint64
	haveID := false
	for p := 1; p < len(b); {
		tag, n := binary.Uvarint(b[p:])
		if n <= 0 || tag == 0 {
			return Meta{}, fmt.Errorf("%w: bad field tag at byte %d", ErrMetaCorrupt, p)
		}
		p += n
		if tag <= last {
			return Meta{}, fmt.Errorf("%w: field %d after field %d", ErrMetaCorrupt, tag, last)
		}
		last = tag
		size, n := binary.Uvarint(b[p:])
		if n <= 0 {
			return Meta{}, fmt.Errorf("%w: bad length of field %d", ErrMetaCorrupt, tag)
		}
		p += n
		if size > uint64(len(b)-p) {
			return Meta{}, fmt.Errorf("%w: field %d of %d bytes overruns the %d-byte meta", ErrMetaCorrupt, tag, size, len(b))
		}
		v := b[p : p+int(size)]
		p += int(size)
		switch tag {
		case tagID:
			x, err := decodeUint32(v, tag)
			if err != nil {
				return Meta{}, err
			}
			if x == 0 || x > math.MaxInt32 {
				return Meta{}, fmt.Errorf("%w: node id %d out of range", ErrMetaCorrupt, x)
			}
			m.ID, haveID = int32(x), true
		case tagClientAddr:
			m.ClientAddr = string(v)
		case tagPeerAddr:
			m.PeerAddr = string(v)
		case tagVersion:
			m.Version = string(v)
		case tagState:
			m.State = string(v)
		case tagFeatureLevel:
			x, err := decodeUint32(v, tag)
			if err != nil {
				return Meta{}, err
			}
			m.FeatureLevel = x
		default:
			// A field of a newer binary: skipped.
		}
	}
	if !haveID {
		return Meta{}, fmt.Errorf("%w: no node id", ErrMetaCorrupt)
	}
	return m, nil
}

func decodeUint32(v []byte, tag uint64) (uint32, error) {
	x, n := binary.Uvarint(v)
	if n <= 0 || n != len(v) || x > math.MaxUint32 {
		return 0, fmt.Errorf("%w: field %d is not a 32-bit varint", ErrMetaCorrupt, tag)
	}
	return uint32(x), nil
}
