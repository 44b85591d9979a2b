package node

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
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
//     its node copies the bucket afresh if it is still assigned one).
//
// Once they are started, the controller treats the lost nodes as dead: after
// cluster.dead_node_grace their replicas are replaced on live nodes, the
// buckets recovered here included (ReplaceDown's leader check), and they
// leave the metadata group. A lost node must never start again with its
// data directory: give its machine an empty one and join it as a new node.

// setAsideSuffix names a replica directory recovery set aside.
const setAsideSuffix = ".set-aside-"

// Recover runs the recovery of this stopped node's data directory (cfg's)
// from the loss of the nodes lost, reporting each step to w. With dryRun
// it changes nothing and reports what it would do.
func Recover(cfg Config, lost []raftmeta.NodeID, dryRun bool, w io.Writer) error {
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
		res, err := replica.ForceSoleVoter(dir, local, lostServer, dryRun, logger)
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
			fmt.Fprintf(w, "bucket %v: voters %v, survivors %v are a minority: NOT recovered (more than one survivor)\n", id, res.Voters, res.Survivors)
		case replica.ForceNotMember:
			fmt.Fprintf(w, "bucket %v: voters %v, this replica not among them (caught in a move): NOT recovered, left as is\n", id, res.Voters)
		}
		count[res.Outcome]++
	}
	fmt.Fprintf(w, "buckets: %d forced, %d set aside, %d not recoverable here, %d need nothing, %d failed\n",
		count[replica.Forced], count[replica.SetAside], count[replica.ForceAmbiguous]+count[replica.ForceNotMember], count[replica.ForceNotNeeded]+count[replica.ForceNoState], failed)
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
