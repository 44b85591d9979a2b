package node

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/fluss-node/fluss-node/node/replica"
)

func TestDiskGuard(t *testing.T) {
	free, calls := int64(1000), 0
	var statErr error
	var logged strings.Builder
	g := newDiskGuard("/data", 500, slog.New(slog.NewTextHandler(&logged, nil)))
	g.avail = func(dir string) (int64, error) {
		if dir != "/data" {
			t.Fatalf("asked about %q", dir)
		}
		calls++
		return free, statErr
	}
	expire := func() { g.checked = g.checked.Add(-diskCheckEvery) } // as if the time had passed

	if err := g.check(); err != nil || calls != 1 {
		t.Fatalf("1000 bytes free, 500 kept: err %v after %d statfs", err, calls)
	}
	free = 499
	if err := g.check(); err != nil || calls != 1 {
		t.Fatalf("within %v of the last check: err %v after %d statfs, want the cached answer", diskCheckEvery, err, calls)
	}
	expire()
	err := g.check()
	if !errors.Is(err, replica.ErrNoSpace) || !strings.Contains(err.Error(), "499 bytes free") || !strings.Contains(err.Error(), "storage.min_free_bytes (500, 0.0 MiB)") {
		t.Fatalf("499 bytes free: err %v, want ErrNoSpace naming both sizes", err)
	}
	if err := g.check(); !errors.Is(err, replica.ErrNoSpace) || calls != 2 {
		t.Fatalf("cached refusal: err %v after %d statfs", err, calls)
	}
	free = 500
	expire()
	if err := g.check(); err != nil {
		t.Fatalf("500 bytes free again: err %v", err)
	}
	free, statErr = 0, errors.New("statfs failed")
	for range 3 {
		expire()
		if err := g.check(); err != nil {
			t.Fatalf("a filesystem that cannot be asked refuses nothing: err %v", err)
		}
	}
	for _, msg := range []string{"nearly full: refusing writes", "space again: accepting writes", "cannot read the free space"} {
		if n := strings.Count(logged.String(), msg); n != 1 {
			t.Errorf("%q logged %d times, want once:\n%s", msg, n, logged.String())
		}
	}

	off := newDiskGuard("/data", 0, slog.New(slog.DiscardHandler))
	off.avail = func(string) (int64, error) { t.Fatal("statfs with the check off"); return 0, nil }
	if err := off.check(); err != nil {
		t.Fatal(err)
	}
}

// The real statfs answers for a real directory.
func TestAvailableBytes(t *testing.T) {
	free, err := availableBytes(t.TempDir())
	if err != nil || free <= 0 {
		t.Fatalf("availableBytes: %d, %v", free, err)
	}
	if _, err := availableBytes(t.TempDir() + "/missing"); err == nil {
		t.Fatal("availableBytes of a missing directory: no error")
	}
}
