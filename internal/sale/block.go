package sale

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// BlockKind is what a blacklist entry names.
type BlockKind string

// The kinds of blacklist entries.
const (
	BlockUser BlockKind = "user" // a user id
	BlockIP   BlockKind = "ip"   // a client address, or a network in CIDR form
)

// MaxUserIDLen bounds a user id (a JWT subject).
const MaxUserIDLen = 64

// MaxReasonLen bounds the reason of a blacklist entry.
const MaxReasonLen = 255

// Block is a blacklist entry: its user, or its clients, are refused with ErrBlocked until Until
// (zero: until the entry is removed).
type Block struct {
	Kind      BlockKind
	Value     string // a user id, or an address or network in canonical CIDR form
	Reason    string
	Until     time.Time
	CreatedAt time.Time
}

// ValidUserID reports whether s can be a user id: 1 to MaxUserIDLen printable ASCII characters.
func ValidUserID(s string) bool {
	if len(s) == 0 || len(s) > MaxUserIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// Normalize checks b and puts its value in canonical form: an address becomes a one-address
// network ("203.0.113.7/32"), a network its masked form. Errors: ErrInvalid.
func (b Block) Normalize() (Block, error) {
	bad := func(msg string) (Block, error) { return Block{}, fmt.Errorf("%w: %s", ErrInvalid, msg) }
	if len(b.Reason) > MaxReasonLen {
		return bad(fmt.Sprintf("the reason is longer than %d bytes", MaxReasonLen))
	}
	switch b.Kind {
	case BlockUser:
		if !ValidUserID(b.Value) {
			return Block{}, BadUserID("a blocked user id")
		}
	case BlockIP:
		p, err := ParseNetwork(b.Value)
		if err != nil {
			return Block{}, err
		}
		b.Value = p.String()
	default:
		return bad(`kind must be "user" or "ip"`)
	}
	return b, nil
}

// ParseNetwork reads an address or a CIDR network as a network. Errors: ErrInvalid.
func ParseNetwork(s string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-unmapBits(p.Addr())).Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("%w: %q is neither an IP address nor a CIDR network", ErrInvalid, s)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// unmapBits is how many bits a v4-mapped v6 prefix loses when unmapped.
func unmapBits(a netip.Addr) int {
	if a.Is4In6() {
		return 96
	}
	return 0
}

// Blocklist is the blacklist as a node holds it, read on every grab and reloaded from the
// database (Load) when it changes.
type Blocklist struct {
	mu    sync.RWMutex
	users map[string]time.Time // user -> until (zero: for ever)
	nets  []blockedNet
	// nUsers and nNets let the crowd's requests pass an empty list without a lock or a clock.
	nUsers, nNets atomic.Int64
}

type blockedNet struct {
	p     netip.Prefix
	until time.Time
}

// Load replaces the list with bs.
func (l *Blocklist) Load(bs []Block) {
	users := make(map[string]time.Time)
	var nets []blockedNet
	for _, b := range bs {
		switch b.Kind {
		case BlockUser:
			users[b.Value] = b.Until
		case BlockIP:
			if p, err := netip.ParsePrefix(b.Value); err == nil {
				nets = append(nets, blockedNet{p, b.Until})
			}
		}
	}
	l.mu.Lock()
	l.users, l.nets = users, nets
	l.nUsers.Store(int64(len(users)))
	l.nNets.Store(int64(len(nets)))
	l.mu.Unlock()
}

// UserBlocked reports whether user is blocked at now.
func (l *Blocklist) UserBlocked(user string, now time.Time) bool {
	l.mu.RLock()
	until, ok := l.users[user]
	l.mu.RUnlock()
	return ok && (until.IsZero() || now.Before(until))
}

// IPBlocked reports whether a client address is blocked at now.
func (l *Blocklist) IPBlocked(ip netip.Addr, now time.Time) bool {
	if !ip.IsValid() {
		return false
	}
	ip = ip.Unmap()
	l.mu.RLock()
	defer l.mu.RUnlock()
	for _, n := range l.nets {
		if n.p.Contains(ip) && (n.until.IsZero() || now.Before(n.until)) {
			return true
		}
	}
	return false
}

// Blocks is the blacklist: the operators' entries, kept by the database, and this node's copy of
// those in force, which the edge asks on every request. A feature of its own: it needs only its
// store and a clock.
type Blocks struct {
	store   BlockStore
	now     func() time.Time
	blocked Blocklist // this node's copy
}

// NewBlocks returns the blacklist kept by store, on the clock now (nil: time.Now). Its copy is
// empty until Reload.
func NewBlocks(store BlockStore, now func() time.Time) *Blocks {
	if now == nil {
		now = time.Now
	}
	return &Blocks{store: store, now: now}
}

// Add adds b to the blacklist (replacing the entry of the same kind and value) and reloads this
// node's copy; the other nodes reload theirs within their refresh period. Errors: ErrInvalid.
func (s *Blocks) Add(ctx context.Context, b Block) (Block, error) {
	b, err := b.Normalize()
	if err != nil {
		return Block{}, err
	}
	now := s.now()
	if !b.Until.IsZero() && !b.Until.After(now) {
		return Block{}, fmt.Errorf("%w: until must be in the future", ErrInvalid)
	}
	b.CreatedAt = now.UTC().Truncate(time.Millisecond)
	if !b.Until.IsZero() {
		b.Until = b.Until.UTC().Truncate(time.Millisecond)
	}
	if err := s.store.AddBlock(ctx, b); err != nil {
		return Block{}, err
	}
	return b, s.Reload(ctx)
}

// Remove removes the entry of kind and value (for an IP, the address or network as it was
// given or in canonical form). Errors: ErrInvalid, ErrNotFound.
func (s *Blocks) Remove(ctx context.Context, kind BlockKind, value string) error {
	b, err := Block{Kind: kind, Value: value}.Normalize()
	if err != nil {
		return err
	}
	if err := s.store.RemoveBlock(ctx, b.Kind, b.Value); err != nil {
		return err
	}
	return s.Reload(ctx)
}

// List lists the blacklist's entries in force.
func (s *Blocks) List(ctx context.Context) ([]Block, error) {
	return s.store.Blocks(ctx, s.now())
}

// Reload replaces this node's copy of the blacklist with the database's.
func (s *Blocks) Reload(ctx context.Context) error {
	bs, err := s.store.Blocks(ctx, s.now())
	if err != nil {
		return fmt.Errorf("reload the blacklist: %w", err)
	}
	s.blocked.Load(bs)
	return nil
}

// UserBlocked reports whether this node's copy of the blacklist refuses user now.
func (s *Blocks) UserBlocked(user string) bool {
	return s.blocked.nUsers.Load() > 0 && s.blocked.UserBlocked(user, s.now())
}

// IPBlocked reports whether this node's copy of the blacklist refuses a client address now.
func (s *Blocks) IPBlocked(ip netip.Addr) bool {
	return s.blocked.nNets.Load() > 0 && s.blocked.IPBlocked(ip, s.now())
}
