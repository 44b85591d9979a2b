package raftmeta

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/fluss-node/fluss-node/logstore/record"
)

// Table properties the data path reads (Fluss's names).
const (
	PropCompression = "table.log.arrow.compression.type"
	PropZstdLevel   = "table.log.arrow.compression.zstd.level"
)

// LogCompression is the table's log compression and ZSTD level (default
// ZSTD level 3, as Fluss). Errors wrap ErrInvalid.
func (t *Table) LogCompression() (record.Compression, int, error) {
	c := record.CompressionZSTD
	if v, ok := t.Properties[PropCompression]; ok {
		var err error
		if c, err = record.ParseCompression(v); err != nil {
			return 0, 0, fmt.Errorf("%w: table %s property %s=%q: %v", ErrInvalid, t.FullName(), PropCompression, v, err)
		}
	}
	level := 3
	if v, ok := t.Properties[PropZstdLevel]; ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return 0, 0, fmt.Errorf("%w: table %s property %s=%q is not an integer", ErrInvalid, t.FullName(), PropZstdLevel, v)
		}
		level = n
	}
	return c, level, nil
}
