package engine

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

// reloadOnFailure asks a Cluster client to reload its slot map after a
// command failed on the network (a refused dial, a reset, a timeout): the
// slot's primary may have died and its replica been promoted. go-redis
// (v9.23) reloads the map by itself only on MOVED, ASK or READONLY and
// every ClusterStateReloadInterval (60 s by default), so without this a
// client whose primary died keeps dialing the dead node for up to a
// minute. The reload is asynchronous and deduplicated by go-redis (one at
// a time, 200 ms apart); other clients and error replies are left alone.
func (e *Engine) reloadOnFailure(ctx context.Context, err error) {
	cc, ok := e.client.(*redis.ClusterClient)
	if !ok || err == nil || Classify(err) != Transient {
		return
	}
	var re redis.Error
	if errors.As(err, &re) {
		return // the node answered
	}
	cc.ReloadState(ctx)
}
