# The whole test suite: installs what it needs, then vet and the race-enabled tests.
.PHONY: test check deps run bench wrk screenshots

test: deps
	go vet ./...
	rm -rf artifacts && mkdir artifacts
	# cmd/seckill's end-to-end suite is the longest package: 378 s alone, ~400 s beside the
	# others (545 s once in CI), seven of its tests run two at a time (they mostly wait); the
	# alarm against a hung test is set above it, the whole suite's 15-minute budget above that
	# (13m56s-14m47s on a clean clone, 2026-12-05, then 12m22s without checkptr for SQLite,
	# below). Four packages at once (-p 4) took 9m36s, but the extra load let a crowd outrun
	# Redis's restart in TestBenchFaults (the crowd does not wait out a BUSY): two packages at
	# once, go test's default here, until it does.
	# -race implies checkptr, which checks every unsafe pointer conversion; modernc.org's
	# SQLite, C translated to Go, makes them by the million, and checking them was 41 % of the
	# CPU of the embedded leaderboard test (16.7 s, 5.7 s without). Race detection stays on
	# everywhere, modernc.org included; only the checks of its pointer arithmetic are left out.
	go test -race -gcflags='modernc.org/...=-d=checkptr=0' -timeout 14m -artifacts -outputdir "$(CURDIR)/artifacts" ./...

# The fast tier: vet and the tests that need no server, no browser and no built binary
# (internal/testtier skips the others under -short). Every test runs, none from the cache.
check:
	go vet ./...
	go test -short -count=1 ./...

deps:
	@scripts/test-deps.sh

run:
	go run ./cmd/seckill

# Benchmarks of the gate and the grab handler (not part of test).
bench:
	go test -run '^$$' -bench . -benchmem ./internal/...

# The grab endpoint under wrk against a trivial net/http handler (needs wrk).
wrk:
	scripts/wrk/run.sh

# The README's screenshots, from the pages' browser tests (docs/img/).
screenshots: deps
	rm -rf artifacts && mkdir artifacts
	go test -run 'TestProductPageJourney|TestDashboardLive|TestProductPageOnAPhone|TestRedPacketPage|TestWaitingLineOnThePage' \
		-artifacts -outputdir "$(CURDIR)/artifacts" ./internal/web/
	for f in product-created dashboard product-phone redpacket line-position; do \
		cp "$$(find artifacts -name "$$f.png" | head -1)" docs/img/$$f.png; done
