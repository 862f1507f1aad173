package redisstore

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// TestArchitectureDocListsEveryKey holds the key schema of docs/architecture.md to the keys this
// package builds: every key it names (an activity's, a line's, the risk windows', the one-key
// ones) has its row, with its placeholders (ID, USER, ...) where the code puts a value, and every
// row is a key it builds.
func TestArchitectureDocListsEveryKey(t *testing.T) {
	built := map[string]bool{}
	fields := func(v any) {
		rv := reflect.ValueOf(v)
		for i := range rv.NumField() {
			built[rv.Field(i).String()] = true
		}
	}
	fields(keysOf("ID"))
	fields(rankKeysOf("ID"))
	fields(lineKeysOf("ID"))
	// The risk windows count an address's and a print's accounts at KEY:users (riskwindows.go);
	// a replay's key holds the hex of its digest.
	digest := strings.Replace(riskReplayKey("\x00"), "00", "DIGEST", 1)
	for _, k := range []string{DeadKey("ID"), passKey("ID", "TOKEN"), rateKey("ID", "USER"),
		riskIPKey("ADDR"), riskIPKey("ADDR") + ":users", riskPrintKey("PRINT"), riskPrintKey("PRINT") + ":users",
		digest, riskUserKey("ID"), challengeKey("ID"), leaseKey("NAME"), RestocksChannel} {
		built[k] = true
	}

	doc, err := os.ReadFile("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	_, schema, ok := strings.Cut(string(doc), "\n## The Redis key schema\n")
	if !ok {
		t.Fatal("docs/architecture.md has no Redis key schema")
	}
	schema, _, _ = strings.Cut(schema, "\n## ")
	rows := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([^`]+)` \\|").FindAllStringSubmatch(schema, -1) {
		rows[m[1]] = true
	}
	for k := range built {
		if !rows[k] {
			t.Errorf("docs/architecture.md's key schema has no row for %s", k)
		}
	}
	for k := range rows {
		if !built[k] {
			t.Errorf("docs/architecture.md's key schema lists %s, which the gate does not build", k)
		}
	}
	if len(built) < 30 {
		t.Fatalf("built %d keys: the schema was not all read", len(built))
	}
}
