package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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

// proc is one running fluss-node process.
type proc struct {
	cmd  *exec.Cmd
	addr string // client address read from the "serving" log line
	logs *bytes.Buffer
	done chan struct{}
}

var servingRE = regexp.MustCompile(`msg=serving .*client_addr=(\S+)`)

// startNode runs `fluss-node serve` on loopback with free ports and waits for
// the serving line.
func startNode(t *testing.T, dataDir string, extra ...string) *proc {
	t.Helper()
	args := append([]string{"serve", "--data-dir", dataDir,
		"--client-addr", "127.0.0.1:0", "--peer-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0"}, extra...)
	cmd := exec.Command(binary, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, logs: new(bytes.Buffer), done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addrCh := make(chan string, 1)
	var mu sync.Mutex
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			mu.Lock()
			p.logs.WriteString(line + "\n")
			mu.Unlock()
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
		t.Fatalf("fluss-node exited before serving:\n%s", p.logs.String())
	case <-time.After(30 * time.Second):
		p.kill()
		t.Fatalf("fluss-node did not report serving within 30s:\n%s", p.logs.String())
	}
	t.Cleanup(p.kill)
	return p
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
