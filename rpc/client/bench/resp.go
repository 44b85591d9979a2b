package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// A minimal RESP2 client for the redis side of `bench lookup`: PING, GET
// and SET only, one connection, not safe for concurrent use. Written by
// hand so the bench needs no redis dependency.

// ErrRedisReply is wrapped by every malformed or unexpected reply error.
var ErrRedisReply = errors.New("bad redis reply")

// maxBulk bounds the bulk strings readReply accepts (redis allows 512 MB;
// the bench's values are a few hundred bytes).
const maxBulk = 64 << 20

// Redis is one connection to a redis server.
type Redis struct {
	conn net.Conn
	r    *bufio.Reader
	w    *bufio.Writer
	buf  []byte // reply scratch
}

// DialRedis connects to addr (host:port) and checks it with PING.
func DialRedis(ctx context.Context, addr string) (*Redis, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("connect to redis at %s: %w", addr, err)
	}
	rc := &Redis{conn: conn, r: bufio.NewReaderSize(conn, 64<<10), w: bufio.NewWriterSize(conn, 64<<10)}
	if err := rc.Ping(); err != nil {
		conn.Close()
		return nil, fmt.Errorf("redis at %s: %w", addr, err)
	}
	return rc, nil
}

// Close closes the connection.
func (c *Redis) Close() error { return c.conn.Close() }

// SetDeadline bounds every following call.
func (c *Redis) SetDeadline(t time.Time) error { return c.conn.SetDeadline(t) }

// appendCommand appends args as a RESP array of bulk strings.
func appendCommand(dst []byte, args ...[]byte) []byte {
	dst = append(dst, '*')
	dst = strconv.AppendInt(dst, int64(len(args)), 10)
	dst = append(dst, '\r', '\n')
	for _, a := range args {
		dst = append(dst, '$')
		dst = strconv.AppendInt(dst, int64(len(a)), 10)
		dst = append(dst, '\r', '\n')
		dst = append(dst, a...)
		dst = append(dst, '\r', '\n')
	}
	return dst
}

// Ping sends PING and expects PONG.
func (c *Redis) Ping() error {
	if _, err := c.w.Write(appendCommand(nil, []byte("PING"))); err != nil {
		return err
	}
	if err := c.w.Flush(); err != nil {
		return err
	}
	kind, v, err := readReply(c.r, c.buf[:0])
	if err != nil {
		return err
	}
	if kind != '+' || string(v) != "PONG" {
		return fmt.Errorf("%w: PING answered %c%q", ErrRedisReply, kind, v)
	}
	return nil
}

// Get returns the value of key (appended to dst) and whether it exists.
func (c *Redis) Get(dst, key []byte) ([]byte, bool, error) {
	cmd := appendCommand(c.buf[:0], []byte("GET"), key)
	c.buf = cmd[:0]
	if _, err := c.w.Write(cmd); err != nil {
		return dst, false, err
	}
	if err := c.w.Flush(); err != nil {
		return dst, false, err
	}
	kind, v, err := readReply(c.r, dst)
	switch {
	case err != nil:
		return dst, false, err
	case kind == '$' && v == nil:
		return dst, false, nil
	case kind == '$':
		return v, true, nil
	}
	return dst, false, fmt.Errorf("%w: GET answered %c%q", ErrRedisReply, kind, v)
}

// SetMany sets keys[i] to values[i], pipelined: every command is sent,
// then every reply read.
func (c *Redis) SetMany(keys, values [][]byte) error {
	if len(keys) != len(values) {
		return fmt.Errorf("SetMany: %d keys but %d values", len(keys), len(values))
	}
	for i := range keys {
		cmd := appendCommand(c.buf[:0], []byte("SET"), keys[i], values[i])
		c.buf = cmd[:0]
		if _, err := c.w.Write(cmd); err != nil {
			return err
		}
	}
	if err := c.w.Flush(); err != nil {
		return err
	}
	for range keys {
		kind, v, err := readReply(c.r, c.buf[:0])
		if err != nil {
			return err
		}
		if kind != '+' || string(v) != "OK" {
			return fmt.Errorf("%w: SET answered %c%q", ErrRedisReply, kind, v)
		}
	}
	return nil
}

// RedisError is an error reply (`-ERR ...`) of the server.
type RedisError struct{ Msg string }

func (e *RedisError) Error() string { return "redis: " + e.Msg }

// readReply reads one RESP2 reply of a simple kind: simple string ('+'),
// error ('-', returned as *RedisError), integer (':', the digits) or bulk
// string ('$'; a null bulk string is kind '$' with a nil value). The value
// is appended to dst. Arrays are not used by PING/GET/SET and are an error.
func readReply(r *bufio.Reader, dst []byte) (byte, []byte, error) {
	line, err := readLine(r)
	if err != nil {
		return 0, dst, err
	}
	if len(line) == 0 {
		return 0, dst, fmt.Errorf("%w: empty line", ErrRedisReply)
	}
	kind, rest := line[0], line[1:]
	switch kind {
	case '+':
		return kind, append(dst, rest...), nil
	case '-':
		return kind, dst, &RedisError{Msg: string(rest)}
	case ':':
		if _, err := strconv.ParseInt(string(rest), 10, 64); err != nil {
			return kind, dst, fmt.Errorf("%w: integer %q", ErrRedisReply, rest)
		}
		return kind, append(dst, rest...), nil
	case '$':
		n, err := strconv.ParseInt(string(rest), 10, 64)
		switch {
		case err != nil || n < -1:
			return kind, dst, fmt.Errorf("%w: bulk length %q", ErrRedisReply, rest)
		case n == -1:
			return kind, nil, nil
		case n > maxBulk:
			return kind, dst, fmt.Errorf("%w: bulk string of %d bytes is over the %d limit", ErrRedisReply, n, maxBulk)
		}
		// Read in chunks: memory follows the bytes that really arrive, not
		// the length the reply announces.
		start := len(dst)
		for need := int(n) + 2; need > 0; {
			chunk := min(need, 64<<10)
			at := len(dst)
			dst = append(dst, make([]byte, chunk)...)
			if _, err := io.ReadFull(r, dst[at:]); err != nil {
				return kind, dst[:start], fmt.Errorf("%w: short bulk string: %w", ErrRedisReply, err)
			}
			need -= chunk
		}
		if !bytes.Equal(dst[len(dst)-2:], []byte("\r\n")) {
			return kind, dst[:start], fmt.Errorf("%w: bulk string not ended by CRLF", ErrRedisReply)
		}
		return kind, dst[:len(dst)-2], nil // non-nil even when empty
	}
	return kind, dst, fmt.Errorf("%w: unexpected reply type %q", ErrRedisReply, kind)
}

// readLine reads one CRLF-terminated line (without the CRLF); lines over
// the reader's buffer are an error.
func readLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, fmt.Errorf("%w: line longer than %d bytes", ErrRedisReply, r.Size())
		}
		return nil, err
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("%w: line not ended by CRLF", ErrRedisReply)
	}
	line = line[:len(line)-2]
	if bytes.IndexByte(line, '\r') >= 0 {
		return nil, fmt.Errorf("%w: CR inside a line", ErrRedisReply)
	}
	return line, nil
}
