//go:build race

package saletest_test

// The race detector slows the pure-Go SQLite about twentyfold; under it the property test runs
// fewer random sales (plain `go test` runs rapid's default 100).
func init() { raceChecks = "30" }
