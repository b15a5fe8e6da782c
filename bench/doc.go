// Package bench holds side-by-side benchmarks of this library against peer
// libraries (bsm/redislock, go-redsync/redsync, go-redis/redis_rate,
// ulule/limiter) on one real server in one run, so that the comparison is a
// ratio measured under the same conditions. It is a separate module so
// that users of the library never download the peers.
//
// Run (servers from scripts/get-servers.sh; the harness starts one) with
// cmd/benchtab, which runs the benchmarks as README.md describes and prints
// the tables:
//
//	cd bench && go run ./cmd/benchtab
//
// BENCH_BACKEND selects the server flavor (default redis7).
package bench
