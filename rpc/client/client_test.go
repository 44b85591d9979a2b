package client

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

type captureRT struct{ got *http.Request }

func (c *captureRT) RoundTrip(r *http.Request) (*http.Response, error) {
	c.got = r
	return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
}

// opaqueBody is a body net/http does not know as in-memory (like
// connect-go's), recording whether it was closed.
type opaqueBody struct {
	r      io.Reader
	closed bool
}

func (b *opaqueBody) Read(p []byte) (int, error) { return b.r.Read(p) }
func (b *opaqueBody) Close() error               { b.closed = true; return nil }

func TestInMemoryBody(t *testing.T) {
	big := strings.Repeat("x", inMemoryBodyMax+1)
	for _, tc := range []struct {
		name     string
		body     string
		length   int64
		replaced bool
		wantErr  bool
	}{
		{"small body becomes a bytes.Reader", `{"rows":[{"id":1}]}`, 19, true, false},
		{"over the bound passes through", big, int64(len(big)), false, false},
		{"unknown length passes through", "abc", -1, false, false},
		{"short body is an error", "ab", 5, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := &captureRT{}
			body := &opaqueBody{r: strings.NewReader(tc.body)}
			req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1:1/x", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Body, req.ContentLength = body, tc.length
			_, err = inMemoryBody{rt}.RoundTrip(req)
			if tc.wantErr {
				if err == nil || !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("error %v, want one wrapping io.ErrUnexpectedEOF", err)
				}
				if !body.closed {
					t.Fatal("original body not closed after a failure")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if req.Body != io.ReadCloser(body) {
				t.Fatal("the caller's request was modified")
			}
			if !tc.replaced {
				if rt.got != req {
					t.Fatal("request was not passed through as it is")
				}
				return
			}
			if !body.closed {
				t.Fatal("original body not closed")
			}
			if rt.got.ContentLength != tc.length {
				t.Fatalf("ContentLength = %d, want %d", rt.got.ContentLength, tc.length)
			}
			for i, rc := range []func() (io.ReadCloser, error){
				func() (io.ReadCloser, error) { return rt.got.Body, nil },
				rt.got.GetBody,
				rt.got.GetBody,
			} {
				r, err := rc()
				if err != nil {
					t.Fatal(err)
				}
				got, _ := io.ReadAll(r)
				if !bytes.Equal(got, []byte(tc.body)) {
					t.Fatalf("body %d = %q, want %q", i, got, tc.body)
				}
			}
		})
	}
}
