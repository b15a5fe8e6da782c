package leader

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/lua"
)

// Info is who leads an election, as read from Redis at one instant. The
// zero Info (FencingToken 0) means nobody leads.
type Info struct {
	// Identity is the leader's identity as given to [New] (empty when the
	// lease was taken by a plain fencing lock without a holder).
	Identity string
	// FencingToken is the leader's term's fencing token (positive), or 0
	// when nobody leads.
	FencingToken int64
	// TTL is the lease's remaining time as the server reported it when it
	// was read: the leader renews it every half lease duration, and a
	// crashed leader is replaced soon after it runs out.
	TTL time.Duration
}

// Get reads who leads the election whose lease is at leaseKey (unprefixed),
// in one round trip (admitted as LEADER READ). It needs no [Elector]: any
// process with a coordinator can ask. The answer may be stale by the time
// it arrives; do not use it to decide that the caller itself leads.
//
// Errors: [ErrNoLeader] when the lease is free; coordination.ErrInvalidArgument
// for a nil coordinator or an empty key (nothing sent);
// coordination.ErrWrongType or coordination.ErrBadState when the key holds
// something else; the hook's error; Redis and network errors.
func Get(ctx context.Context, coord *coordination.Coordinator, leaseKey string) (Info, error) {
	if err := coord.Check(); err != nil {
		return Info{}, err
	}
	if err := coordination.CheckKey("leaseKey", leaseKey); err != nil {
		return Info{}, err
	}
	ctx, finish, err := coord.Admit(ctx, hooks.LeaderRead, primitive)
	if err != nil {
		return Info{}, err
	}
	info, err := read(ctx, coord, leaseKey)
	if errors.Is(err, ErrNoLeader) {
		finish(nil)
		return Info{}, err
	}
	return info, finish(err)
}

// read runs leader_read once and decodes {fence, holder, pttl} or false.
func read(ctx context.Context, coord *coordination.Coordinator, leaseKey string) (Info, error) {
	cmd, err := coord.Eval(ctx, lua.LeaderRead, []string{leaseKey})
	if errors.Is(err, redis.Nil) {
		return Info{}, ErrNoLeader
	}
	if err != nil {
		return Info{}, err
	}
	v, err := cmd.Slice()
	if err != nil {
		return Info{}, err
	}
	if len(v) != 3 {
		return Info{}, coordination.UnexpectedReply(lua.LeaderRead.Name(), v)
	}
	fs, ok1 := v[0].(string)
	holder, ok2 := v[1].(string)
	pttl, ok3 := v[2].(int64)
	fence, perr := strconv.ParseInt(fs, 10, 64)
	if !ok1 || !ok2 || !ok3 || perr != nil || fence <= 0 {
		return Info{}, coordination.UnexpectedReply(lua.LeaderRead.Name(), v)
	}
	ttl := time.Duration(0)
	if pttl > 0 {
		ttl = time.Duration(pttl) * time.Millisecond
	}
	return Info{Identity: holder, FencingToken: fence, TTL: ttl}, nil
}

// Observe follows the leadership of the election whose lease is at
// leaseKey: it calls fn with the current leader (the zero [Info] when
// there is none), then again each time the leader's identity or fencing
// token changes, until ctx ends. It blocks; fn runs on the caller's
// goroutine, one call at a time, and should return quickly.
//
// It wakes when a leader releases the lease (Pub/Sub notification), when
// the lease's TTL runs out, and otherwise every poll interval, which bounds
// how late a newly elected leader is reported; changes between two reads
// can be missed (observers see the latest state, not every term). Each
// read is admitted as LEADER READ. Transient errors are retried after the
// poll interval.
//
// It returns nil when ctx ends; an error wrapping
// coordination.ErrInvalidArgument (nothing sent) for a nil coordinator, an
// empty key or a poll interval below 1 ms; or a terminal error of a read
// (a permission error, coordination.ErrWrongType ...).
func Observe(ctx context.Context, coord *coordination.Coordinator, leaseKey string, poll time.Duration, fn func(Info)) error {
	if err := coord.Check(); err != nil {
		return err
	}
	if err := coordination.CheckKey("leaseKey", leaseKey); err != nil {
		return err
	}
	if _, err := coordination.Millis("poll", poll); err != nil {
		return err
	}
	if fn == nil {
		return coordination.InvalidArgument("fn", "must not be nil")
	}
	w, werr := coord.Watch(ctx, leaseKey)
	if werr != nil {
		if ctx.Err() != nil {
			return nil
		}
		coord.Logger().Warn("leader: release notifications unavailable; observing by polling",
			"error_class", coordination.Classify(werr).String())
	}
	defer w.Close()
	var notify <-chan struct{}
	if w != nil {
		notify = w.C()
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var (
		last  Info
		first = true
	)
	for {
		info, err := Get(ctx, coord, leaseKey)
		d := poll
		switch {
		case err == nil || errors.Is(err, ErrNoLeader):
			if first || info.Identity != last.Identity || info.FencingToken != last.FencingToken {
				first = false
				last = info
				fn(info)
			}
			if info.FencingToken > 0 && info.TTL > 0 {
				d = min(d, info.TTL+time.Millisecond)
			}
		case ctx.Err() != nil:
			return nil
		case coordination.Classify(err) == coordination.Terminal:
			return err
		default:
			coord.Logger().Warn("leader: observing failed; retrying", "error_class", coordination.Classify(err).String())
		}
		timer.Reset(d)
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		case <-notify:
			// Go 1.23+ timers: Reset after Stop never sees a stale tick.
			timer.Stop()
		}
	}
}
