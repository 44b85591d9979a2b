package peer

import (
	"encoding/binary"
	"net"
	"sync"
)

// yamux's frame header (its spec.md): version(1) type(1) flags(2)
// stream id(4) length(4); for a data frame, length body bytes follow.
const (
	yamuxVersion    = 0 // the first byte of every frame
	yamuxHeaderSize = 12
	yamuxTypeData   = 0
)

// sendMaxPending is how many bytes a sendConn holds before a Write waits
// for the connection to take them; a buffer up to sendKeep bytes is kept
// for the next burst, a larger one (a burst of big frames) is dropped.
const (
	sendMaxPending = 1 << 20
	sendKeep       = 256 << 10
)

// sendConn is the connection under a yamux session. It decides how yamux's
// frames reach the kernel, where each write syscall on loopback or a LAN
// costs about as much as the small Raft RPC it carries:
//
//   - One write per frame. yamux's send loop (the only writer) writes a
//     data frame as two calls, header then body; sendConn holds the header
//     until the body comes. Every other frame (window updates, pings,
//     go-away, a data frame without body) is taken at once.
//   - Frames that come while a write is in the kernel share the next one.
//     A Write copies its frame into a pending buffer and returns; one flush
//     goroutine, started when a frame arrives with none running, writes
//     everything pending in one syscall, again until nothing is pending,
//     then exits. A sync round releases the AppendEntries or answers of
//     many bucket groups at once, and they go out together. Nothing waits
//     for later traffic: a lone frame starts a write at once.
//
// A write error closes the connection (so yamux sees the session end) and
// every later Write returns it. Frames handed over before the error may
// have been lost; that is the session's end, as for any broken connection.
// Close closes the connection and returns once the flush goroutine has.
type sendConn struct {
	net.Conn

	// Owned by the send loop.
	hdr     [yamuxHeaderSize]byte
	holding bool

	mu       sync.Mutex
	space    sync.Cond // signalled when the flusher takes the pending bytes
	pending  []byte
	spare    []byte // the buffer the last flush wrote, reused
	flushing bool
	err      error
}

func newSendConn(c net.Conn) *sendConn {
	s := &sendConn{Conn: c}
	s.space.L = &s.mu
	return s
}

// Write takes one call of yamux's send loop; it is not safe for concurrent
// use (the send loop is the only writer).
func (s *sendConn) Write(p []byte) (int, error) {
	if !s.holding {
		if len(p) == yamuxHeaderSize && p[1] == yamuxTypeData && binary.BigEndian.Uint32(p[8:]) > 0 {
			copy(s.hdr[:], p)
			s.holding = true
			return len(p), nil
		}
		if err := s.enqueue(nil, p); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	s.holding = false
	if err := s.enqueue(s.hdr[:], p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// enqueue adds hdr and p to the pending bytes and starts a flush goroutine
// if none runs.
func (s *sendConn) enqueue(hdr, p []byte) error {
	n := len(hdr) + len(p)
	s.mu.Lock()
	for s.err == nil && len(s.pending) > 0 && len(s.pending)+n > sendMaxPending {
		s.space.Wait()
	}
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return err
	}
	s.pending = append(append(s.pending, hdr...), p...)
	start := !s.flushing
	s.flushing = true
	s.mu.Unlock()
	if start {
		go s.flush()
	}
	return nil
}

// flush writes the pending bytes until none are left.
func (s *sendConn) flush() {
	s.mu.Lock()
	for len(s.pending) > 0 && s.err == nil {
		buf := s.pending
		s.pending, s.spare = s.spare[:0], nil
		s.space.Broadcast()
		s.mu.Unlock()
		_, err := s.Conn.Write(buf)
		s.mu.Lock()
		if cap(buf) <= sendKeep {
			s.spare = buf
		}
		if err != nil {
			s.err = err
			s.Conn.Close()
		}
	}
	if s.err != nil {
		s.pending = nil // never to be written
	}
	s.flushing = false
	s.space.Broadcast()
	s.mu.Unlock()
}

// Close closes the connection, which ends a write in progress, and waits
// for the flush goroutine to return. Later Writes fail.
func (s *sendConn) Close() error {
	err := s.Conn.Close()
	s.mu.Lock()
	if s.err == nil {
		s.err = net.ErrClosed
	}
	for s.flushing {
		s.space.Wait()
	}
	s.mu.Unlock()
	return err
}
