// Command fluss-node is the whole of fluss-node: the server (serve, join)
// and the client commands that drive it over the Connect API. It parses
// flags and config and calls node or rpc/client; it holds no domain logic.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	// Time zone data in the binary: table.auto-partition.time-zone names an
	// IANA zone, and a node without /usr/share/zoneinfo must still load it.
	_ "time/tzdata"

	"github.com/spf13/cobra"

	"github.com/fluss-node/fluss-node/node"
)

func main() {
	cmd, err := rootCmd().ExecuteC()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fluss-node:", err)
		if client := cmd.Name() != "serve" && cmd.Name() != "join" && cmd.Name() != "recover"; client && errors.Is(err, syscall.ECONNREFUSED) {
			fmt.Fprintf(os.Stderr, "fluss-node: no server listens at %s: start one (fluss-node serve) or name a running node with --server or $FLUSS_SERVER\n", serverAddr)
		}
		os.Exit(1)
	}
}

func rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "fluss-node",
		Short:         "Streaming storage for real-time analytics: Arrow log tables replicated by Raft, in one binary",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(serveCmd(), joinCmd(), recoverCmd(), versionCmd(), authCmd())
	addClientCommands(root)
	return root
}

// version is the module version from build info, else "dev" with the VCS
// revision the binary was built from ("dev+1a2b3c4d5e6f", "-dirty" when
// the tree had changes).
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	rev, dirty := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	v := "dev"
	if len(rev) >= 12 {
		v += "+" + rev[:12]
	}
	if dirty {
		v += "-dirty"
	}
	return v
}

func versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the binary version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), "fluss-node", version())
			return nil
		},
	}
}

// serverFlags are the flags shared by serve and join.
type serverFlags struct {
	config                                               string
	dataDir, clientAddr, peerAddr, gossipAddr, advertise string
	nodeID                                               int32
	join                                                 []string
	bootstrapExpect, metaVoters                          int
}

func (f *serverFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.config, "config", "", "TOML config file (see config.example.toml)")
	fl.StringVar(&f.dataDir, "data-dir", "", "data directory (default ./fluss-data)")
	fl.Int32Var(&f.nodeID, "node-id", 0, "node id (default: stored in <data-dir>/node.id; on a new data dir 1, or allocated by the cluster when joining)")
	fl.StringVar(&f.clientAddr, "client-addr", "", "client (Connect API) listen address (default 127.0.0.1:9123)")
	fl.StringVar(&f.peerAddr, "peer-addr", "", "peer (Raft) listen address (default 127.0.0.1:9124)")
	fl.StringVar(&f.gossipAddr, "gossip-addr", "", "gossip listen address (default 127.0.0.1:9125)")
	fl.StringVar(&f.advertise, "advertise", "", "host other nodes and clients use to reach this node")
	fl.StringSliceVar(&f.join, "join", nil, "peer or gossip addresses of cluster members to join (repeat or comma-separate; default: none, bootstrap a new cluster)")
	fl.IntVar(&f.bootstrapExpect, "bootstrap-expect", 0, "bootstrap a new cluster once this many nodes of --join see each other (needs --node-id)")
	fl.IntVar(&f.metaVoters, "meta-voters", 0, "voters of the metadata Raft group (default 3)")
}

// load builds the config: defaults, then the file, then flags.
func (f *serverFlags) load() (node.Config, error) {
	cfg := node.Default()
	if f.config != "" {
		if err := node.LoadFile(f.config, &cfg); err != nil {
			return cfg, err
		}
	}
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&cfg.DataDir, f.dataDir)
	set(&cfg.ClientAddr, f.clientAddr)
	set(&cfg.PeerAddr, f.peerAddr)
	set(&cfg.GossipAddr, f.gossipAddr)
	set(&cfg.Advertise, f.advertise)
	if f.nodeID != 0 {
		cfg.NodeID = f.nodeID
	}
	if len(f.join) > 0 {
		cfg.Join = f.join
	}
	if f.bootstrapExpect != 0 {
		cfg.BootstrapExpect = f.bootstrapExpect
	}
	if f.metaVoters != 0 {
		cfg.MetaVoters = f.metaVoters
	}
	return cfg, cfg.Validate()
}

func serveCmd() *cobra.Command {
	var f serverFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a node (with no flags: a single-node cluster in ./fluss-data on 127.0.0.1:9123)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := f.load()
			if err != nil {
				return err
			}
			return runNode(cfg, f.config)
		},
	}
	f.register(cmd)
	return cmd
}

func joinCmd() *cobra.Command {
	var f serverFlags
	cmd := &cobra.Command{
		Use:   "join SEED",
		Short: "Run a node inside the cluster that SEED (any member's peer or gossip address, host:port) belongs to",
		Long: "join starts a node like serve, but a fresh node is admitted by the cluster SEED belongs to\n" +
			"instead of bootstrapping its own; it gets a node id from the cluster unless --node-id is given.\n" +
			"SEED may be a peer or a gossip address.\n" +
			"A node that is already a member (its data directory holds metadata state) just starts.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f.join = append([]string{args[0]}, f.join...)
			cfg, err := f.load()
			if err != nil {
				return err
			}
			return runNode(cfg, f.config)
		},
	}
	f.register(cmd)
	return cmd
}

// runNode starts a node and serves until SIGINT or SIGTERM. SIGHUP reads
// the [auth] users and the [log] level of configPath again.
func runNode(cfg node.Config, configPath string) error {
	var level slog.LevelVar
	logger := newLogger(cfg.Log, &level)
	node.Version = version()
	n, err := node.New(cfg, logger)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Caught from before Start: SIGHUP's default action would end the
	// process, and a reload may come while the node starts (it is then
	// handled once the node serves).
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	if err := n.Start(ctx); err != nil {
		n.Close()
		return err
	}
	var fatal error
	for ctx.Err() == nil && fatal == nil {
		select {
		case <-hup:
			reload(n, configPath, logger, &level)
		case fatal = <-n.Fatal():
		case <-ctx.Done():
		}
	}
	logger.Info("shutting down")
	if err := n.Close(); err != nil && !errors.Is(err, context.Canceled) && fatal == nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return fatal
}

// reload applies what SIGHUP reads again from the config file: the client
// API's users ([auth]) and the log level ([log] level); other keys need a
// restart. Errors are logged, and what they concern stays as it was.
func reload(n *node.Node, configPath string, logger *slog.Logger, level *slog.LevelVar) {
	if configPath == "" {
		logger.Warn("SIGHUP: no --config file to reload")
		return
	}
	cfg := node.Default()
	if err := node.LoadFile(configPath, &cfg); err != nil {
		logger.Error("SIGHUP: config not reloaded: the client API's users stay as they were, and so does the log level", "err", err)
		return
	}
	switch l, err := cfg.Log.SlogLevel(); {
	case err != nil:
		logger.Error("SIGHUP: the log level stays as it was", "level", level.Level(), "err", err)
	case l != level.Level():
		from := level.Level()
		if l < from {
			level.Set(l) // more verbose: this line shows at the new level
		}
		logger.Info("SIGHUP: log level changed", "from", from, "to", l)
		level.Set(l)
	}
	if err := n.ReloadAuth(cfg.Auth); err != nil {
		logger.Error("SIGHUP: the client API's users stay as they were", "err", err)
	}
}

// newLogger returns the process's logger, at level (set here from c; the
// config was validated).
func newLogger(c node.LogConfig, level *slog.LevelVar) *slog.Logger {
	l, _ := c.SlogLevel()
	level.Set(l)
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}
