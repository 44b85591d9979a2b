package node

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"

	"github.com/fluss-node/fluss-node/rpc/peer"
)

// The example config must load to exactly the defaults: it documents them.
func TestExampleConfigIsDefault(t *testing.T) {
	cfg := Default()
	if err := LoadFile("../config.example.toml", &cfg); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg, Default()) {
		t.Fatalf("config.example.toml differs from Default():\n%+v\n%+v", cfg, Default())
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	// Every key of Default() appears in the example.
	var m map[string]any
	b, _ := os.ReadFile("../config.example.toml")
	if _, err := toml.Decode(string(b), &m); err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	if err := toml.NewEncoder(&sb).Encode(Default()); err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	if _, err := toml.Decode(sb.String(), &d); err != nil {
		t.Fatal(err)
	}
	for k, v := range d {
		if _, ok := m[k]; !ok {
			t.Errorf("key %q missing from config.example.toml", k)
		}
		if sub, ok := v.(map[string]any); ok {
			for k2 := range sub {
				if _, ok := m[k].(map[string]any)[k2]; !ok {
					t.Errorf("key %s.%s missing from config.example.toml", k, k2)
				}
			}
		}
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name, toml, want string
	}{
		{"unknown key", "bogus = 1\n", `unknown key "bogus"`},
		{"bad duration", "[raft]\ncommit_timeout = \"soon\"\n", "soon"},
		{"bad fsync", "[storage]\nfsync = \"never\"\n", "storage.fsync"},
		{"replica lag under two heartbeat rounds", "[raft]\nreplica_max_lag = \"5s\"\n", "raft.replica_max_lag must be at least 8s"},
		{"no pending write budget", "[limits]\nmax_pending_write_bytes = 0\n", "limits.max_pending_write_bytes must be > 0"},
		{"negative min free", "[storage]\nmin_free_bytes = -1\n", "storage.min_free_bytes must be >= 0"},
		{"bad addr", "client_addr = \"nohostport\"\n", "client_addr"},
		{"bad join", "join = [\"nohostport\"]\n", "join address"},
		{"expect without join", "bootstrap_expect = 3\n", "needs a join list"},
		{"no voters", "meta_voters = 0\n", "meta_voters must be 1 to 9, got 0"},
		{"too many voters", "meta_voters = 10\n", "meta_voters must be 1 to 9, got 10"},
		{"default log ttl too short", "[storage]\ndefault_log_ttl = \"10ms\"\n", "storage.default_log_ttl must be at least 1s, got 10ms"},
		{"lake snapshot retention under a millisecond", "[tiering]\nlake_snapshot_retention = \"100us\"\n", "tiering.lake_snapshot_retention must be at least 1ms, got 100µs"},
		{"grace too short", "[cluster]\ndead_node_grace = \"500ms\"\n", "cluster.dead_node_grace must be 1s to 720h0m0s, got 500ms"},
		{"gossip key not base64", "gossip_key = \"%%%\"\n", "gossip_key is not base64"},
		{"gossip key length", "gossip_key = \"c2hvcnQ=\"\n", "gossip_key decodes to 5 bytes"},
		{"batch over request", "[limits]\nmax_batch_bytes = 100\nmax_request_bytes = 10\n", "max_batch_bytes"},
		{"tiny kv memtable", "[kv]\nmemtable_bytes = 1000\n", "kv: need memtable_bytes"},
		{"two remote stores", "[tiering]\nremote_dir = \"/r\"\ns3_endpoint = \"e:9000\"\ns3_bucket = \"b\"\n", "remote_dir or s3_bucket, not both"},
		{"s3 bucket without endpoint", "[tiering]\ns3_bucket = \"b\"\n", "s3_bucket and s3_endpoint go together"},
		{"no tiering interval", "[tiering]\ninterval = \"0s\"\n", "tiering: need interval > 0"},
		{"auth user without grants", "[[auth.users]]\nname = \"a\"\ntoken_sha256 = \"9f64a747e1b97f131fabb6b447296c9b6f0201e79fb3c5356e6c77e89b6a806a\"\n", `auth user "a": no grants`},
		{"auth bad grant", "[[auth.users]]\nname = \"a\"\ntoken_sha256 = \"9f64a747e1b97f131fabb6b447296c9b6f0201e79fb3c5356e6c77e89b6a806a\"\ngrants = [\"own:*\"]\n", `unknown operation "own"`},
		{"auth token not hashed", "[[auth.users]]\nname = \"a\"\ntoken_sha256 = \"secret\"\ngrants = [\"all:*\"]\n", "want 64 hex digits"},
		{"auth user twice", "[[auth.users]]\nname = \"a\"\ntoken_sha256 = \"9f64a747e1b97f131fabb6b447296c9b6f0201e79fb3c5356e6c77e89b6a806a\"\ngrants = [\"all:*\"]\n[[auth.users]]\nname = \"a\"\ntoken_sha256 = \"8f64a747e1b87f131fabb6b447286c8b6f0201e78fb3c5356e6c77e88b6a806a\"\ngrants = [\"all:*\"]\n", `user "a" is listed twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "c.toml")
			os.WriteFile(p, []byte(tc.toml), 0o644)
			cfg := Default()
			err := LoadFile(p, &cfg)
			if err == nil {
				err = cfg.Validate()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want error containing %q", err, tc.want)
			}
		})
	}
}

// Peer frames hold the largest raft entry, forwarded request and answer
// the limits allow, and never less than peer's default.
func TestPeerFrameSize(t *testing.T) {
	def := Default().Limits
	if got, want := peerFrameSize(def), 65<<20; got != want {
		t.Fatalf("default limits: frame %d, want %d (64 MiB requests + 1 MiB)", got, want)
	}
	small := LimitsConfig{MaxRequestBytes: 1 << 20, MaxBatchBytes: 1 << 20, MaxFetchBytes: 1 << 20}
	if got := peerFrameSize(small); got != peer.DefaultMaxFrameSize {
		t.Fatalf("small limits: frame %d, want peer's default %d", got, peer.DefaultMaxFrameSize)
	}
	big := LimitsConfig{MaxRequestBytes: 100 << 20, MaxBatchBytes: 90 << 20, MaxFetchBytes: 200 << 20}
	if got, want := peerFrameSize(big), 201<<20; got != want {
		t.Fatalf("large fetch limit: frame %d, want %d", got, want)
	}
	if got := entryBytes(big); got != 90<<20 {
		t.Fatalf("entry bytes %d, want max_batch_bytes", got)
	}
}
