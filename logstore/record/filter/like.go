package filter

import (
	"bytes"
	"fmt"
	"unicode"
	"unicode/utf8"
)

// likePattern is a compiled LIKE pattern: literal runs, '_' (exactly one
// character) and '%' (any run of characters, none included).
type likePattern struct {
	toks []likeTok
	fold bool // ILIKE: literals match regardless of case
	// prefix is the literal text before the first wildcard: every match
	// starts with it, which is what batch statistics can test. Empty for
	// ILIKE (a match may start with the prefix in any case).
	prefix string
}

type likeTok struct {
	kind likeKind
	lit  []byte // likeLit
}

type likeKind uint8

const (
	likeLit likeKind = iota
	likeOne          // _
	likeAny          // %
)

// compileLike compiles pattern. escape, if not empty, is one character
// that makes the '%', '_' or escape character after it literal. fold makes
// literals match regardless of case (ILIKE).
func compileLike(pattern, escape string, fold bool) (*likePattern, error) {
	var esc rune = -1
	if escape != "" {
		r, n := utf8.DecodeRuneInString(escape)
		if n != len(escape) || r == utf8.RuneError {
			return nil, fmt.Errorf("ESCAPE %s must be one character", quoteLit(escape))
		}
		esc = r
	}
	p := &likePattern{fold: fold}
	var lit []byte
	wild, pending := false, false
	for i := 0; i < len(pattern); {
		r, n := utf8.DecodeRuneInString(pattern[i:])
		text := pattern[i : i+n] // as written, even if not UTF-8
		i += n
		switch {
		case pending:
			if r != '%' && r != '_' && r != esc {
				return nil, fmt.Errorf("pattern %s: the escape character may precede only %%, _ or itself", quoteLit(pattern))
			}
			pending = false
		case r == esc:
			pending = true
			continue
		case r == '%' || r == '_':
			if len(lit) > 0 {
				p.toks = append(p.toks, likeTok{kind: likeLit, lit: lit})
				lit = nil
			}
			wild = true
			if r == '_' {
				p.toks = append(p.toks, likeTok{kind: likeOne})
			} else if len(p.toks) == 0 || p.toks[len(p.toks)-1].kind != likeAny { // %% is %
				p.toks = append(p.toks, likeTok{kind: likeAny})
			}
			continue
		}
		lit = append(lit, text...)
		if !wild && !fold {
			p.prefix += text
		}
	}
	if pending {
		return nil, fmt.Errorf("pattern %s ends with the escape character", quoteLit(pattern))
	}
	if len(lit) > 0 {
		p.toks = append(p.toks, likeTok{kind: likeLit, lit: lit})
	}
	return p, nil
}

// match reports whether s matches the whole pattern. '_' takes one UTF-8
// character (an invalid byte counts as one). On a mismatch it resumes from
// the last '%' one character further on: the usual wildcard matcher, linear
// in the text for each '%'.
func (p *likePattern) match(s []byte) bool {
	pi, si := 0, 0
	star, starS := -1, 0
	for pi < len(p.toks) || si < len(s) {
		if pi < len(p.toks) {
			switch t := p.toks[pi]; t.kind {
			case likeAny:
				star, starS = pi, si
				pi++
				continue
			case likeOne:
				if si < len(s) {
					_, n := utf8.DecodeRune(s[si:])
					pi, si = pi+1, si+n
					continue
				}
			case likeLit:
				var n int
				var ok bool
				if p.fold {
					n, ok = hasPrefixFold(s[si:], t.lit)
				} else {
					n, ok = len(t.lit), bytes.HasPrefix(s[si:], t.lit)
				}
				if ok {
					pi, si = pi+1, si+n
					continue
				}
			}
		}
		if star < 0 || starS >= len(s) {
			return false
		}
		_, n := utf8.DecodeRune(s[starS:])
		starS += n
		pi, si = star+1, starS
	}
	return true
}

// hasPrefixFold reports whether s starts with lit under simple case
// folding, character by character as strings.EqualFold compares, and how
// many bytes of s that prefix takes (folded characters may differ in
// length: K and the Kelvin sign). Invalid UTF-8 matches itself byte for
// byte.
func hasPrefixFold(s, lit []byte) (int, bool) {
	si := 0
	for li := 0; li < len(lit); {
		if si >= len(s) {
			return 0, false
		}
		if c, d := lit[li], s[si]; c|d < utf8.RuneSelf {
			// Two ASCII characters fold together only as ASCII letters.
			if lc := c | 0x20; c != d && (lc != d|0x20 || lc < 'a' || lc > 'z') {
				return 0, false
			}
			li, si = li+1, si+1
			continue
		}
		lr, ln := utf8.DecodeRune(lit[li:])
		sr, sn := utf8.DecodeRune(s[si:])
		switch {
		case lr == utf8.RuneError && ln == 1 || sr == utf8.RuneError && sn == 1:
			if ln != sn || lit[li] != s[si] {
				return 0, false
			}
		case !equalFold(lr, sr):
			return 0, false
		}
		li, si = li+ln, si+sn
	}
	return si, true
}

// equalFold reports whether a and b are the same character under simple
// case folding.
func equalFold(a, b rune) bool {
	if a == b {
		return true
	}
	for r := unicode.SimpleFold(a); r != a; r = unicode.SimpleFold(r) {
		if r == b {
			return true
		}
	}
	return false
}

// prefixEnd returns the least string above every string that starts with
// prefix, or unbounded when the prefix is all 0xff bytes (or empty).
func prefixEnd(prefix string) (end string, unbounded bool) {
	b := []byte(prefix)
	for len(b) > 0 && b[len(b)-1] == 0xff {
		b = b[:len(b)-1]
	}
	if len(b) == 0 {
		return "", true
	}
	b[len(b)-1]++
	return string(b), false
}
