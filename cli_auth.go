package main

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fluss-node/fluss-node/rpc"
)

// authCmd helps an operator set up [auth] users: tokens are generated here
// and only their SHA-256 goes into the server's config.
func authCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "auth", Short: "Make tokens for the [auth] users of the server config"}
	var name string
	var grants []string
	tok := &cobra.Command{
		Use:   "token",
		Short: "Print a new random token and the [[auth.users]] entry that admits it",
		Example: `  fluss-node auth token --name ingest --grant write:shop --grant read:shop
  fluss-node auth token --name admin --grant all:*`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if name == "" {
				return errors.New("--name is required")
			}
			for _, g := range grants {
				if _, err := rpc.ParseGrant(g); err != nil {
					return err
				}
			}
			var b [32]byte
			_, _ = rand.Read(b[:])
			t := hex.EncodeToString(b[:])
			h := rpc.HashToken(t)
			quoted := make([]string, len(grants))
			for i, g := range grants {
				quoted[i] = strconv.Quote(g)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "# token (give it to the client; it is not stored anywhere):\n# %s\n[[auth.users]]\nname = %s\ntoken_sha256 = %q\ngrants = [%s]\n",
				t, strconv.Quote(name), hex.EncodeToString(h[:]), strings.Join(quoted, ", "))
			return nil
		},
	}
	tok.Flags().StringVar(&name, "name", "", "the user's name")
	tok.Flags().StringArrayVar(&grants, "grant", []string{"all:*"}, "OPERATION:RESOURCE, repeatable: operation describe|read|write|create|drop|alter|all, resource *|DB|DB.TABLE")
	hash := &cobra.Command{
		Use:   "hash",
		Short: "Print the token_sha256 of a token read from stdin",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			line, err := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
			t := strings.TrimSpace(line)
			if t == "" {
				return fmt.Errorf("no token on stdin (%v)", err)
			}
			h := rpc.HashToken(t)
			fmt.Fprintln(cmd.OutOrStdout(), hex.EncodeToString(h[:]))
			return nil
		},
	}
	cmd.AddCommand(tok, hash)
	return cmd
}
