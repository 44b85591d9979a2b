package rpc

import (
	"encoding/binary"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"connectrpc.com/connect"
)

// envelope frames msg as Connect frames a stream message.
func envelope(flags byte, msg string) []byte {
	b := make([]byte, envelopeHeaderLen, envelopeHeaderLen+len(msg))
	b[0] = flags
	binary.BigEndian.PutUint32(b[1:], uint32(len(msg)))
	return append(b, msg...)
}

// The NDJSON side of plainJSONStreams, against handlers that write the
// stream in pieces, fail after a message, or end without an end message.
func TestPlainJSONStreamsFraming(t *testing.T) {
	for _, tc := range []struct {
		name   string
		writes [][]byte
		status int
		want   string
	}{
		{
			name: "messages split across writes",
			writes: func() [][]byte {
				s := append(envelope(0, `{"a":1}`), envelope(0, `{"b":2}`)...)
				s = append(s, envelope(envelopeEndOfStream, `{}`)...)
				return [][]byte{s[:3], s[3:9], s[9:]}
			}(),
			status: 200,
			want:   "{\"a\":1}\n{\"b\":2}\n",
		},
		{
			name:   "no message",
			writes: [][]byte{envelope(envelopeEndOfStream, `{}`)},
			status: 200,
			want:   "",
		},
		{
			name:   "error after a message: a last line",
			writes: [][]byte{envelope(0, `{"a":1}`), envelope(envelopeEndOfStream, `{"error":{"code":"unavailable","message":"no leader"}}`)},
			status: 200,
			want:   "{\"a\":1}\n{\"error\":{\"code\":\"unavailable\",\"message\":\"no leader\"}}\n",
		},
		{
			name:   "error first: a unary error",
			writes: [][]byte{envelope(envelopeEndOfStream, `{"error":{"code":"permission_denied","message":"no grant"}}`)},
			status: 403,
			want:   `{"code":"permission_denied","message":"no grant"}`,
		},
		{
			name:   "no end message",
			writes: [][]byte{envelope(0, `{"a":1}`), envelope(0, `{"b"`)[:7]},
			status: 200,
			want:   "{\"a\":1}\n{\"error\":{\"code\":\"internal\",\"message\":\"the stream ended without its end message\"}}\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := plainJSONStreams(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				if want := string(envelope(0, `{"table":"t"}`)); r.Header.Get("Content-Type") != "application/connect+json" || string(body) != want {
					t.Errorf("handler got %q %q, want the request framed as a Connect stream", r.Header.Get("Content-Type"), body)
				}
				w.WriteHeader(200)
				for _, p := range tc.writes {
					_, _ = w.Write(p)
				}
			}), 1<<20, connect.NewErrorWriter())
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodPost, "/fluss.v1.ReadService/Scan", strings.NewReader(`{"table":"t"}`))
			req.Header.Set("Content-Type", "application/json; charset=utf-8")
			h.ServeHTTP(rec, req)
			if rec.Code != tc.status || rec.Body.String() != tc.want {
				t.Fatalf("status %d, body %q; want %d, %q", rec.Code, rec.Body.String(), tc.status, tc.want)
			}
			if ct := rec.Header().Get("Content-Type"); tc.status == 200 && ct != ndjsonContentType {
				t.Fatalf("content type %q, want %s", ct, ndjsonContentType)
			}
		})
	}
}

// Whatever a handler writes, the NDJSON side neither panics nor answers
// without a status.
func FuzzPlainJSONStreams(f *testing.F) {
	f.Add(append(envelope(0, `{"a":1}`), envelope(envelopeEndOfStream, `{}`)...), 3)
	f.Add(envelope(envelopeEndOfStream, `{"error":{"code":"bogus","message":"x"}}`), 1)
	f.Add(envelope(envelopeCompressed, `xx`), 2)
	f.Fuzz(func(t *testing.T, stream []byte, split int) {
		h := plainJSONStreams(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			at := min(max(split, 0), len(stream))
			_, _ = w.Write(stream[:at])
			_, _ = w.Write(stream[at:])
		}), 1<<10, connect.NewErrorWriter())
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/fluss.v1.ReadService/Scan", strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(rec, req)
		if ct := rec.Header().Get("Content-Type"); ct != ndjsonContentType && ct != "application/json" {
			t.Fatalf("status %d, content type %q, body %q: an answer without a content type", rec.Code, ct, rec.Body)
		}
	})
}
