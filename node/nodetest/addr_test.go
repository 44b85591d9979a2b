package nodetest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
)

// TestFreeAddrAcrossProcesses: a port another test process handed out is
// not handed out here while that process runs, and is once it exited.
func TestFreeAddrAcrossProcesses(t *testing.T) {
	if os.Getenv("NODETEST_CHILD") == "1" {
		// The child: hand out an address, say which, and hold it until
		// the parent closes stdin.
		fmt.Println(FreeAddr())
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		return
	}
	if portLocks() == nil {
		t.Skip("the shared lock file cannot be opened here: FreeAddr keeps only its own process's ports apart")
	}
	child := exec.Command(os.Args[0], "-test.run", "^TestFreeAddrAcrossProcesses$")
	child.Env = append(os.Environ(), "NODETEST_CHILD=1")
	stdin, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("the child handed out no address: %v", err)
	}
	_, p, err := net.SplitHostPort(line[:len(line)-1])
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(p)
	if claim(port) {
		t.Fatalf("port %d, held by another process, claimed here too", port)
	}
	stdin.Close()
	if err := child.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	if !claim(port) {
		t.Fatalf("port %d not claimable after the process holding it exited", port)
	}
}
