// Package port finds free TCP ports for the servers the bench commands
// start.
package port

import "net"

// Free returns a TCP port on 127.0.0.1 that was free a moment ago (the
// kernel's choice for a listener, closed again).
func Free() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
