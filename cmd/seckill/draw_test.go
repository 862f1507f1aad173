package main

import (
	"bytes"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"seckill/internal/sale"
)

// TestDrawRecomputesTheOrder: `seckill draw` prints, from a revealed seed and the entries, the
// order the draw gives (and the winners with --winners), after checking the seed against its
// commitment; a seed that does not match, or is malformed, is refused with nothing printed.
func TestDrawRecomputesTheOrder(t *testing.T) {
	seed, err := sale.NewSeed()
	if err != nil {
		t.Fatal(err)
	}
	entries := []string{"carol", "alice", "bob", "dave", "alice", "erin"}
	in := strings.Join(entries, "\n") + "\n\n"
	draw := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := drawCmd(args, strings.NewReader(in), &out, io.Discard)
		return out.String(), err
	}
	got, err := draw("--seed", seed.String(), "--commitment", strings.ToUpper(seed.Commitment()))
	if want := strings.Join(sale.DrawOrder(seed, entries), "\n") + "\n"; err != nil || got != want {
		t.Fatalf("draw = %q, %v; want %q", got, err, want)
	}
	got, err = draw("--seed", seed.String(), "--winners", "2")
	if want := strings.Join(sale.Winners(seed, entries, 2), "\n") + "\n"; err != nil || got != want {
		t.Fatalf("draw --winners 2 = %q, %v; want %q", got, err, want)
	}
	other, _ := sale.NewSeed()
	for _, bad := range [][]string{
		{"--seed", seed.String(), "--commitment", other.Commitment()},
		{"--seed", "abc"},
		{},
		{"--seed", seed.String(), "entries.txt"},
	} {
		if out, err := draw(bad...); err == nil || out != "" {
			t.Errorf("draw %q = %q, %v; want an error and nothing printed", bad, out, err)
		}
	}
}

// TestDrawChecksALotteryOfTheBinary: a lottery served by run() takes 40 entries before its start
// and draws 5 winners at it; `seckill draw`, given only what the server publishes (the seed
// revealed after the draw, the commitment published before, the entries), prints exactly the
// tickets the server answered WON.
func TestDrawChecksALotteryOfTheBinary(t *testing.T) {
	c := newClient(t, startRun(t, testEnv(sqliteDSN(t))))
	start := time.Now().Add(3 * time.Second).Truncate(time.Second)
	id := createLined(c, "lottery", 5, 1, start)
	entries, _ := joins(c, id, names("u", 40), 8, nil)
	if len(entries) != 40 || !time.Now().Before(start) {
		t.Fatalf("%d entries before %v", len(entries), start)
	}
	time.Sleep(time.Until(start))
	answered(c, id)
	line := c.Must("GET", "/api/activities/"+id, "", "", http.StatusOK)["line"].(map[string]any)
	resp, err := http.Get(c.Base + line["entries_url"].(string))
	if err != nil {
		t.Fatal(err)
	}
	published, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var out bytes.Buffer // seckill draw is drawCmd on the process's stdin
	if err := drawCmd([]string{"--seed", line["draw_seed"].(string), "--commitment", line["draw_commitment"].(string),
		"--winners", "5"}, bytes.NewReader(published), &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	drawn := strings.Fields(out.String())
	var won []string
	for u, tok := range entries {
		if v := c.Must("GET", "/api/queue/"+tok, c.Token(u), "", http.StatusOK); v["status"] == "WON" {
			won = append(won, tok)
		} else if v["status"] != "NOT_DRAWN" {
			t.Fatalf("entry of %s: %v", u, v)
		}
	}
	slices.Sort(won)
	slices.Sort(drawn)
	if len(drawn) != 5 || !slices.Equal(won, drawn) {
		t.Fatalf("seckill draw names %v; the server answered WON to %v", drawn, won)
	}
}
