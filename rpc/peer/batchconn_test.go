package peer

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// gateConn is a net.Conn whose Writes each wait for a release and are
// recorded as the kernel would see them, or fail with failWith.
type gateConn struct {
	net.Conn
	release  chan struct{} // one receive per Write; nil: never wait
	failWith error
	closed   atomic.Bool

	mu     sync.Mutex
	writes [][]byte
}

func (g *gateConn) Write(p []byte) (int, error) {
	if g.release != nil {
		<-g.release
	}
	if g.failWith != nil {
		return 0, g.failWith
	}
	g.mu.Lock()
	g.writes = append(g.writes, bytes.Clone(p))
	g.mu.Unlock()
	return len(p), nil
}

func (g *gateConn) Close() error { g.closed.Store(true); return nil }

func (g *gateConn) got() [][]byte {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.writes
}

// Frames handed over while a write is in the kernel go out together in the
// next write; a lone frame goes out at once.
func TestBatchConnGathersWhileWriting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &gateConn{release: make(chan struct{})}
		b := newBatchConn(g)
		for _, p := range []string{"a", "bb", "ccc"} {
			if n, err := b.Write([]byte(p)); n != len(p) || err != nil {
				t.Fatalf("Write(%q) = %d, %v", p, n, err)
			}
			synctest.Wait() // the flusher is in the write of "a"
		}
		g.release <- struct{}{} // "a"
		g.release <- struct{}{} // "bbccc"
		synctest.Wait()
		want := [][]byte{[]byte("a"), []byte("bbccc")}
		if got := g.got(); len(got) != 2 || !bytes.Equal(got[0], want[0]) || !bytes.Equal(got[1], want[1]) {
			t.Fatalf("writes reaching the connection: %q, want %q", got, want)
		}

		// Idle again: the next frame starts a write of its own.
		go func() { g.release <- struct{}{} }()
		if _, err := b.Write([]byte("d")); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got := g.got(); len(got) != 3 || string(got[2]) != "d" {
			t.Fatalf("writes reaching the connection: %q, want a third one of \"d\"", got)
		}
	})
}

// A Write that would take the pending bytes past batchMaxPending waits
// until the connection takes them.
func TestBatchConnBoundsPending(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &gateConn{release: make(chan struct{})}
		b := newBatchConn(g)
		if _, err := b.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the flusher holds "x" in the kernel
		if _, err := b.Write(make([]byte, batchMaxPending-10)); err != nil {
			t.Fatal(err)
		}
		var done atomic.Bool
		go func() {
			if _, err := b.Write(make([]byte, 20)); err != nil {
				t.Error(err)
			}
			done.Store(true)
		}()
		synctest.Wait()
		if done.Load() {
			t.Fatalf("a Write past %d pending bytes returned before the connection took them", batchMaxPending)
		}
		g.release <- struct{}{} // "x": the flusher takes the pending bytes
		synctest.Wait()
		if !done.Load() {
			t.Fatal("the waiting Write did not return once the pending bytes were taken")
		}
		g.release <- struct{}{}
		g.release <- struct{}{}
		synctest.Wait()
		total := 0
		for _, w := range g.got() {
			total += len(w)
		}
		if want := 1 + batchMaxPending - 10 + 20; total != want {
			t.Fatalf("%d bytes reached the connection, want %d", total, want)
		}
	})
}

// A failed write closes the connection, and every later Write returns the
// error.
func TestBatchConnWriteError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		boom := errors.New("connection reset")
		g := &gateConn{failWith: boom}
		b := newBatchConn(g)
		if _, err := b.Write([]byte("a")); err != nil {
			t.Fatalf("first Write = %v, want nil (the failure comes later)", err)
		}
		synctest.Wait()
		if !g.closed.Load() {
			t.Fatal("connection not closed after a failed write")
		}
		if _, err := b.Write([]byte("b")); !errors.Is(err, boom) {
			t.Fatalf("Write after the failure = %v, want %v", err, boom)
		}
	})
}

// Over a real socket, writes of every size, from several goroutines each
// writing whole chunks, arrive intact: each chunk contiguous, each
// goroutine's chunks in order, nothing lost.
func TestBatchConnOverSocket(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const writers, chunks = 4, 300
	received := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			received <- nil
			return
		}
		defer c.Close()
		all, _ := io.ReadAll(c)
		received <- all
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b := newBatchConn(c)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for i := range chunks {
				size := 1 + rng.IntN(4096)
				if i%50 == 0 {
					size = batchMaxPending + 1000 // larger than the bound
				}
				if _, err := b.Write(chunk(w, i, size)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	// Close once the last bytes are out (the flusher finishes on its own).
	for {
		b.mu.Lock()
		idle := !b.flushing
		b.mu.Unlock()
		if idle {
			break
		}
		time.Sleep(time.Millisecond)
	}
	c.Close()
	all := <-received
	next := make([]int, writers)
	for len(all) > 0 {
		w, i, size := int(all[0]), int(all[1])<<8|int(all[2]), int(all[3])<<24|int(all[4])<<16|int(all[5])<<8|int(all[6])
		if w >= writers || i != next[w] || size > len(all) || !bytes.Equal(all[:size], chunk(w, i, size)) {
			t.Fatalf("chunk header writer %d index %d size %d: want writer's next index %v, intact bytes", w, i, size, next)
		}
		next[w]++
		all = all[size:]
	}
	for w, n := range next {
		if n != chunks {
			t.Fatalf("writer %d: %d chunks arrived, want %d", w, n, chunks)
		}
	}
}

// chunk is writer w's i-th write: a 7-byte header (writer, index, size)
// and a fill derived from them.
func chunk(w, i, size int) []byte {
	size = max(size, 7)
	p := make([]byte, size)
	p[0], p[1], p[2] = byte(w), byte(i>>8), byte(i)
	p[3], p[4], p[5], p[6] = byte(size>>24), byte(size>>16), byte(size>>8), byte(size)
	for j := 7; j < size; j++ {
		p[j] = byte(w*31 + i + j)
	}
	return p
}

// Close ends a write in progress and returns once the flush goroutine has;
// later Writes fail and start nothing.
func TestBatchConnClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &gateConn{release: make(chan struct{})}
		b := newBatchConn(g)
		if _, err := b.Write([]byte("a")); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the flusher is in the write of "a"
		closed := make(chan error)
		go func() { closed <- b.Close() }()
		synctest.Wait()
		select {
		case <-closed:
			t.Fatal("Close returned while the flush goroutine was still writing")
		default:
		}
		close(g.release) // the closed connection ends the write
		if err := <-closed; err != nil {
			t.Fatalf("Close = %v", err)
		}
		if _, err := b.Write([]byte("b")); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Write after Close = %v, want net.ErrClosed", err)
		}
		synctest.Wait() // no flush goroutine may be left in the bubble
	})
}

// A buffer larger than batchKeep is not kept, and the buffer being written
// is never the one that takes new bytes: a burst of one big frame between
// small ones leaves every write intact.
func TestBatchConnBigBurstBetweenSmall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &gateConn{release: make(chan struct{})}
		b := newBatchConn(g)
		big := bytes.Repeat([]byte("B"), batchKeep+1)
		step := func(p string, release bool) {
			if release {
				g.release <- struct{}{}
			}
			synctest.Wait()
			if p != "" {
				if _, err := b.Write([]byte(p)); err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
			}
		}
		step("a", false)        // in the kernel: "a"
		step(string(big), true) // "a" done; in the kernel: big
		step("xy", false)       // pending: "xy"
		step("zz", true)        // big done; in the kernel: "xy"; pending: "zz"
		step("", true)          // "xy" done; in the kernel: "zz"
		step("", true)          // "zz" done
		want := []string{"a", string(big), "xy", "zz"}
		got := g.got()
		if len(got) != len(want) {
			t.Fatalf("%d writes reached the connection, want %d", len(got), len(want))
		}
		for i := range want {
			if string(got[i]) != want[i] {
				t.Fatalf("write %d = %.10q (%d bytes), want %.10q", i, got[i], len(got[i]), want[i])
			}
		}
	})
}
