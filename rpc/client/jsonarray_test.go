package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

func TestSplitJSONArray(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string // nil: an error
	}{
		{`[]`, []string{}},
		{` [ ] `, []string{}},
		{`[null]`, []string{`null`}},
		{`[{"a":1},null, {"b":[1,2,{"c":"]"}]} ]`, []string{`{"a":1}`, `null`, `{"b":[1,2,{"c":"]"}]}`}},
		{`[{"s":"a,b\"},{"}, 7]`, []string{`{"s":"a,b\"},{"}`, `7`}},
		{`["\\",{"x":"\\\""}]`, []string{`"\\"`, `{"x":"\\\""}`}},
		{`{"a":1}`, nil},
		{`[1,,2]`, nil},
		{`[1,]`, nil},
		{`[{"a":1]`, nil},
		{`[}]`, nil},
		{`["open]`, nil},
		{``, nil},
		{`[`, nil},
	} {
		got, err := splitJSONArray([]byte(tc.in))
		if tc.want == nil {
			if !errors.Is(err, errNotArray) {
				t.Errorf("%q: got %q, %v; want an errNotArray", tc.in, got, err)
			}
			continue
		}
		if err != nil || len(got) != len(tc.want) {
			t.Errorf("%q: got %q, %v; want %q", tc.in, got, err, tc.want)
			continue
		}
		for i := range got {
			if string(got[i]) != tc.want[i] {
				t.Errorf("%q: element %d is %q, want %q", tc.in, i, got[i], tc.want[i])
			}
		}
	}
}

// The elements alias the input and cannot grow into each other.
func TestSplitJSONArrayAliases(t *testing.T) {
	in := []byte(`[{"a":1},{"b":2}]`)
	got, err := splitJSONArray(in)
	if err != nil || len(got) != 2 {
		t.Fatalf("got %q, %v", got, err)
	}
	_ = append(got[0], 'X')
	if string(got[1]) != `{"b":2}` || &got[0][0] != &in[1] {
		t.Fatalf("elements %q do not alias the input without overlap", got)
	}
}

// FuzzSplitJSONArray: on every valid JSON array the elements are exactly
// json.Unmarshal's; on anything else it returns or errors, never panics.
func FuzzSplitJSONArray(f *testing.F) {
	for _, s := range []string{`[]`, `[null,{"a":"]"}]`, `[1,,2]`, `["\"",[[]]]`, `{"a":1}`, ` [ 1 , 2 ] `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := splitJSONArray(b)
		var want []json.RawMessage
		if json.Unmarshal(b, &want) != nil || want == nil { // invalid, or null
			return
		}
		if err != nil {
			t.Fatalf("%q: %v, want %q", b, err, want)
		}
		if len(got) != len(want) {
			t.Fatalf("%q: %d elements %q, want %q", b, len(got), got, want)
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("%q: element %d is %q, want %q", b, i, got[i], want[i])
			}
		}
	})
}
