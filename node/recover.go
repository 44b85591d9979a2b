package node

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fluss-node/fluss-node/node/replica"
	"github.com/fluss-node/fluss-node/raftmeta"
)

// Recovery from the permanent loss of nodes that leaves the metadata group
// or buckets without a majority (`fluss-node recover`; docs/OPERATIONS.md
// "A majority of nodes died for good"). With every surviving node stopped,
// each runs Recover naming the same lost nodes:
//
//   - the metadata group, where its surviving voters are a minority, is
//     recovered to its surviving members (raftmeta.Recover);
//   - a bucket replica that is the one surviving voter of its group (the
//     others lost, a minority survives) is made the group's only voter
//     (replica.ForceSoleVoter), and a non-voting copy beside such a
//     survivor is set aside (renamed <bucket dir>.set-aside-<unix seconds>;
//     its node copies the bucket afresh if it is still assigned one);
//   - where two or more voters survive as a minority, the one with the most
//     up-to-date log, by the positions every survivor's report gives
//     (RecoverOptions.Positions), is forced so; the others follow it.
//
// Once they are started, the controller treats the lost nodes as dead, and,
// fenced, as down past cluster.dead_node_grace at once: their replicas are
// replaced on live nodes, the buckets recovered here included (ReplaceDown's
// leader check), and they leave the metadata group. A lost node must never start again with its
// data directory: give its machine an empty one and join it as a new node.
// Should it start anyway, the survivors refuse it (fence.go), and it stops.

// setAsideSuffix names a replica directory recovery set aside.
const setAsideSuffix = ".set-aside-"

// RecoverOptions says what Recover recovers from.
type RecoverOptions struct {
	// Lost are the nodes lost for good.
	Lost []raftmeta.NodeID
	// DryRun reports what would be done and changes nothing.
	DryRun bool
	// Positions is the `position` lines of every surviving node's report
	// (its dry run), for buckets with two or more surviving voters that
	// are a minority: the most up-to-date one is forced (nil: none is).
	Positions io.Reader
}

// Recover runs the recovery of this stopped node's data directory (cfg's)
// from the loss of the nodes o.Lost, reporting each step to w.
func Recover(cfg Config, o RecoverOptions, w io.Writer) error {
	lost, dryRun := o.Lost, o.DryRun
	if len(lost) == 0 {
		return errors.New("recover: name the lost nodes")
	}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "node.id")); err != nil {
		return fmt.Errorf("recover: %s is no node's data directory: %w", cfg.DataDir, err)
	}
	lock, err := lockDir(cfg.DataDir)
	if err != nil {
		return fmt.Errorf("recover: %w (stop the node first)", err)
	}
	defer lock.Close()
	self, err := loadNodeID(cfg.DataDir, 0, 0)
	if err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	if slices.Contains(lost, self) {
		return fmt.Errorf("recover: node %d is this node (%s): run recover on the nodes that survive", self, cfg.DataDir)
	}
	isLost := func(id raftmeta.NodeID) bool { return slices.Contains(lost, id) }
	logger := slog.New(slog.DiscardHandler)
	note := ""
	if dryRun {
		note = " (dry run: nothing changed)"
	}
	fmt.Fprintf(w, "node %d, lost nodes %v%s\n", self, lost, note)
	var positions map[raftmeta.BucketID]map[raftmeta.NodeID]position
	if o.Positions != nil {
		if positions, err = readPositions(o.Positions); err != nil {
			return fmt.Errorf("recover: %w", err)
		}
	}

	// The fence first: once recovered, the lost nodes' old copies must
	// never reach this one's (fence.go).
	if dryRun {
		fmt.Fprintf(w, "fenced nodes: would refuse the raft requests of %v\n", lost)
	} else {
		all, err := addFencedNodes(cfg.DataDir, lost)
		if err != nil {
			return fmt.Errorf("recover: fence the lost nodes: %w", err)
		}
		fmt.Fprintf(w, "fenced nodes: %v (%s): their raft requests are refused\n", all, filepath.Join(cfg.DataDir, fencedNodesFile))
	}

	var mr raftmeta.MetaRecovery // MetaNoState without a meta directory
	if metaDir := filepath.Join(cfg.DataDir, "meta"); dirExists(metaDir) {
		if mr, err = raftmeta.Recover(metaDir, self, isLost, dryRun, logger); err != nil {
			return fmt.Errorf("recover the metadata group: %w", err)
		}
	}
	fmt.Fprintf(w, "metadata group: %s", mr.Outcome)
	if mr.Outcome == raftmeta.MetaRecovered {
		fmt.Fprintf(w, " (voters %v; now %v)", mr.Voters, serverList(mr.Servers))
	}
	fmt.Fprintln(w)

	count := map[replica.ForceOutcome]int{}
	failed := 0
	lostServer := func(id raft.ServerID) bool { return isLost(serverNode(id)) }
	local := raft.ServerID(strconv.Itoa(int(self)))
	now := time.Now().Unix()
	for _, id := range bucketDirs(cfg.DataDir) {
		dir := bucketPath(cfg.DataDir, id)
		var pick func([]raft.ServerID) raft.ServerID
		if positions != nil {
			pick = func(survivors []raft.ServerID) raft.ServerID { return mostUpToDate(positions[id], survivors) }
		}
		res, err := replica.ForceSoleVoter(dir, local, replica.Recovery{Lost: lostServer, Pick: pick, DryRun: dryRun, Logger: logger})
		if err != nil {
			// The others are still worth recovering: a damaged log, say,
			// is the operator's to look at (OPERATIONS "A segment is
			// damaged") and recover can run again for it.
			failed++
			fmt.Fprintf(w, "bucket %v: FAILED: %v\n", id, err)
			continue
		}
		switch res.Outcome {
		case replica.Forced:
			fmt.Fprintf(w, "bucket %v: voters %v, forced to node %d alone (entry %d, term %d)\n", id, res.Voters, self, res.Index, res.Term)
		case replica.SetAside:
			aside := dir + setAsideSuffix + strconv.FormatInt(now, 10)
			// Durably: a rename a crash undid would bring the copy back.
			if !dryRun {
				if err := renameSync(dir, aside); err != nil {
					failed++
					fmt.Fprintf(w, "bucket %v: FAILED to set its copy aside: %v\n", id, err)
					continue
				}
			}
			fmt.Fprintf(w, "bucket %v: voters %v, a non-voting copy beside the survivor %v: set aside as %s\n", id, res.Voters, res.Survivors, aside)
		case replica.ForceAmbiguous:
			fmt.Fprintf(w, "bucket %v: voters %v, survivors %v are a minority: NOT recovered (more than one survivor; give every survivor's positions with --positions)\n", id, res.Voters, res.Survivors)
			fmt.Fprintln(w, formatPosition(id, self, res))
		case replica.ForceNotChosen:
			fmt.Fprintf(w, "bucket %v: voters %v, survivors %v: another survivor's copy is forced; this one left as is (it follows)\n", id, res.Voters, res.Survivors)
		case replica.ForceNotMember:
			fmt.Fprintf(w, "bucket %v: voters %v, this replica not among them (caught in a move): NOT recovered, left as is\n", id, res.Voters)
		}
		count[res.Outcome]++
	}
	fmt.Fprintf(w, "buckets: %d forced, %d set aside, %d not recoverable here, %d need nothing, %d failed\n",
		count[replica.Forced], count[replica.SetAside], count[replica.ForceAmbiguous]+count[replica.ForceNotMember], count[replica.ForceNotNeeded]+count[replica.ForceNoState]+count[replica.ForceNotChosen], failed)
	if failed > 0 {
		return fmt.Errorf("recover: %d buckets failed (above); the rest are done", failed)
	}
	return nil
}

// serverList formats a raft configuration's servers as node ids.
func serverList(servers []raft.Server) []raftmeta.NodeID {
	out := make([]raftmeta.NodeID, 0, len(servers))
	for _, s := range servers {
		out = append(out, serverNode(s.ID))
	}
	return out
}

// dirExists reports whether path is a directory.
func dirExists(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// position is a replica's log position, as a `position` line of a
// recover report gives it.
type position struct{ term, index uint64 }

// formatPosition is the report line that gives this node's position in a
// bucket whose surviving voters must be compared:
// "position table=T partition=P bucket=B node=N term=X index=Y".
func formatPosition(b raftmeta.BucketID, self raftmeta.NodeID, res replica.ForceResult) string {
	return fmt.Sprintf("position table=%d partition=%d bucket=%d node=%d term=%d index=%d",
		b.TableID, b.PartitionID, b.Bucket, self, res.LastTerm, res.LastIndex)
}

// readPositions reads the `position` lines of r (other lines are the rest
// of the reports and skipped).
func readPositions(r io.Reader) (map[raftmeta.BucketID]map[raftmeta.NodeID]position, error) {
	out := map[raftmeta.BucketID]map[raftmeta.NodeID]position{}
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != "position" {
			continue
		}
		v := map[string]int64{}
		for _, kv := range f[1:] {
			k, val, ok := strings.Cut(kv, "=")
			n, err := strconv.ParseInt(val, 10, 64)
			if _, dup := v[k]; !ok || err != nil || n < 0 || dup {
				return nil, fmt.Errorf("positions line %d: %q is not key=number, or a key twice", line, kv)
			}
			v[k] = n
		}
		for _, k := range []string{"table", "partition", "bucket", "node", "term", "index"} {
			if _, ok := v[k]; !ok || len(v) != 6 {
				return nil, fmt.Errorf("positions line %d: want table, partition, bucket, node, term and index, once each", line)
			}
		}
		if v["node"] == 0 || v["node"] > math.MaxInt32 || v["bucket"] > math.MaxInt32 {
			return nil, fmt.Errorf("positions line %d: node or bucket out of range", line)
		}
		b := raftmeta.BucketID{TableID: v["table"], PartitionID: v["partition"], Bucket: int32(v["bucket"])}
		if out[b] == nil {
			out[b] = map[raftmeta.NodeID]position{}
		}
		out[b][raftmeta.NodeID(v["node"])] = position{uint64(v["term"]), uint64(v["index"])}
	}
	return out, sc.Err()
}

// mostUpToDate is the survivor whose position is the most up to date (raft's
// order: the higher last term, then the higher last index; ties to the
// smaller node id), or "" when the positions miss one of them.
func mostUpToDate(pos map[raftmeta.NodeID]position, survivors []raft.ServerID) raft.ServerID {
	var best raft.ServerID
	var bp position
	var bid raftmeta.NodeID
	for _, s := range survivors {
		id := serverNode(s)
		p, ok := pos[id]
		if !ok {
			return ""
		}
		if best == "" || p.term > bp.term || p.term == bp.term && (p.index > bp.index || p.index == bp.index && id < bid) {
			best, bp, bid = s, p, id
		}
	}
	return best
}
