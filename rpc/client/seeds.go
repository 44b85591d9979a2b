package client

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
)

// parseSeeds splits New's base URL, one URL or a comma-separated list of
// them (Kafka's bootstrap.servers), into URLs; a bare "host:port" gets
// "http://". Empty entries are skipped. An entry that is no URL is an
// error naming it.
func parseSeeds(baseURL string) ([]*url.URL, error) {
	var seeds []*url.URL
	for _, s := range strings.Split(baseURL, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !strings.Contains(s, "://") {
			s = "http://" + s
		}
		u, err := url.Parse(s)
		if err != nil {
			return nil, fmt.Errorf("server %q: %w", s, err)
		}
		if u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return nil, fmt.Errorf("server %q: want host:port, http://host:port or https://host:port", s)
		}
		u.Path = strings.TrimRight(u.Path, "/")
		seeds = append(seeds, u)
	}
	if len(seeds) == 0 {
		return nil, fmt.Errorf("no server address in %q", baseURL)
	}
	return seeds, nil
}

// seedBackoff is how long a seed that refused a connection or answered
// `unavailable` is passed over while another seed is not.
const seedBackoff = time.Second

// seedList is the HTTP client of a Client given several servers: the calls
// the generated clients make to the first server's URL go to one of the
// servers, the current one, until it fails. A seed whose connection cannot
// be made (refused, unreachable, unknown host) is passed over in the same
// call: nothing was sent, so even a call that is not safe to repeat (DDL)
// goes to the next seed. A seed that answers `unavailable` (a cut-off or
// starting node; see unavailableAnswer) is passed over by the calls after
// it, so the client's retry of a call that is safe to
// repeat goes elsewhere. Every node serves every call, so which seed
// answers does not change results. Calls to other addresses (a bucket
// leader the routing chose) are passed on untouched.
type seedList struct {
	next  connect.HTTPClient
	seeds []*url.URL // seeds[0] is the URL the generated clients call
	err   error      // the list did not parse: every call fails with it (a *connect.Error, so it is not retried)

	mu    sync.Mutex
	cur   int         // the seed calls go to first
	until []time.Time // per seed: passed over until then
}

func newSeedList(next connect.HTTPClient, seeds []*url.URL) *seedList {
	return &seedList{next: next, seeds: seeds, until: make([]time.Time, len(seeds))}
}

// Do implements connect.HTTPClient.
func (s *seedList) Do(r *http.Request) (*http.Response, error) {
	if s.err != nil {
		if r.Body != nil {
			_ = r.Body.Close()
		}
		return nil, s.err
	}
	first := s.seeds[0]
	if r.URL.Host != first.Host || r.URL.Scheme != first.Scheme {
		return s.next.Do(r)
	}
	var err error
	for n, i := range s.order() {
		req := r
		if n > 0 {
			if r.GetBody == nil { // the body cannot be sent twice
				return nil, err
			}
			if req, err = s.retarget(r, i); err != nil {
				return nil, err
			}
		} else if i != 0 {
			req = s.at(r, i)
		}
		var resp *http.Response
		resp, err = s.next.Do(req)
		if err == nil {
			s.answered(i, unavailableAnswer(resp))
			unavailable := func() { s.passOver(i) }
			switch ct := resp.Header.Get("Content-Type"); {
			case strings.HasPrefix(ct, "application/grpc"):
				resp.Body = &grpcStatusWatch{ReadCloser: resp.Body, resp: resp, unavailable: unavailable}
			case strings.HasPrefix(ct, "application/connect+"):
				resp.Body = &connectStreamWatch{ReadCloser: resp.Body, unavailable: unavailable}
			}
			return resp, nil
		}
		if !notSent(err) || r.Context().Err() != nil {
			return nil, err
		}
		s.passOver(i)
	}
	return nil, err
}

// order returns the seeds in the order a call tries them: the current one,
// then the others after it; the ones passed over a moment ago come last,
// the one that failed longest ago first.
func (s *seedList) order() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	out := make([]int, 0, len(s.seeds))
	var later []int
	for k := range s.seeds {
		i := (s.cur + k) % len(s.seeds)
		if now.Before(s.until[i]) {
			later = append(later, i)
		} else {
			out = append(out, i)
		}
	}
	slices.SortStableFunc(later, func(a, b int) int { return s.until[a].Compare(s.until[b]) })
	return append(out, later...)
}

// unavailableAnswer reports whether resp answers `unavailable` in a way
// seen before its body is read: HTTP 503 (a Connect unary call), or gRPC
// status 14 in the headers of a trailers-only answer. A gRPC answer that
// carries its status in trailers is watched by grpcStatusWatch, a Connect
// stream, whose error is its last message, by connectStreamWatch.
func unavailableAnswer(resp *http.Response) bool {
	return resp.StatusCode == http.StatusServiceUnavailable || resp.Header.Get("Grpc-Status") == "14"
}

// grpcStatusWatch is the body of a gRPC answer: once it is read to the
// end, the trailers are in, and a status of 14 (`unavailable`) passes the
// seed over before the caller sees the error and retries.
type grpcStatusWatch struct {
	io.ReadCloser
	resp        *http.Response
	unavailable func()
}

func (w *grpcStatusWatch) Read(p []byte) (int, error) {
	n, err := w.ReadCloser.Read(p)
	if err == io.EOF && w.resp.Trailer.Get("Grpc-Status") == "14" {
		w.unavailable()
	}
	return n, err
}

// connectStreamWatch is the body of a Connect streaming answer: envelopes
// of a flags byte, a big-endian uint32 length and that many bytes. The
// last one (flag 0x02) is the end of the stream, JSON whatever the codec,
// with the call's error if it failed; an error coded "unavailable" passes
// the seed over once the envelope is read, before the caller sees the
// error and retries. A compressed end-of-stream (flag 0x01; the client asks
// for none) or one larger than maxEndStream is not looked into.
type connectStreamWatch struct {
	io.ReadCloser
	unavailable func()

	hdr  [5]byte
	nhdr int    // bytes of the current envelope's prefix read so far
	left uint32 // bytes of its payload still to come
	end  bool   // it is an (uncompressed) end-of-stream envelope
	msg  []byte // its payload so far, when end
}

const maxEndStream = 64 << 10

func (w *connectStreamWatch) Read(p []byte) (int, error) {
	n, err := w.ReadCloser.Read(p)
	w.scan(p[:n])
	return n, err
}

// scan follows the envelopes through b, the next bytes of the body.
func (w *connectStreamWatch) scan(b []byte) {
	for len(b) > 0 {
		if w.nhdr < len(w.hdr) {
			k := copy(w.hdr[w.nhdr:], b)
			w.nhdr += k
			b = b[k:]
			if w.nhdr == len(w.hdr) {
				w.left = binary.BigEndian.Uint32(w.hdr[1:])
				w.end = w.hdr[0]&0x02 != 0 && w.hdr[0]&0x01 == 0 && w.left <= maxEndStream
				w.msg = w.msg[:0]
				if w.left == 0 {
					w.envelopeRead()
				}
			}
			continue
		}
		k := min(uint32(len(b)), w.left)
		if w.end {
			w.msg = append(w.msg, b[:k]...)
		}
		w.left -= k
		b = b[k:]
		if w.left == 0 {
			w.envelopeRead()
		}
	}
}

// envelopeRead ends the current envelope, looking into an end-of-stream.
func (w *connectStreamWatch) envelopeRead() {
	if w.end {
		var end struct {
			Error *struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		if json.Unmarshal(w.msg, &end) == nil && end.Error != nil && end.Error.Code == connect.CodeUnavailable.String() {
			w.unavailable()
		}
	}
	w.nhdr, w.end = 0, false
}

// answered records seed i's answer: `unavailable` passes it over,
// anything else makes it the current seed.
func (s *seedList) answered(i int, unavailable bool) {
	if unavailable {
		s.passOver(i)
		return
	}
	s.mu.Lock()
	s.cur = i
	s.until[i] = time.Time{}
	s.mu.Unlock()
}

// passOver makes calls try seed i after the others for seedBackoff.
func (s *seedList) passOver(i int) {
	s.mu.Lock()
	s.until[i] = time.Now().Add(seedBackoff)
	s.mu.Unlock()
}

// at returns r addressed to seed i, sharing r's body.
func (s *seedList) at(r *http.Request, i int) *http.Request {
	u := s.seeds[i]
	req := r.Clone(r.Context())
	req.URL.Scheme, req.URL.Host = u.Scheme, u.Host
	req.URL.Path = u.Path + strings.TrimPrefix(r.URL.Path, s.seeds[0].Path)
	req.URL.RawPath = ""
	req.Host = u.Host
	return req
}

// retarget returns r addressed to seed i with a fresh copy of its body.
func (s *seedList) retarget(r *http.Request, i int) (*http.Request, error) {
	body, err := r.GetBody()
	if err != nil {
		return nil, fmt.Errorf("send %s to another server: %w", r.URL.Path, err)
	}
	req := s.at(r, i)
	req.Body = body
	return req, nil
}

// notSent reports whether a call failed before its request reached a
// server: the connection could not be made.
func notSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// CloseIdleConnections closes the idle connections of the client beneath.
func (s *seedList) CloseIdleConnections() {
	if ci, ok := s.next.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}
