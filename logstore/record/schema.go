package record

import (
	"errors"
	"fmt"
	"regexp"

	"github.com/apache/arrow-go/v18/arrow"
)

// Column is one column of a table schema.
type Column struct {
	Name     string
	Type     Type
	Nullable bool
	Comment  string
	// Dictionary stores the column dictionary-encoded in the log (STRING
	// and BYTES types; a primary-key table's changelog): for columns with
	// few distinct values, whose offsets and repeated values compress
	// poorly.
	Dictionary bool
}

// Schema is one version of a table's columns. ID is the schema id that every
// batch written with it names; it starts at 1 and grows with each evolution
// (only nullable columns appended at the end).
type Schema struct {
	ID         int32
	Columns    []Column
	PrimaryKey []string
}

// ErrBadSchema wraps every schema validation failure.
var ErrBadSchema = errors.New("bad schema")

// MaxColumns bounds the width of a table.
const MaxColumns = 1024

var columnNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

// ValidColumnName reports whether name is a legal column name: a letter or
// '_' followed by letters, digits or '_', at most 128 characters. Names that
// start with '_' followed by "change_type", "log_offset" or "commit_timestamp"
// are reserved for $changelog.
func ValidColumnName(name string) bool {
	if !columnNameRE.MatchString(name) {
		return false
	}
	switch name {
	case "_change_type", "_log_offset", "_commit_timestamp":
		return false
	}
	return true
}

// Index returns the position of the named column, or -1.
func (s *Schema) Index(name string) int {
	for i := range s.Columns {
		if s.Columns[i].Name == name {
			return i
		}
	}
	return -1
}

// Validate checks column names, types, duplicates and primary-key rules.
func (s *Schema) Validate() error {
	if len(s.Columns) == 0 {
		return fmt.Errorf("%w: a table needs at least one column", ErrBadSchema)
	}
	if len(s.Columns) > MaxColumns {
		return fmt.Errorf("%w: %d columns, at most %d allowed", ErrBadSchema, len(s.Columns), MaxColumns)
	}
	seen := make(map[string]bool, len(s.Columns))
	for _, c := range s.Columns {
		if !ValidColumnName(c.Name) {
			return fmt.Errorf("%w: column name %q is not allowed (letters, digits and '_', starting with a letter or '_', at most 128; _change_type, _log_offset and _commit_timestamp are reserved)", ErrBadSchema, c.Name)
		}
		if seen[c.Name] {
			return fmt.Errorf("%w: column %q appears twice", ErrBadSchema, c.Name)
		}
		seen[c.Name] = true
		if c.Type.ArrowType() == nil {
			return fmt.Errorf("%w: column %q has no valid type", ErrBadSchema, c.Name)
		}
		if c.Dictionary && c.Type.Kind != KindString && c.Type.Kind != KindBytes {
			return fmt.Errorf("%w: column %q is %s; only STRING, VARCHAR, CHAR, BYTES, VARBINARY and BINARY columns can be dictionary-encoded", ErrBadSchema, c.Name, c.Type)
		}
	}
	pk := make(map[string]bool, len(s.PrimaryKey))
	for _, k := range s.PrimaryKey {
		i := s.Index(k)
		if i < 0 {
			return fmt.Errorf("%w: primary key column %q is not a column of the table", ErrBadSchema, k)
		}
		if pk[k] {
			return fmt.Errorf("%w: primary key names column %q twice", ErrBadSchema, k)
		}
		pk[k] = true
		if s.Columns[i].Nullable {
			return fmt.Errorf("%w: primary key column %q must be NOT NULL", ErrBadSchema, k)
		}
		switch s.Columns[i].Type.Kind {
		case KindFloat, KindDouble:
			return fmt.Errorf("%w: primary key column %q cannot be %s", ErrBadSchema, k, s.Columns[i].Type)
		}
	}
	return nil
}

// HasPrimaryKey reports whether this is a primary-key table's schema.
func (s *Schema) HasPrimaryKey() bool { return len(s.PrimaryKey) > 0 }

// ArrowSchema is the Arrow schema of the records of this schema (without
// the change-type column of primary-key tables); dictionary-encoded columns
// have their plain type and DictionaryMetadataKey in their metadata, and
// StoredSchema gives the stored form. It is built once per *Schema and
// shared: callers must not modify it.
func (s *Schema) ArrowSchema() *arrow.Schema { return s.state().arrow }

func (s *Schema) buildArrowSchema() *arrow.Schema {
	fields := make([]arrow.Field, len(s.Columns))
	for i, c := range s.Columns {
		fields[i] = arrow.Field{Name: c.Name, Type: c.Type.ArrowType(), Nullable: c.Nullable}
		if c.Dictionary {
			fields[i].Metadata = dictionaryFieldMetadata()
		}
	}
	return arrow.NewSchema(fields, nil)
}
