//go:build unix

package client

import (
	"errors"
	"net"
	"syscall"
)

// closedByPeer reports whether an idle connection has been closed (or
// written to) by the server, with one non-blocking peek at its socket.
func closedByPeer(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	closed := false
	var b [1]byte
	err = rc.Read(func(fd uintptr) bool {
		n, _, rerr := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		// EAGAIN: open and quiet, the only state fit for a new request.
		closed = !errors.Is(rerr, syscall.EAGAIN) || n > 0
		return true
	})
	return err != nil || closed
}
