package risk

import (
	"strings"
	"testing"
)

func TestReadLabelled(t *testing.T) {
	in := `{"features":{"b":2,"a":1},"bot":true}

{"features":{"a":3,"b":4,"c":5},"bot":false}
`
	names, rows, bots, err := ReadLabelled(strings.NewReader(in), []string{"b", "a"})
	if err != nil || strings.Join(names, ",") != "b,a" || len(rows) != 2 || rows[0][0] != 2 || rows[1][1] != 3 || !bots[0] || bots[1] {
		t.Fatalf("given names: %v %v %v %v", names, rows, bots, err)
	}
	if _, _, _, err := ReadLabelled(strings.NewReader(in), nil); err == nil || !strings.Contains(err.Error(), `line 1: no feature "c"`) {
		t.Fatalf("every name, one missing on line 1: %v", err)
	}
	for name, bad := range map[string]string{
		"not JSON":         "{",
		"no features":      `{"bot":true}`,
		"a word":           `{"features":{"a":"x"},"bot":true}`,
		"an unnamed value": `{"features":{"":1},"bot":true}`,
	} {
		if _, _, _, err := ReadLabelled(strings.NewReader(bad), nil); err == nil || !strings.Contains(err.Error(), "line 1") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
