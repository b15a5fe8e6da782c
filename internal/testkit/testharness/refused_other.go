//go:build !unix

package testharness

import (
	"net"
	"testing"
)

// RefusedAddr returns "127.0.0.1:PORT", an address whose dials are
// refused: here a port freed by closing a listener at once (on unix
// systems a bound socket holds the port until t ends).
func RefusedAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}
