package coordination

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"
)

type replyErr string

func (e replyErr) Error() string { return string(e) }
func (replyErr) RedisError()     {}

// A command that could not get a connection was never sent: retrying loops
// must not start an owner-checked cleanup for it (one per attempt, for as
// long as the server is down).
func TestIsAmbiguous(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	cases := []struct {
		err  error
		want bool
	}{
		{nil, false},
		{dial, false},
		{fmt.Errorf("wrapped: %w", dial), false},
		{redis.ErrPoolTimeout, false},
		{replyErr("LOADING loading"), false},
		{replyErr("NOPERM no"), false},
		{io.EOF, true},
		{&net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, true},
		{context.Canceled, true},
		{context.DeadlineExceeded, true},
		{errors.New("something else"), false},
	}
	for _, c := range cases {
		if got := IsAmbiguous(c.err); got != c.want {
			t.Errorf("IsAmbiguous(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
