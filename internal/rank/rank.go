// Package rank holds the two in-memory structures behind a red packet's leaderboard: Exact, an
// order-statistic tree (a treap whose nodes know their subtree's size) that answers a member's
// rank and the top N in O(log n), and Approx, a histogram of amounts in a few kilobytes that
// estimates a rank within a stated bound however many members there are.
//
// Members are ordered by amount, largest first, and among equal amounts by the time they were
// grabbed, earliest first, then by id.
package rank

import (
	"math/rand/v2"
)

// Member is one entry: a grab of a red-packet share.
type Member struct {
	ID     string // the grab's token: unique
	User   string
	Amount int64 // cents
	At     int64 // when it was grabbed, Unix milliseconds (the database's precision)
}

// before reports whether a ranks above b.
func before(a, b *Member) bool {
	if a.Amount != b.Amount {
		return a.Amount > b.Amount
	}
	if a.At != b.At {
		return a.At < b.At
	}
	return a.ID < b.ID
}

type node struct {
	m           Member
	prio        uint32
	size        int
	left, right *node
}

func (n *node) sz() int {
	if n == nil {
		return 0
	}
	return n.size
}

func (n *node) fix() { n.size = 1 + n.left.sz() + n.right.sz() }

// Exact is an order-statistic treap of members. It is not safe for concurrent use.
type Exact struct {
	root  *node
	byID  map[string]*Member // the members, to find one by id
	bytes int64
}

// memberBytes estimates what a member costs: its node (80 B), its map entry (about 48 B) and
// its strings.
func memberBytes(m *Member) int64 { return 128 + int64(len(m.ID)+len(m.User)) }

// Bytes estimates the memory the tree holds.
func (t *Exact) Bytes() int64 { return t.bytes }

// NewExact returns an empty tree.
func NewExact() *Exact { return &Exact{byID: map[string]*Member{}} }

// Len is the number of members.
func (t *Exact) Len() int { return t.root.sz() }

// split cuts n into the members before m and the rest.
func split(n *node, m *Member) (l, r *node) {
	if n == nil {
		return nil, nil
	}
	if before(&n.m, m) {
		n.right, r = split(n.right, m)
		n.fix()
		return n, r
	}
	l, n.left = split(n.left, m)
	n.fix()
	return l, n
}

// merge joins l and r, every member of l before every member of r.
func merge(l, r *node) *node {
	switch {
	case l == nil:
		return r
	case r == nil:
		return l
	case l.prio > r.prio:
		l.right = merge(l.right, r)
		l.fix()
		return l
	default:
		r.left = merge(l, r.left)
		r.fix()
		return r
	}
}

// Add inserts m; adding an id already there does nothing.
func (t *Exact) Add(m Member) {
	if _, ok := t.byID[m.ID]; ok {
		return
	}
	n := &node{m: m, prio: rand.Uint32(), size: 1}
	l, r := split(t.root, &m)
	t.root = merge(merge(l, n), r)
	t.byID[m.ID] = &n.m
	t.bytes += memberBytes(&m)
}

// Remove takes the member id out; an unknown id does nothing.
func (t *Exact) Remove(id string) {
	m, ok := t.byID[id]
	if !ok {
		return
	}
	key := *m
	l, r := split(t.root, &key) // r starts with the member
	_, r = splitFirst(r)
	t.root = merge(l, r)
	delete(t.byID, id)
	t.bytes -= memberBytes(&key)
}

// splitFirst takes the first member off n.
func splitFirst(n *node) (first, rest *node) {
	if n.left == nil {
		rest = n.right
		n.right = nil
		n.fix()
		return n, rest
	}
	first, n.left = splitFirst(n.left)
	n.fix()
	return first, n
}

// Rank is the 1-based rank of member id, or 0 if it is not there.
func (t *Exact) Rank(id string) int {
	m, ok := t.byID[id]
	if !ok {
		return 0
	}
	rank := 1
	for n := t.root; n != nil; {
		switch {
		case n.m.ID == m.ID:
			return rank + n.left.sz()
		case before(m, &n.m):
			n = n.left
		default:
			rank += n.left.sz() + 1
			n = n.right
		}
	}
	return 0
}

// Top returns the first n members in order.
func (t *Exact) Top(n int) []Member {
	out := make([]Member, 0, min(n, t.Len()))
	var walk func(*node) bool
	walk = func(x *node) bool {
		if x == nil {
			return true
		}
		if !walk(x.left) {
			return false
		}
		if len(out) == n {
			return false
		}
		out = append(out, x.m)
		return walk(x.right)
	}
	walk(t.root)
	return out
}

// Buckets is the resolution of an approximate leaderboard, in process or on Redis: 8 KiB of
// counts.
const Buckets = 1024

// Approx is a histogram of amounts: buckets equal slices of [0, max] (the last one also counts
// anything above), and a count in each. It costs 8 bytes a bucket whatever the number of
// members, and estimates a rank within a bound: the members sharing the bucket of the amount
// asked about.
type Approx struct {
	max    int64
	counts []int64
}

// NewApprox returns an empty histogram of buckets slices of [0, max].
func NewApprox(max int64, buckets int) *Approx {
	return &Approx{max: max, counts: make([]int64, buckets)}
}

// BucketOf is Bucket for a histogram of buckets slices of [0, max], without one.
func BucketOf(amount, max int64, buckets int) int {
	if amount >= max || max <= 0 {
		return buckets - 1
	}
	return int(amount * int64(buckets) / max)
}

// Counts returns the buckets' counts.
func (h *Approx) Counts() []int64 { return append([]int64(nil), h.counts...) }

// Set sets bucket i's count, as read back from a copy of Counts.
func (h *Approx) Set(i int, n int64) {
	if i >= 0 && i < len(h.counts) {
		h.counts[i] = n
	}
}

func (h *Approx) bucket(amount int64) int { return BucketOf(amount, h.max, len(h.counts)) }

// Add counts a member of amount; Remove uncounts one.
func (h *Approx) Add(amount int64) { h.add(amount, 1) }

// Remove uncounts a member of amount.
func (h *Approx) Remove(amount int64) { h.add(amount, -1) }

func (h *Approx) add(amount, d int64) {
	h.counts[h.bucket(amount)] += d
}

// Bytes is the memory the histogram holds.
func (h *Approx) Bytes() int64 { return 8*int64(len(h.counts)) + 48 }

// Rank estimates the rank of a member of amount: every member in a higher bucket ranks above
// it, and of those in its own bucket, half are taken to. The true rank is within bound of the
// estimate.
func (h *Approx) Rank(amount int64) (estimate, bound int64) {
	above := int64(0)
	b := h.bucket(amount)
	for i := b + 1; i < len(h.counts); i++ {
		above += h.counts[i]
	}
	return within(above, h.counts[b])
}

// within is the middle of ranks above+1 .. above+same and how far the ends are from it.
func within(above, same int64) (estimate, bound int64) {
	spread := max(same-1, 0)
	return above + 1 + spread/2, spread - spread/2
}
