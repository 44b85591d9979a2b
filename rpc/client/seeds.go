package client

import (
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
			if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/grpc") {
				resp.Body = &grpcStatusWatch{ReadCloser: resp.Body, resp: resp, unavailable: func() { s.passOver(i) }}
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
// carries its status in trailers is watched by grpcStatusWatch. (A Connect
// stream reports its error at the end of the body; such a seed is passed
// over only when its connection fails.)
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
