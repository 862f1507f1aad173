# The whole test suite: installs what it needs, then vet and the race-enabled tests.
.PHONY: test deps run bench wrk

test: deps
	go vet ./...
	go test -race ./...

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
