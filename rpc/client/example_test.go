package client_test

import (
	"context"
	"fmt"
	"log"
	"sync"

	"github.com/fluss-node/fluss-node/rpc/client"
)

// Many goroutines append single rows through one Appender: rows that meet
// in flight share a request, and each Append returns once its row is
// stored on a quorum of its bucket's replicas.
func ExampleClient_NewAppender() {
	ctx := context.Background()
	c := client.New("127.0.0.1:9123", client.WithRouting())
	a := c.NewAppender("shop.events", client.AppenderOptions{})
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Go(func() {
			for i := range 100 {
				if err := a.Append(ctx, fmt.Appendf(nil, `{"id":%d,"v":"event %d"}`, g*100+i, i)); err != nil {
					log.Printf("append: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// Many goroutines look up single keys through one Lookuper; lookups that
// meet in flight share a request.
func ExampleClient_NewLookuper() {
	ctx := context.Background()
	c := client.New("127.0.0.1:9123")
	l := c.NewLookuper("shop.users", client.LookuperOptions{Columns: []string{"id", "name"}})
	row, err := l.Lookup(ctx, []byte(`{"id":1}`))
	switch {
	case err != nil:
		log.Printf("lookup: %v", err)
	case row == nil:
		fmt.Println("no user 1")
	default:
		fmt.Printf("%s\n", row)
	}
}
