package testharness

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Fault is one fault a [ScriptFaults] hook injects into script calls.
type Fault struct {
	// SHA restricts the fault to one script (EVALSHA of it, or EVAL of its
	// source); empty matches every script call.
	SHA string
	// Command, when set, makes the fault match calls of that plain command
	// (its lower-case name, e.g. "set" for the lock's first acquisition
	// attempt) instead of script calls.
	Command string
	// Times is how many matching calls get the fault: 0 means 1, -1 means
	// every one until Clear.
	Times int
	// Before delays the command before it is sent; After delays the reply
	// on its way back to the caller.
	Before, After time.Duration
	// Forward runs the command on the server (the default when Err is nil).
	// With Err set and Forward false, the command never reaches the server.
	Forward bool
	// Err is the error the caller sees instead of the reply; nil delivers
	// the real reply.
	Err error
	// Started, when not nil, receives a value (without blocking) when a
	// matching call starts.
	Started chan struct{}
	// Done, when not nil, receives a value (without blocking) when a
	// matching call returns to its caller, after the fault's delays (not
	// when a NOSCRIPT reply hands the fault on to go-redis' EVAL re-send,
	// which then gets it).
	Done chan struct{}
}

// ScriptFaults is a go-redis hook (add it with AddHook) that injects
// [Fault]s into script calls (EVALSHA, EVAL), or into plain commands a
// fault names ([Fault.Command]). It works above go-redis'
// retries: the caller sees exactly what the fault says. It is safe for
// concurrent use.
type ScriptFaults struct {
	mu     sync.Mutex
	faults []*Fault
	hits   int
}

// Add queues f; faults match in the order added.
func (s *ScriptFaults) Add(f Fault) {
	if f.Times == 0 {
		f.Times = 1
	}
	s.mu.Lock()
	s.faults = append(s.faults, &f)
	s.mu.Unlock()
}

// Clear removes every queued fault.
func (s *ScriptFaults) Clear() {
	s.mu.Lock()
	s.faults = nil
	s.mu.Unlock()
}

// Hits returns how many calls got a fault so far.
func (s *ScriptFaults) Hits() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits
}

// LoadingError is the error reply a server gives while it loads its data
// set: go-redis retries it, and a caller sees it after a re-send.
var LoadingError error = redisError("LOADING Redis is loading the dataset in memory")

// ReadOnlyError is the error reply of a replica to a write.
var ReadOnlyError error = redisError("READONLY You can't write against a read only replica.")

type redisError string

// Error returns the error's message.
func (e redisError) Error() string { return string(e) }

// RedisError marks the error as a reply from the server (go-redis' redis.Error).
func (e redisError) RedisError() {}

var _ redis.Error = redisError("")

// RunsScript reports whether cmd runs the script whose SHA1 is sha (hex):
// EVALSHA or EVALSHA_RO naming it, or EVAL or EVAL_RO of its body (as
// go-redis sends it after NOSCRIPT).
func RunsScript(cmd redis.Cmder, sha string) bool {
	got, ok := scriptSHA(cmd)
	return ok && strings.EqualFold(got, sha)
}

func scriptSHA(cmd redis.Cmder) (string, bool) {
	args := cmd.Args()
	if len(args) < 2 {
		return "", false
	}
	switch strings.ToLower(cmd.Name()) {
	case "evalsha", "evalsha_ro":
		return fmt.Sprint(args[1]), true
	case "eval", "eval_ro":
		sum := sha1.Sum([]byte(fmt.Sprint(args[1])))
		return hex.EncodeToString(sum[:]), true
	}
	return "", false
}

func (s *ScriptFaults) match(cmd redis.Cmder) *Fault {
	sha, script := scriptSHA(cmd)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, f := range s.faults {
		switch {
		case f.Command != "":
			if cmd.Name() != f.Command {
				continue
			}
		case !script, f.SHA != "" && f.SHA != sha:
			continue
		}
		c := *f
		if f.Times > 0 {
			f.Times--
			if f.Times == 0 {
				s.faults = append(s.faults[:i], s.faults[i+1:]...)
			}
		}
		s.hits++
		return &c
	}
	return nil
}

func (s *ScriptFaults) requeue(f *Fault) {
	c := *f
	c.Times = 1
	s.mu.Lock()
	s.faults = append([]*Fault{&c}, s.faults...)
	s.hits--
	s.mu.Unlock()
}

// DialHook implements redis.Hook.
func (s *ScriptFaults) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (s *ScriptFaults) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		f := s.match(cmd)
		if f == nil {
			return next(ctx, cmd)
		}
		if f.Started != nil {
			select {
			case f.Started <- struct{}{}:
			default:
			}
		}
		time.Sleep(f.Before)
		var err error
		if f.Err == nil || f.Forward {
			err = next(ctx, cmd)
			if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
				// It did not run: go-redis sends EVAL next, which gets
				// the fault instead.
				s.requeue(f)
				return err
			}
		}
		time.Sleep(f.After)
		if f.Done != nil {
			defer func() {
				select {
				case f.Done <- struct{}{}:
				default:
				}
			}()
		}
		if f.Err != nil {
			cmd.SetErr(f.Err)
			return f.Err
		}
		return err
	}
}

// ProcessPipelineHook implements redis.Hook.
func (s *ScriptFaults) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

var _ redis.Hook = (*ScriptFaults)(nil)
