package lease

import (
	"context"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/lua"
)

// Scripts are the owner-checked scripts of a lease on one key that follow
// the common shape: refresh (KEYS[1]; ARGV owner, ttl ms -> 1|0), verify
// (KEYS[1]; ARGV owner -> 1|0) and release (KEYS[1]; ARGV owner, channel
// -> 1|0|-1, publishing on the channel when it deleted).
type Scripts struct {
	Refresh, Verify, Release *lua.Script
}

// ScriptOps returns Ops that run s on key for the owner token.
func ScriptOps(coord *coordination.Coordinator, key, token string, s Scripts) Ops {
	keys, _ := coord.Keys(key) // one key: never a slot error
	return ScriptOpsKeys(coord, keys, coord.Channel(key), token, s)
}

// ScriptOpsKeys is ScriptOps with the key already prepared (prefixed, as
// the acquisition used it) and the release channel given.
func ScriptOpsKeys(coord *coordination.Coordinator, keys coordination.Keys, channel, token string, s Scripts) Ops {
	return Ops{
		Refresh: func(ctx context.Context, ttlMs int64) (bool, error) {
			return oneOrZero(coord.EvalKeys(ctx, s.Refresh, keys, token, ttlMs))
		},
		Verify: func(ctx context.Context) (bool, error) {
			return oneOrZero(coord.EvalKeys(ctx, s.Verify, keys, token))
		},
		Release: func(ctx context.Context) (coordination.ReleaseOutcome, error) {
			return outcomeOf(coord.EvalKeys(ctx, s.Release, keys, token, channel))
		},
	}
}

// ReleaseWith runs a release script of the common shape for token.
func ReleaseWith(ctx context.Context, coord *coordination.Coordinator, s *lua.Script, key, token string) (coordination.ReleaseOutcome, error) {
	return outcomeOf(coord.Eval(ctx, s, []string{key}, token, coord.Channel(key)))
}

func outcomeOf(cmd interface{ Int64() (int64, error) }, err error) (coordination.ReleaseOutcome, error) {
	if err != nil {
		return 0, err
	}
	n, err := cmd.Int64()
	if err != nil {
		return 0, err
	}
	return Outcome(n), nil
}

func oneOrZero(cmd interface{ Int64() (int64, error) }, err error) (bool, error) {
	if err != nil {
		return false, err
	}
	n, err := cmd.Int64()
	return n == 1, err
}
