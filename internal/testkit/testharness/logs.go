package testharness

import (
	"bytes"
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// LogBuffer is an io.Writer that keeps what is written, safe for
// concurrent use: the output of a slog handler that background goroutines
// log to, for a test to read.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// DropGoRedisLogs discards go-redis' own log lines (redis.SetLogger is
// process-wide) for tests that kill, restart or fail over servers on
// purpose, where go-redis logs every failed dial and every new Sentinel
// primary. Call it from TestMain before m.Run; not safe for concurrent use
// with go-redis clients.
func DropGoRedisLogs() {
	redis.SetLogger(quietLogger{})
}

type quietLogger struct{}

// Printf logs one formatted line (go-redis' internal logger interface).
func (quietLogger) Printf(context.Context, string, ...any) {}
