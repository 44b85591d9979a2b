# Developer tasks. The README's two commands and .ci/run do not need just.

# Build the binary into ./fluss-node
build:
    go build -o fluss-node .

# Run a single-node server with embedded defaults
run:
    go run . serve

# The README's test command
test:
    go test ./...

# Race detector on the packages that share state
test-race:
    go test -race ./logstore/ ./node/... ./rpc/... ./raftmeta/... ./kvstore/

# Multi-process tests (build the binary, kill -9, restart; the long ones two at a time)
integration:
    go test -count=1 -timeout 20m -v ./integration/

# Micro-benchmarks of codec, projection, filter and segment append
bench:
    go test -run '^$' -bench . -benchmem ./logstore/...

# Regenerate protobuf code with the tool versions pinned in go.mod
proto:
    mkdir -p .bin
    go build -o .bin/ google.golang.org/protobuf/cmd/protoc-gen-go connectrpc.com/connect/cmd/protoc-gen-connect-go
    protoc -I proto -I /usr/include --plugin=protoc-gen-go=.bin/protoc-gen-go --plugin=protoc-gen-connect-go=.bin/protoc-gen-connect-go \
        --go_out=. --go_opt=module=github.com/fluss-node/fluss-node \
        --connect-go_out=. --connect-go_opt=module=github.com/fluss-node/fluss-node \
        proto/fluss/v1/fluss.proto proto/fluss/meta/v1/meta.proto

# Formatting and static checks
lint:
    gofmt -l $(git ls-files '*.go' | grep -v '\.pb\.go$' | grep -v '\.connect\.go$')
    go vet ./...
    .ci/staticcheck
