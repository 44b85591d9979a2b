package main

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/fluss-node/fluss-node/logstore/record"
	flussv1 "github.com/fluss-node/fluss-node/proto/flussv1"
)

// parseSchemaFlag turns "id BIGINT NOT NULL, name STRING, amount DECIMAL(10,2)"
// into API columns. Commas inside parentheses belong to the type. A type
// may end in DICTIONARY ("kind STRING NOT NULL DICTIONARY"): the column is
// stored dictionary-encoded.
func parseSchemaFlag(s string) ([]*flussv1.Column, error) {
	var cols []*flussv1.Column
	for _, part := range splitTopLevel(s, ',') {
		part = strings.TrimSpace(part)
		if part == "" {
			return nil, fmt.Errorf("--schema %q: empty column definition", s)
		}
		name, typ, ok := strings.Cut(part, " ")
		if !ok {
			return nil, fmt.Errorf("--schema: column %q needs a type, e.g. %q", part, part+" STRING")
		}
		typ = strings.TrimSpace(typ)
		dict := false
		if fields := strings.Fields(typ); len(fields) > 1 && strings.EqualFold(fields[len(fields)-1], "DICTIONARY") {
			dict = true
			typ = strings.TrimSpace(typ[:strings.LastIndexFunc(typ, func(r rune) bool { return r == ' ' || r == '\t' })])
		}
		t, notNull, err := record.ParseType(typ)
		if err != nil {
			return nil, fmt.Errorf("--schema: column %q: %w", name, err)
		}
		cols = append(cols, &flussv1.Column{Name: name, Type: t.String(), Nullable: proto.Bool(!notNull), Dictionary: dict})
	}
	if len(cols) == 0 {
		return nil, fmt.Errorf("--schema is empty")
	}
	return cols, nil
}

// splitTopLevel splits s at sep where no parenthesis is open.
func splitTopLevel(s string, sep byte) []string {
	var parts []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			if depth > 0 {
				depth--
			}
		case sep:
			if depth == 0 {
				parts = append(parts, s[start:i])
				start = i + 1
			}
		}
	}
	return append(parts, s[start:])
}
