package engine

import (
	"errors"
	"strings"
	"testing"

	"github.com/coordkit/coordination/internal/sentinel"
)

type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

// A script marked with Requires reports each server's "unknown command
// called from script" reply as sentinel.ErrUnsupportedServer naming the feature;
// other replies, and scripts not marked, keep the usual mapping.
func TestRequiresMapsUnknownCommand(t *testing.T) {
	marked := &Script[bool]{name: "x", feature: HashFieldExpiration}
	plain := &Script[bool]{name: "y"}
	for _, msg := range []string{
		"ERR Unknown Redis command called from script script: ae58, on @user_script:1.",                      // Redis 7.0
		"ERR Unknown command called from script script: ae58, on @user_script:1.",                            // Valkey 8.1
		"ERR Error compiling script (new function): user_script:1: Unknown Redis command called from script", // miniredis
	} {
		err := marked.mapError(replyError(msg))
		if !errors.Is(err, sentinel.ErrUnsupportedServer) || Classify(err) != Terminal || IsAmbiguous(err) {
			t.Errorf("%q: %v, want a terminal sentinel.ErrUnsupportedServer", msg, err)
		}
		if !strings.Contains(err.Error(), "hash field expiration") || !strings.Contains(err.Error(), "Valkey 9.0") {
			t.Errorf("%q: %v does not name the feature and versions", msg, err)
		}
		if errors.Is(plain.mapError(replyError(msg)), sentinel.ErrUnsupportedServer) {
			t.Errorf("%q on a script without Requires became sentinel.ErrUnsupportedServer", msg)
		}
	}
	if err := marked.mapError(replyError("WRONGTYPE Operation against a key holding the wrong kind of value")); !errors.Is(err, sentinel.ErrBadState) || !strings.Contains(err.Error(), "wrong Redis type") {
		t.Errorf("WRONGTYPE on a marked script: %v", err)
	}
	if err := marked.mapError(replyError("NOPERM this user has no permissions to run the 'hpexpire' command")); errors.Is(err, sentinel.ErrUnsupportedServer) {
		t.Errorf("NOPERM became %v", err)
	}
}
