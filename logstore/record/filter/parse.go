package filter

import (
	"errors"
	"fmt"
	"strings"
)

// ErrSyntax is wrapped by every Parse error (see *SyntaxError).
var ErrSyntax = errors.New("filter syntax error")

// MaxExprLen bounds the source length Parse accepts, and MaxDepth the
// nesting of parentheses and NOT, so that a hostile filter cannot exhaust the
// stack or the CPU.
const (
	MaxExprLen = 64 << 10
	MaxDepth   = 128
)

// SyntaxError reports where a filter fails to parse. Pos is a 0-based byte
// offset into the source; the message quotes it 1-based with the text there.
type SyntaxError struct {
	Pos  int
	Near string // up to 20 bytes of source at Pos ("" at the end)
	Msg  string
}

func (e *SyntaxError) Error() string {
	if e.Near == "" {
		return fmt.Sprintf("%v at position %d (end of filter): %s", ErrSyntax, e.Pos+1, e.Msg)
	}
	return fmt.Sprintf("%v at position %d near %q: %s", ErrSyntax, e.Pos+1, e.Near, e.Msg)
}

func (e *SyntaxError) Unwrap() error { return ErrSyntax }

type tokKind uint8

const (
	tEOF     tokKind = iota
	tIdent           // bare identifier (text as written)
	tQIdent          // "quoted" identifier (text unescaped)
	tKeyword         // reserved word (text upper-cased)
	tNumber          // numeric literal (text as written)
	tString          // 'string' (text unescaped)
	tOp              // = != <> < <= > >=
	tLParen
	tRParen
	tComma
)

type token struct {
	kind tokKind
	text string
	pos  int
	lit  LitKind // for tNumber
}

type parser struct {
	src   string
	pos   int // lexer position
	tok   token
	depth int
}

// Parse parses a filter expression. It checks syntax only; Bind resolves
// columns and types. Errors wrap ErrSyntax and are *SyntaxError.
func Parse(expr string) (Expr, error) {
	if len(expr) > MaxExprLen {
		return nil, &SyntaxError{Pos: MaxExprLen, Msg: fmt.Sprintf("filter is %d bytes, at most %d allowed", len(expr), MaxExprLen)}
	}
	p := &parser{src: expr}
	if err := p.next(); err != nil {
		return nil, err
	}
	if p.tok.kind == tEOF {
		return nil, p.errf(p.tok.pos, "empty filter: expected a condition such as `amount > 100`")
	}
	e, err := p.parseOr()
	if err != nil {
		return nil, err
	}
	if p.tok.kind != tEOF {
		return nil, p.errf(p.tok.pos, "expected AND, OR or the end of the filter")
	}
	return e, nil
}

func (p *parser) errf(pos int, format string, args ...any) error {
	near := ""
	if pos < len(p.src) {
		near = p.src[pos:min(len(p.src), pos+20)]
	}
	return &SyntaxError{Pos: pos, Near: near, Msg: fmt.Sprintf(format, args...)}
}

// next lexes one token into p.tok.
func (p *parser) next() error {
	s := p.src
	for p.pos < len(s) && (s[p.pos] == ' ' || s[p.pos] == '\t' || s[p.pos] == '\n' || s[p.pos] == '\r') {
		p.pos++
	}
	start := p.pos
	if start >= len(s) {
		p.tok = token{kind: tEOF, pos: start}
		return nil
	}
	c := s[start]
	switch {
	case c == '(':
		p.pos++
		p.tok = token{kind: tLParen, text: "(", pos: start}
	case c == ')':
		p.pos++
		p.tok = token{kind: tRParen, text: ")", pos: start}
	case c == ',':
		p.pos++
		p.tok = token{kind: tComma, text: ",", pos: start}
	case c == '=':
		p.pos++
		if p.pos < len(s) && s[p.pos] == '=' { // tolerate ==
			p.pos++
		}
		p.tok = token{kind: tOp, text: "=", pos: start}
	case c == '!' || c == '<' || c == '>':
		p.pos++
		op := string(c)
		if p.pos < len(s) && (s[p.pos] == '=' || (c == '<' && s[p.pos] == '>')) {
			op += string(s[p.pos])
			p.pos++
		}
		if op == "!" {
			return p.errf(start, "'!' must be followed by '=' (use NOT for negation)")
		}
		p.tok = token{kind: tOp, text: op, pos: start}
	case c == '\'' || c == '"':
		var b strings.Builder
		i := start + 1
		for {
			if i >= len(s) {
				what := "string"
				if c == '"' {
					what = "quoted identifier"
				}
				return p.errf(start, "unterminated %s: add the closing %c (write %c%c for a literal %c)", what, c, c, c, c)
			}
			if s[i] == c {
				if i+1 < len(s) && s[i+1] == c {
					b.WriteByte(c)
					i += 2
					continue
				}
				i++
				break
			}
			b.WriteByte(s[i])
			i++
		}
		p.pos = i
		if c == '\'' {
			p.tok = token{kind: tString, text: b.String(), pos: start}
		} else {
			if b.Len() == 0 {
				return p.errf(start, "empty quoted identifier")
			}
			p.tok = token{kind: tQIdent, text: b.String(), pos: start}
		}
	case isDigit(c) || c == '.' || ((c == '-' || c == '+') && start+1 < len(s) && (isDigit(s[start+1]) || s[start+1] == '.')):
		return p.lexNumber(start)
	case isIdentStart(c):
		i := start + 1
		for i < len(s) && isIdentPart(s[i]) {
			i++
		}
		// A qualified name (after.qty: a field of $binlog's after image)
		// is one identifier; its parts are never keywords.
		qualified := false
		for i+1 < len(s) && s[i] == '.' && isIdentStart(s[i+1]) {
			qualified = true
			i += 2
			for i < len(s) && isIdentPart(s[i]) {
				i++
			}
		}
		p.pos = i
		word := s[start:i]
		if up := strings.ToUpper(word); !qualified && reserved[up] {
			p.tok = token{kind: tKeyword, text: up, pos: start}
		} else {
			p.tok = token{kind: tIdent, text: word, pos: start}
		}
	default:
		return p.errf(start, "unexpected character %q", c)
	}
	return nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func (p *parser) lexNumber(start int) error {
	s := p.src
	i := start
	if s[i] == '-' || s[i] == '+' {
		i++
	}
	kind := LitInt
	digits := 0
	for i < len(s) && isDigit(s[i]) {
		i++
		digits++
	}
	if i < len(s) && s[i] == '.' {
		kind = LitDecimal
		i++
		for i < len(s) && isDigit(s[i]) {
			i++
			digits++
		}
	}
	if digits == 0 {
		return p.errf(start, "malformed number: expected digits")
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		kind = LitFloat
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		ed := 0
		for i < len(s) && isDigit(s[i]) {
			i++
			ed++
		}
		if ed == 0 {
			return p.errf(start, "malformed number: exponent needs digits")
		}
	}
	if i < len(s) && (isIdentPart(s[i]) || s[i] == '.') {
		return p.errf(start, "malformed number %q", s[start:i+1])
	}
	p.pos = i
	p.tok = token{kind: tNumber, text: s[start:i], pos: start, lit: kind}
	return nil
}

func (p *parser) isKeyword(kw string) bool { return p.tok.kind == tKeyword && p.tok.text == kw }

func (p *parser) parseOr() (Expr, error) {
	l, err := p.parseAnd()
	if err != nil {
		return nil, err
	}
	for p.isKeyword("OR") {
		if err := p.next(); err != nil {
			return nil, err
		}
		r, err := p.parseAnd()
		if err != nil {
			return nil, err
		}
		l = &Or{L: l, R: r}
	}
	return l, nil
}

func (p *parser) parseAnd() (Expr, error) {
	l, err := p.parseNot()
	if err != nil {
		return nil, err
	}
	for p.isKeyword("AND") {
		if err := p.next(); err != nil {
			return nil, err
		}
		r, err := p.parseNot()
		if err != nil {
			return nil, err
		}
		l = &And{L: l, R: r}
	}
	return l, nil
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > MaxDepth {
		return p.errf(p.tok.pos, "filter nested more than %d levels deep", MaxDepth)
	}
	return nil
}

func (p *parser) parseNot() (Expr, error) {
	if p.isKeyword("NOT") {
		pos := p.tok.pos
		if err := p.enter(); err != nil {
			return nil, err
		}
		if err := p.next(); err != nil {
			return nil, err
		}
		x, err := p.parseNot()
		if err != nil {
			return nil, err
		}
		p.depth--
		return &Not{X: x, Offset: pos}, nil
	}
	if p.tok.kind == tLParen {
		open := p.tok.pos
		if err := p.enter(); err != nil {
			return nil, err
		}
		if err := p.next(); err != nil {
			return nil, err
		}
		e, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		if p.tok.kind != tRParen {
			return nil, p.errf(p.tok.pos, "expected ')' to close the '(' at position %d", open+1)
		}
		p.depth--
		return e, p.next()
	}
	return p.parsePredicate()
}

// operand is a column or a literal on either side of a comparison.
type operand struct {
	isCol bool
	col   string
	lit   Literal
	pos   int
}

func (p *parser) parseOperand() (operand, error) {
	t := p.tok
	switch t.kind {
	case tIdent, tQIdent:
		return operand{isCol: true, col: t.text, pos: t.pos}, p.next()
	case tNumber:
		return operand{lit: Literal{Kind: t.lit, Text: t.text, Offset: t.pos}, pos: t.pos}, p.next()
	case tString:
		return operand{lit: Literal{Kind: LitString, Text: t.text, Offset: t.pos}, pos: t.pos}, p.next()
	case tKeyword:
		switch t.text {
		case "NULL":
			return operand{lit: Literal{Kind: LitNull, Text: "NULL", Offset: t.pos}, pos: t.pos}, p.next()
		case "TRUE", "FALSE":
			return operand{lit: Literal{Kind: LitBool, Text: t.text, Offset: t.pos}, pos: t.pos}, p.next()
		case "DATE", "TIME", "TIMESTAMP":
			if err := p.next(); err != nil {
				return operand{}, err
			}
			if p.tok.kind != tString {
				// Not a typed literal: a column named date, time or timestamp.
				return operand{isCol: true, col: p.src[t.pos : t.pos+len(t.text)], pos: t.pos}, nil
			}
			k := map[string]LitKind{"DATE": LitDate, "TIME": LitTime, "TIMESTAMP": LitTimestamp}[t.text]
			lit := Literal{Kind: k, Text: p.tok.text, Offset: t.pos}
			return operand{lit: lit, pos: t.pos}, p.next()
		}
		return operand{}, p.errf(t.pos, "expected a column or a value, found keyword %s (quote a column with that name: \"%s\")", t.text, strings.ToLower(t.text))
	case tEOF:
		return operand{}, p.errf(t.pos, "expected a column or a value")
	}
	return operand{}, p.errf(t.pos, "expected a column or a value, found %q", t.text)
}

var opOf = map[string]Op{"=": OpEq, "!=": OpNe, "<>": OpNe, "<": OpLt, "<=": OpLe, ">": OpGt, ">=": OpGe}

func (p *parser) parsePredicate() (Expr, error) {
	left, err := p.parseOperand()
	if err != nil {
		return nil, err
	}
	switch {
	case p.tok.kind == tOp:
		opTok := p.tok
		if err := p.next(); err != nil {
			return nil, err
		}
		right, err := p.parseOperand()
		if err != nil {
			return nil, err
		}
		op := opOf[opTok.text]
		switch {
		case left.isCol && !right.isCol:
			return &Compare{Column: left.col, Op: op, Value: right.lit, Offset: left.pos}, nil
		case !left.isCol && right.isCol:
			return &Compare{Column: right.col, Op: op.flip(), Value: left.lit, Offset: left.pos}, nil
		case left.isCol:
			return nil, p.errf(right.pos, "a column can only be compared with a value, not with another column")
		default:
			return nil, p.errf(left.pos, "a comparison needs a column on one side")
		}
	case p.isKeyword("IS"):
		if !left.isCol {
			return nil, p.errf(left.pos, "IS NULL applies to a column, not a value")
		}
		if err := p.next(); err != nil {
			return nil, err
		}
		not := false
		if p.isKeyword("NOT") {
			not = true
			if err := p.next(); err != nil {
				return nil, err
			}
		}
		if !p.isKeyword("NULL") {
			return nil, p.errf(p.tok.pos, "expected NULL after IS%s", map[bool]string{true: " NOT"}[not])
		}
		return &IsNull{Column: left.col, Not: not, Offset: left.pos}, p.next()
	case p.isKeyword("IN") || p.isKeyword("NOT") || p.isKeyword("BETWEEN") || p.isKeyword("LIKE") || p.isKeyword("ILIKE"):
		not := p.isKeyword("NOT")
		if not {
			if err := p.next(); err != nil {
				return nil, err
			}
			if !p.isKeyword("IN") && !p.isKeyword("BETWEEN") && !p.isKeyword("LIKE") && !p.isKeyword("ILIKE") {
				return nil, p.errf(p.tok.pos, "expected IN, BETWEEN, LIKE or ILIKE after NOT")
			}
		}
		switch {
		case p.isKeyword("BETWEEN"):
			return p.parseBetween(left, not)
		case p.isKeyword("LIKE"), p.isKeyword("ILIKE"):
			return p.parseLike(left, not)
		}
		if !left.isCol {
			return nil, p.errf(left.pos, "IN applies to a column, not a value")
		}
		if err := p.next(); err != nil {
			return nil, err
		}
		if p.tok.kind != tLParen {
			return nil, p.errf(p.tok.pos, "expected '(' after IN")
		}
		if err := p.next(); err != nil {
			return nil, err
		}
		in := &In{Column: left.col, Not: not, Offset: left.pos}
		for {
			v, err := p.parseOperand()
			if err != nil {
				return nil, err
			}
			if v.isCol {
				return nil, p.errf(v.pos, "IN lists hold values, not columns (quote strings with ')")
			}
			in.Values = append(in.Values, v.lit)
			if p.tok.kind == tComma {
				if err := p.next(); err != nil {
					return nil, err
				}
				continue
			}
			if p.tok.kind == tRParen {
				return in, p.next()
			}
			return nil, p.errf(p.tok.pos, "expected ',' or ')' in the IN list")
		}
	}
	if left.isCol {
		if p.tok.kind == tEOF || p.tok.kind == tRParen || p.isKeyword("AND") || p.isKeyword("OR") {
			// A column alone is a condition, as in SQL: "ok" means ok = TRUE
			// (Bind refuses it for a column that is not BOOLEAN).
			return &Compare{Column: left.col, Op: OpEq, Value: Literal{Kind: LitBool, Text: "TRUE", Offset: left.pos}, Offset: left.pos, Bare: true}, nil
		}
		return nil, p.errf(p.tok.pos, "expected an operator (= != <> < <= > >=), [NOT] IN, [NOT] BETWEEN, [NOT] [I]LIKE or IS [NOT] NULL after column %q", left.col)
	}
	return nil, p.errf(p.tok.pos, "expected an operator after the value")
}

// parseLike parses the rest of "col [NOT] [I]LIKE 'pattern' [ESCAPE 'c']"
// (p.tok is LIKE or ILIKE). ESCAPE is not a reserved word: after the
// pattern nothing else could follow.
func (p *parser) parseLike(left operand, not bool) (Expr, error) {
	op := strings.ToUpper(p.tok.text)
	if !left.isCol {
		return nil, p.errf(left.pos, "%s applies to a column, not a value", op)
	}
	str := func(what string) (string, error) {
		if err := p.next(); err != nil {
			return "", err
		}
		if p.tok.kind != tString {
			return "", p.errf(p.tok.pos, "expected a quoted %s", what)
		}
		text := p.tok.text
		return text, p.next()
	}
	e := &Like{Column: left.col, Not: not, Fold: op == "ILIKE", Offset: left.pos}
	var err error
	if e.Pattern, err = str("pattern after " + op + ", such as 'abc%'"); err != nil {
		return nil, err
	}
	if p.tok.kind == tIdent && strings.EqualFold(p.tok.text, "ESCAPE") {
		if e.Escape, err = str("escape character after ESCAPE, such as '\\'"); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// parseBetween parses the rest of "col [NOT] BETWEEN low AND high" (p.tok
// is BETWEEN). It is SQL's shorthand for col >= low AND col <= high, and
// parses to that (under NOT for NOT BETWEEN), so binding, statistics and
// three-valued evaluation are the comparisons' own.
func (p *parser) parseBetween(left operand, not bool) (Expr, error) {
	if !left.isCol {
		return nil, p.errf(left.pos, "BETWEEN applies to a column, not a value")
	}
	bound := func() (Literal, error) {
		if err := p.next(); err != nil {
			return Literal{}, err
		}
		v, err := p.parseOperand()
		if err == nil && v.isCol {
			err = p.errf(v.pos, "the bounds of BETWEEN are values, not columns (quote strings with ')")
		}
		return v.lit, err
	}
	low, err := bound()
	if err != nil {
		return nil, err
	}
	if !p.isKeyword("AND") {
		return nil, p.errf(p.tok.pos, "expected AND between the bounds of BETWEEN")
	}
	high, err := bound()
	if err != nil {
		return nil, err
	}
	var e Expr = &And{
		L: &Compare{Column: left.col, Op: OpGe, Value: low, Offset: left.pos},
		R: &Compare{Column: left.col, Op: OpLe, Value: high, Offset: left.pos},
	}
	if not {
		e = &Not{X: e, Offset: left.pos}
	}
	return e, nil
}
