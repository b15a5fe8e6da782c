package engine

import "context"

// WatchFor is watchFor on the whole key: a watch woken only by messages
// whose payload is only.
func WatchFor(ctx context.Context, e *Engine, full, only string) (*Watch, error) {
	return e.watchFor(ctx, full, "", only)
}
