package rpc

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"connectrpc.com/connect"

	"github.com/fluss-node/fluss-node/proto/flussv1/flussv1connect"
)

// ndjsonContentType is what a server stream answers a plain JSON request
// with: one JSON message per line.
const ndjsonContentType = "application/x-ndjson"

// Connect's envelope: a flags byte and a big-endian uint32 length before
// each message of a stream.
const (
	envelopeHeaderLen   = 5
	envelopeCompressed  = 0x01
	envelopeEndOfStream = 0x02
)

// plainJSONStreams lets a server-streaming method (Scan) be called like a
// unary one, with the request as a plain `application/json` body, so that
// curl works without Connect's stream framing. The request is handed to the
// Connect handler framed as `application/connect+json`, and each message of
// the answer goes out as one line of NDJSON (`application/x-ndjson`),
// flushed as it comes (a Scan with follow runs until the client hangs up).
// An error before the first message is answered as a unary call's error
// is (its HTTP status, `{"code": ..., "message": ...}`); an error after it
// ends the stream with a line `{"error": {"code": ..., "message": ...}}`.
// Requests in any other form pass through.
func plainJSONStreams(h http.Handler, maxBytes int, ew *connect.ErrorWriter) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != flussv1connect.ReadServiceScanProcedure || !plainJSON(r.Header.Get("Content-Type")) {
			h.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, int64(maxBytes)+1))
		if err != nil {
			_ = ew.Write(w, r, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("read the request body: %w", err)))
			return
		}
		if len(body) > maxBytes {
			_ = ew.Write(w, r, connect.NewError(connect.CodeResourceExhausted, fmt.Errorf(
				"%w: request body over max_request_bytes (%d); send smaller requests", ErrResourceExhausted, maxBytes)))
			return
		}
		framed := make([]byte, envelopeHeaderLen+len(body))
		binary.BigEndian.PutUint32(framed[1:], uint32(len(body)))
		copy(framed[envelopeHeaderLen:], body)
		r2 := r.Clone(r.Context())
		r2.Body = io.NopCloser(bytes.NewReader(framed))
		r2.ContentLength = int64(len(framed))
		r2.Header.Set("Content-Type", "application/connect+json")
		r2.Header.Del("Connect-Content-Encoding")
		if compressed(r.Header) {
			// A compressed body (curl --compressed does not, but a
			// client may): the message is, in Connect's terms.
			framed[0] = envelopeCompressed
			r2.Header.Set("Connect-Content-Encoding", r.Header.Get("Content-Encoding"))
		}
		r2.Header.Del("Content-Encoding")
		r2.Header.Del("Connect-Accept-Encoding") // messages come back uncompressed
		sw := &ndjsonWriter{w: w, r: r, ew: ew}
		h.ServeHTTP(sw, r2)
		sw.finish()
	})
}

// plainJSON reports whether ct is application/json, maybe with parameters.
func plainJSON(ct string) bool {
	mt, _, _ := strings.Cut(ct, ";")
	return strings.TrimSpace(mt) == "application/json"
}

// ndjsonWriter turns the Connect stream a handler writes into NDJSON.
type ndjsonWriter struct {
	w       http.ResponseWriter
	r       *http.Request // the plain JSON request, for errors answered as unary
	ew      *connect.ErrorWriter
	header  http.Header // the handler's, not sent: the answer's are set here
	buf     []byte      // bytes of an envelope not complete yet
	started bool        // the 200 and the first line are out
	ended   bool        // the end-of-stream message came
}

func (s *ndjsonWriter) Header() http.Header {
	if s.header == nil {
		s.header = http.Header{}
	}
	return s.header
}

// WriteHeader is the handler's status: always 200 for a Connect stream,
// or an HTTP-level refusal before it ran (then its body is an envelope
// too, and is turned into an error like any other).
func (s *ndjsonWriter) WriteHeader(int) {}

func (s *ndjsonWriter) Write(p []byte) (int, error) {
	s.buf = append(s.buf, p...)
	for len(s.buf) >= envelopeHeaderLen && !s.ended {
		n := int(binary.BigEndian.Uint32(s.buf[1:envelopeHeaderLen]))
		if len(s.buf) < envelopeHeaderLen+n {
			break
		}
		flags, msg := s.buf[0], s.buf[envelopeHeaderLen:envelopeHeaderLen+n]
		var err error
		switch {
		case flags&envelopeEndOfStream != 0:
			s.ended = true
			err = s.end(msg)
		case flags&envelopeCompressed != 0:
			// Not asked for (the request carries no accepted encoding).
			err = s.fail(connect.NewError(connect.CodeInternal, fmt.Errorf("a compressed stream message")))
			s.ended = true
		default:
			err = s.line(msg)
		}
		s.buf = s.buf[envelopeHeaderLen+n:]
		if err != nil {
			return len(p), err
		}
	}
	return len(p), nil
}

// Flush is a no-op: every line is flushed as it is written.
func (s *ndjsonWriter) Flush() {}

// start sends the answer's status and headers, once.
func (s *ndjsonWriter) start() {
	if !s.started {
		s.started = true
		s.w.Header().Set("Content-Type", ndjsonContentType)
		s.w.WriteHeader(http.StatusOK)
	}
}

// line sends one message as a line.
func (s *ndjsonWriter) line(msg []byte) error {
	s.start()
	msg = bytes.TrimSpace(msg)
	// A new slice: msg lies in s.buf, before the next message's bytes.
	if _, err := s.w.Write(append(msg[:len(msg):len(msg)], '\n')); err != nil {
		return err
	}
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
	return nil
}

// end handles the end-of-stream message: nothing more to send (an empty
// answer if nothing was) unless it carries an error.
func (s *ndjsonWriter) end(msg []byte) error {
	var end struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(msg, &end); err != nil {
		return s.fail(connect.NewError(connect.CodeInternal, fmt.Errorf("unreadable end of stream: %w", err)))
	}
	if end.Error == nil {
		s.start()
		return nil
	}
	var code connect.Code
	if err := code.UnmarshalText([]byte(end.Error.Code)); err != nil {
		code = connect.CodeUnknown
	}
	return s.fail(connect.NewError(code, fmt.Errorf("%s", end.Error.Message)))
}

// fail sends err: as a unary error when nothing went out yet, else as a
// last line.
func (s *ndjsonWriter) fail(err *connect.Error) error {
	if !s.started {
		s.started = true
		_ = s.ew.Write(s.w, s.r, err)
		return nil
	}
	line, _ := json.Marshal(map[string]any{"error": map[string]string{"code": err.Code().String(), "message": err.Message()}})
	return s.line(line)
}

// finish ends an answer the handler left without any message (it cannot
// for a Connect stream, but a truncated one must not look like success).
func (s *ndjsonWriter) finish() {
	if !s.ended && (len(s.buf) > 0 || !s.started) {
		_ = s.fail(connect.NewError(connect.CodeInternal, fmt.Errorf("the stream ended without its end message")))
	}
}
