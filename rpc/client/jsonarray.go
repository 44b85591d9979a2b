package client

import (
	"bytes"
	"errors"
	"fmt"
)

// errNotArray: splitJSONArray's input is no JSON array.
var errNotArray = errors.New("not a JSON array")

// splitJSONArray returns the elements of the JSON array b as subslices of
// b (no copies), each without surrounding white space. It finds element
// boundaries only, tracking nesting and strings, and leaves validating
// the elements to whoever decodes them; a malformed array is an error.
// It reads the server's answers, where json.Unmarshal into RawMessages
// validated and copied every row once more.
func splitJSONArray(b []byte) ([][]byte, error) {
	b = bytes.TrimSpace(b)
	if len(b) < 2 || b[0] != '[' || b[len(b)-1] != ']' {
		return nil, errNotArray
	}
	body := b[1 : len(b)-1]
	if len(bytes.TrimSpace(body)) == 0 {
		return [][]byte{}, nil
	}
	var out [][]byte
	depth, start := 0, 0
	inString, escaped := false, false
	for i, c := range body {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			if depth--; depth < 0 {
				return nil, fmt.Errorf("%w: unbalanced %q at byte %d", errNotArray, c, i+1)
			}
		case c == ',' && depth == 0:
			el, err := element(body[start:i], len(out))
			if err != nil {
				return nil, err
			}
			out = append(out, el)
			start = i + 1
		}
	}
	if inString || depth != 0 {
		return nil, fmt.Errorf("%w: unterminated string or nesting", errNotArray)
	}
	el, err := element(body[start:], len(out))
	if err != nil {
		return nil, err
	}
	return append(out, el), nil
}

// element trims one element; an empty one (`[1,,2]`) is an error.
func element(b []byte, i int) ([]byte, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: element %d is empty", errNotArray, i)
	}
	return b[:len(b):len(b)], nil
}
