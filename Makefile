# ringcast — `make run` starts the server on :6001, `make test` runs the whole suite.
# Needs only Node 20 + npm (and apt for the backends later tests use).

NPM ?= npm
NODE ?= node

.PHONY: all install build deps bench-deps run lint test test-1 test-4 bench bench-smoke bench-shards bench-cluster bench-storm bench-hostile clean

all: build

node_modules/.install-stamp: package.json package-lock.json
	$(NPM) ci --no-audit --no-fund
	@touch $@

install: node_modules/.install-stamp

build: install
	npx tsc -p tsconfig.json

# Debian packages the tests drive for real (redis-server, redis-sentinel, nats-server);
# installs only what is missing.
deps:
	./scripts/deps.sh

# wrk, the C load generator of the benchmarks' API-only and many-channels scenarios
# (Debian package); installs it only when missing. Only the bench targets need it.
bench-deps:
	./scripts/bench-deps.sh

run: build
	$(NODE) bin/ringcast.js start --config config.yaml

# ESLint (eslint.config.mjs) and the import boundaries of src/ (.dependency-cruiser.cjs).
lint: build
	node_modules/.bin/eslint src test bench examples
	$(NODE) scripts/check-boundaries.mjs
	$(NODE) scripts/check-options.mjs

# Lint, import boundaries and option effects, the suite with one shard (with coverage and a
# floor of 95 % of the lines of src/) and with four (cross-shard paths), all from one pool
# of processes (scripts/run-suite.mjs); scripts/test-plan.mjs says which files run in which.
test: build deps
	./scripts/test.sh

# One suite run only, no lint (test-1 collects coverage and enforces the floor).
test-1: build deps
	TEST_CHECKS=0 TEST_WORKER_MODES=1 ./scripts/test.sh

test-4: build deps
	TEST_CHECKS=0 TEST_WORKER_MODES=4 ./scripts/test.sh

# The whole comparison: ceiling, soketi 1.6.1, ringcast workers 1 and 2; medians of 3 (< 20 min);
# the table on stdout and the chart in docs/benchmarks.svg.
bench: build bench-deps
	$(NODE) dist/bench/run.js --max-minutes 18 --chart docs/benchmarks.svg

bench-smoke: build bench-deps
	$(NODE) dist/bench/run.js --runs 1 --duration 2 --warmup 0.5 --conns 50

# CPU time per publish to a channel with one subscriber, workers 1, 2, 4, 8, 16 (~4 min).
bench-shards: build
	$(NODE) dist/bench/shards/cpu-per-publish.js

# Two nodes through Redis and through NATS against one node: latency at 1,000 publishes/s
# to 1,000 subscribers split over the nodes, and closed-loop fan-out; 5 rounds (~5 min).
bench-cluster: build deps bench-deps
	$(NODE) dist/bench/cluster/latency.js

# A node restarted under 19,000 clients that reconnect and resubscribe (some with rewind or
# recover): time until every client is back; ringcast workers 1 and 2 and the bare ceiling (~1 min).
bench-storm: build bench-deps
	$(NODE) dist/bench/storm/reconnect.js

# Hostile clients at full size, from outside: the first round (hostile.js) and the features
# (features.js: history, hooks, HTTP sessions, per-address cap, idempotency); ~3 min.
bench-hostile: build deps
	$(NODE) dist/bench/hostile/hostile.js && $(NODE) dist/bench/hostile/features.js

clean:
	rm -rf dist node_modules/.install-stamp
