// Package deps pins the project's dependencies while the packages that use
// them are being written; it is deleted once every one is imported for real.
package deps

import (
	_ "connectrpc.com/connect"
	_ "github.com/BurntSushi/toml"
	_ "github.com/anishathalye/porcupine"
	_ "github.com/apache/arrow-go/v18/arrow/array"
	_ "github.com/apache/arrow-go/v18/arrow/ipc"
	_ "github.com/apache/arrow-go/v18/arrow/memory"
	_ "github.com/dgraph-io/badger/v4"
	_ "github.com/google/flatbuffers/go"
	_ "github.com/hashicorp/go-hclog"
	_ "github.com/hashicorp/memberlist"
	_ "github.com/hashicorp/raft"
	_ "github.com/hashicorp/raft-boltdb/v2"
	_ "github.com/hashicorp/yamux"
	_ "github.com/klauspost/compress/zstd"
	_ "github.com/pierrec/lz4/v4"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/spf13/cobra"
	_ "github.com/valyala/fastjson"
	_ "go.uber.org/goleak"
	_ "golang.org/x/net/http2"
	_ "golang.org/x/net/http2/h2c"
	_ "golang.org/x/sys/unix"
	_ "google.golang.org/protobuf/proto"
)
