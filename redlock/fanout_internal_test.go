package redlock

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	coordination "github.com/coordkit/coordination"
)

// endingCtx is a context whose deadline has just passed (Err reports it)
// while its Done channel is not closed yet: the instant in which a node's
// call, ended by that context, can come back before the fan-out sees Done.
type endingCtx struct {
	context.Context
	ended atomic.Bool
}

func (c *endingCtx) Err() error {
	if c.ended.Load() {
		return context.DeadlineExceeded
	}
	return nil
}

// A node call that the caller's context cut short is not that node's
// failure: the fan-out is canceled (the round is the context's, and a
// blocking Acquire's wait gives up naming the last round that ended), and
// node_failures does not count it. (It counted as failed with the
// context's error: the round read as a QuorumError whose nodes "failed"
// with "context deadline exceeded".)
func TestFanOutCutByTheCallersContext(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	var coords []*coordination.Coordinator
	for range 3 {
		m := miniredis.RunT(t)
		rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
		t.Cleanup(func() { rdb.Close() })
		coord, err := coordination.New(rdb, coordination.WithMeterProvider(mp))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = coord.Shutdown(context.Background()) })
		coords = append(coords, coord)
	}
	g, err := New(coords, WithNodeTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	ctx := &endingCtx{Context: context.Background()}
	f := g.fanOut(ctx, "acquire", allNodes(3), func(_ context.Context, n *node) result {
		if n.i == 0 {
			return result{state: yes}
		}
		// Nodes 1 and 2 answer nothing until the caller's deadline
		// passes; the client then returns the context's error.
		ctx.ended.Store(true)
		return result{state: failed, err: context.DeadlineExceeded}
	}, func(rs []result, pend int) bool {
		y := count(rs, yes)
		return y+pend < g.quorum || y >= g.quorum
	})
	if !f.canceled {
		t.Fatalf("fan-out not canceled: results %+v", f.rs)
	}
	for i, r := range f.rs {
		if r.state == failed && !r.cut {
			t.Fatalf("node %d failed on its own: %+v", i, r)
		}
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == "coordination.redlock.node_failures" {
				t.Fatalf("node_failures recorded: %+v", m.Data)
			}
		}
	}
}
