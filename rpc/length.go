package rpc

import (
	"cmp"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// maxLengthBuffer is the largest unary answer withLength holds back to send
// with a Content-Length; a larger one goes out chunked as it is written.
const maxLengthBuffer = 64 << 10

// withLength sends the answers of unary Connect calls over HTTP/1.1 with a
// Content-Length instead of chunked. net/http only sets the length itself
// for answers under 2 KiB; a Lookup of a dozen rows is larger, and chunked
// framing costs both sides: the server writes chunk headers, and a client
// must read to the terminating chunk, growing its buffer, instead of
// reading a known length into one allocation. Streams, HTTP/2 and gRPC
// pass through untouched.
func withLength(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 1 || r.Method != http.MethodPost || !unaryContentType(r.Header.Get("Content-Type")) {
			h.ServeHTTP(w, r)
			return
		}
		lw := &lengthWriter{ResponseWriter: w, buf: lengthBufs.Get().(*[]byte)}
		h.ServeHTTP(lw, r)
		lw.finish()
	})
}

// unaryContentType reports whether ct is a unary Connect content type
// (application/proto or application/json, maybe with parameters); Connect
// streams are application/connect+codec.
func unaryContentType(ct string) bool {
	ct, _, _ = strings.Cut(ct, ";")
	ct = strings.TrimSpace(ct)
	return ct == "application/proto" || ct == "application/json"
}

var lengthBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// lengthWriter holds the answer back (up to maxLengthBuffer) until the
// handler returns, then writes it with its length.
type lengthWriter struct {
	http.ResponseWriter
	buf    *[]byte // nil once passing through
	status int     // WriteHeader's, held back with the body
}

func (w *lengthWriter) WriteHeader(code int) {
	if w.buf == nil || code < 200 { // informational answers go out at once
		w.ResponseWriter.WriteHeader(code)
		return
	}
	if w.status == 0 {
		w.status = code
	}
}

func (w *lengthWriter) Write(p []byte) (int, error) {
	if w.buf == nil {
		return w.ResponseWriter.Write(p)
	}
	if len(*w.buf)+len(p) <= maxLengthBuffer {
		*w.buf = append(*w.buf, p...)
		return len(p), nil
	}
	// Too large to hold: send what is held, then pass through.
	w.passThrough()
	return w.ResponseWriter.Write(p)
}

// Flush sends what is held and passes everything after it through: a
// handler that flushes wants its bytes on the wire now.
func (w *lengthWriter) Flush() {
	w.passThrough()
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *lengthWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// passThrough writes the held status and bytes without a length and stops
// holding.
func (w *lengthWriter) passThrough() {
	if w.buf == nil {
		return
	}
	if w.status != 0 {
		w.ResponseWriter.WriteHeader(w.status)
	}
	held := *w.buf
	if len(held) > 0 {
		_, _ = w.ResponseWriter.Write(held) // a write error shows on the next Write
	}
	w.release()
}

// finish writes the held answer with its Content-Length.
func (w *lengthWriter) finish() {
	if w.buf == nil {
		return
	}
	held := *w.buf
	w.ResponseWriter.Header().Set("Content-Length", strconv.Itoa(len(held)))
	w.ResponseWriter.WriteHeader(cmp.Or(w.status, http.StatusOK))
	if len(held) > 0 {
		_, _ = w.ResponseWriter.Write(held) // the client sees a short body
	}
	w.release()
}

func (w *lengthWriter) release() {
	*w.buf = (*w.buf)[:0]
	lengthBufs.Put(w.buf)
	w.buf = nil
}
