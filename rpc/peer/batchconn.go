package peer

import (
	"net"
	"sync"
)

// batchMaxPending is how many bytes batchConn holds before a Write waits
// for the connection to take them; a buffer up to batchKeep bytes is kept
// for the next burst, a larger one (a burst of big frames) is dropped.
const (
	batchMaxPending = 1 << 20
	batchKeep       = 256 << 10
)

// batchConn is the connection under a yamux session's joinConn. A Write
// copies its bytes into a pending buffer and returns; one flush goroutine,
// started when bytes arrive with none running, writes everything pending
// in one syscall and again until nothing is pending, then exits. While a
// write is in the kernel, the frames the send loop hands over meanwhile
// gather and go out together in the next one.
//
// The point is many Raft groups on one session: a sync round on one node
// releases the AppendEntries or answers of all its groups at once, and a
// write syscall on loopback or a LAN costs about as much as the frame it
// carries. Nothing is held for later traffic: a lone frame starts a flush
// at once.
//
// A write error closes the connection (so yamux sees the session end) and
// every later Write returns it. Frames handed over before the error may
// have been lost; that is the session's end, as for any broken connection.
// Close closes the connection and returns once the flush goroutine has.
type batchConn struct {
	net.Conn

	mu       sync.Mutex
	space    sync.Cond // signalled when the flusher takes the pending bytes
	pending  []byte
	spare    []byte // the buffer the last flush wrote, reused
	flushing bool
	err      error
}

func newBatchConn(c net.Conn) *batchConn {
	b := &batchConn{Conn: c}
	b.space.L = &b.mu
	return b
}

func (b *batchConn) Write(p []byte) (int, error) {
	b.mu.Lock()
	for b.err == nil && len(b.pending) > 0 && len(b.pending)+len(p) > batchMaxPending {
		b.space.Wait()
	}
	if b.err != nil {
		err := b.err
		b.mu.Unlock()
		return 0, err
	}
	b.pending = append(b.pending, p...)
	start := !b.flushing
	b.flushing = true
	b.mu.Unlock()
	if start {
		go b.flush()
	}
	return len(p), nil
}

// flush writes the pending bytes until none are left.
func (b *batchConn) flush() {
	b.mu.Lock()
	for len(b.pending) > 0 && b.err == nil {
		buf := b.pending
		b.pending, b.spare = b.spare[:0], nil
		b.space.Broadcast()
		b.mu.Unlock()
		_, err := b.Conn.Write(buf)
		b.mu.Lock()
		if cap(buf) <= batchKeep {
			b.spare = buf
		}
		if err != nil {
			b.err = err
			b.Conn.Close()
		}
	}
	if b.err != nil {
		b.pending = nil // never to be written
	}
	b.flushing = false
	b.space.Broadcast()
	b.mu.Unlock()
}

// Close closes the connection, which ends a write in progress, and waits
// for the flush goroutine to return. Later Writes fail.
func (b *batchConn) Close() error {
	err := b.Conn.Close()
	b.mu.Lock()
	if b.err == nil {
		b.err = net.ErrClosed
	}
	for b.flushing {
		b.space.Wait()
	}
	b.mu.Unlock()
	return err
}
