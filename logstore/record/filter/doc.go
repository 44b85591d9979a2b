// Package filter parses, binds and evaluates the server-side row filters of
// Fetch and Scan (`amount > 100 AND city IN ('a','b') OR note LIKE 'x%'`).
//
// The life of a filter:
//
//	Parse(expr)     -> Expr     syntax only; no schema needed
//	Bind(e, schema) -> *Filter  columns resolved, literals converted exactly
//	f.MayMatch(stats)           batch skipping on per-batch min/max/null counts
//	f.Eval(rec, colIndex, sel)  column-at-a-time evaluation over Arrow arrays
//
// Invariants:
//
//   - LIKE applies to STRING columns; `_` takes one UTF-8 character (a byte
//     that is not UTF-8 counts as one). MayMatch tests only the pattern's
//     literal prefix against min/max; Eval on a dictionary column matches
//     each dictionary value once. ILIKE compares literals character by
//     character under simple case folding (strings.EqualFold's rule) and
//     has no prefix for MayMatch.
//   - `a [NOT] BETWEEN x AND y` and a BOOLEAN column alone (`ok`) parse into
//     comparisons (`[NOT] (a >= x AND a <= y)`, `ok = TRUE`): binding,
//     statistics and evaluation below treat them as such.
//   - SQL three-valued logic. A comparison, IN or NOT IN that reads a null
//     value (or a NULL literal) is UNKNOWN; NOT UNKNOWN is UNKNOWN; AND/OR
//     follow the Kleene tables. A row passes only when the whole predicate is
//     TRUE. Eval represents every sub-result as two bitmaps (TRUE rows, FALSE
//     rows); a row in neither is UNKNOWN.
//   - Literals are compared exactly with the stored values: integer, DECIMAL,
//     DATE, TIME and TIMESTAMP columns are compared as exact rationals
//     (a literal that is not representable in the column's unit, such as
//     `tinyint_col > 1.5` or a nanosecond timestamp against a millisecond
//     column, is rewritten at Bind time to an equivalent integer comparison,
//     or to a constant for non-null rows). FLOAT columns compare against the
//     literal rounded to float32, DOUBLE columns against the nearest float64;
//     NaN follows IEEE-754 (every comparison false except !=).
//   - TIMESTAMP_LTZ string literals without an offset are read as UTC.
//   - A qualified name (`after.qty`, parts of letters, digits and '_') is
//     one column name, bound like any other: the schema a caller binds to
//     supplies such columns ($binlog's images), no other does.
//   - MayMatch is conservative: it returns false only when no row of the
//     batch can make the predicate TRUE. It tracks, per node, "may be TRUE"
//     and "may be FALSE" so that NOT is exact.
//   - AND evaluates its right side only for rows where the left is not
//     FALSE, OR only where it is not TRUE (a per-node "care" bitmap), so a
//     selective first conjunct makes string and decimal comparisons cheaper.
//   - A column that colIndex maps to -1 (a batch written before the column
//     was added) reads as all NULL; stats slices shorter than the schema
//     mean "no information" for the missing columns.
//   - A *Filter is immutable after Bind and safe for concurrent use. Eval
//     appends to the caller's slice and allocates nothing in steady state
//     (scratch bitmaps come from a sync.Pool).
//   - Parse, Bind, MayMatch and Eval never panic on any input: Eval turns a
//     record that does not match the bound schema into an error.
package filter
