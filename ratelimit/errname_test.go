package ratelimit_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/ratelimit"
)

// A limiter's Redis failure comes back naming the operation, wrapping what
// go-redis returned (here a refused dial: nothing was sent, so it is not
// ambiguous).
func TestRedisFailureNamesTheOperation(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: time.Second})
	defer client.Close()
	coord, err := coordination.New(client)
	if err != nil {
		t.Fatal(err)
	}
	lim, err := ratelimit.New(coord, "api", ratelimit.FixedWindow{Limit: 10, Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	_, err = lim.Allow(context.Background(), 1)
	var op *net.OpError
	if err == nil || !strings.HasPrefix(err.Error(), "coordination: rate limit acquire") || !errors.As(err, &op) {
		t.Fatalf("Allow with the server unreachable = %v, want an error naming the operation and wrapping the *net.OpError", err)
	}
	if coordination.IsAmbiguous(err) || !coordination.IsTransient(err) {
		t.Fatalf("refused dial: ambiguous %v, class %v; want not ambiguous, transient", coordination.IsAmbiguous(err), engine.Classify(err))
	}
}
