# make test: provision the real servers (cached after the first run), then run
# every test with the race detector on every backend: miniredis, Redis 7.0,
# Redis 8.0, Valkey 8.1, Valkey 9.1, a 6-node Redis Cluster and a Sentinel
# deployment (Redis 8.0: a primary, a replica, three Sentinels, reached
# through go-redis' failover client).
SERVERS_CACHE ?= $(if $(REDIS_SERVERS_CACHE),$(REDIS_SERVERS_CACHE),$(if $(XDG_CACHE_HOME),$(XDG_CACHE_HOME),$(HOME)/.cache)/redis-servers)
GO ?= go
TESTFLAGS ?= -race -count=1 -timeout 20m

.PHONY: test servers test-fast test-long vet bench demo fuzz fuzz-short failover-campaign fault-matrix-all

# examples/fenced-sql is its own module (the SQLite driver stays out of the
# library's go.mod): its tests run too. So does tests/, the module of the
# tests that need porcupine or goleak (checked histories, linearizability,
# goleak-checked user tests), on every backend like the library's.
test: servers
	. "$(SERVERS_CACHE)/env.sh" && $(GO) test $(TESTFLAGS) ./...
	. "$(SERVERS_CACHE)/env.sh" && cd tests && $(GO) test $(TESTFLAGS) ./...
	cd examples/fenced-sql && $(GO) test $(TESTFLAGS) ./...

# A longer reliability campaign (make test runs a bounded one): HISTORIES
# checked histories with faults per primitive on each real backend, then a
# SOAK-long soak on every real backend in turn.
HISTORIES ?= 200
SOAK ?= 10m
test-long: servers
	. "$(SERVERS_CACHE)/env.sh" && cd tests && COORD_HISTORIES=$(HISTORIES) COORD_HISTORY_BUDGET=2h COORD_SOAK=$(SOAK) \
		$(GO) test -race -count=1 -timeout 6h -v -run 'TestHistories|TestSoak' ./history/

# Fetch or build Redis 7.0, Redis 8.0, Valkey 8.1 and Valkey 9.1 into the cache.
servers:
	REDIS_SERVERS_CACHE="$(SERVERS_CACHE)" sh scripts/get-servers.sh all >/dev/null

# Every fuzz target (func FuzzX in a _test.go file) for a bounded budget
# each: 10000 executions in CI (.ci/run, after make test; about 18 targets,
# a few seconds each on a quiet machine; at 30000 the step took more than
# 15 minutes on 2 loaded cores), FUZZTIME=10m or more for a campaign. CI's budget is a count, not
# a duration: with a duration, Go 1.26's fuzz coordinator can report a bare
# "context deadline exceeded" failure, with no failing input, when a worker
# on a loaded machine has not acknowledged the end of -fuzztime in time
# (go.dev/issue/75804, fixed in Go 1.27); a count has no deadline to race.
# A plain go test runs each target over its seeds and committed corpus
# (testdata/fuzz) only.
fuzz-short:
	FUZZTIME=10000x sh scripts/fuzz.sh

FUZZTIME ?= 5m
fuzz:
	FUZZTIME=$(FUZZTIME) sh scripts/fuzz.sh

# miniredis only: no servers needed.
test-fast:
	COORD_BACKENDS=miniredis $(GO) test -count=1 ./...
	cd tests && COORD_BACKENDS=miniredis $(GO) test -count=1 ./...
	cd examples/fenced-sql && $(GO) test -count=1 ./...

vet:
	gofmt -l . | (! grep .)
	$(GO) vet ./...
	cd tests && $(GO) vet ./...
	cd examples/fenced-sql && $(GO) vet ./...

demo:
	$(GO) run ./cmd/coordctl demo

# The lost-write measurement of internal/testkit/failover, 20 failovers per case
# (Sentinel with and without WithReplicaAcks, Cluster), with the figures.
failover-campaign: servers
	. "$(SERVERS_CACHE)/env.sh" && COORD_FAILOVER_RUNS=20 $(GO) test -count=1 -timeout 60m -run LostWrites -v ./internal/testkit/failover/

# The fault matrix on every server flavor (make test runs it on Redis 8.0).
fault-matrix-all: servers
	. "$(SERVERS_CACHE)/env.sh" && COORD_MATRIX_FLAVOR=all $(GO) test -race -count=1 ./internal/testkit/faultmatrix/
