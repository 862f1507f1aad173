package sale

import (
	"errors"
	"net/netip"
	"testing"
	"time"
)

func TestBlockNormalize(t *testing.T) {
	tests := []struct {
		in   Block
		want string // the canonical value; "" for ErrInvalid
	}{
		{Block{Kind: BlockUser, Value: "bot-1"}, "bot-1"},
		{Block{Kind: BlockUser, Value: "has space"}, ""},
		{Block{Kind: BlockUser, Value: ""}, ""},
		{Block{Kind: BlockIP, Value: "203.0.113.7"}, "203.0.113.7/32"},
		{Block{Kind: BlockIP, Value: "203.0.113.77/24"}, "203.0.113.0/24"},
		{Block{Kind: BlockIP, Value: "::ffff:10.1.2.3"}, "10.1.2.3/32"},
		{Block{Kind: BlockIP, Value: "::ffff:10.1.2.3/120"}, "10.1.2.0/24"},
		{Block{Kind: BlockIP, Value: "2001:db8::1/32"}, "2001:db8::/32"},
		{Block{Kind: BlockIP, Value: "fe80::1%eth0"}, ""},
		{Block{Kind: BlockIP, Value: "10.0.0.0/33"}, ""},
		{Block{Kind: BlockIP, Value: "'; DROP TABLE blocks; --"}, ""},
		{Block{Kind: "email", Value: "a@b"}, ""},
		{Block{Kind: BlockUser, Value: "x", Reason: string(make([]byte, MaxReasonLen+1))}, ""},
	}
	for _, tc := range tests {
		got, err := tc.in.Normalize()
		switch {
		case tc.want == "" && !errors.Is(err, ErrInvalid):
			t.Errorf("%+v: %v, %v; want ErrInvalid", tc.in, got, err)
		case tc.want != "" && (err != nil || got.Value != tc.want):
			t.Errorf("%+v: %q, %v; want %q", tc.in, got.Value, err, tc.want)
		}
	}
}

func TestBlocklist(t *testing.T) {
	now := time.Unix(1_000_000_000, 0) // any time: the domain's own tests keep no clock of the suites'
	var l Blocklist
	l.Load([]Block{
		{Kind: BlockUser, Value: "bot"},
		{Kind: BlockUser, Value: "brief", Until: now.Add(time.Minute)},
		{Kind: BlockIP, Value: "203.0.113.0/24"},
		{Kind: BlockIP, Value: "2001:db8::/32", Until: now.Add(time.Minute)},
	})
	for _, tc := range []struct {
		user string
		at   time.Duration
		want bool
	}{{"bot", 0, true}, {"bot", time.Hour, true}, {"brief", 0, true}, {"brief", time.Minute, false}, {"honest", 0, false}} {
		if got := l.UserBlocked(tc.user, now.Add(tc.at)); got != tc.want {
			t.Errorf("user %s at +%s: %v, want %v", tc.user, tc.at, got, tc.want)
		}
	}
	for _, tc := range []struct {
		ip   string
		at   time.Duration
		want bool
	}{
		{"203.0.113.200", 0, true}, {"::ffff:203.0.113.1", 0, true}, {"203.0.114.1", 0, false},
		{"2001:db8::42", 0, true}, {"2001:db8::42", 2 * time.Minute, false}, {"2001:db9::1", 0, false},
	} {
		if got := l.IPBlocked(netip.MustParseAddr(tc.ip), now.Add(tc.at)); got != tc.want {
			t.Errorf("ip %s at +%s: %v, want %v", tc.ip, tc.at, got, tc.want)
		}
	}
	if l.IPBlocked(netip.Addr{}, now) {
		t.Error("an unknown address is blocked")
	}
	l.Load(nil)
	if l.UserBlocked("bot", now) {
		t.Error("a reload without the entry kept it")
	}
}
