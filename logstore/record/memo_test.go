package record

import (
	"errors"
	"testing"
)

func TestMemo(t *testing.T) {
	m := Memo[int, string]{Max: 3}
	builds := 0
	build := func(s string) func() string { return func() string { builds++; return s } }
	if got := m.Get(1, build("a")); got != "a" {
		t.Fatalf("Get(1) = %q", got)
	}
	if got := m.Get(1, build("other")); got != "a" || builds != 1 {
		t.Fatalf("cached Get(1) = %q after %d builds, want a after 1", got, builds)
	}

	// A failed build caches nothing; the next one does.
	boom := errors.New("boom")
	if _, err := m.GetErr(2, func() (string, error) { return "", boom }); err != boom {
		t.Fatalf("GetErr with a failing build: %v", err)
	}
	if got, err := m.GetErr(2, func() (string, error) { return "b", nil }); err != nil || got != "b" {
		t.Fatalf("GetErr(2) = %q, %v", got, err)
	}
	if got, _ := m.GetErr(2, func() (string, error) { return "", boom }); got != "b" {
		t.Fatalf("cached GetErr(2) = %q", got)
	}

	// Past Max entries it forgets everything and starts over.
	m.Get(3, build("c"))
	if m.Len() != 3 {
		t.Fatalf("Len = %d, want 3", m.Len())
	}
	m.Get(4, build("d"))
	if m.Len() != 1 {
		t.Fatalf("Len after passing Max = %d, want 1", m.Len())
	}
	builds = 0
	if got := m.Get(1, build("a2")); got != "a2" || builds != 1 {
		t.Fatalf("Get(1) after forgetting = %q after %d builds, want a rebuilt a2", got, builds)
	}
	if got := m.Get(4, build("x")); got != "d" {
		t.Fatalf("Get(4) = %q, want the entry kept after the reset", got)
	}
}
