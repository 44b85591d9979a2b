package filter

import (
	"math/rand/v2"
	"testing"
)

// FuzzParse: Parse never panics; whatever parses round-trips through
// String; binding and evaluating it on a random record never panics.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"amount > 100 AND city IN ('a','b') OR note IS NULL",
		"NOT (i64 = 1 OR s <> 'x''y') AND d >= DATE '2024-01-01'",
		`"date" < TIMESTAMP '2024-01-01 10:00:00.123' AND ts3 > 1000`,
		"i8 NOT IN (1, 2.5, -3e2, NULL) AND b = TRUE",
		"t3 = TIME '10:00:00.5' OR f32 > 1e400",
		"((((a = 1))))", "a IS NOT NULL", "1 < a", "a ! 1", "'unterminated", `"x"`,
		"dec = 1.505 AND dec IN (1, 2)", "a = -.5e-3",
		"i64 NOT BETWEEN -1 AND 2.5 OR NOT b", "s NOT LIKE 'a!%_%' ESCAPE '!' OR s LIKE ''", "(b) AND d BETWEEN DATE '2024-01-01' AND '2024-02-01'",
	} {
		f.Add(s)
	}
	s := testSchema()
	r := rand.New(rand.NewPCG(1, 2))
	rec := genRecord(r, s, 70, true)
	idx := reverseIndex(len(s.Columns))
	stats := statsOf(s, rec, idx)
	f.Fuzz(func(t *testing.T, in string) {
		e, err := Parse(in)
		if err != nil {
			return
		}
		out := e.String()
		e2, err := Parse(out)
		if err != nil {
			t.Fatalf("Parse(%q) ok, but its String %q does not parse: %v", in, out, err)
		}
		if got := e2.String(); got != out {
			t.Fatalf("round trip changed %q into %q", out, got)
		}
		if tree(e2) != tree(e) {
			t.Fatalf("round trip changed the tree of %q: %s vs %s", in, tree(e), tree(e2))
		}
		fl, err := Bind(e, s)
		if err != nil {
			return
		}
		sel, err := fl.Eval(rec, idx, nil)
		if err != nil {
			t.Fatalf("Eval(%q): %v", out, err)
		}
		if len(sel) > 0 && !fl.MayMatch(stats) {
			t.Fatalf("MayMatch(%q) = false but %d rows pass", out, len(sel))
		}
	})
}
