// Package failover holds the library's failover tests on real topologies
// (it has no code of its own): a Sentinel deployment (three Sentinels, a
// primary and a replica, go-redis' failover client) and a Redis Cluster
// (a primary killed, its replica promoted). They check that locks, fencing
// tokens, leader election, semaphores and rate limiters keep working after
// the failover with the effects the package docs name, measure the time to
// recover, and count the second holders that lost recent writes produce,
// with and without coordination.WithReplicaAcks (Redis WAIT).
//
// `go test ./internal/failover/` runs a bounded pass (one failover per
// case); `COORD_FAILOVER_RUNS=20 go test -run LostWrites -v
// ./internal/failover/` (make failover-campaign) repeats the lost-write
// measurement and prints the figures.
package failover
