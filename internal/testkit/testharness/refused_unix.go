//go:build unix

package testharness

import (
	"fmt"
	"syscall"
	"testing"
)

// RefusedAddr returns "127.0.0.1:PORT", an address every dial to is
// refused until t ends: a TCP socket bound to the port but not listening
// holds it (the kernel answers connections with a reset), so no server
// that another test starts meanwhile can take the port. (A listener closed
// at once frees its port; a cluster node of a concurrent package got one,
// and a "closed port" answered CLUSTERDOWN.)
func RefusedAddr(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatalf("refused address: socket: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("refused address: bind: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatalf("refused address: getsockname: %v", err)
	}
	in, ok := sa.(*syscall.SockaddrInet4)
	if !ok {
		t.Fatalf("refused address: bound to %T", sa)
	}
	return fmt.Sprintf("127.0.0.1:%d", in.Port)
}
