package peer

import (
	"encoding/binary"
	"net"
)

// yamux's frame header (its spec.md): version(1) type(1) flags(2)
// stream id(4) length(4); for a data frame, length body bytes follow.
const (
	yamuxVersion    = 0 // the first byte of every frame
	yamuxHeaderSize = 12
	yamuxTypeData   = 0
	// joinCopyMax is the largest body joinConn copies behind its header;
	// larger ones go out with the header in one writev.
	joinCopyMax = 64 << 10
)

// joinConn is the connection under a yamux session. yamux's send loop (the
// only writer) writes a data frame as two calls, header then body, which
// costs two syscalls, and on loopback or a LAN each send is a large part
// of a small Raft RPC's cost. joinConn holds a data frame's header and
// sends it with the body in one write. Every other write (window updates,
// pings, go-away, a data frame without body) goes out at once, so nothing
// is ever held waiting for a later frame.
type joinConn struct {
	net.Conn
	hdr     [yamuxHeaderSize]byte
	holding bool
	buf     []byte // header + small body, reused
}

func (c *joinConn) Write(p []byte) (int, error) {
	if !c.holding {
		if len(p) == yamuxHeaderSize && p[1] == yamuxTypeData && binary.BigEndian.Uint32(p[8:]) > 0 {
			copy(c.hdr[:], p)
			c.holding = true
			return len(p), nil
		}
		return c.Conn.Write(p)
	}
	c.holding = false
	if len(p) > joinCopyMax {
		bufs := net.Buffers{c.hdr[:], p}
		if _, err := bufs.WriteTo(c.Conn); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	c.buf = append(append(c.buf[:0], c.hdr[:]...), p...)
	if _, err := c.Conn.Write(c.buf); err != nil {
		return 0, err
	}
	return len(p), nil
}
