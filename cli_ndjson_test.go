package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// readAll runs readNDJSON over in with batches of two and returns the
// batches sent (each row as a string) and the error.
func readAll(in string) ([][]string, error) {
	var sent [][]string
	err := readNDJSON(strings.NewReader(in), 2, func(rows [][]byte) error {
		if len(rows) == 0 {
			return nil
		}
		b := make([]string, len(rows))
		for i, r := range rows {
			b[i] = string(r)
		}
		sent = append(sent, b)
		return nil
	})
	return sent, err
}

func TestReadNDJSON(t *testing.T) {
	for _, tt := range []struct {
		name, in string
		want     string // batches joined: rows by ",", batches by " | "
	}{
		{"batches of two", "{\"a\":1}\n{\"a\":2}\n{\"a\":3}\n", `{"a":1},{"a":2} | {"a":3}`},
		{"no final newline", "{\"a\":1}", `{"a":1}`},
		{"CRLF and blank lines", "{\"a\":1}\r\n\r\n  \n{\"a\":2}\r\n", `{"a":1},{"a":2}`},
		{"byte order mark", "\xef\xbb\xbf{\"a\":1}\n", `{"a":1}`},
		{"empty", "", ``},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sent, err := readAll(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, b := range sent {
				got = append(got, strings.Join(b, ","))
			}
			if g := strings.Join(got, " | "); g != tt.want {
				t.Errorf("sent %q, want %q", g, tt.want)
			}
		})
	}
}

func TestReadNDJSONErrorsNameTheLine(t *testing.T) {
	long := `{"s":"` + strings.Repeat("x", maxNDJSONLine) + `"}`
	for _, tt := range []struct {
		name, in, want string
		sent           int // rows sent before the error
	}{
		// The byte order mark is skipped before the first line only.
		{"byte order mark later", "{\"a\":1}\n\xef\xbb\xbf{\"a\":2}\n", "stdin line 2 is not valid JSON", 0},
		{"not JSON", "{\"a\":1}\n{\"a\":2}\n{\"a\":3}\n{\"a\":\n", "stdin line 4 is not valid JSON", 2},
		{"too long", "{\"a\":1}\n\n" + long + "\n", "stdin line 3 is longer than 16 MiB", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sent, err := readAll(tt.in)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
			n := 0
			for _, b := range sent {
				n += len(b)
			}
			if n != tt.sent {
				t.Errorf("%d rows sent before the error, want %d", n, tt.sent)
			}
		})
	}
}

func TestFlagOrStdinRefusesBadInput(t *testing.T) {
	cmd := &cobra.Command{}
	cmd.SetIn(strings.NewReader("{\"a\":1}\n"))
	sent := 0
	send := func(rows [][]byte) error { sent += len(rows); return nil }
	for _, tt := range []struct {
		name   string
		values []string
		batch  int
		want   string
	}{
		{"batch of zero", nil, 0, "--batch 0: want a positive number"},
		{"flag not JSON", []string{`{"a":1}`, `{"a":`}, 10, `--row "{\"a\":" is not valid JSON`},
	} {
		if err := flagOrStdin(cmd, "row", tt.values, tt.batch, send); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want one containing %q", tt.name, err, tt.want)
		}
	}
	if sent != 0 {
		t.Errorf("%d rows sent, want none", sent)
	}
}
