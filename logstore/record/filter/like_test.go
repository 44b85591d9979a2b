package filter

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/fluss-node/fluss-node/logstore/record"
)

func TestLikeMatch(t *testing.T) {
	for _, tt := range []struct {
		pattern, escape, s string
		want               bool
	}{
		{"", "", "", true},
		{"", "", "a", false},
		{"%", "", "", true},
		{"%", "", "anything\n", true},
		{"a%", "", "abc", true},
		{"a%", "", "ba", false},
		{"%c", "", "abc", true},
		{"%b%", "", "abc", true},
		{"%b%", "", "ac", false},
		{"a_c", "", "abc", true},
		{"a_c", "", "ac", false},
		{"a_c", "", "aéc", true}, // _ is one character, not one byte
		{"__", "", "é", false},
		{"%a%a%a", "", "aaa", true},
		{"%aab", "", "aaaab", true}, // the match resumes after a partial one
		{"%ab%ab", "", "abab", true},
		{"%ab%ab", "", "aab", false},
		{"a%%b", "", "ab", true},
		{"100!%", "!", "100%", true},
		{"100!%", "!", "1000", false},
		{"a!_b", "!", "a_b", true},
		{"a!_b", "!", "axb", false},
		{"a!!b", "!", "a!b", true},
		{"%é_", "", "xxéy", true},
		{"a\xffb", "", "a\xffb", true}, // bytes that are not UTF-8 match themselves
		{"a_b", "", "a\xffb", true},    // ... and count as one character
	} {
		p, err := compileLike(tt.pattern, tt.escape, false)
		if err != nil {
			t.Fatalf("%q ESCAPE %q: %v", tt.pattern, tt.escape, err)
		}
		if got := p.match([]byte(tt.s)); got != tt.want {
			t.Errorf("%q LIKE %q ESCAPE %q = %v, want %v", tt.s, tt.pattern, tt.escape, got, tt.want)
		}
	}
}

func TestILikeMatch(t *testing.T) {
	for _, tt := range []struct {
		pattern, s  string
		like, ilike bool
	}{
		{"abc", "ABC", false, true},
		{"A%", "abc", false, true},
		{"%É_", "xxéY", false, true},
		{"straße", "STRASSE", false, false}, // simple folding: ß is not ss
		{"k", "\u212a", false, true},        // the Kelvin sign folds to k (3 bytes against 1)
		{"\u212a%", "kelvin", false, true},
		{"%σ", "ΟΔΟΣ", false, true}, // σ, ς and Σ are one orbit
		{"a\xffb", "A\xffB", false, true},
		{"a\xffb", "a\xfeb", false, false},
		{"%aB%", "xxAbxx", false, true},
		{"%ab", "abAB", false, true},
		{"a_c", "AXC", false, true},
		{"abc", "abd", false, false},
	} {
		for _, fold := range []bool{false, true} {
			p, err := compileLike(tt.pattern, "", fold)
			if err != nil {
				t.Fatal(err)
			}
			want := map[bool]bool{false: tt.like, true: tt.ilike}[fold]
			if got := p.match([]byte(tt.s)); got != want {
				t.Errorf("%q LIKE %q (fold %v) = %v, want %v", tt.s, tt.pattern, fold, got, want)
			}
		}
	}
}

// TestLikeMayMatch: a batch is skipped only when no value in its
// [min, max] can start with the pattern's literal prefix.
func TestLikeMayMatch(t *testing.T) {
	for _, tt := range []struct {
		pattern, min, max string
		may               bool
	}{
		{"b%", "a", "c", true},
		{"b%", "bz", "bzz", true},
		{"b%", "c", "d", false},
		{"b%", "a", "az", false},
		{"b%", "a", "b", true},
		{"b%", "c", "c", false},
		{"%b", "x", "y", true}, // no prefix: no information
		{"ab_", "ab", "ab", true},
		{"ab_", "ac", "ad", false},
		{"\xff%", "a", "b", false},
		{"\xff%", "a", "\xff", true},
		{"a\xff%", "b", "c", false},
		{"a\xff%", "a\xff\xff", "b", true},
	} {
		p, err := compileLike(tt.pattern, "", false)
		if err != nil {
			t.Fatal(err)
		}
		st := &record.ColumnStats{HasMinMax: true, MinBytes: []byte(tt.min), MaxBytes: []byte(tt.max)}
		if got := p.may(st); got != tt.may {
			t.Errorf("%q over [%q, %q]: may %v, want %v", tt.pattern, tt.min, tt.max, got, tt.may)
		}
		// ILIKE has no prefix in byte order: a value may start with it in
		// any case, so no batch is skipped.
		if p, _ := compileLike(tt.pattern, "", true); !p.may(st) {
			t.Errorf("%q ILIKE over [%q, %q]: may false", tt.pattern, tt.min, tt.max)
		}
	}
}

// FuzzLike: the matcher agrees with LIKE's definition as a regular
// expression, and a match starts with the pattern's prefix.
func FuzzLike(f *testing.F) {
	for _, s := range [][3]string{{"a%", "", "abc"}, {"%a_b%", "", "xaéb"}, {"1!%%", "!", "1%x"}, {"%%_%", "", ""}} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, pattern, escape, s string) {
		// The same input is tried as LIKE and as ILIKE.
		fold := len(s)%2 == 1
		p, err := compileLike(pattern, escape, fold)
		if err != nil {
			return
		}
		got := p.match([]byte(s))
		if got && !strings.HasPrefix(s, p.prefix) {
			t.Fatalf("%q LIKE %q matched without the prefix %q", s, pattern, p.prefix)
		}
		if !utf8.ValidString(pattern) || !utf8.ValidString(s) {
			return // the reference below reads text only
		}
		re, err := likeRegexp(pattern, escape, fold)
		if err != nil {
			t.Fatalf("reference for %q: %v", pattern, err)
		}
		if want := re.MatchString(s); got != want {
			t.Fatalf("%q LIKE %q ESCAPE %q (fold %v) = %v, want %v", s, pattern, escape, fold, got, want)
		}
	})
}
