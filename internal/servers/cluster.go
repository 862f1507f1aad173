package servers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	clusterCreateTimeout = 30 * time.Second // how long redis-cli --cluster create may take
	clusterOKTimeout     = 20 * time.Second // how long WaitOK waits for cluster_state:ok on every node
)

// ClusterOptions shape a Redis Cluster started by StartRedisCluster.
type ClusterOptions struct {
	Masters  int // masters holding the slots; default 3
	Replicas int // replicas of each master; default 0
	// NodeTimeout is cluster-node-timeout: how long a node may not answer before it is flagged as
	// failing and, if a master with a replica, replaced. Default 3 s (Redis's own 15 s would make
	// fault tests slow).
	NodeTimeout time.Duration
	// Persistence is each node's AOF setting (none by default).
	Persistence RedisOptions
	// Debug enables the DEBUG command (DEBUG SLEEP freezes a replica deterministically).
	Debug bool
	// TLS, when set, gives every node a TLS port beside its plain one (which the harness's probes
	// use), with TLS on the cluster bus and between replicas: TLSSeeds are the seeds a client
	// reaches the cluster by TLS on, and the cluster then names TLS ports to it.
	TLS *TLSFiles
	// Extra is more of each node's command line (ACL users: see Auth).
	Extra []string
	// Auth is the "user:password" redis-cli logs in with to create the cluster, when Extra
	// leaves the default user unable to.
	Auth string
}

// TLSFiles are the PEM files of a server's certificate, its key and the CA that signed it.
type TLSFiles struct{ Cert, Key, CA string }

// Args are the TLS part of redis-server's command line, for a TLS port.
func (f TLSFiles) Args(port int) []string {
	return []string{"--tls-port", strconv.Itoa(port), "--tls-cert-file", f.Cert, "--tls-key-file", f.Key,
		"--tls-ca-cert-file", f.CA, "--tls-auth-clients", "no"}
}

func (o ClusterOptions) withDefaults() ClusterOptions {
	if o.Masters == 0 {
		o.Masters = 3
	}
	if o.NodeTimeout == 0 {
		o.NodeTimeout = 3 * time.Second
	}
	return o
}

// RedisCluster is a Redis Cluster of redis-server processes started by StartRedisCluster. Node i
// of the first Masters nodes was created a master; the others its replicas, as redis-cli assigned
// them. Roles change with failovers: MasterOf asks the cluster.
type RedisCluster struct {
	nodes    []*Redis
	tlsAddrs []string // the nodes' TLS addresses, with ClusterOptions.TLS
	replicas int      // the replicas it was started with
}

// StartRedisCluster starts the nodes of o in subdirectories of dir on free ports of 127.0.0.1
// (whose cluster bus ports, port+10000, are free too), assigns the hash slots with redis-cli
// --cluster create, and waits until every node reports cluster_state:ok. logf, which may be nil,
// is told about retries. On error the nodes started are stopped; otherwise the caller must Stop
// the cluster.
func StartRedisCluster(dir string, o ClusterOptions, logf func(format string, args ...any)) (_ *RedisCluster, err error) {
	o = o.withDefaults()
	cli, err := FindBinary("redis-cli", "/usr/bin/redis-cli")
	if err != nil {
		return nil, err
	}
	persistence, err := o.Persistence.Args()
	if err != nil {
		return nil, err
	}
	extra := append([]string{
		"--cluster-enabled", "yes",
		"--cluster-config-file", "nodes.conf", // in --dir, each node's own
		"--cluster-node-timeout", strconv.FormatInt(o.NodeTimeout.Milliseconds(), 10),
	}, persistence...)
	if o.Debug {
		extra = append(extra, "--enable-debug-command", "yes")
	}
	if o.TLS != nil {
		extra = append(extra, "--tls-cluster", "yes", "--tls-replication", "yes")
	}
	extra = append(extra, o.Extra...)
	c := &RedisCluster{}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	for i := range o.Masters * (1 + o.Replicas) {
		nodeDir := filepath.Join(dir, "node"+strconv.Itoa(i))
		if err := os.MkdirAll(nodeDir, 0o755); err != nil {
			return nil, err
		}
		pick, args := FreeClusterPort, extra
		if o.TLS != nil { // the bus is the TLS port's: port+10000 of it must be free, not of the plain one
			tlsPort, err := FreeClusterPort()
			if err != nil {
				return nil, err
			}
			pick, args = FreePort, append(slices.Clip(extra), o.TLS.Args(tlsPort)...)
			c.tlsAddrs = append(c.tlsAddrs, "127.0.0.1:"+strconv.Itoa(tlsPort))
		}
		n, err := StartRedisArgs(nodeDir, args, pick, logf)
		if err != nil {
			return nil, err
		}
		c.nodes = append(c.nodes, n)
	}
	args := []string{"--cluster", "create"}
	if o.TLS != nil {
		args = append([]string{"--tls", "--cacert", o.TLS.CA}, args...)
		args = append(args, c.tlsAddrs...)
	} else {
		args = append(args, c.Addrs()...)
	}
	if err := c.cli(cli, o, append(args, "--cluster-replicas", strconv.Itoa(o.Replicas), "--cluster-yes")...); err != nil {
		return nil, err
	}
	if err := c.WaitOK(clusterOKTimeout); err != nil {
		return nil, err
	}
	c.replicas = o.Masters * o.Replicas
	if err := c.waitReplicas(c.replicas, clusterOKTimeout); err != nil {
		return nil, err
	}
	return c, nil
}

// WaitReplicas waits until as many replicas as the cluster started with are in sync with their
// masters again: after a failover, the killed master restarted as its successor's replica.
func (c *RedisCluster) WaitReplicas(timeout time.Duration) error {
	return c.waitReplicas(c.replicas, timeout)
}

// waitReplicas waits until n nodes are replicas whose link to their master is up and whom their
// master counts online: cluster_state is ok before the replicas have synced, and until then a
// master's death loses its slots (and WAIT counts no replica).
func (c *RedisCluster) waitReplicas(n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		up := 0
		for _, node := range c.nodes {
			info, err := RedisCommand(node.Addr(), "INFO", "replication")
			if err != nil || !replicaInSync(info) {
				continue
			}
			if i := c.masterIndexIn(info); i >= 0 && replicaOnline(c.nodes[i].Addr(), node.Port()) {
				up++
			}
		}
		if up >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d replicas in sync with their masters after %v", up, n, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// masterIndexIn returns the index of the master a replica's INFO replication names, or -1.
func (c *RedisCluster) masterIndexIn(info string) int {
	for _, l := range strings.Split(info, "\r\n") {
		if p, ok := strings.CutPrefix(l, "master_port:"); ok {
			for i, n := range c.nodes {
				if strconv.Itoa(n.Port()) == p {
					return i
				}
			}
		}
	}
	return -1
}

// Addrs returns the nodes' addresses, "127.0.0.1:PORT", in the order of Node.
func (c *RedisCluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// Seeds returns the nodes' addresses separated by commas, the form SECKILL_REDIS takes for a
// cluster.
func (c *RedisCluster) Seeds() string { return strings.Join(c.Addrs(), ",") }

// TLSSeeds returns the nodes' TLS addresses separated by commas (ClusterOptions.TLS).
func (c *RedisCluster) TLSSeeds() string { return strings.Join(c.tlsAddrs, ",") }

// Node returns node i, for fault tests.
func (c *RedisCluster) Node(i int) *Redis { return c.nodes[i] }

// Len returns the number of nodes.
func (c *RedisCluster) Len() int { return len(c.nodes) }

// Stop stops every node.
func (c *RedisCluster) Stop() {
	for _, n := range c.nodes {
		n.Stop()
	}
}

// WaitOK waits until every running node reports cluster_state:ok, as after a start or a node's
// Restart. It fails if no node is running or the cluster is not ok within timeout.
func (c *RedisCluster) WaitOK(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	running := 0
	for i, n := range c.nodes {
		if !n.Running() {
			continue
		}
		running++
		for {
			info, err := RedisCommand(n.Addr(), "CLUSTER", "INFO")
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				if err == nil {
					err = errors.New(strings.TrimSpace(info))
				}
				nodes, nerr := RedisCommand(n.Addr(), "CLUSTER", "NODES")
				if nerr != nil {
					nodes = nerr.Error()
				}
				return fmt.Errorf("cluster node %d (%s) is not ok after %v: %v\nCLUSTER NODES:\n%s\nserver log ends with:\n%s",
					i, n.Addr(), timeout, err, strings.TrimSpace(nodes), TailFile(n.LogPath()))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if running == 0 {
		return errors.New("no cluster node is running")
	}
	return nil
}

// Slot returns the hash slot of key, as the cluster computes it.
func (c *RedisCluster) Slot(key string) (int, error) {
	var lastErr error
	for _, n := range c.nodes {
		if !n.Running() {
			continue
		}
		s, err := RedisCommand(n.Addr(), "CLUSTER", "KEYSLOT", key)
		if err == nil {
			return strconv.Atoi(s)
		}
		lastErr = err
	}
	return 0, fmt.Errorf("CLUSTER KEYSLOT %s: %v", key, lastErr)
}

// ClusterNode is one line of CLUSTER NODES.
type ClusterNode struct {
	ID, Addr string
	Master   bool   // flagged master, and not failed
	Failed   bool   // flagged fail or fail?
	MasterID string // a replica's master
	Slots    [][2]int
}

// Owns reports whether the node serves slot.
func (n ClusterNode) Owns(slot int) bool {
	for _, r := range n.Slots {
		if slot >= r[0] && slot <= r[1] {
			return true
		}
	}
	return false
}

// Topology returns the cluster as the first running node that answers sees it.
func (c *RedisCluster) Topology() ([]ClusterNode, error) {
	var lastErr error
	for _, n := range c.nodes {
		if !n.Running() {
			continue
		}
		out, err := RedisCommand(n.Addr(), "CLUSTER", "NODES")
		if err != nil {
			lastErr = err
			continue
		}
		return parseClusterNodes(out)
	}
	return nil, fmt.Errorf("CLUSTER NODES: no running node answered: %v", lastErr)
}

// parseClusterNodes reads the text of CLUSTER NODES.
func parseClusterNodes(out string) ([]ClusterNode, error) {
	var nodes []ClusterNode
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			return nil, fmt.Errorf("CLUSTER NODES line %q: too few fields", line)
		}
		addr, _, _ := strings.Cut(f[1], "@")
		flags := "," + f[2] + ","
		n := ClusterNode{ID: f[0], Addr: addr, Failed: strings.Contains(flags, ",fail,") || strings.Contains(flags, ",fail?,")}
		n.Master = strings.Contains(flags, ",master,") && !n.Failed
		if f[3] != "-" {
			n.MasterID = f[3]
		}
		for _, s := range f[8:] {
			if strings.HasPrefix(s, "[") { // a slot being imported or migrated
				continue
			}
			lo, hi, isRange := strings.Cut(s, "-")
			a, err := strconv.Atoi(lo)
			if err != nil {
				return nil, fmt.Errorf("CLUSTER NODES slot %q: %v", s, err)
			}
			b := a
			if isRange {
				if b, err = strconv.Atoi(hi); err != nil {
					return nil, fmt.Errorf("CLUSTER NODES slot %q: %v", s, err)
				}
			}
			n.Slots = append(n.Slots, [2]int{a, b})
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// MasterOf returns the index (for Node) of the live master serving slot, as the cluster sees it
// now, or -1 if none does (after a master failed and before its replica took over).
func (c *RedisCluster) MasterOf(slot int) (int, error) {
	top, err := c.Topology()
	if err != nil {
		return -1, err
	}
	for _, n := range top {
		if n.Master && n.Owns(slot) {
			return c.index(n.Addr), nil
		}
	}
	return -1, nil
}

// ReplicaOf returns the index of a replica of node i whose link to it is up, or -1. It asks the
// replicas themselves: the cluster's gossip may not have told every node yet.
func (c *RedisCluster) ReplicaOf(i int) (int, error) {
	want := "master_port:" + strconv.Itoa(c.nodes[i].Port()) + "\r\n"
	for j, n := range c.nodes {
		if j == i || !n.Running() {
			continue
		}
		info, err := RedisCommand(n.Addr(), "INFO", "replication")
		if err != nil {
			return -1, err
		}
		if strings.Contains(info, "role:slave") && strings.Contains(info, want) && strings.Contains(info, "master_link_status:up") {
			return j, nil
		}
	}
	return -1, nil
}

// WaitMaster waits until a live master other than node not serves slot, and returns its index.
func (c *RedisCluster) WaitMaster(slot, not int, timeout time.Duration) (int, error) {
	deadline := time.Now().Add(timeout)
	for {
		i, err := c.MasterOf(slot)
		if err == nil && i >= 0 && i != not {
			return i, nil
		}
		if time.Now().After(deadline) {
			return -1, fmt.Errorf("no new master for slot %d after %v (last: node %d, %v)", slot, timeout, i, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (c *RedisCluster) index(addr string) int {
	for i, n := range c.nodes {
		if n.Addr() == addr {
			return i
		}
	}
	return -1
}

// FreeClusterPort returns a TCP port on 127.0.0.1 that was free a moment ago, as was port+10000,
// the cluster bus port of a node listening on it.
func FreeClusterPort() (int, error) {
	var held []net.Listener // ports rejected are held until the end, so they are not offered again
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("find free port: %w", err)
		}
		held = append(held, l)
		port := l.Addr().(*net.TCPAddr).Port
		if port+10000 > 65535 {
			continue
		}
		bus, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000))
		if err != nil {
			continue
		}
		held = append(held, bus)
		return port, nil
	}
	return 0, errors.New("find free port: no port found whose cluster bus port (port+10000) is free too")
}

// id returns the cluster's id of node i.
func (c *RedisCluster) id(i int) (string, error) {
	id, err := RedisCommand(c.nodes[i].Addr(), "CLUSTER", "MYID")
	if err != nil {
		return "", fmt.Errorf("CLUSTER MYID of node %d: %w", i, err)
	}
	return id, nil
}

// MigrateSlot moves slot from the master that serves it to node to, as redis-cli --cluster
// reshard does, by hand and key by key: IMPORTING on the target, MIGRATING on the source, each key
// MIGRATEd with pause between keys (so a test can watch the slot mid-move), then the slot
// assigned to the target on every master.
func (c *RedisCluster) MigrateSlot(slot, to int, pause time.Duration) error {
	from, err := c.MasterOf(slot)
	if err != nil || from < 0 {
		return fmt.Errorf("migrate slot %d: no master serves it: %v", slot, err)
	}
	if from == to {
		return nil
	}
	fromID, err := c.id(from)
	if err != nil {
		return err
	}
	toID, err := c.id(to)
	if err != nil {
		return err
	}
	s := strconv.Itoa(slot)
	src, dst := c.nodes[from].Addr(), c.nodes[to].Addr()
	if _, err := RedisCommand(dst, "CLUSTER", "SETSLOT", s, "IMPORTING", fromID); err != nil {
		return fmt.Errorf("migrate slot %d: IMPORTING on %s: %w", slot, dst, err)
	}
	if _, err := RedisCommand(src, "CLUSTER", "SETSLOT", s, "MIGRATING", toID); err != nil {
		return fmt.Errorf("migrate slot %d: MIGRATING on %s: %w", slot, src, err)
	}
	host, port, _ := strings.Cut(dst, ":")
	for {
		keys, err := RedisCommand(src, "CLUSTER", "GETKEYSINSLOT", s, "1")
		if err != nil {
			return fmt.Errorf("migrate slot %d: GETKEYSINSLOT: %w", slot, err)
		}
		if keys == "" {
			break
		}
		if _, err := redisCommandWithin(nil, src, 10*time.Second, "MIGRATE", host, port, "", "0", "5000", "KEYS", keys); err != nil {
			return fmt.Errorf("migrate slot %d: MIGRATE %s: %w", slot, keys, err)
		}
		time.Sleep(pause)
	}
	// The target first, then the source, then the other masters (replicas learn it from them):
	// the order redis-cli uses, so that no node ever sends a client to a master that does not
	// know it owns the slot.
	top, err := c.Topology()
	if err != nil {
		return fmt.Errorf("migrate slot %d: %w", slot, err)
	}
	order := []int{to, from}
	for _, n := range top {
		if i := c.index(n.Addr); n.Master && i != to && i != from && i >= 0 && c.nodes[i].Running() {
			order = append(order, i)
		}
	}
	for _, i := range order {
		_, err := RedisCommand(c.nodes[i].Addr(), "CLUSTER", "SETSLOT", s, "NODE", toID)
		if err != nil && i != to && strings.Contains(err.Error(), "SETSLOT only with masters") {
			// A failover made it a replica since the topology was read (the nemesis's Cluster
			// seed 50: a killed master, restarted as a replica, still listed as a master by the
			// node asked): it learns the slot's owner from its master, as every replica does.
			continue
		}
		if err != nil {
			return fmt.Errorf("migrate slot %d: SETSLOT NODE on %s: %w", slot, c.nodes[i].Addr(), err)
		}
	}
	return nil
}

// AddMaster starts a new node with the options the cluster was started with (persistence and
// TLS aside: it has none) and adds it to the cluster as a master without slots (redis-cli
// --cluster add-node), and returns its index.
func (c *RedisCluster) AddMaster(dir string, o ClusterOptions, logf func(format string, args ...any)) (int, error) {
	o = o.withDefaults()
	if o.TLS != nil {
		return -1, errors.New("add a master: not with TLS")
	}
	cli, err := FindBinary("redis-cli", "/usr/bin/redis-cli")
	if err != nil {
		return -1, err
	}
	nodeDir := filepath.Join(dir, "node"+strconv.Itoa(len(c.nodes)))
	if err := os.MkdirAll(nodeDir, 0o755); err != nil {
		return -1, err
	}
	n, err := StartRedisArgs(nodeDir, append([]string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", strconv.FormatInt(o.NodeTimeout.Milliseconds(), 10), "--appendonly", "no"}, o.Extra...),
		FreeClusterPort, logf)
	if err != nil {
		return -1, err
	}
	if err := c.cli(cli, o, "--cluster", "add-node", n.Addr(), c.nodes[0].Addr()); err != nil {
		n.Stop()
		return -1, err
	}
	c.nodes = append(c.nodes, n)
	if err := c.WaitOK(clusterOKTimeout); err != nil {
		return -1, err
	}
	return len(c.nodes) - 1, c.waitKnown(len(c.nodes)-1, clusterOKTimeout)
}

// waitKnown waits until every running node lists node i in its CLUSTER NODES, and i lists them:
// gossip takes a while, and a node asked to hand a slot to a node it does not know refuses.
func (c *RedisCluster) waitKnown(i int, timeout time.Duration) error {
	id, err := c.id(i)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for j, n := range c.nodes {
		if !n.Running() {
			continue
		}
		for {
			out, err := RedisCommand(n.Addr(), "CLUSTER", "NODES")
			if err == nil && strings.Contains(out, id) && strings.Count(out, "\n")+1 >= c.running() {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("node %d does not know node %d after %v: %v\n%s", j, i, timeout, err, out)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

func (c *RedisCluster) running() int {
	n := 0
	for _, node := range c.nodes {
		if node.Running() {
			n++
		}
	}
	return n
}

// Reshard moves slots slots from every other master to node to, with redis-cli --cluster reshard.
func (c *RedisCluster) Reshard(to, slots int, o ClusterOptions) error {
	cli, err := FindBinary("redis-cli", "/usr/bin/redis-cli")
	if err != nil {
		return err
	}
	toID, err := c.id(to)
	if err != nil {
		return err
	}
	return c.cli(cli, o, "--cluster", "reshard", c.nodes[0].Addr(), "--cluster-from", "all", "--cluster-to", toID,
		"--cluster-slots", strconv.Itoa(slots), "--cluster-yes")
}

// cli runs redis-cli with args (logged in as o.Auth).
func (c *RedisCluster) cli(bin string, o ClusterOptions, args ...string) error {
	if o.Auth != "" {
		user, pass, _ := strings.Cut(o.Auth, ":")
		args = append([]string{"--user", user, "--pass", pass, "--no-auth-warning"}, args...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*clusterCreateTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("redis-cli %s: %v\n%s", strings.Join(args, " "), err, Tail(out))
	}
	return nil
}
