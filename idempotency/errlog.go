package idempotency

import (
	"log/slog"
	"time"

	"github.com/coordkit/coordination/internal/engine"
)

// errorLog logs store failures once per distinct failure (message, stage
// and [engine.Describe] of the error) and then at most once a minute with
// the number of repeats in between ([engine.FailureLog]). Descriptions
// never carry keys, tokens, addresses or passwords.
type errorLog struct {
	logger *slog.Logger
	seen   engine.FailureLog
}

func (l *errorLog) warn(msg, stage string, err error) {
	desc := engine.Describe(err)
	log, repeats := l.seen.Note(msg+"\x00"+stage+"\x00"+desc, time.Now())
	if !log {
		return
	}
	args := []any{"stage", stage, "error", desc}
	if repeats > 0 {
		args = append(args, "repeats", repeats)
	}
	l.logger.Warn(msg, args...)
}
