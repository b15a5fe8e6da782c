package testharness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// sentinelDeployments numbers the deployments of [StartSentinel], for
// their master names.
var sentinelDeployments atomic.Int64

// Sentinel is a Sentinel-managed deployment on 127.0.0.1: a primary, one
// replica of it and three Sentinels (redis-server --sentinel, quorum 2)
// monitoring it.
type Sentinel struct {
	Flavor string
	// Master is the name the Sentinels monitor the primary under (go-redis
	// FailoverOptions.MasterName), unique to the deployment (process id and
	// a counter): Sentinels only gossip with, and take configurations from,
	// Sentinels of the same master name, so a deployment never merges with
	// another one whose Sentinels reach its servers (a port reused after a
	// kill, another test binary's deployment).
	Master string
	// Primary and Replica are the data servers as started; after a failover
	// the replica is the primary (ask [Sentinel.MasterAddr]).
	Primary, Replica *Server
	// Sentinels are the three Sentinel processes.
	Sentinels []*Server
}

// SentinelConfig adjusts [StartSentinel]. The zero value gives a Sentinel
// that declares the primary down after 500 ms of silence.
type SentinelConfig struct {
	// DownAfter is Sentinel's down-after-milliseconds (default 500 ms):
	// how long the primary must be unreachable before a failover starts.
	DownAfter time.Duration
	// FailoverTimeout is Sentinel's failover-timeout (default 4 s). A
	// failover whose leader election split is retried after twice this.
	// A replica that replicates through ReplicaLink is repointed at the
	// primary itself by the Sentinels once this has passed since they
	// found it: keep the test shorter, or raise it.
	FailoverTimeout time.Duration
	// ReplicaLink, when set, returns the address the replica replicates
	// from instead of the primary's own (a fault proxy in front of the
	// primary, to delay or cut the replication stream).
	ReplicaLink func(primary *Server) string
}

// StartSentinel starts a primary and a replica of flavor, waits until the
// replica is in sync, then starts three Sentinels monitoring the primary
// (under a master name of its own, [Sentinel.Master], quorum 2) and waits
// until each of them knows the replica and the two other Sentinels, so
// that killing the primary fails it over (in about 1.3 s with the default
// DownAfter). SENTINEL DEBUG lowers the INFO, hello and ask periods to
// 200 ms; the ping period stays at 1 s, because during a failover Sentinel
// asks a replica for INFO every second and takes it as fit only if it
// answered within five ping periods. All of it is stopped when the test
// ends (or earlier by [Sentinel.Stop]); a missing binary skips the test
// (fails it when CI=true).
func StartSentinel(t testing.TB, flavor string, cfg SentinelConfig) *Sentinel {
	t.Helper()
	s, err := startSentinel(flavor, cfg)
	if err != nil {
		var m errMissing
		if errors.As(err, &m) {
			missing(t, flavor+" sentinel", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// startSentinel is [StartSentinel] returning an error instead of failing a
// test (an [errMissing] when the binary is missing), for the shared
// deployment of the sentinel backend too. Nothing of a deployment that
// failed to start is left running.
func startSentinel(flavor string, cfg SentinelConfig) (_ *Sentinel, err error) {
	if cfg.DownAfter == 0 {
		cfg.DownAfter = 500 * time.Millisecond
	}
	if cfg.FailoverTimeout == 0 {
		cfg.FailoverTimeout = 4 * time.Second
	}
	s := &Sentinel{Flavor: flavor, Master: fmt.Sprintf("coord-%d-%d", os.Getpid(), sentinelDeployments.Add(1))}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	if s.Primary, err = startServer(flavor, false); err != nil {
		return nil, err
	}
	if s.Replica, err = startServer(flavor, false); err != nil {
		return nil, err
	}
	link := s.Primary.Addr
	if cfg.ReplicaLink != nil {
		link = cfg.ReplicaLink(s.Primary)
	}
	host, port, _ := strings.Cut(link, ":")
	ctx := context.Background()
	rc := redis.NewClient(s.Replica.Options())
	defer rc.Close()
	if err := rc.Do(ctx, "REPLICAOF", host, port).Err(); err != nil {
		return nil, fmt.Errorf("testharness: REPLICAOF: %w", err)
	}
	if err := waitUntil(15*time.Second, "the replica to sync", func() string {
		info, err := rc.Info(ctx, "replication").Result()
		if err != nil || !strings.Contains(info, "master_link_status:up") {
			return fmt.Sprint(err)
		}
		return ""
	}); err != nil {
		return nil, err
	}
	for i := range 3 {
		sn, err := startProcess(flavor, false, func(port int, dir string) ([]string, error) {
			conf := filepath.Join(dir, "sentinel.conf")
			body := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nlogfile %s\n"+
				"sentinel monitor %s 127.0.0.1 %d 2\n"+
				"sentinel down-after-milliseconds %s %d\n"+
				"sentinel failover-timeout %s %d\n",
				port, dir, filepath.Join(dir, "server.log"),
				s.Master, s.Primary.Port,
				s.Master, cfg.DownAfter.Milliseconds(),
				s.Master, cfg.FailoverTimeout.Milliseconds())
			if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
				return nil, err
			}
			return []string{conf, "--sentinel"}, nil
		})
		if err != nil {
			return nil, fmt.Errorf("testharness: sentinel %d: %w", i, err)
		}
		s.Sentinels = append(s.Sentinels, sn)
		c := redis.NewClient(&redis.Options{Addr: sn.Addr})
		// Periods of 200 ms instead of 1-10 s: the Sentinels find the
		// replica and each other, and agree, within a fraction of a second.
		// A Sentinel whose timer was held up for more than 2 s (a starved
		// process on a loaded machine) enters TILT mode: it stops updating
		// s_down and acting for tilt-period, 30 s by default, longer than
		// the tests wait; 3 s here.
		err = c.Do(ctx, "SENTINEL", "DEBUG", "info-period", 200, "publish-period", 200, "ask-period", 200,
			"tilt-period", 3000).Err()
		_ = c.Close()
		if err != nil {
			return nil, fmt.Errorf("testharness: SENTINEL DEBUG: %w", err)
		}
	}
	if err := s.waitUntil(20*time.Second, "the Sentinels to know the replica and each other", func() string {
		for _, sn := range s.Sentinels {
			m, err := s.sentinelMaster(ctx, sn)
			if err != nil {
				return err.Error()
			}
			if m["num-slaves"] != "1" || m["num-other-sentinels"] != "2" || m["flags"] != "master" {
				return fmt.Sprintf("%s: %v", sn.Addr, m)
			}
		}
		return ""
	}); err != nil {
		return nil, err
	}
	// The primary must still be one, streaming to the replica: nothing else
	// (a Sentinel left over by another test on a reused port) repointed it,
	// and the replica has acknowledged its stream (WAIT 1). A replica whose
	// link is up may not have been sent anything yet: Redis 7.0 holds the
	// stream after a diskless sync until the replica's first REPLCONF ACK,
	// up to a second later, and a primary killed before that loses
	// everything written since the sync.
	popt := s.Primary.Options()
	popt.ReadTimeout = 15 * time.Second // WAIT blocks up to 10 s
	pc := redis.NewClient(popt)
	defer pc.Close()
	if n, err := InfoInt(ctx, pc, "replication", "connected_slaves"); err != nil || n != 1 {
		return nil, fmt.Errorf("testharness: the primary %s has %d connected replicas (%v), want 1\n%s", s.Primary.Addr, n, err, s.Diagnose(ctx))
	}
	if n, err := pc.Do(ctx, "WAIT", 1, 10000).Int(); err != nil || n != 1 {
		return nil, fmt.Errorf("testharness: WAIT 1 on the primary %s: %d replicas acknowledged (%v)\n%s", s.Primary.Addr, n, err, s.Diagnose(ctx))
	}
	return s, nil
}

// relax sets the Sentinels' periods back to their defaults (INFO every
// 10 s, hello every 2 s, ask every second, TILT for 30 s) once the
// deployment formed: the shared deployment of the sentinel backend is never
// failed over, and its Sentinels then add little traffic to the primary the
// tests share.
func (s *Sentinel) relax() {
	ctx := context.Background()
	for _, sn := range s.Sentinels {
		c := redis.NewClient(&redis.Options{Addr: sn.Addr})
		if err := c.Do(ctx, "SENTINEL", "DEBUG", "info-period", 10000, "publish-period", 2000, "ask-period", 1000,
			"tilt-period", 30000).Err(); err != nil {
			fmt.Fprintf(os.Stderr, "testharness: SENTINEL DEBUG on %s: %v\n", sn.Addr, err)
		}
		_ = c.Close()
	}
}

// Stop kills the Sentinels, then the primary and the replica, and removes
// their folders. StartSentinel registers it with t.Cleanup; a test that
// starts deployment after deployment calls it (or runs each in a subtest)
// as soon as one is done: a Sentinel left running keeps the primary it
// failed over from as a replica to repoint, and sends REPLICAOF to
// whatever server a later deployment starts on that port.
func (s *Sentinel) Stop() {
	for _, sn := range s.Sentinels {
		sn.close()
	}
	for _, d := range []*Server{s.Primary, s.Replica} {
		if d != nil {
			d.close()
		}
	}
}

// sentinelMaster returns SENTINEL MASTER's fields as one Sentinel reports
// them.
func (s *Sentinel) sentinelMaster(ctx context.Context, sn *Server) (map[string]string, error) {
	c := redis.NewClient(&redis.Options{Addr: sn.Addr, MaxRetries: -1, DialTimeout: 500 * time.Millisecond,
		ReadTimeout: time.Second, Protocol: 2})
	defer c.Close()
	v, err := c.Do(ctx, "SENTINEL", "MASTER", s.Master).Slice()
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for i := 0; i+1 < len(v); i += 2 {
		m[fmt.Sprint(v[i])] = fmt.Sprint(v[i+1])
	}
	return m, nil
}

// Addrs returns the Sentinels' addresses.
func (s *Sentinel) Addrs() []string {
	out := make([]string, len(s.Sentinels))
	for i, sn := range s.Sentinels {
		out[i] = sn.Addr
	}
	return out
}

// FailoverOptions returns options for redis.NewFailoverClient through the
// three Sentinels, with the timeouts of [Server.Options].
func (s *Sentinel) FailoverOptions() *redis.FailoverOptions {
	return &redis.FailoverOptions{MasterName: s.Master, SentinelAddrs: s.Addrs(),
		DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second}
}

// MasterAddr returns the primary's address as the first Sentinel that
// answers reports it.
func (s *Sentinel) MasterAddr(ctx context.Context) (string, error) {
	var last error
	for _, sn := range s.Sentinels {
		m, err := s.sentinelMaster(ctx, sn)
		if err != nil {
			last = err
			continue
		}
		return m["ip"] + ":" + m["port"], nil
	}
	return "", last
}

// WaitPromoted waits until every Sentinel reports addr as the primary and
// the server at addr has the role master, and returns how long it took.
// It fails t after limit, with what each Sentinel reports (see
// [Sentinel.Diagnose]).
func (s *Sentinel) WaitPromoted(t testing.TB, addr string, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	ctx := context.Background()
	s.waitFor(t, limit, "the failover to "+addr, func() string { return s.promoted(ctx, addr) })
	return time.Since(start)
}

// waitFor is [WaitFor] failing t with [Sentinel.Diagnose] as well.
func (s *Sentinel) waitFor(t testing.TB, limit time.Duration, what string, cond func() string) {
	t.Helper()
	if err := s.waitUntil(limit, what, cond); err != nil {
		t.Fatal(err)
	}
}

// waitUntil is [waitUntil] with [Sentinel.Diagnose] in its error.
func (s *Sentinel) waitUntil(limit time.Duration, what string, cond func() string) error {
	if err := waitUntil(limit, what, cond); err != nil {
		return fmt.Errorf("%w\n%s", err, s.Diagnose(context.Background()))
	}
	return nil
}

// promoted returns "" once every Sentinel reports addr as the primary and
// the server at addr has the role master, or why not.
func (s *Sentinel) promoted(ctx context.Context, addr string) string {
	for _, sn := range s.Sentinels {
		m, err := s.sentinelMaster(ctx, sn)
		if err != nil {
			return sn.Addr + ": " + err.Error()
		}
		if got := m["ip"] + ":" + m["port"]; got != addr {
			return sn.Addr + " reports " + got
		}
	}
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, Protocol: 2})
	defer c.Close()
	role, err := c.Do(ctx, "ROLE").Slice()
	if err != nil || len(role) == 0 || role[0] != "master" {
		return fmt.Sprintf("%s role %v %v", addr, role, err)
	}
	return ""
}

// Diagnose describes the deployment as each Sentinel sees it: the primary
// it reports, its flags, num-other-sentinels, failover-state and
// config-epoch, the Sentinels it knows (an address outside this deployment
// is marked foreign), and the last failover events of its log.
func (s *Sentinel) Diagnose(ctx context.Context) string {
	own := map[string]bool{s.Primary.Addr: true, s.Replica.Addr: true}
	for _, sn := range s.Sentinels {
		own[sn.Addr] = true
	}
	var b strings.Builder
	fmt.Fprintf(&b, "deployment: primary %s, replica %s, sentinels %v", s.Primary.Addr, s.Replica.Addr, s.Addrs())
	for _, sn := range s.Sentinels {
		fmt.Fprintf(&b, "\nsentinel %s:", sn.Addr)
		m, err := s.sentinelMaster(ctx, sn)
		if err != nil {
			fmt.Fprintf(&b, " SENTINEL MASTER: %v", err)
		} else {
			fmt.Fprintf(&b, " primary %s:%s flags=%s num-slaves=%s num-other-sentinels=%s failover-state=%s config-epoch=%s",
				m["ip"], m["port"], m["flags"], m["num-slaves"], m["num-other-sentinels"], m["failover-state"], m["config-epoch"])
		}
		if others, err := s.sentinelPeers(ctx, sn); err != nil {
			fmt.Fprintf(&b, "; SENTINEL SENTINELS: %v", err)
		} else {
			b.WriteString("; knows")
			for _, o := range others {
				fmt.Fprintf(&b, " %s", o)
				if !own[o] {
					b.WriteString(" (foreign)")
				}
			}
		}
		for _, line := range sn.logEvents(12) {
			fmt.Fprintf(&b, "\n    %s", line)
		}
	}
	return b.String()
}

// sentinelPeers returns the addresses of the other Sentinels one Sentinel
// knows (SENTINEL SENTINELS), with their flags when not just "sentinel".
func (s *Sentinel) sentinelPeers(ctx context.Context, sn *Server) ([]string, error) {
	c := redis.NewClient(&redis.Options{Addr: sn.Addr, MaxRetries: -1, DialTimeout: 500 * time.Millisecond,
		ReadTimeout: time.Second, Protocol: 2})
	defer c.Close()
	v, err := c.Do(ctx, "SENTINEL", "SENTINELS", s.Master).Slice()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range v {
		f, _ := e.([]any)
		m := map[string]string{}
		for i := 0; i+1 < len(f); i += 2 {
			m[fmt.Sprint(f[i])] = fmt.Sprint(f[i+1])
		}
		a := m["ip"] + ":" + m["port"]
		if m["flags"] != "sentinel" {
			a += "[" + m["flags"] + "]"
		}
		out = append(out, a)
	}
	return out, nil
}

// logEvents returns the last n failover events (lines with +/- events such
// as +sdown, +switch-master, +tilt, +convert-to-slave) of a Sentinel's log.
func (s *Server) logEvents(n int) []string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, " +") || strings.Contains(line, " -") {
			out = append(out, strings.TrimSpace(line))
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out
}

// WaitFor polls cond every 20 ms until it returns "" and fails t with
// what and cond's last answer (why it is not there yet) after limit.
func WaitFor(t testing.TB, limit time.Duration, what string, cond func() string) {
	t.Helper()
	if err := waitUntil(limit, what, cond); err != nil {
		t.Fatal(err)
	}
}

// waitUntil polls cond every 20 ms until it returns "", or returns an
// error with what and cond's last answer after limit.
func waitUntil(limit time.Duration, what string, cond func() string) error {
	deadline := time.Now().Add(limit)
	for {
		why := cond()
		if why == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waited %v for %s: %s", limit, what, why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// InfoInt returns the integer field of INFO section as c's server reports
// it (for instance "replication", "master_repl_offset"), or an error.
func InfoInt(ctx context.Context, c redis.UniversalClient, section, field string) (int64, error) {
	info, err := c.Info(ctx, section).Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("testharness: INFO %s has no %s", section, field)
}
