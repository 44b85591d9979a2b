package filter

import (
	"errors"
	"strings"
	"testing"
)

// tree renders e fully parenthesised so that a test pins the structure.
func tree(e Expr) string {
	switch e := e.(type) {
	case *And:
		return "(AND " + tree(e.L) + " " + tree(e.R) + ")"
	case *Or:
		return "(OR " + tree(e.L) + " " + tree(e.R) + ")"
	case *Not:
		return "(NOT " + tree(e.X) + ")"
	case *Compare:
		return "(" + e.Op.String() + " " + e.Column + " " + litTree(e.Value) + ")"
	case *In:
		var b strings.Builder
		if e.Not {
			b.WriteString("(NOTIN ")
		} else {
			b.WriteString("(IN ")
		}
		b.WriteString(e.Column)
		for _, v := range e.Values {
			b.WriteString(" " + litTree(v))
		}
		return b.String() + ")"
	case *IsNull:
		if e.Not {
			return "(NOTNULL " + e.Column + ")"
		}
		return "(NULL " + e.Column + ")"
	case *Like:
		op := "(LIKE "
		if e.Fold {
			op = "(ILIKE "
		}
		if e.Not {
			op = "(NOT" + op[1:]
		}
		if e.Escape != "" {
			return op + e.Column + " " + e.Pattern + " esc:" + e.Escape + ")"
		}
		return op + e.Column + " " + e.Pattern + ")"
	}
	return "?"
}

func litTree(l Literal) string {
	kinds := []string{"null", "bool", "int", "dec", "float", "str", "date", "time", "ts"}
	return kinds[l.Kind] + ":" + l.Text
}

func TestParse(t *testing.T) {
	f := func(in, want, canonical string) {
		t.Helper()
		e, err := Parse(in)
		if err != nil {
			t.Fatalf("Parse(%q): %v", in, err)
		}
		if got := tree(e); got != want {
			t.Fatalf("Parse(%q)\n got  %s\n want %s", in, got, want)
		}
		if canonical != "" && e.String() != canonical {
			t.Fatalf("Parse(%q).String() = %q, want %q", in, e.String(), canonical)
		}
		// The canonical form parses back to the same tree.
		e2, err := Parse(e.String())
		if err != nil {
			t.Fatalf("Parse(String()=%q): %v", e.String(), err)
		}
		if tree(e2) != want {
			t.Fatalf("round trip of %q: got %s want %s", e.String(), tree(e2), want)
		}
	}
	// The brief's example: AND binds tighter than OR.
	f("amount > 100 AND city IN ('a','b') OR note IS NULL",
		"(OR (AND (> amount int:100) (IN city str:a str:b)) (NULL note))",
		"amount > 100 AND city IN ('a', 'b') OR note IS NULL")
	f("a = 1 OR b = 2 AND c = 3", "(OR (= a int:1) (AND (= b int:2) (= c int:3)))", "a = 1 OR b = 2 AND c = 3")
	f("(a = 1 OR b = 2) AND c = 3", "(AND (OR (= a int:1) (= b int:2)) (= c int:3))", "(a = 1 OR b = 2) AND c = 3")
	f("a = 1 AND (b = 2 AND c = 3)", "(AND (= a int:1) (AND (= b int:2) (= c int:3)))", "a = 1 AND (b = 2 AND c = 3)")
	f("a = 1 AND b = 2 AND c = 3", "(AND (AND (= a int:1) (= b int:2)) (= c int:3))", "a = 1 AND b = 2 AND c = 3")
	// NOT binds tighter than AND.
	f("NOT a = 1 AND b = 2", "(AND (NOT (= a int:1)) (= b int:2))", "NOT a = 1 AND b = 2")
	f("NOT (a = 1 AND b = 2)", "(NOT (AND (= a int:1) (= b int:2)))", "NOT (a = 1 AND b = 2)")
	f("not not a is null", "(NOT (NOT (NULL a)))", "NOT NOT a IS NULL")
	f("((a = 1))", "(= a int:1)", "a = 1")
	// Qualified names ($binlog's before.qty, after.qty) are one column name.
	f("before.qty = 2 AND after.qty > 5", "(AND (= before.qty int:2) (> after.qty int:5))", "")
	f(`"after.qty" = 1`, "(= after.qty int:1)", "after.qty = 1")
	f(`a.and = 1 OR "x.5" = 1`, "(OR (= a.and int:1) (= x.5 int:1))", "")
	// Every operator, either order.
	f("a = 1", "(= a int:1)", "")
	f("a == 1", "(= a int:1)", "a = 1")
	f("a != 1", "(!= a int:1)", "")
	f("a <> 1", "(!= a int:1)", "a != 1")
	f("a < 1", "(< a int:1)", "")
	f("a <= 1", "(<= a int:1)", "")
	f("a > 1", "(> a int:1)", "")
	f("a >= 1", "(>= a int:1)", "")
	f("1 < a", "(> a int:1)", "a > 1")
	f("1 <= a", "(>= a int:1)", "a >= 1")
	f("1 > a", "(< a int:1)", "a < 1")
	f("1 >= a", "(<= a int:1)", "a <= 1")
	f("1 = a", "(= a int:1)", "a = 1")
	f("'x' <> a", "(!= a str:x)", "a != 'x'")
	f("a IN (1)", "(IN a int:1)", "")
	f("a NOT IN (1, 2)", "(NOTIN a int:1 int:2)", "a NOT IN (1, 2)")
	f("a IS NOT NULL", "(NOTNULL a)", "")
	// Keywords are case-insensitive; identifiers keep their case.
	f("Amount in (1) AnD city iS nOt NuLl oR x = TrUe", "(OR (AND (IN Amount int:1) (NOTNULL city)) (= x bool:TRUE))", "Amount IN (1) AND city IS NOT NULL OR x = TRUE")
	// Quoting.
	f(`"my col" = 'it''s'`, "(= my col str:it's)", `"my col" = 'it''s'`)
	f(`"a""b" = ''`, `(= a"b str:)`, `"a""b" = ''`)
	f(`"and" = 1`, "(= and int:1)", `"and" = 1`)
	f(`date = DATE '2024-01-01'`, "(= date date:2024-01-01)", `"date" = DATE '2024-01-01'`)
	f(`"Time" < TIME '10:00:00.5'`, "(< Time time:10:00:00.5)", `"Time" < TIME '10:00:00.5'`)
	// Literals.
	f("a IN (-3, +4, 1.25, -.5, 1e3, 2.5E-2, 'x', NULL, TRUE, FALSE, DATE '2024-01-01', TIME '10:00', TIMESTAMP '2024-01-01 10:00:00.123')",
		"(IN a int:-3 int:+4 dec:1.25 dec:-.5 float:1e3 float:2.5E-2 str:x null:NULL bool:TRUE bool:FALSE date:2024-01-01 time:10:00 ts:2024-01-01 10:00:00.123)", "")
	f("a>-1", "(> a int:-1)", "a > -1")
	f("a = 1. OR a = 1.e5", "(OR (= a dec:1.) (= a float:1.e5))", "a = 1. OR a = 1.e5")
	f("a = NULL", "(= a null:NULL)", "")
	f(" \t\na\n=\n1 ", "(= a int:1)", "a = 1")
	// BETWEEN is its two comparisons; NOT BETWEEN their negation.
	f("a BETWEEN 1 AND 3", "(AND (>= a int:1) (<= a int:3))", "a >= 1 AND a <= 3")
	f("a not between 'x' and 'y' or b = 1", "(OR (NOT (AND (>= a str:x) (<= a str:y))) (= b int:1))", "NOT (a >= 'x' AND a <= 'y') OR b = 1")
	f("d BETWEEN DATE '2024-01-01' AND DATE '2024-01-31' AND x = 1",
		"(AND (AND (>= d date:2024-01-01) (<= d date:2024-01-31)) (= x int:1))", "")
	f(`"between" = 1`, "(= between int:1)", `"between" = 1`)
	// LIKE, with an optional escape character.
	f("name LIKE 'a%'", "(LIKE name a%)", "")
	f("name not like '%it''s_' or x = 1", "(OR (NOTLIKE name %it's_) (= x int:1))", "name NOT LIKE '%it''s_' OR x = 1")
	f("name LIKE '50!%%' escape '!' AND escape = 1", "(AND (LIKE name 50!%% esc:!) (= escape int:1))", "name LIKE '50!%%' ESCAPE '!' AND escape = 1")
	f(`"like" LIKE ''`, "(LIKE like )", `"like" LIKE ''`)
	f("a LIKE 'x_' ESCAPE ''", "(LIKE a x_)", "a LIKE 'x_'") // no escape character, as PostgreSQL reads it
	// ILIKE: LIKE regardless of case.
	f("name ilike 'A%'", "(ILIKE name A%)", "name ILIKE 'A%'")
	f("name NOT ILIKE '%x!_' ESCAPE '!' OR n", "(OR (NOTILIKE name %x!_ esc:!) (= n bool:TRUE))", "name NOT ILIKE '%x!_' ESCAPE '!' OR n")
	f(`"ilike" ILIKE 'a'`, "(ILIKE ilike a)", `"ilike" ILIKE 'a'`)
	// A column alone is the condition column = TRUE.
	f("ok", "(= ok bool:TRUE)", "ok")
	f("NOT ok AND (flag OR x > 1)", "(AND (NOT (= ok bool:TRUE)) (OR (= flag bool:TRUE) (> x int:1)))", "NOT ok AND (flag OR x > 1)")
	f(`NOT "and"`, "(NOT (= and bool:TRUE))", `NOT "and"`)
}

func TestParseErrors(t *testing.T) {
	f := func(in string, pos int, msgPart string) {
		t.Helper()
		_, err := Parse(in)
		if err == nil {
			t.Fatalf("Parse(%q) = nil error, want a syntax error", in)
		}
		if !errors.Is(err, ErrSyntax) {
			t.Fatalf("Parse(%q) error %v does not wrap ErrSyntax", in, err)
		}
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Fatalf("Parse(%q) error %T is not *SyntaxError", in, err)
		}
		if se.Pos != pos {
			t.Fatalf("Parse(%q) error at %d, want %d: %v", in, se.Pos, pos, err)
		}
		if !strings.Contains(err.Error(), msgPart) {
			t.Fatalf("Parse(%q) error %q does not mention %q", in, err, msgPart)
		}
	}
	f("", 0, "empty filter")
	f("   ", 3, "empty filter")
	f("a >", 3, "end of filter")
	f("a = 1 AND", 9, "expected a column or a value")
	f("(a = 1", 6, "to close the '(' at position 1")
	f("a = 1)", 5, "expected AND, OR")
	f("a = 1 b = 2", 6, "expected AND, OR")
	f("a IN 1", 5, "expected '(' after IN")
	f("a IN ()", 6, "expected a column or a value")
	f("a IN (1 2)", 8, "expected ',' or ')'")
	f("a IN (b)", 6, "IN lists hold values")
	f("a NOT 1", 6, "expected IN, BETWEEN, LIKE or ILIKE after NOT")
	f("'x' LIKE 'a'", 0, "LIKE applies to a column")
	f("'x' ILIKE 'a'", 0, "ILIKE applies to a column")
	f("a ILIKE 1", 8, "expected a quoted pattern after ILIKE")
	f("a LIKE b", 7, "expected a quoted pattern")
	f("a LIKE 1", 7, "expected a quoted pattern")
	f("a LIKE 'x' ESCAPE", 17, "expected a quoted escape character")
	f("a LIKE 'x' ESCAPE 1", 18, "expected a quoted escape character")
	f("a LIKE 'x' y", 11, "expected AND, OR")
	f("1 BETWEEN 1 AND 2", 0, "BETWEEN applies to a column")
	f("a BETWEEN 1", 11, "expected AND between the bounds")
	f("a BETWEEN 1 OR 2", 12, "expected AND between the bounds")
	f("a BETWEEN b AND 2", 10, "bounds of BETWEEN are values")
	f("a BETWEEN 1 AND", 15, "expected a column or a value")
	f("a = b", 4, "not with another column")
	f("1 = 2", 0, "needs a column")
	f("1 IN (2)", 0, "IN applies to a column")
	f("1 IS NULL", 0, "IS NULL applies to a column")
	f("a IS 5", 5, "expected NULL after IS")
	f("a IS NOT 5", 9, "expected NULL after IS NOT")
	f("a = 'abc", 4, "unterminated string")
	f(`"abc = 1`, 0, "unterminated quoted identifier")
	f(`"" = 1`, 0, "empty quoted identifier")
	f("a ! 1", 2, "'!' must be followed by '='")
	f("a = 1.2.3", 4, "malformed number")
	f("a = 1e", 4, "exponent needs digits")
	f("a = 12abc", 4, "malformed number")
	f("a = -", 4, "unexpected character")
	f("a # 1", 2, "unexpected character")
	f("a 1", 2, "expected an operator")
	f("a b", 2, "expected an operator")
	f("NOT", 3, "expected a column or a value")
	f("AND = 1", 0, "found keyword AND")
	f("a = 1 OR OR", 9, "found keyword OR")
	f(strings.Repeat("(", MaxDepth+1)+"a = 1"+strings.Repeat(")", MaxDepth+1), MaxDepth, "nested more than")
	f(strings.Repeat("NOT ", MaxDepth+1)+"a = 1", MaxDepth*4, "nested more than")
	f(strings.Repeat(" ", MaxExprLen+1), MaxExprLen, "at most")
	// Nesting right at the limit is fine.
	if _, err := Parse(strings.Repeat("(", MaxDepth) + "a = 1" + strings.Repeat(")", MaxDepth)); err != nil {
		t.Fatalf("depth %d: %v", MaxDepth, err)
	}
}

func TestSyntaxErrorMessage(t *testing.T) {
	_, err := Parse("amount > 100 AND city IN 'a'")
	want := `filter syntax error at position 26 near "'a'": expected '(' after IN`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
}
