package sale

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"slices"
)

// A draw picks winners among entries so that anyone can check it was fair (the lottery mode, and
// the waiting room's shuffle of its pre-queue). Before entries open, the seller publishes the
// commitment: the SHA-256 of a secret random seed. After the draw, the seed is revealed; anyone
// can check it against the commitment, and recompute the order from the seed and the published
// entries alone:
//
//  1. Take the entries' distinct values, sorted bytewise (the order they arrived in plays no
//     part, so arriving first or fastest gains nothing).
//  2. Key a ChaCha8Rand generator (C2SP chacha8rand, Go's math/rand/v2.ChaCha8) with
//     SHA-256("seckill draw v1\x00" + seed).
//  3. Shuffle with Fisher–Yates from the last position down: for i from n-1 to 1, swap
//     position i with position j, where j is drawn uniformly from 0..i by taking 64-bit values
//     x from the generator until x < 2^64 - (2^64 mod (i+1)), and j = x mod (i+1).
//  4. The winners of k units are the first k of the shuffled list; the waiting room's order is
//     the whole list.
//
// Go's ChaCha8 makes the same stream from the same key on every platform and version (it is
// specified), and the rejection step keeps every index equally likely.

// SeedLen is the length of a draw's seed in bytes.
const SeedLen = 32

// Seed is a draw's secret, revealed after the draw.
type Seed [SeedLen]byte

// NewSeed returns a random seed from the operating system's generator.
func NewSeed() (Seed, error) {
	var s Seed
	if _, err := rand.Read(s[:]); err != nil {
		return Seed{}, fmt.Errorf("draw seed: %w", err)
	}
	return s, nil
}

// ParseSeed reads a seed written by Seed.String.
func ParseSeed(h string) (Seed, error) {
	var s Seed
	b, err := hex.DecodeString(h)
	if err != nil || len(b) != SeedLen {
		return Seed{}, fmt.Errorf("%w: a seed is %d bytes in hex", ErrInvalid, SeedLen)
	}
	copy(s[:], b)
	return s, nil
}

// String writes the seed in hex.
func (s Seed) String() string { return hex.EncodeToString(s[:]) }

// Commitment is what is published before the draw: the seed's SHA-256, in hex.
func (s Seed) Commitment() string {
	sum := sha256.Sum256(s[:])
	return hex.EncodeToString(sum[:])
}

// DrawOrder returns the entries' distinct values in the draw's order for seed (steps 1 to 3).
func DrawOrder(seed Seed, entries []string) []string {
	out := slices.Clone(entries)
	slices.Sort(out)
	out = slices.Compact(out)
	key := sha256.Sum256(append([]byte("seckill draw v1\x00"), seed[:]...))
	r := mrand.NewChaCha8(key)
	for i := len(out) - 1; i > 0; i-- {
		j := uniform(r, uint64(i+1))
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// Winners returns the first k of DrawOrder (all of them when there are no more than k).
func Winners(seed Seed, entries []string, k int) []string {
	o := DrawOrder(seed, entries)
	return o[:min(max(k, 0), len(o))]
}

// uniform draws from r a number from 0 to n-1, each equally likely (step 3's rejection).
func uniform(r *mrand.ChaCha8, n uint64) uint64 {
	limit := -(-n % n) // 2^64 - (2^64 mod n), in uint64 arithmetic; 0 when n divides 2^64
	for {
		x := r.Uint64()
		if limit == 0 || x < limit {
			return x % n
		}
	}
}
