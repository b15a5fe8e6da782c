package engine

import (
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"
)

// HashFieldExpiration is the server feature the hash-field lease scripts
// need, in the words of the error a server without it gets.
const HashFieldExpiration = "hash field expiration (HPEXPIRE, HPEXPIRETIME, HPTTL) needs Redis 7.4 or later, or Valkey 9.0 or later"

// Requires marks s as calling commands that only some servers have, and
// returns s (for use in a declaration). The script must call the newest
// such command before it writes anything: on a server without it, that
// call raises "unknown command" and Run returns an error matching
// sentinel.ErrUnsupportedServer (and sentinel.ErrBadState none) whose text names feature,
// with nothing written. Call it only at initialisation.
func (s *Script[R]) Requires(feature string) *Script[R] {
	s.feature = feature
	return s
}

// mapError is [mapErr], except that for a script marked with
// [Script.Requires] an "unknown command called from script" reply becomes
// an error matching sentinel.ErrUnsupportedServer.
func (s *Script[R]) mapError(err error) error {
	if s.feature != "" && unknownCommand(err) {
		return &scriptError{code: "COORD_UNSUPPORTED", detail: "unsupported server: " + s.feature}
	}
	return mapErr(err)
}

// unknownCommand reports whether err is a server's reply to a script that
// called a command the server does not have. Servers word it differently
// ("Unknown Redis command called from script" on Redis and miniredis,
// "Unknown command called from script" on Valkey), always with these
// words.
func unknownCommand(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	msg := strings.ToLower(re.Error())
	return strings.Contains(msg, "unknown") && strings.Contains(msg, "command called from script")
}
