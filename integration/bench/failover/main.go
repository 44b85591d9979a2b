// Command failover measures how long writes to a bucket stop when its leader
// is killed: the time from `kill -9` of the bucket leader's process to the
// first acknowledged write on the new leader, over --kills kills, restarting
// the killed node between kills. It prints every kill and the median and
// maximum.
//
//	go build -o /tmp/fluss-node . && go run ./integration/bench/failover --bin /tmp/fluss-node --kills 20
//
// Three nodes run on 127.0.0.1 (node 1 `serve`, nodes 2 and 3 `join` it) with
// their data in a temp directory; only the processes started here are killed.
// The table has one bucket replicated 3 ways. After each kill a writer sends
// one-row appends for bucket 0 through a surviving node (which forwards to
// the leader), retrying at once on any error with the same writer id and
// sequence, each attempt bounded by --attempt-timeout; the first success ends
// the measurement, and the layout must then name a leader other than the
// killed node. The writer then goes on for --after (the killed node still
// down) and the slowest of those writes is reported too: a new leader that
// stalls after its first write (handing leadership back to the dead node,
// say) shows there.
//
// With --signal term the leader's process gets SIGTERM instead (a graceful
// stop, which hands its leaderships to other replicas before it closes),
// and the times are from the signal; the process is waited for before its
// restart.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"connectrpc.com/connect"

	flussv1 "github.com/fluss-node/fluss-node/proto/flussv1"
	"github.com/fluss-node/fluss-node/rpc/client"
)

type options struct {
	bin            string
	kills          int
	basePort       int
	attemptTimeout time.Duration
	settle         time.Duration
	after          time.Duration
	config         string
	signal         string
	keep           bool
}

func main() {
	var o options
	flag.StringVar(&o.bin, "bin", "", "fluss-node binary (required; build it with `go build -o /tmp/fluss-node .`)")
	flag.IntVar(&o.kills, "kills", 20, "leader kills to measure")
	flag.IntVar(&o.basePort, "base-port", 22000, "node N listens on base+10N (client), +1 (peer), +2 (gossip); below the ephemeral port range, whose ports a client socket may hold when a node restarts")
	flag.DurationVar(&o.attemptTimeout, "attempt-timeout", 2*time.Second, "bound of one write attempt")
	flag.DurationVar(&o.settle, "settle", 3*time.Second, "wait after a restarted node is back before the next kill")
	flag.DurationVar(&o.after, "after", 5*time.Second, "keep writing this long after the first ack, the killed node still down, and report the slowest write")
	flag.StringVar(&o.config, "config", "", "TOML config file given to every node (e.g. [raft] timeouts)")
	flag.StringVar(&o.signal, "signal", "kill", "how the leader's process is stopped: kill (SIGKILL) or term (SIGTERM, a graceful stop)")
	flag.BoolVar(&o.keep, "keep", false, "keep the data directory")
	flag.Parse()
	if o.bin == "" || o.kills < 1 || (o.signal != "kill" && o.signal != "term") {
		fmt.Fprintln(os.Stderr, "failover: --bin is required, --kills must be at least 1 and --signal kill or term")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "failover:", err)
		os.Exit(1)
	}
}

// node is one fluss-node process with fixed addresses.
type node struct {
	n                    int
	dir                  string
	client, peer, gossip string
	args                 []string
	cmd                  *exec.Cmd
	done                 chan struct{}
	logf                 *os.File
	id                   int32 // node id, learned from DescribeCluster
}

func (nd *node) start(bin string) error {
	cmd := exec.Command(bin, nd.args...)
	f, err := os.OpenFile(filepath.Join(filepath.Dir(nd.dir), fmt.Sprintf("node%d.log", nd.n)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		f.Close()
		return err
	}
	if err := cmd.Start(); err != nil {
		f.Close()
		return err
	}
	nd.cmd, nd.logf, nd.done = cmd, f, make(chan struct{})
	serving := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		once := false
		for sc.Scan() {
			line := sc.Text()
			io.WriteString(f, line+"\n")
			if !once && strings.Contains(line, "msg=serving") {
				once = true
				close(serving)
			}
		}
		cmd.Wait()
		f.Close()
		close(nd.done)
	}()
	select {
	case <-serving:
		return nil
	case <-nd.done:
		return fmt.Errorf("node %d exited before serving (log %s)", nd.n, f.Name())
	case <-time.After(60 * time.Second):
		nd.kill()
		return fmt.Errorf("node %d did not report serving within 60s (log %s)", nd.n, f.Name())
	}
}

// kill sends SIGKILL to this node's process and waits until it is gone.
func (nd *node) kill() {
	if nd.cmd == nil {
		return
	}
	select {
	case <-nd.done:
		return
	default:
	}
	nd.cmd.Process.Signal(syscall.SIGKILL)
	<-nd.done
}

func (nd *node) alive() bool {
	if nd.cmd == nil {
		return false
	}
	select {
	case <-nd.done:
		return false
	default:
		return true
	}
}

const table = "failover.t"

func run(ctx context.Context, o options) error {
	dir, err := os.MkdirTemp("", "fluss-failover-")
	if err != nil {
		return err
	}
	nodes := make([]*node, 3)
	defer func() {
		for _, nd := range nodes {
			if nd != nil {
				nd.kill()
			}
		}
		if o.keep {
			fmt.Fprintln(os.Stderr, "kept", dir)
		} else {
			os.RemoveAll(dir)
		}
	}()
	for i := range nodes {
		c := o.basePort + 10*(i+1)
		nd := &node{n: i + 1, dir: filepath.Join(dir, fmt.Sprint(i+1)),
			client: fmt.Sprintf("127.0.0.1:%d", c), peer: fmt.Sprintf("127.0.0.1:%d", c+1), gossip: fmt.Sprintf("127.0.0.1:%d", c+2)}
		nd.args = []string{"serve"}
		if i > 0 {
			nd.args = []string{"join", nodes[0].peer}
		}
		nd.args = append(nd.args, "--data-dir", nd.dir, "--client-addr", nd.client, "--peer-addr", nd.peer, "--gossip-addr", nd.gossip)
		if o.config != "" {
			nd.args = append(nd.args, "--config", o.config)
		}
		nodes[i] = nd
		if err := nd.start(o.bin); err != nil {
			return err
		}
		if i == 0 {
			if err := waitActive(ctx, nd, 1); err != nil {
				return err
			}
		}
	}
	if err := waitActive(ctx, nodes[0], 3); err != nil {
		return err
	}
	if err := learnIDs(ctx, nodes); err != nil {
		return err
	}
	admin := newClient(nodes[0])
	if err := admin.CreateDatabase(ctx, "failover", true); err != nil {
		return fmt.Errorf("create database: %w", err)
	}
	nullable := false
	if _, err := admin.CreateTable(ctx, &flussv1.CreateTableRequest{
		Table:       table,
		Schema:      &flussv1.Schema{Columns: []*flussv1.Column{{Name: "k", Type: "INT", Nullable: &nullable}}},
		BucketCount: 1,
		Properties:  map[string]string{"table.replication.factor": "3"},
	}); err != nil {
		return fmt.Errorf("create table: %w", err)
	}

	w := &writer{id: time.Now().UnixNano()&0x7fffffffffff | 1}
	var results, slowest []time.Duration
	stop := "kill" // what the tables call the stop
	if o.signal == "term" {
		stop = "SIGTERM"
	}
	fmt.Printf("| %s | stopped node | was meta leader | new leader | failed attempts | %s → first ack | slowest write in the next %v |\n| --- | --- | --- | --- | --- | --- | --- |\n", stop, stop, o.after)
	for k := 1; k <= o.kills; k++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		// Every node up, the bucket led, and a write through each node acked.
		for _, nd := range nodes {
			if _, err := w.untilAck(ctx, nd, o.attemptTimeout, 60*time.Second); err != nil {
				return fmt.Errorf("kill %d: cluster not writable through node %d before the kill: %w", k, nd.n, err)
			}
		}
		leaderID, metaLeader, err := leaders(ctx, nodes[0])
		if err != nil {
			return fmt.Errorf("kill %d: %w", k, err)
		}
		victim := byID(nodes, leaderID)
		if victim == nil {
			return fmt.Errorf("kill %d: leader node id %d is none of ours", k, leaderID)
		}
		via := nodes[(victim.n)%3] // a surviving node
		t0 := time.Now()
		if o.signal == "term" {
			victim.cmd.Process.Signal(syscall.SIGTERM)
		} else {
			victim.kill()
		}
		failed, err := w.untilAck(ctx, via, o.attemptTimeout, 120*time.Second)
		elapsed := time.Since(t0)
		if err != nil {
			return fmt.Errorf("kill %d: no write acknowledged after killing node %d: %w", k, victim.id, err)
		}
		// The killed process cannot have acknowledged the write; the layout
		// (metadata) may lag the bucket's own election for a moment.
		newLeader := int32(0)
		for range 50 {
			if l, _, err := leaders(ctx, via); err == nil && l != victim.id {
				newLeader = l
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		// The writes after the first, while the killed node is still down
		// (and gossip may still count it alive): the new leader must keep
		// taking them, not stall handing leadership back to it.
		slow := time.Duration(0)
		for end := time.Now().Add(o.after); time.Now().Before(end); {
			s := time.Now()
			if _, err := w.untilAck(ctx, via, o.attemptTimeout, 120*time.Second); err != nil {
				return fmt.Errorf("kill %d: a write after the first: %w", k, err)
			}
			slow = max(slow, time.Since(s))
		}
		results = append(results, elapsed)
		slowest = append(slowest, slow)
		fmt.Printf("| %d | %d | %v | %d | %d | %v | %v |\n", k, victim.id, metaLeader == victim.id, newLeader, failed, elapsed.Round(time.Millisecond), slow.Round(time.Millisecond))
		select {
		case <-victim.done:
		case <-time.After(60 * time.Second):
			return fmt.Errorf("kill %d: node %d still running 60 s after SIGTERM", k, victim.id)
		}
		if err := victim.start(o.bin); err != nil {
			return fmt.Errorf("kill %d: restart: %w", k, err)
		}
		if err := waitActive(ctx, via, 3); err != nil {
			return err
		}
		select {
		case <-time.After(o.settle):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	summary := func(what string, d []time.Duration) {
		slices.Sort(d)
		fmt.Printf("%s: median %v, max %v, min %v\n", what,
			d[len(d)/2].Round(time.Millisecond), d[len(d)-1].Round(time.Millisecond), d[0].Round(time.Millisecond))
	}
	fmt.Printf("\n%d kills\n", len(results))
	summary(stop+" → first ack", results)
	if o.after > 0 {
		summary(fmt.Sprintf("slowest write in the %v after it", o.after), slowest)
	}
	return nil
}

func newClient(nd *node) *client.Client {
	return client.New("http://"+nd.client, client.WithRetry(client.Retry{Attempts: 1}))
}

// writer sends one-row appends to bucket 0 as one idempotent writer.
type writer struct {
	id  int64
	seq int32
}

// untilAck appends one row through nd until it is acknowledged, retrying
// the same (writer, sequence) at once after any error. It returns how many
// attempts failed.
func (w *writer) untilAck(ctx context.Context, nd *node, attempt, total time.Duration) (int, error) {
	c := newClient(nd)
	w.seq++
	bucket := int32(0)
	req := &flussv1.AppendRequest{Table: table, Bucket: &bucket, Rows: []byte(fmt.Sprintf(`[{"k":%d}]`, w.seq)),
		WriterId: w.id, BatchSequence: w.seq}
	deadline := time.Now().Add(total)
	failed := 0
	var last error
	for time.Now().Before(deadline) {
		actx, cancel := context.WithTimeout(ctx, attempt)
		_, err := c.AppendRequest(actx, req)
		cancel()
		if err == nil {
			return failed, nil
		}
		if ctx.Err() != nil {
			return failed, ctx.Err()
		}
		failed++
		last = err
		if connect.CodeOf(err) == connect.CodeInvalidArgument || connect.CodeOf(err) == connect.CodeNotFound {
			return failed, err
		}
		time.Sleep(5 * time.Millisecond)
	}
	return failed, fmt.Errorf("not acknowledged within %v: %w", total, last)
}

// leaders returns the leader of bucket 0 and the metadata leader as nd sees
// them.
func leaders(ctx context.Context, nd *node) (bucket, meta int32, err error) {
	c := newClient(nd)
	for range 100 {
		layout, lerr := c.GetTableLayout(ctx, table)
		dc, derr := c.DescribeCluster(ctx)
		if lerr == nil && derr == nil && len(layout) == 1 && layout[0].Leader != 0 {
			return layout[0].Leader, dc.MetaLeader, nil
		}
		err = errors.Join(lerr, derr)
		time.Sleep(100 * time.Millisecond)
	}
	return 0, 0, fmt.Errorf("no leader for bucket 0 in the layout of node %d: %v", nd.n, err)
}

// waitActive waits until nd's DescribeCluster lists want active nodes.
func waitActive(ctx context.Context, nd *node, want int) error {
	c := newClient(nd)
	deadline := time.Now().Add(60 * time.Second)
	for {
		dc, err := c.DescribeCluster(ctx)
		if err == nil {
			n := 0
			for _, ni := range dc.Nodes {
				if ni.State == "active" {
					n++
				}
			}
			if n == want && dc.MetaLeader != 0 {
				return nil
			}
			err = fmt.Errorf("%d active nodes, meta leader %d", n, dc.MetaLeader)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %d: want %d active nodes: %w", nd.n, want, err)
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// learnIDs maps node ids to our processes by client address.
func learnIDs(ctx context.Context, nodes []*node) error {
	dc, err := newClient(nodes[0]).DescribeCluster(ctx)
	if err != nil {
		return err
	}
	for _, ni := range dc.Nodes {
		for _, nd := range nodes {
			if ni.ClientAddr == nd.client {
				nd.id = ni.Id
			}
		}
	}
	for _, nd := range nodes {
		if nd.id == 0 {
			return fmt.Errorf("node %d (%s) not in the cluster description", nd.n, nd.client)
		}
	}
	return nil
}

func byID(nodes []*node, id int32) *node {
	for _, nd := range nodes {
		if nd.id == id && nd.alive() {
			return nd
		}
	}
	return nil
}
