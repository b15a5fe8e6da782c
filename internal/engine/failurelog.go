package engine

import (
	"sync"
	"time"
)

// failureLogEvery is how often one distinct failure is logged again while
// it repeats.
const failureLogEvery = time.Minute

// failureLogDistinct bounds the distinct failures a [FailureLog] remembers.
const failureLogDistinct = 64

// FailureLog decides when a failure an operator must see (a primitive
// that cannot reach Redis, NOAUTH) is logged: the first time each
// distinct failure happens, then at most once per [failureLogEvery] with
// the number of repeats in between, so an outage does not log once per
// request while a new kind of failure is always seen. Callers build the
// key from what tells failures apart (a stage or policy name and
// [Describe] of the error, never a key, token or address). The zero value
// is ready; it is safe for concurrent use.
type FailureLog struct {
	mu   sync.Mutex
	seen map[string]*failureEntry
}

type failureEntry struct {
	at      time.Time // when it was last logged
	repeats int       // occurrences not logged since
}

// Note records one occurrence of the failure key at now and reports
// whether to log it, and how many occurrences were not logged since it was
// last logged. Past [failureLogDistinct] remembered failures it forgets the
// stale ones first, and all of them when none is stale (some failures are
// then logged again early, never later).
func (l *FailureLog) Note(key string, now time.Time) (log bool, repeats int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.seen[key]
	if e != nil && now.Sub(e.at) < failureLogEvery {
		e.repeats++
		return false, 0
	}
	if e != nil {
		repeats = e.repeats
		e.at, e.repeats = now, 0
		return true, repeats
	}
	if l.seen == nil {
		l.seen = map[string]*failureEntry{}
	}
	if len(l.seen) >= failureLogDistinct {
		for k, old := range l.seen {
			if now.Sub(old.at) >= failureLogEvery {
				delete(l.seen, k)
			}
		}
		if len(l.seen) >= failureLogDistinct {
			clear(l.seen)
		}
	}
	l.seen[key] = &failureEntry{at: now}
	return true, 0
}

// remembered returns how many distinct failures are remembered.
func (l *FailureLog) remembered() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.seen)
}
