package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testkit/faultproxy"
	"github.com/coordkit/coordination/redlock"
)

func init() {
	addScenario(scenario{
		order: 60,
		name:  "redlock",
		title: "Redlock: three workers, a quorum lock over three embedded servers, one node cut off",
		run:   demoRedlock,
	})
}

// redlockNodeTimeout bounds each node's part of a group operation in the
// demo: short enough for a snappy demo (the no-quorum step waits for it),
// long enough that a node answering late on a loaded machine (the demo runs
// in CI under -race, next to other packages) is not counted as failed.
const redlockNodeTimeout = 400 * time.Millisecond

// demoRedlock runs three workers on a Redlock over three independent
// servers, each behind a fault proxy: a Redlock needs three deployments,
// so the scenario always runs on three embedded servers (whatever --redis
// says). The workers take turns with every node up, then with node C cut
// off (its proxy answers nothing: a partition), then a fourth group tries
// with B cut off too, then every node is healed. It checks that no two
// workers ever held the lock at once, that the lock is acquired with one
// node cut off (the quorum of the two others) without waiting more than
// the node timeout, that with two nodes cut off it is not acquired and
// the reachable node keeps no token, and that it works again after healing.
func demoRedlock(ctx context.Context, d *demo) error {
	const (
		key = "redlock:report"
		ttl = 2 * time.Second
	)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	names := []string{"A", "B", "C"}
	var (
		minis   []*miniredis.Miniredis
		proxies []*faultproxy.Proxy
	)
	defer func() {
		for _, p := range proxies {
			p.Close()
		}
		for _, m := range minis {
			m.Close()
		}
	}()
	for range names {
		m, err := miniredis.Run()
		if err != nil {
			return err
		}
		minis = append(minis, m)
		p, err := faultproxy.New(m.Addr())
		if err != nil {
			return err
		}
		proxies = append(proxies, p)
	}
	d.logf("setup", "three embedded servers A, B, C, each behind a fault proxy; node timeout %v", redlockNodeTimeout)
	var clients []*redis.Client
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	newGroup := func() (*redlock.Group, error) {
		var coords []*coordination.Coordinator
		for _, p := range proxies {
			rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), ReadTimeout: time.Second, ContextTimeoutEnabled: true})
			clients = append(clients, rdb)
			c, err := coordination.New(rdb, coordination.WithKeyPrefix(d.prefix))
			if err != nil {
				return nil, err
			}
			coords = append(coords, c)
		}
		return redlock.New(coords, redlock.WithNodeTimeout(redlockNodeTimeout))
	}
	holders := func() string {
		s := ""
		for i, m := range minis {
			v, err := m.Get(d.prefix + key)
			if err != nil {
				v = "-"
			} else {
				v = v[:8]
			}
			s += fmt.Sprintf(" %s:%s", names[i], v)
		}
		return s
	}

	var inside, maxInside, done atomic.Int64
	// round: each worker takes the lock once, in turn (they contend).
	round := func(label string, groups []*redlock.Group) error {
		var wg sync.WaitGroup
		errs := make(chan error, len(groups))
		for w, g := range groups {
			name := fmt.Sprintf("worker-%d", w+1)
			wg.Go(func() {
				actx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				l, err := g.Acquire(actx, key, ttl)
				if err != nil {
					errs <- fmt.Errorf("%s: %w", name, err)
					return
				}
				raiseTo(&maxInside, inside.Add(1))
				d.logf(name, "holds the lock (%s), validity %v, nodes%s", label, l.Validity().Round(time.Millisecond), holders())
				time.Sleep(20 * time.Millisecond)
				inside.Add(-1)
				if _, err := l.Release(ctx); err != nil {
					var qe *redlock.QuorumError
					if !errors.As(err, &qe) {
						errs <- fmt.Errorf("%s release: %w", name, err)
						return
					}
					// Nodes slower than the node timeout (a loaded machine):
					// the release is unconfirmed, not wrong; the token ends
					// at its TTL where it was not released, and the next
					// worker waits for it.
					d.logf(name, "release not confirmed by a quorum (%v): the lock ends at its TTL where it is left", err)
				}
				done.Add(1)
			})
		}
		wg.Wait()
		close(errs)
		return errors.Join(func() []error {
			var out []error
			for err := range errs {
				out = append(out, err)
			}
			return out
		}()...)
	}
	var groups []*redlock.Group
	for range 3 {
		g, err := newGroup()
		if err != nil {
			return err
		}
		groups = append(groups, g)
	}

	if err := round("all nodes up", groups); err != nil {
		return err
	}

	proxies[2].BlackHole(faultproxy.Both)
	d.logf("proxy", "node C cut off: its proxy holds every byte both ways")
	// Time one uncontended acquisition with C cut off, once the last
	// holder's release has reached A and B (Release returns when a quorum
	// confirmed; the last node follows).
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		_, errA := minis[0].Get(d.prefix + key)
		_, errB := minis[1].Get(d.prefix + key)
		if errA != nil && errB != nil {
			break
		}
	}
	start := time.Now()
	l, err := groups[0].TryAcquire(ctx, key, ttl)
	took := time.Since(start)
	acquiredCut := err == nil
	if err == nil {
		d.logf("worker-1", "acquired with C cut off in %v, nodes%s", took.Round(100*time.Microsecond), holders())
		if _, err := l.Release(ctx); err != nil {
			return err
		}
	} else {
		d.logf("worker-1", "not acquired with C cut off: %v", err)
	}
	if err := round("C cut off", groups); err != nil {
		return err
	}

	proxies[1].BlackHole(faultproxy.Both)
	d.logf("proxy", "node B cut off too: only A is reachable")
	g4, err := newGroup()
	if err != nil {
		return err
	}
	start = time.Now()
	_, err = g4.TryAcquire(ctx, key, ttl)
	tookNo := time.Since(start)
	var qe *redlock.QuorumError
	refused := errors.As(err, &qe)
	d.logf("worker-4", "tried with only A reachable: %v (after %v)", err, tookNo.Round(time.Millisecond))
	// The failed attempt releases what A granted, in the background.
	var left string
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		v, gerr := minis[0].Get(d.prefix + key)
		if gerr != nil || time.Now().After(deadline) {
			left = v
			break
		}
	}

	for _, p := range proxies {
		p.CutAll(faultproxy.RST) // what the proxies held is discarded
		p.Restore()
	}
	d.logf("proxy", "B and C healed")
	before := done.Load()
	if err := round("healed", groups); err != nil {
		return err
	}
	healed := done.Load() - before

	d.check("one holder at a time", maxInside.Load() == 1, "at most %d worker(s) held the lock at once", maxInside.Load())
	d.timed("acquired with one node cut off", acquiredCut, took < redlockNodeTimeout,
		"acquired on the quorum A+B in %v (node timeout %v: the cut-off node is not waited for)", took.Round(100*time.Microsecond), redlockNodeTimeout)
	d.timed("no quorum with two nodes cut off", refused && left == "", tookNo < redlockNodeTimeout+time.Second,
		"refused after %v (node timeout %v); token left on A: %q", tookNo.Round(time.Millisecond), redlockNodeTimeout, left)
	d.check("acquired again after healing", healed == int64(len(groups)), "%d of %d workers held it after B and C came back", healed, len(groups))
	return nil
}
