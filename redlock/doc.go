// Package redlock is a quorum lock over N independent Redis deployments:
// the Redlock algorithm as the Redis documentation on distributed locks
// states it.
package redlock
