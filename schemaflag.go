package main

import (
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/fluss-node/fluss-node/logstore/record"
	flussv1 "github.com/fluss-node/fluss-node/proto/flussv1"
)

// parseSchemaFlag turns "id BIGINT NOT NULL, name STRING, amount DECIMAL(10,2)"
// into API columns. Commas inside parentheses belong to the type. A type
// may end in DICTIONARY ("kind STRING NOT NULL DICTIONARY"): the column is
// stored dictionary-encoded. One item may be a primary key as SQL writes it,
// "PRIMARY KEY (a, b)" (Flink's NOT ENFORCED may follow); its columns come
// back as primaryKey.
func parseSchemaFlag(s string) (cols []*flussv1.Column, primaryKey []string, err error) {
	for _, part := range splitTopLevel(s, ',') {
		part = strings.TrimSpace(part)
		if part == "" {
			return nil, nil, fmt.Errorf("%q: empty column definition", s)
		}
		if pk, ok, err := primaryKeyClause(part); ok || err != nil {
			if err == nil && primaryKey != nil {
				err = errors.New("two PRIMARY KEY clauses")
			}
			if err != nil {
				return nil, nil, err
			}
			primaryKey = pk
			continue
		}
		name, typ, ok := strings.Cut(part, " ")
		if !ok {
			return nil, nil, fmt.Errorf("column %q needs a type, e.g. %q", part, part+" STRING")
		}
		typ = strings.TrimSpace(typ)
		dict := false
		if fields := strings.Fields(typ); len(fields) > 1 && strings.EqualFold(fields[len(fields)-1], "DICTIONARY") {
			dict = true
			typ = strings.TrimSpace(typ[:strings.LastIndexFunc(typ, func(r rune) bool { return r == ' ' || r == '\t' })])
		}
		t, notNull, err := record.ParseType(typ)
		if err != nil {
			return nil, nil, fmt.Errorf("column %q: %w", name, err)
		}
		cols = append(cols, &flussv1.Column{Name: name, Type: t.String(), Nullable: proto.Bool(!notNull), Dictionary: dict})
	}
	if len(cols) == 0 {
		return nil, nil, errors.New("no columns")
	}
	return cols, primaryKey, nil
}

// primaryKeyClause parses "PRIMARY KEY (a, b) [NOT ENFORCED]"; ok is false
// when part does not start with PRIMARY KEY (it is then a column).
func primaryKeyClause(part string) (cols []string, ok bool, err error) {
	rest, ok := cutKeyword(part, "PRIMARY")
	if ok {
		rest, ok = cutKeyword(rest, "KEY")
	}
	if !ok {
		return nil, false, nil
	}
	inner, open := strings.CutPrefix(strings.TrimSpace(rest), "(")
	list, tail, closed := strings.Cut(inner, ")")
	if !open || !closed {
		return nil, true, fmt.Errorf("%q: want PRIMARY KEY (column, ...)", part)
	}
	if t := strings.Join(strings.Fields(tail), " "); t != "" && !strings.EqualFold(t, "NOT ENFORCED") {
		return nil, true, fmt.Errorf("%q: unexpected %q after the key columns", part, t)
	}
	for _, c := range strings.Split(list, ",") {
		if c = strings.TrimSpace(c); c == "" {
			return nil, true, fmt.Errorf("%q: empty key column", part)
		}
		cols = append(cols, c)
	}
	return cols, true, nil
}

// cutKeyword cuts the word kw (any case) from the start of s, after
// blanks; the next character must not continue the word.
func cutKeyword(s, kw string) (string, bool) {
	s = strings.TrimLeft(s, " \t")
	if len(s) < len(kw) || !strings.EqualFold(s[:len(kw)], kw) {
		return s, false
	}
	if rest := s[len(kw):]; rest == "" || !isWordByte(rest[0]) {
		return rest, true
	}
	return s, false
}

func isWordByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
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
