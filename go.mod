module github.com/fluss-node/fluss-node

go 1.26.0

require (
	connectrpc.com/connect v1.21.1 // Connect JSON, Connect proto and gRPC on one handler (client API)
	github.com/BurntSushi/toml v1.6.0 // config.toml parsing (strict: unknown keys are errors)
	github.com/anishathalye/porcupine v1.3.1 // linearizability checker of the PK tests (integration)
	github.com/apache/arrow-go/v18 v18.8.0 // Arrow columnar batches: IPC encode/decode, buffer compression; Parquet lake files (pqarrow)
	github.com/apache/iceberg-go v0.7.0 // Iceberg metadata of the lake (tiering/iceberg.go): Hadoop catalog, manifests, commits, expiry; ~20 MB of the binary (gocloud.dev/blob, substrait come with it)
	github.com/cespare/xxhash/v2 v2.3.0 // bucket hash of key columns (logstore/record/FORMAT.md)
	github.com/dgraph-io/badger/v4 v4.9.6 // primary-key state (kvstore), one DB per node
	github.com/google/flatbuffers v25.12.19+incompatible // Arrow IPC Message flatbuffers for buffer-level projection
	github.com/hashicorp/go-hclog v1.6.3 // adapter from hashicorp/raft logging to log/slog
	github.com/hashicorp/go-msgpack/v2 v2.1.5 // raft message encoding on the peer transport, as raft's own
	github.com/hashicorp/memberlist v0.5.4 // gossip membership; v0.5.4 builds with raft v1.7.3 (DESIGN §13)
	github.com/hashicorp/raft v1.7.3 // metadata group and one group per bucket; v1.7.3 (not 1.8) builds with raft-boltdb/v2, DESIGN §13
	github.com/hashicorp/raft-boltdb/v2 v2.3.1 // metadata Raft log and stable store
	github.com/hashicorp/yamux v0.1.2 // one multiplexed TCP connection per node pair (rpc/peer)
	github.com/johannesboyne/gofakes3 v1.2.0 // in-memory S3 server for the S3 store's tests (tiering/s3test)
	github.com/klauspost/compress v1.20.4 // ZSTD of Arrow buffers: shared encoders (arrowipc)
	github.com/minio/minio-go/v7 v7.4.1 // S3-compatible remote storage for tiering (tiering/s3.go)
	github.com/pierrec/lz4/v4 v4.1.33 // LZ4_FRAME of Arrow buffers (arrowipc)
	github.com/prometheus/client_golang v1.25.0 // /metrics
	github.com/prometheus/client_model v0.6.3 // reading a series' labels (rpc: dropping a dropped table's series)
	github.com/spf13/cobra v1.10.2 // CLI
	github.com/valyala/fastjson v1.6.10 // fast, exact (no float round trip) JSON row parsing
	go.etcd.io/bbolt v1.3.5 // open options (timeout) for raft-boltdb/v2
	go.uber.org/goleak v1.3.0 // goroutine leak checks in tests
	golang.org/x/net v0.63.0 // h2c: HTTP/2 without TLS for gRPC on the client port
	golang.org/x/sync v0.25.0 // semaphore: the client API's gate for large requests (rpc/gate.go)
	golang.org/x/sys v0.50.0 // flock, fdatasync, fallocate
	google.golang.org/protobuf v1.36.12 // protobuf messages, protojson
)

require (
	github.com/armon/go-metrics v0.4.1 // indirect
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/boltdb/bolt v1.3.1 // indirect
	github.com/fatih/color v1.19.0 // indirect
	github.com/goccy/go-json v0.10.6 // indirect
	github.com/hashicorp/go-immutable-radix v1.0.0 // indirect
	github.com/hashicorp/go-metrics v0.5.4 // indirect; pinned: v0.7 drops the compat package raft-boltdb/v2 imports
	github.com/hashicorp/golang-lru v0.5.0 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/klauspost/cpuid/v2 v2.4.0 // indirect
	github.com/mattn/go-colorable v0.1.15 // indirect
	github.com/mattn/go-isatty v0.0.24 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/common v0.72.0 // indirect
	github.com/prometheus/procfs v0.22.0 // indirect
	github.com/spf13/pflag v1.0.10 // indirect
	github.com/zeebo/xxh3 v1.1.0 // indirect
	golang.org/x/exp v0.0.0-20260603202125-055de637280b // indirect
	golang.org/x/text v0.44.0 // indirect
)

require (
	cloud.google.com/go v0.123.0 // indirect
	github.com/RoaringBitmap/roaring/v2 v2.26.0 // indirect
	github.com/andybalholm/brotli v1.2.3 // indirect
	github.com/antlr4-go/antlr/v4 v4.13.1 // indirect
	github.com/apache/thrift v0.24.0 // indirect
	github.com/bits-and-blooms/bitset v1.24.4 // indirect
	github.com/cockroachdb/apd/v3 v3.2.1 // indirect
	github.com/creasty/defaults v1.8.0 // indirect
	github.com/dgraph-io/ristretto/v2 v2.2.0 // indirect
	github.com/dustin/go-humanize v1.0.1 // indirect
	github.com/geoarrow/geoarrow-go v0.0.0-20260403143023-f54751c3e3a1 // indirect
	github.com/go-logr/logr v1.4.4 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/goccy/go-yaml v1.17.1 // indirect
	github.com/google/btree v1.1.3 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/googleapis/gax-go/v2 v2.24.0 // indirect
	github.com/hashicorp/errwrap v1.1.0 // indirect
	github.com/hashicorp/go-multierror v1.1.1 // indirect
	github.com/hashicorp/go-sockaddr v1.0.7 // indirect
	github.com/hashicorp/golang-lru/v2 v2.0.7 // indirect
	github.com/klauspost/crc32 v1.3.0 // indirect
	github.com/miekg/dns v1.1.68 // indirect
	github.com/minio/crc64nvme v1.1.1 // indirect
	github.com/minio/md5-simd v1.1.2 // indirect
	github.com/mschoch/smat v0.2.0 // indirect
	github.com/philhofer/fwd v1.2.0 // indirect
	github.com/rs/xid v1.6.0 // indirect
	github.com/ryszard/goskiplist v0.0.0-20150312221310-2dfbae5fcf46 // indirect
	github.com/sean-/seed v0.0.0-20170313163322-e2103e2c3529 // indirect
	github.com/stretchr/objx v0.5.3 // indirect
	github.com/stretchr/testify v1.12.1 // indirect
	github.com/substrait-io/substrait v0.87.0 // indirect
	github.com/substrait-io/substrait-go/v8 v8.1.1 // indirect
	github.com/substrait-io/substrait-protobuf/go v0.85.0 // indirect
	github.com/tinylib/msgp v1.6.4 // indirect
	github.com/twmb/avro v1.8.0 // indirect
	github.com/twmb/murmur3 v1.1.8 // indirect
	github.com/twpayne/go-geom v1.6.1 // indirect
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	go.opentelemetry.io/otel v1.46.0 // indirect
	go.opentelemetry.io/otel/metric v1.46.0 // indirect
	go.opentelemetry.io/otel/sdk v1.46.0 // indirect
	go.opentelemetry.io/otel/sdk/metric v1.46.0 // indirect
	go.opentelemetry.io/otel/trace v1.46.0 // indirect
	go.shabbyrobe.org/gocovmerge v0.0.0-20230507111327-fa4f82cfbf4d // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	gocloud.dev v0.46.0 // indirect
	golang.org/x/crypto v0.59.0 // indirect
	golang.org/x/mod v0.42.0 // indirect
	golang.org/x/tools v0.52.0 // indirect
	golang.org/x/xerrors v0.0.0-20240903120638-7835f813f4da // indirect
	google.golang.org/api v0.295.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260819154853-08b0e4226688 // indirect
	google.golang.org/grpc v1.83.2 // indirect
	gopkg.in/ini.v1 v1.67.3 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)

tool (
	connectrpc.com/connect/cmd/protoc-gen-connect-go
	google.golang.org/protobuf/cmd/protoc-gen-go
)
