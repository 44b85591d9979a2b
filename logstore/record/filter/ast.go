package filter

import (
	"strings"
)

// Expr is a parsed filter expression. The concrete types are *And, *Or,
// *Not, *Compare, *In, *IsNull and *Like. String renders a canonical form that
// Parse reads back to the same tree.
type Expr interface {
	String() string
	// Pos is the byte offset in the source where the expression starts.
	Pos() int
	appendTo(dst []byte) []byte
}

// Op is a comparison operator.
type Op uint8

const (
	OpEq Op = iota // =
	OpNe           // != or <>
	OpLt           // <
	OpLe           // <=
	OpGt           // >
	OpGe           // >=
)

var opNames = [...]string{OpEq: "=", OpNe: "!=", OpLt: "<", OpLe: "<=", OpGt: ">", OpGe: ">="}

func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return "?"
}

// flip is the operator with the operands swapped (1 < a  ==  a > 1).
func (o Op) flip() Op {
	switch o {
	case OpLt:
		return OpGt
	case OpLe:
		return OpGe
	case OpGt:
		return OpLt
	case OpGe:
		return OpLe
	}
	return o
}

// LitKind is the lexical kind of a literal.
type LitKind uint8

const (
	LitNull      LitKind = iota // NULL
	LitBool                     // TRUE, FALSE (Text is "TRUE" or "FALSE")
	LitInt                      // 42, -7
	LitDecimal                  // 1.25, -.5
	LitFloat                    // 1e3, 2.5E-2
	LitString                   // 'text' (Text is unescaped)
	LitDate                     // DATE '2024-01-01'
	LitTime                     // TIME '10:00:00.5'
	LitTimestamp                // TIMESTAMP '2024-01-01 10:00:00.123'
)

// Literal is a constant. Text keeps the source spelling of numbers (so that
// DECIMAL conversion is exact) and the unescaped content of strings.
type Literal struct {
	Kind   LitKind
	Text   string
	Offset int
}

func (l Literal) appendTo(dst []byte) []byte {
	switch l.Kind {
	case LitNull:
		return append(dst, "NULL"...)
	case LitBool, LitInt, LitDecimal, LitFloat:
		return append(dst, l.Text...)
	case LitDate:
		dst = append(dst, "DATE "...)
	case LitTime:
		dst = append(dst, "TIME "...)
	case LitTimestamp:
		dst = append(dst, "TIMESTAMP "...)
	}
	return appendQuoted(dst, l.Text, '\'')
}

func (l Literal) String() string { return string(l.appendTo(nil)) }

// Compare is `Column Op Value`. A literal on the left is normalised at parse
// time (`100 < a` becomes `a > 100`). A column alone (`ok`) is Bare: the
// comparison `ok = TRUE`, written as the column.
type Compare struct {
	Column string
	Op     Op
	Value  Literal
	Offset int
	Bare   bool
}

// In is `Column [NOT] IN (v1, v2, ...)`.
type In struct {
	Column string
	Not    bool
	Values []Literal
	Offset int
}

// IsNull is `Column IS [NOT] NULL`.
type IsNull struct {
	Column string
	Not    bool
	Offset int
}

// Like is `Column [NOT] LIKE 'pattern' [ESCAPE 'c']`: in the pattern, %
// matches any run of characters and _ exactly one; Escape ("" for none) is
// one character that makes the %, _ or escape character after it literal.
// Fold is ILIKE: letters match regardless of case (Unicode simple case
// folding, as strings.EqualFold).
type Like struct {
	Column  string
	Not     bool
	Fold    bool
	Pattern string
	Escape  string
	Offset  int
}

// And is `L AND R`.
type And struct{ L, R Expr }

// Or is `L OR R`.
type Or struct{ L, R Expr }

// Not is `NOT X`.
type Not struct {
	X      Expr
	Offset int
}

func (e *Compare) Pos() int { return e.Offset }
func (e *In) Pos() int      { return e.Offset }
func (e *IsNull) Pos() int  { return e.Offset }
func (e *Like) Pos() int    { return e.Offset }
func (e *And) Pos() int     { return e.L.Pos() }
func (e *Or) Pos() int      { return e.L.Pos() }
func (e *Not) Pos() int     { return e.Offset }

func (e *Compare) String() string { return string(e.appendTo(nil)) }
func (e *In) String() string      { return string(e.appendTo(nil)) }
func (e *IsNull) String() string  { return string(e.appendTo(nil)) }
func (e *Like) String() string    { return string(e.appendTo(nil)) }
func (e *And) String() string     { return string(e.appendTo(nil)) }
func (e *Or) String() string      { return string(e.appendTo(nil)) }
func (e *Not) String() string     { return string(e.appendTo(nil)) }

func (e *Compare) appendTo(dst []byte) []byte {
	dst = appendIdent(dst, e.Column)
	if e.Bare {
		return dst
	}
	dst = append(dst, ' ')
	dst = append(dst, e.Op.String()...)
	dst = append(dst, ' ')
	return e.Value.appendTo(dst)
}

func (e *In) appendTo(dst []byte) []byte {
	dst = appendIdent(dst, e.Column)
	if e.Not {
		dst = append(dst, " NOT"...)
	}
	dst = append(dst, " IN ("...)
	for i, v := range e.Values {
		if i > 0 {
			dst = append(dst, ", "...)
		}
		dst = v.appendTo(dst)
	}
	return append(dst, ')')
}

func (e *IsNull) appendTo(dst []byte) []byte {
	dst = appendIdent(dst, e.Column)
	if e.Not {
		return append(dst, " IS NOT NULL"...)
	}
	return append(dst, " IS NULL"...)
}

func (e *Like) appendTo(dst []byte) []byte {
	dst = appendIdent(dst, e.Column)
	if e.Not {
		dst = append(dst, " NOT"...)
	}
	if e.Fold {
		dst = append(dst, " ILIKE "...)
	} else {
		dst = append(dst, " LIKE "...)
	}
	dst = appendQuoted(dst, e.Pattern, '\'')
	if e.Escape != "" {
		dst = append(dst, " ESCAPE "...)
		dst = appendQuoted(dst, e.Escape, '\'')
	}
	return dst
}

// precedence: OR 1, AND 2, everything else binds tighter.
func precedence(e Expr) int {
	switch e.(type) {
	case *Or:
		return 1
	case *And:
		return 2
	}
	return 3
}

// appendChild parenthesises a child that binds looser than its parent, or
// as tightly when it is the right operand (the parser is left-associative),
// so that the printed form parses back to the same tree.
func appendChild(dst []byte, child Expr, parentPrec int, right bool) []byte {
	p := precedence(child)
	if p < parentPrec || (right && p == parentPrec) {
		dst = append(dst, '(')
		dst = child.appendTo(dst)
		return append(dst, ')')
	}
	return child.appendTo(dst)
}

func (e *And) appendTo(dst []byte) []byte {
	dst = appendChild(dst, e.L, 2, false)
	dst = append(dst, " AND "...)
	return appendChild(dst, e.R, 2, true)
}

func (e *Or) appendTo(dst []byte) []byte {
	dst = appendChild(dst, e.L, 1, false)
	dst = append(dst, " OR "...)
	return appendChild(dst, e.R, 1, true)
}

func (e *Not) appendTo(dst []byte) []byte {
	dst = append(dst, "NOT "...)
	return appendChild(dst, e.X, 3, false)
}

// reserved words cannot be bare identifiers. DATE, TIME and TIMESTAMP are
// identifiers unless a string follows them; they are quoted on output anyway.
var reserved = map[string]bool{
	"AND": true, "OR": true, "NOT": true, "IN": true, "IS": true, "NULL": true,
	"TRUE": true, "FALSE": true, "DATE": true, "TIME": true, "TIMESTAMP": true,
	"BETWEEN": true, "LIKE": true, "ILIKE": true,
}

func isIdentStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isIdentPart(c byte) bool { return isIdentStart(c) || (c >= '0' && c <= '9') }

func appendIdent(dst []byte, name string) []byte {
	parts := strings.Split(name, ".")
	bare := len(parts) > 1 || !reserved[strings.ToUpper(name)] // a qualified name's parts are no keywords
	for _, part := range parts {
		bare = bare && part != "" && isIdentStart(part[0])
		for i := 1; bare && i < len(part); i++ {
			bare = isIdentPart(part[i])
		}
	}
	if bare {
		return append(dst, name...)
	}
	return appendQuoted(dst, name, '"')
}

// quoteLit quotes s as a filter string literal.
func quoteLit(s string) string { return string(appendQuoted(nil, s, '\'')) }

func appendQuoted(dst []byte, s string, q byte) []byte {
	dst = append(dst, q)
	for i := 0; i < len(s); i++ {
		if s[i] == q {
			dst = append(dst, q)
		}
		dst = append(dst, s[i])
	}
	return append(dst, q)
}
