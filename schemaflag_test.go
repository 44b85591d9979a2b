package main

import (
	"strings"
	"testing"
)

func TestParseSchemaFlag(t *testing.T) {
	cols, pk, err := parseSchemaFlag("id BIGINT NOT NULL, amount DECIMAL(10, 2), name string, ts TIMESTAMP(3) NOT NULL, kind STRING NOT NULL dictionary, cc STRING DICTIONARY")
	if err != nil || pk != nil {
		t.Fatal(pk, err)
	}
	var got []string
	for _, c := range cols {
		got = append(got, c.Name+" "+c.Type+map[bool]string{true: "", false: " NOT NULL"}[c.GetNullable()]+map[bool]string{true: " DICTIONARY"}[c.GetDictionary()])
	}
	want := "id BIGINT NOT NULL|amount DECIMAL(10,2)|name STRING|ts TIMESTAMP(3) NOT NULL|kind STRING NOT NULL DICTIONARY|cc STRING DICTIONARY"
	if strings.Join(got, "|") != want {
		t.Fatalf("got %q\nwant %q", strings.Join(got, "|"), want)
	}
	for _, bad := range []string{"", "id", "id BIGNT", "id DICTIONARY", "id INT DICTIONARY NOT NULL", "a INT,,b INT", "d DECIMAL(99,1)",
		"PRIMARY KEY (a)", "a INT, PRIMARY KEY a", "a INT, PRIMARY KEY (a", "a INT, PRIMARY KEY (a,)", "a INT, PRIMARY KEY (a) ENFORCED",
		"a INT, PRIMARY KEY (a), PRIMARY KEY (a)", "a INT, PRIMARY KEY ()"} {
		if _, _, err := parseSchemaFlag(bad); err == nil {
			t.Errorf("parseSchemaFlag(%q) succeeded", bad)
		}
	}
}

// TestParseSchemaFlagPrimaryKey: a PRIMARY KEY clause, as SQL (and Flink,
// with NOT ENFORCED) writes it, anywhere in the list; a column whose name
// starts with "primary" is still a column.
func TestParseSchemaFlagPrimaryKey(t *testing.T) {
	for _, tt := range []struct {
		in      string
		columns int
		pk      string
	}{
		{"user_id BIGINT NOT NULL, item STRING NOT NULL, PRIMARY KEY (user_id, item)", 2, "user_id|item"},
		{"primary key(id) not enforced, id BIGINT NOT NULL", 1, "id"},
		{"id INT NOT NULL,\tPrimary  Key  ( id )  NOT   ENFORCED", 1, "id"},
		{"primary_key INT, primary STRING", 2, ""},
	} {
		cols, pk, err := parseSchemaFlag(tt.in)
		if err != nil {
			t.Errorf("%q: %v", tt.in, err)
			continue
		}
		if got := strings.Join(pk, "|"); got != tt.pk || len(cols) != tt.columns {
			t.Errorf("%q: %d columns, primary key %q; want %d, %q", tt.in, len(cols), got, tt.columns, tt.pk)
		}
	}
}
