package sale

import "fmt"

// Share is one pre-split part of a red packet.
type Share struct {
	Index       int64
	AmountCents int64
}

// SplitRedPacket splits total cents into count shares by the double-mean method: each share but
// the last is drawn uniformly from [1, 2 × the mean of what is left], capped so every later share
// can still get a cent, and the last share takes the remainder. Every share is at least 1 cent
// and the shares sum to total exactly. intn(n) must return a uniform value in [0, n).
func SplitRedPacket(total, count int64, intn func(n int64) int64) ([]int64, error) {
	if count <= 0 || count > MaxShares || total < count || total > MaxCents {
		return nil, fmt.Errorf("%w: cannot split %d cents into %d shares of at least 1 cent", ErrInvalid, total, count)
	}
	shares := make([]int64, count)
	left := total
	for i := int64(0); i < count-1; i++ {
		rest := count - i // shares still to draw, this one included
		hi := 2 * (left / rest)
		if most := left - (rest - 1); hi > most {
			hi = most
		}
		shares[i] = 1 + intn(hi)
		if shares[i] > hi { // never true for a uniform intn; guards a broken one
			shares[i] = hi
		}
		left -= shares[i]
	}
	shares[count-1] = left
	return shares, nil
}
