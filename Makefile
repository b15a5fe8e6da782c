# make test: provision the real servers (cached after the first run), then run
# every test with the race detector on every backend: miniredis, Redis 7.0,
# Redis 8.0, Valkey 8.1, Valkey 9.1 and a 6-node Redis Cluster.
SERVERS_CACHE ?= $(if $(REDIS_SERVERS_CACHE),$(REDIS_SERVERS_CACHE),$(if $(XDG_CACHE_HOME),$(XDG_CACHE_HOME),$(HOME)/.cache)/redis-servers)
GO ?= go
TESTFLAGS ?= -race -count=1 -timeout 20m

.PHONY: test servers test-fast vet bench demo failover-campaign fault-matrix-all

# examples/fenced-sql is its own module (the SQLite driver stays out of the
# library's go.mod): its tests run too.
test: servers
	. "$(SERVERS_CACHE)/env.sh" && $(GO) test $(TESTFLAGS) ./...
	cd examples/fenced-sql && $(GO) test $(TESTFLAGS) ./...

# Fetch or build Redis 7.0, Redis 8.0, Valkey 8.1 and Valkey 9.1 into the cache.
servers:
	REDIS_SERVERS_CACHE="$(SERVERS_CACHE)" sh scripts/get-servers.sh all >/dev/null

# miniredis only: no servers needed.
test-fast:
	COORD_BACKENDS=miniredis $(GO) test -count=1 ./...
	cd examples/fenced-sql && $(GO) test -count=1 ./...

vet:
	gofmt -l . | (! grep .)
	$(GO) vet ./...
	cd examples/fenced-sql && $(GO) vet ./...

demo:
	$(GO) run ./cmd/coordctl demo

# The lost-write measurement of internal/failover, 20 failovers per case
# (Sentinel with and without WithReplicaAcks, Cluster), with the figures.
failover-campaign: servers
	. "$(SERVERS_CACHE)/env.sh" && COORD_FAILOVER_RUNS=20 $(GO) test -count=1 -timeout 60m -run LostWrites -v ./internal/failover/

# The fault matrix on every server flavor (make test runs it on Redis 8.0).
fault-matrix-all: servers
	. "$(SERVERS_CACHE)/env.sh" && COORD_MATRIX_FLAVOR=all $(GO) test -race -count=1 ./internal/faultmatrix/
