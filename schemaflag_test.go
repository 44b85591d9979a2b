package main

import (
	"strings"
	"testing"
)

func TestParseSchemaFlag(t *testing.T) {
	cols, err := parseSchemaFlag("id BIGINT NOT NULL, amount DECIMAL(10, 2), name string, ts TIMESTAMP(3) NOT NULL, kind STRING NOT NULL dictionary, cc STRING DICTIONARY")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cols {
		got = append(got, c.Name+" "+c.Type+map[bool]string{true: "", false: " NOT NULL"}[c.GetNullable()]+map[bool]string{true: " DICTIONARY"}[c.GetDictionary()])
	}
	want := "id BIGINT NOT NULL|amount DECIMAL(10,2)|name STRING|ts TIMESTAMP(3) NOT NULL|kind STRING NOT NULL DICTIONARY|cc STRING DICTIONARY"
	if strings.Join(got, "|") != want {
		t.Fatalf("got %q\nwant %q", strings.Join(got, "|"), want)
	}
	for _, bad := range []string{"", "id", "id BIGNT", "id DICTIONARY", "id INT DICTIONARY NOT NULL", "a INT,,b INT", "d DECIMAL(99,1)"} {
		if _, err := parseSchemaFlag(bad); err == nil {
			t.Errorf("parseSchemaFlag(%q) succeeded", bad)
		}
	}
}
