package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// binary is the fluss-node binary built once by TestMain.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fluss-it-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Readable by every uid: the network fault tests run nodes as uids of
	// their own (partition_test.go).
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "fluss-node")
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Dir = ".."
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build fluss-node:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// killCount is how many kill -9s a fault test runs: def, or $FLUSS_TEST_KILLS
// for a longer soak (`FLUSS_TEST_KILLS=50 go test ./integration -run
// KillNine`). Only the count changes (and the linearizability test's
// deadline, which it sets from the count).
func killCount(t *testing.T, def int) int {
	s := os.Getenv("FLUSS_TEST_KILLS")
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("FLUSS_TEST_KILLS=%q: want a count of at least 1", s)
	}
	t.Logf("FLUSS_TEST_KILLS: %d kill -9s instead of %d", n, def)
	return n
}

// longMultiProcess starts one of the long multi-process tests: skipped with
// -short, and run in parallel with the others (up to -parallel at a time,
// GOMAXPROCS by default). They spend most of their time waiting on their
// processes (elections, restarts, kill -9s, timeouts), not on the CPU; each
// has its own data directories and loopback ports (port 0), and the fault
// tests their own uids and filesystems. The short ones run one at a time,
// before these.
func longMultiProcess(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("multi-process test")
	}
	t.Parallel()
}

// proc is one running fluss-node process.
type proc struct {
	cmd  *exec.Cmd
	addr string     // client address read from the "serving" log line
	mu   sync.Mutex // guards logs
	logs *bytes.Buffer
	done chan struct{}
}

var servingRE = regexp.MustCompile(`msg=serving .*client_addr=(\S+)`)

// startNode runs `fluss-node serve` on loopback with free ports and waits for
// the serving line; the test fails if the node does not come up.
func startNode(t *testing.T, dataDir string, extra ...string) *proc {
	t.Helper()
	return startNodeAs(t, 0, dataDir, extra...)
}

// startNodeAs is startNode for a process run as uid (and gid uid); 0 runs
// it as this process's user.
func startNodeAs(t *testing.T, uid uint32, dataDir string, extra ...string) *proc {
	t.Helper()
	p, err := startNodeErr(t, uid, dataDir, extra...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// tryStart is startNode for a node that may refuse to start: it returns nil
// if the process exits before serving.
func tryStart(t *testing.T, dataDir string, extra ...string) *proc {
	t.Helper()
	p, err := startNodeErr(t, 0, dataDir, extra...)
	if err != nil {
		t.Logf("node did not start: %v", err)
		return nil
	}
	return p
}

func startNodeErr(t *testing.T, uid uint32, dataDir string, extra ...string) (*proc, error) {
	t.Helper()
	args := append([]string{"serve", "--data-dir", dataDir,
		"--client-addr", "127.0.0.1:0", "--peer-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0"}, extra...)
	cmd := exec.Command(binary, args...)
	// A test binary killed from outside (a CI timeout) takes its nodes with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if uid != 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uid, Gid: uid, NoSetGroups: true}
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, logs: new(bytes.Buffer), done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	addrCh := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.logs.WriteString(line + "\n")
			p.mu.Unlock()
			if m := servingRE.FindStringSubmatch(line); m != nil {
				select {
				case addrCh <- m[1]:
				default:
				}
			}
		}
		cmd.Wait()
		close(p.done)
	}()
	select {
	case p.addr = <-addrCh:
	case <-p.done:
		return nil, fmt.Errorf("fluss-node exited before serving:\n%s", p.logText())
	case <-time.After(30 * time.Second):
		p.kill()
		return nil, fmt.Errorf("fluss-node did not report serving within 30s:\n%s", p.logText())
	}
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("log of the node in %s (last 32 KiB):\n%s", dataDir, p.logTail(32<<10))
		}
	})
	return p, nil
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// call posts a Connect JSON request and decodes the reply into out. A
// non-200 reply is returned as *connectErr.
func call(ctx context.Context, addr, procedure string, req, out any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/fluss.v1."+procedure, bytes.NewReader(body))
	if err != nil {
		return err
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		var ce connectErr
		if json.Unmarshal(b, &ce) != nil || ce.Code == "" {
			return fmt.Errorf("%s: HTTP %d: %s", procedure, resp.StatusCode, b)
		}
		return &ce
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(b, out)
}

// connectErr is a Connect error body.
type connectErr struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *connectErr) Error() string { return e.Code + ": " + e.Message }

// waitFor polls f until it returns nil or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met after %v: %v", timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// jsonInt reads a protojson int64 (a string) or a plain number.
func jsonInt(v any) int64 {
	switch x := v.(type) {
	case string:
		var n int64
		fmt.Sscan(strings.TrimSpace(x), &n)
		return n
	case float64:
		return int64(x)
	}
	return 0
}

// stop sends SIGTERM and waits (bounded) for a clean exit.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.kill()
		t.Fatalf("fluss-node did not exit within 30s of SIGTERM:\n%s", p.logText())
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("fluss-node exited with status %d after SIGTERM:\n%s", code, p.logText())
	}
}

// logText is the node's stderr so far.
func (p *proc) logText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// logTail is the last n bytes of the node's stderr so far.
func (p *proc) logTail(n int) string {
	s := p.logText()
	if len(s) > n {
		s = s[len(s)-n:]
	}
	return s
}

// startNodeWithConfig writes config (TOML) to a file and starts a node with
// --config pointing at it.
func startNodeWithConfig(t *testing.T, dataDir, config string) *proc {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fluss.toml")
	if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	return startNode(t, dataDir, "--config", path)
}

// mustCall retries a Connect JSON call until it succeeds (a fresh node has
// no leader for a moment) and fails the test after 20s.
func mustCall(t *testing.T, addr, procedure string, req, out any) {
	t.Helper()
	waitFor(t, 20*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return call(ctx, addr, procedure, req, out)
	})
}

// callOnce is one Connect JSON call with a 10s bound.
func callOnce(addr, procedure string, req, out any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return call(ctx, addr, procedure, req, out)
}

// postRaw posts body as it is (no JSON encoding) to a Connect JSON
// procedure and returns the status and reply body.
func postRaw(addr, procedure string, body []byte) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/fluss.v1."+procedure, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// wantCode checks that err is a Connect error with code and a message
// containing every one of words.
func wantCode(t *testing.T, what string, err error, code string, words ...string) {
	t.Helper()
	var ce *connectErr
	if !errors.As(err, &ce) {
		t.Errorf("%s: want Connect error %s, got %v", what, code, err)
		return
	}
	if ce.Code != code {
		t.Errorf("%s: code %q, want %q (message %q)", what, ce.Code, code, ce.Message)
	}
	for _, w := range words {
		if !strings.Contains(ce.Message, w) {
			t.Errorf("%s: message %q does not mention %q", what, ce.Message, w)
		}
	}
}

// fetchAllRaw reads every bucket of table from offset 0 to its high
// watermark as JSON and returns the rows' raw bytes per bucket.
func fetchAllRaw(t *testing.T, addr, table string, buckets int) [][]json.RawMessage {
	t.Helper()
	return fetchPartitionRaw(t, addr, table, "", buckets)
}

// fetchPartitionRaw is fetchAllRaw for one partition ("": none).
func fetchPartitionRaw(t *testing.T, addr, table, partition string, buckets int) [][]json.RawMessage {
	t.Helper()
	out := make([][]json.RawMessage, buckets)
	for b := 0; b < buckets; b++ {
		var offset int64
		for {
			var resp struct {
				Rows          []json.RawMessage `json:"rows"`
				NextOffset    any               `json:"nextOffset"`
				HighWatermark any               `json:"highWatermark"`
			}
			mustCall(t, addr, "ReadService/Fetch", map[string]any{"table": table, "partition": partition, "bucket": b, "offset": offset}, &resp)
			out[b] = append(out[b], resp.Rows...)
			next, hw := jsonInt(resp.NextOffset), jsonInt(resp.HighWatermark)
			if next >= hw {
				break
			}
			if next <= offset {
				t.Fatalf("fetch %s bucket %d at %d: no progress (next %d, hw %d)", table, b, offset, next, hw)
			}
			offset = next
		}
	}
	return out
}

// cliResult is one run of the fluss-node binary as a client.
type cliResult struct {
	stdout, stderr string
	code           int
}

// runCLI runs the binary with args against addr (via $FLUSS_SERVER and
// --server), feeding stdin, bounded to 60s.
func runCLI(t *testing.T, addr, stdin string, args ...string) cliResult {
	t.Helper()
	return runCLIEnv(t, nil, addr, stdin, args...)
}

// runCLIEnv is runCLI with env (KEY=VALUE) added to the environment.
func runCLIEnv(t *testing.T, env []string, addr, stdin string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, append(args, "--server", addr)...)
	cmd.Env = append(append(os.Environ(), "FLUSS_SERVER="+addr), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	r := cliResult{stdout: so.String(), stderr: se.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("run fluss-node %v: %v", args, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("fluss-node %v did not finish within 60s", args)
	}
	return r
}

// mustCLI runs the binary and fails the test on a non-zero exit.
func mustCLI(t *testing.T, addr, stdin string, args ...string) cliResult {
	t.Helper()
	r := runCLI(t, addr, stdin, args...)
	if r.code != 0 {
		t.Fatalf("fluss-node %q: exit %d\nstdout: %s\nstderr: %s", args, r.code, r.stdout, r.stderr)
	}
	return r
}

// readyz asks the node at client address addr for /readyz: the status
// code and the body.
func readyz(addr string) (int, string, error) {
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}
