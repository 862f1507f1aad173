package risk

import (
	"bufio"
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// Networks is a list of networks a request's address is looked up in: the datacenter and proxy
// ranges of SECKILL_RISK_NETWORKS, one of the server's features for the model. It is read from a
// file of CIDRs (one a line, # comments, a bare address is its /32 or /128) and read again when
// the file changes; a file that no longer parses leaves the list as it was and says why.
type Networks struct {
	path string

	mu       sync.RWMutex
	prefixes []netip.Prefix // sorted, for a binary search by start address
	modTime  time.Time
	size     int64
	err      error // the last reload's, nil when it took
}

// MaxNetworks bounds the networks one file may list.
const MaxNetworks = 1_000_000

// LoadNetworks reads the file at path. Errors: the file is missing or does not parse (naming the
// line).
func LoadNetworks(path string) (*Networks, error) {
	n := &Networks{path: path}
	if err := n.load(); err != nil {
		return nil, err
	}
	return n, nil
}

// ParseNetworks reads a list of networks, one CIDR or address a line.
func ParseNetworks(data []byte) ([]netip.Prefix, error) {
	var out []netip.Prefix
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		text, _, _ := strings.Cut(sc.Text(), "#")
		text = strings.TrimSpace(text)
		if text == "" {
			continue
		}
		p, err := netip.ParsePrefix(text)
		if err != nil {
			a, aerr := netip.ParseAddr(text)
			if aerr != nil {
				return nil, fmt.Errorf("line %d: %q is neither a CIDR nor an address", line, text)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		if len(out) == MaxNetworks {
			return nil, fmt.Errorf("line %d: more than %d networks", line, MaxNetworks)
		}
		out = append(out, p.Masked())
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	// Sorted by start, the wider first, a network inside the one before it adds nothing: what
	// is kept is disjoint, so the one network that may hold an address is the last that starts
	// at or before it.
	slices.SortFunc(out, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	kept := out[:0]
	for _, p := range out {
		if len(kept) > 0 && kept[len(kept)-1].Contains(p.Addr()) {
			continue
		}
		kept = append(kept, p)
	}
	return kept, nil
}

func (n *Networks) load() error {
	fi, err := os.Stat(n.path)
	if err != nil {
		return fmt.Errorf("risk networks: %w", err)
	}
	data, err := os.ReadFile(n.path)
	if err != nil {
		return fmt.Errorf("risk networks: %w", err)
	}
	ps, err := ParseNetworks(data)
	if err != nil {
		return fmt.Errorf("risk networks %s: %w", n.path, err)
	}
	n.mu.Lock()
	n.prefixes, n.modTime, n.size, n.err = ps, fi.ModTime(), fi.Size(), nil
	n.mu.Unlock()
	return nil
}

// Reload reads the file again if it changed since it was last read (its time or size), and
// reports whether it did. A file that does not parse any more keeps the list it had: the error
// is returned, and kept for Err.
func (n *Networks) Reload() (bool, error) {
	fi, err := os.Stat(n.path)
	if err == nil {
		n.mu.RLock()
		same := fi.ModTime().Equal(n.modTime) && fi.Size() == n.size
		n.mu.RUnlock()
		if same {
			return false, nil
		}
		err = n.load()
	}
	if err != nil {
		n.mu.Lock()
		n.err = err
		n.mu.Unlock()
		return false, err
	}
	return true, nil
}

// Err is the last reload's error: the list in use is older than the file.
func (n *Networks) Err() error {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.err
}

// Len is how many networks the list has.
func (n *Networks) Len() int {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return len(n.prefixes)
}

// Contains reports whether addr is in one of the networks.
func (n *Networks) Contains(addr netip.Addr) bool {
	addr = addr.Unmap()
	n.mu.RLock()
	defer n.mu.RUnlock()
	// The last network that starts at or before addr: the networks are disjoint (ParseNetworks).
	i, _ := slices.BinarySearchFunc(n.prefixes, addr, func(p netip.Prefix, a netip.Addr) int {
		if c := p.Addr().Compare(a); c != 0 {
			return c
		}
		return -1 // a network starting at addr sorts before it
	})
	return i > 0 && n.prefixes[i-1].Contains(addr)
}
