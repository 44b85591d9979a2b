// Package nodetest holds what tests that run nodes on loopback share.
package nodetest

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// First and Last bound the ports FreeAddr picks from: below Linux's
// default ephemeral range (32768-60999). A port from that range, once
// closed, can be taken by any outgoing connection (of this or a
// concurrently running test package) before a node binds it, or binds it
// again after a restart: tests failed with "address already in use".
const (
	First = 20000
	Last  = 32767
)

// handedOut holds every address FreeAddr returned in this process: one
// handed out before may not be bound yet, or be free while its node
// restarts.
var handedOut sync.Map

// portLocks is a file every test process on the machine shares; FreeAddr
// holds a one-byte lock at the offset of each port it hands out (fcntl
// locks are the process's and go when it exits), so that two test packages
// running at once never hand out one port: one package's node may not have
// bound its port yet, or be restarting, when the other looks (CI saw an
// integration node fail with "address already in use" beside the node
// package's tests). nil when the file cannot be opened: then only this
// process's own addresses are kept apart.
var portLocks = sync.OnceValue(func() *os.File {
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "fluss-nodetest-ports.lock"), os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return nil
	}
	return f
})

// claim takes port for this process among the machine's test processes.
func claim(port int) bool {
	f := portLocks()
	if f == nil {
		return true
	}
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart, Start: int64(port), Len: 1}
	return unix.FcntlFlock(f.Fd(), unix.F_SETLK, &lk) == nil
}

// FreeAddr returns a loopback address whose TCP and UDP port (a gossip
// listener binds both) was free a moment ago, never the same one twice on
// the machine while this process runs (portLocks). It panics if it finds
// none, which only a machine out of ports would make it do.
func FreeAddr() string {
	for range 500 {
		port := First + rand.IntN(Last-First+1)
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		if _, dup := handedOut.LoadOrStore(addr, true); dup || !claim(port) {
			continue
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		u, err := net.ListenPacket("udp", addr)
		l.Close()
		if err != nil {
			continue
		}
		u.Close()
		return addr
	}
	panic(fmt.Sprintf("nodetest: no free loopback port in %d-%d", First, Last))
}
