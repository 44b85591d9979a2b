// Package nodetest holds what tests that run nodes on loopback share.
package nodetest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
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

// FreeAddr returns a loopback address whose TCP and UDP port (a gossip
// listener binds both) was free a moment ago, never the same one twice in
// a process. It panics if it finds none, which only a machine out of
// ports would make it do.
func FreeAddr() string {
	for range 500 {
		addr := fmt.Sprintf("127.0.0.1:%d", First+rand.IntN(Last-First+1))
		if _, dup := handedOut.LoadOrStore(addr, true); dup {
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
