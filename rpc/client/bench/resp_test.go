package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestReadReply(t *testing.T) {
	for _, tc := range []struct {
		name     string
		in       string
		kind     byte
		val      string
		null     bool
		wantErr  error // errors.Is target; nil: success
		redisErr string
	}{
		{name: "simple string", in: "+OK\r\n", kind: '+', val: "OK"},
		{name: "integer", in: ":-42\r\n", kind: ':', val: "-42"},
		{name: "bulk", in: "$5\r\nhello\r\n", kind: '$', val: "hello"},
		{name: "bulk with CRLF inside", in: "$4\r\na\r\nb\r\n", kind: '$', val: "a\r\nb"},
		{name: "empty bulk", in: "$0\r\n\r\n", kind: '$', val: ""},
		{name: "null bulk", in: "$-1\r\n", kind: '$', null: true},
		{name: "error reply", in: "-ERR wrong type\r\n", kind: '-', redisErr: "ERR wrong type"},
		{name: "bad integer", in: ":x\r\n", wantErr: ErrRedisReply},
		{name: "negative bulk length", in: "$-2\r\n", wantErr: ErrRedisReply},
		{name: "huge bulk length", in: "$99999999999\r\n", wantErr: ErrRedisReply},
		{name: "short bulk", in: "$5\r\nhel", wantErr: ErrRedisReply},
		{name: "bulk without CRLF", in: "$2\r\nhixx", wantErr: ErrRedisReply},
		{name: "bare LF", in: "+OK\n", wantErr: ErrRedisReply},
		{name: "empty line", in: "\r\n", wantErr: ErrRedisReply},
		{name: "array is unsupported", in: "*1\r\n$1\r\na\r\n", wantErr: ErrRedisReply},
		{name: "nothing", in: "", wantErr: io.EOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kind, val, err := readReply(bufio.NewReader(strings.NewReader(tc.in)), []byte("prefix:"))
			if tc.redisErr != "" {
				var re *RedisError
				if !errors.As(err, &re) || re.Msg != tc.redisErr {
					t.Fatalf("error %v, want RedisError %q", err, tc.redisErr)
				}
				return
			}
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("error %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if kind != tc.kind {
				t.Errorf("kind %q, want %q", kind, tc.kind)
			}
			if tc.null {
				if val != nil {
					t.Errorf("value %q, want nil (null bulk)", val)
				}
				return
			}
			if want := "prefix:" + tc.val; string(val) != want {
				t.Errorf("value %q, want %q (appended to dst)", val, want)
			}
		})
	}
}

func FuzzReadReply(f *testing.F) {
	for _, s := range []string{"+OK\r\n", ":1\r\n", "$3\r\nabc\r\n", "$-1\r\n", "-ERR x\r\n", "$0\r\n\r\n",
		"$5\r\nab", "*2\r\n", "$99999999999999999999\r\n", "\r\n", "+PONG\r\n+OK\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bufio.NewReaderSize(bytes.NewReader(in), 16)
		for range 4 {
			kind, val, err := readReply(r, nil)
			if err != nil {
				return
			}
			switch kind {
			case '+', ':':
				if bytes.ContainsAny(val, "\r\n") {
					t.Fatalf("%c value %q holds a line break", kind, val)
				}
			case '$':
				if len(val) > len(in) {
					t.Fatalf("bulk of %d bytes from %d input bytes", len(val), len(in))
				}
			default:
				t.Fatalf("success with kind %q", kind)
			}
		}
	})
}

func BenchmarkReadReply(b *testing.B) {
	reply := []byte("$200\r\n" + strings.Repeat("x", 200) + "\r\n")
	br := bytes.NewReader(reply)
	r := bufio.NewReader(br)
	var dst []byte
	b.ReportAllocs()
	for b.Loop() {
		br.Reset(reply)
		r.Reset(br)
		var err error
		if _, dst, err = readReply(r, dst[:0]); err != nil {
			b.Fatal(err)
		}
	}
}

// fakeRedis serves PING, GET and SET from a map over RESP on 127.0.0.1.
func fakeRedis(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	kv := map[string]string{}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer conn.Close()
				r := bufio.NewReader(conn)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					n, _ := strconv.Atoi(strings.TrimSpace(line[1:]))
					args := make([]string, n)
					for i := range args {
						l, _ := r.ReadString('\n')
						size, _ := strconv.Atoi(strings.TrimSpace(l[1:]))
						buf := make([]byte, size+2)
						if _, err := io.ReadFull(r, buf); err != nil {
							return
						}
						args[i] = string(buf[:size])
					}
					var reply string
					mu.Lock()
					switch strings.ToUpper(args[0]) {
					case "PING":
						reply = "+PONG\r\n"
					case "SET":
						kv[args[1]] = args[2]
						reply = "+OK\r\n"
					case "GET":
						if v, ok := kv[args[1]]; ok {
							reply = "$" + strconv.Itoa(len(v)) + "\r\n" + v + "\r\n"
						} else {
							reply = "$-1\r\n"
						}
					default:
						reply = "-ERR unknown command\r\n"
					}
					mu.Unlock()
					if _, err := conn.Write([]byte(reply)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func TestRedisClient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	addr := fakeRedis(t)
	if err := LoadRedis(ctx, addr, 2500); err != nil {
		t.Fatal(err)
	}
	rc, err := DialRedis(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	for _, id := range []int64{0, 999, 1000, 2499} {
		v, ok, err := rc.Get(nil, []byte(strconv.FormatInt(id, 10)))
		if err != nil || !ok {
			t.Fatalf("GET %d: ok %v err %v", id, ok, err)
		}
		if want := AppendPKRow(nil, id, 0); !bytes.Equal(v, want) {
			t.Errorf("GET %d = %s, want %s", id, v, want)
		}
	}
	if _, ok, err := rc.Get(nil, []byte("2500")); err != nil || ok {
		t.Fatalf("GET of a missing key: ok %v err %v, want not found", ok, err)
	}
	if err := rc.SetMany([][]byte{[]byte("a")}, nil); err == nil {
		t.Fatal("SetMany with mismatched slices succeeded")
	}
}

func TestAppendPKRow(t *testing.T) {
	a := AppendPKRow([]byte("x"), 42, 3)
	if !bytes.HasPrefix(a, []byte("x")) {
		t.Fatal("AppendPKRow did not append to dst")
	}
	var row map[string]any
	if err := json.Unmarshal(a[1:], &row); err != nil {
		t.Fatalf("row %s is not JSON: %v", a[1:], err)
	}
	if len(row) != len(pkColumns) {
		t.Errorf("row has %d columns, want %d: %s", len(row), len(pkColumns), a[1:])
	}
	for _, c := range pkColumns {
		if _, ok := row[c.Name]; !ok {
			t.Errorf("row lacks column %s", c.Name)
		}
	}
	if row["id"] != float64(42) {
		t.Errorf("id = %v, want 42", row["id"])
	}
	if b := AppendPKRow(nil, 42, 3); !bytes.Equal(b, a[1:]) {
		t.Error("AppendPKRow is not deterministic in (id, version)")
	}
	if b := AppendPKRow(nil, 42, 4); bytes.Equal(b, a[1:]) {
		t.Error("another version gave the same row")
	}
}

// TestRedisClientRealServer runs the client against a real redis-server
// when $FLUSS_TEST_REDIS names one (host:port), e.g. one started with
// `redis-server --port 6390 --bind 127.0.0.1 --save "" --appendonly no`.
func TestRedisClientRealServer(t *testing.T) {
	addr := os.Getenv("FLUSS_TEST_REDIS")
	if addr == "" {
		t.Skip("set FLUSS_TEST_REDIS=host:port to run against a real redis-server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := LoadRedis(ctx, addr, 3000); err != nil {
		t.Fatal(err)
	}
	rc, err := DialRedis(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	for _, id := range []int64{0, 1234, 2999} {
		v, ok, err := rc.Get(nil, []byte(strconv.FormatInt(id, 10)))
		if err != nil || !ok || !bytes.Equal(v, AppendPKRow(nil, id, 0)) {
			t.Fatalf("GET %d = %s ok %v err %v", id, v, ok, err)
		}
	}
	if _, ok, err := rc.Get(nil, []byte("no-such-key-fluss")); err != nil || ok {
		t.Fatalf("GET of a missing key: ok %v err %v", ok, err)
	}
	// An error reply (wrong arity) comes back as *RedisError and leaves
	// the connection usable.
	rc.w.Write(appendCommand(nil, []byte("GET")))
	rc.w.Flush()
	var re *RedisError
	if _, _, err := readReply(rc.r, nil); !errors.As(err, &re) {
		t.Fatalf("GET without a key: %v, want a RedisError", err)
	}
	if err := rc.Ping(); err != nil {
		t.Fatal(err)
	}
}

// A reply announcing a huge bulk string but carrying a few bytes costs
// memory for the bytes, not for the announcement.
func TestReadReplyHugeAnnouncedBulk(t *testing.T) {
	in := []byte("$" + strconv.Itoa(maxBulk) + "\r\nab")
	allocs := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, _, err := readReply(bufio.NewReader(bytes.NewReader(in)), nil); err == nil {
				b.Fatal("a truncated bulk string was accepted")
			}
		}
	})
	if per := allocs.AllocedBytesPerOp(); per > 1<<20 {
		t.Fatalf("%d bytes allocated for a %d-byte reply", per, len(in))
	}
}
