package servers

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// SentinelOptions shape the sentinels started by StartSentinels.
type SentinelOptions struct {
	Master string // the name the sentinels watch the master under; default "seckill"
	Count  int    // sentinels; default 3
	Quorum int    // sentinels that must agree the master is down; default a majority
	// DownAfter is how long the master may not answer before a sentinel calls it down; default
	// 2 s. Below that, sentinels may call a master they have just promoted down before their new
	// links to it have answered a PING, and fail it over again (redis/redis#8607; at 1 s, the
	// nemesis's Sentinel seed 34: a second failover 1 s after the first, its replicas then
	// resyncing, every write refused for want of a replica). FailoverTimeout bounds a failover;
	// default 5 s.
	DownAfter, FailoverTimeout time.Duration
	// AuthUser and AuthPass are what the sentinels log in to the master and replicas with, when
	// those require it.
	AuthUser, AuthPass string
}

func (o SentinelOptions) withDefaults() SentinelOptions {
	if o.Master == "" {
		o.Master = "seckill"
	}
	if o.Count == 0 {
		o.Count = 3
	}
	if o.Quorum == 0 {
		o.Quorum = o.Count/2 + 1
	}
	if o.DownAfter == 0 {
		o.DownAfter = 2 * time.Second
	}
	if o.FailoverTimeout == 0 {
		o.FailoverTimeout = 5 * time.Second
	}
	return o
}

// Sentinels are redis-server processes in sentinel mode watching one master.
type Sentinels struct {
	nodes []*Redis
	name  string
}

// StartSentinels starts o.Count sentinels in subdirectories of dir, watching the master at addr
// ("127.0.0.1:PORT"), and waits until each knows the master's replicas and the other sentinels.
// On error the sentinels started are stopped; otherwise the caller must Stop them.
func StartSentinels(dir, addr string, o SentinelOptions, logf func(format string, args ...any)) (_ *Sentinels, err error) {
	o = o.withDefaults()
	host, port, ok := strings.Cut(addr, ":")
	if !ok {
		return nil, fmt.Errorf("sentinels: master %q is not host:port", addr)
	}
	s := &Sentinels{name: o.Master}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	conf := fmt.Sprintf("sentinel monitor %s %s %s %d\nsentinel down-after-milliseconds %s %d\nsentinel failover-timeout %s %d\n",
		o.Master, host, port, o.Quorum, o.Master, o.DownAfter.Milliseconds(), o.Master, o.FailoverTimeout.Milliseconds())
	if o.AuthUser != "" {
		conf += fmt.Sprintf("sentinel auth-user %s %s\n", o.Master, o.AuthUser)
	}
	if o.AuthPass != "" {
		conf += fmt.Sprintf("sentinel auth-pass %s %s\n", o.Master, o.AuthPass)
	}
	for i := range o.Count {
		d := filepath.Join(dir, "sentinel"+strconv.Itoa(i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
		file := filepath.Join(d, "sentinel.conf") // a sentinel rewrites its own file
		if err := os.WriteFile(file, []byte(conf), 0o644); err != nil {
			return nil, err
		}
		n, err := startRedis(d, []string{file, "--sentinel"}, "", nil, FreePort, logf)
		if err != nil {
			return nil, err
		}
		s.nodes = append(s.nodes, n)
	}
	return s, s.waitAcquainted(o.Count-1, 20*time.Second)
}

// waitAcquainted waits until every sentinel sees others other sentinels and the master's
// replicas: until then a majority cannot agree on a failover, nor promote anyone.
func (s *Sentinels) waitAcquainted(others int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for _, n := range s.nodes {
		for {
			out, err := RedisCommand(n.Addr(), "SENTINEL", "MASTER", s.name)
			seen, _ := strconv.Atoi(fieldOf(out, "num-other-sentinels"))
			replicas, _ := strconv.Atoi(fieldOf(out, "num-slaves"))
			master, merr := s.masterReplicas(out)
			if err == nil && merr == nil && seen >= others && replicas >= master {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("sentinel %s sees %d of %d other sentinels and %d of %d replicas after %v: %v %v\n%s",
					n.Addr(), seen, others, replicas, master, timeout, err, merr, TailFile(n.LogPath()))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

// masterReplicas asks the master a sentinel's SENTINEL MASTER reply names how many replicas
// it has.
func (s *Sentinels) masterReplicas(reply string) (int, error) {
	addr := fieldOf(reply, "ip") + ":" + fieldOf(reply, "port")
	info, err := RedisCommand(addr, "INFO", "replication")
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(l, "connected_slaves:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, fmt.Errorf("INFO replication of %s has no connected_slaves", addr)
}

// fieldOf reads the value after name in a reply of alternating names and values, one a line.
func fieldOf(reply, name string) string {
	f := strings.Split(reply, "\n")
	for i := 0; i+1 < len(f); i += 2 {
		if f[i] == name {
			return f[i+1]
		}
	}
	return ""
}

// Addrs returns the sentinels' addresses.
func (s *Sentinels) Addrs() []string {
	out := make([]string, len(s.nodes))
	for i, n := range s.nodes {
		out[i] = n.Addr()
	}
	return out
}

// LogPaths returns the paths of the sentinels' logs.
func (s *Sentinels) LogPaths() []string {
	out := make([]string, len(s.nodes))
	for i, n := range s.nodes {
		out[i] = n.LogPath()
	}
	return out
}

// Name is the name the sentinels watch the master under.
func (s *Sentinels) Name() string { return s.name }

// Master returns the address the sentinels name as master now, as the first that answers says.
func (s *Sentinels) Master() (string, error) {
	var lastErr error
	for _, n := range s.nodes {
		addr, err := s.masterAt(n)
		if err == nil || !errors.Is(err, errNoAnswer) {
			return addr, err
		}
		lastErr = err
	}
	return "", fmt.Errorf("no sentinel answered: %v", lastErr)
}

// errNoAnswer marks a sentinel that did not answer.
var errNoAnswer = errors.New("the sentinel did not answer")

// masterAt returns the address sentinel n names as master now.
func (s *Sentinels) masterAt(n *Redis) (string, error) {
	out, err := RedisCommand(n.Addr(), "SENTINEL", "GET-MASTER-ADDR-BY-NAME", s.name)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %v", errNoAnswer, n.Addr(), err)
	}
	host, port, ok := strings.Cut(out, "\n")
	if !ok {
		return "", fmt.Errorf("SENTINEL GET-MASTER-ADDR-BY-NAME answered %q", out)
	}
	return host + ":" + port, nil
}

// WaitMaster waits until the sentinels name a master other than not, and returns it.
func (s *Sentinels) WaitMaster(not string, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	for {
		m, err := s.Master()
		if err == nil && m != not {
			return m, nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = errors.New("still " + m)
			}
			return "", fmt.Errorf("no new master after %v: %v", timeout, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// WaitInSync waits until every sentinel names the same master and that master has replicas
// replicas in sync (see replicaInSync), and returns the master's address. Sentinel can promote a
// replica still in its first sync (a server killed in the last failover, restarted, and only made
// a replica 8 to 18 s later), which then has the data it had before, not the master's: a failure
// before that has a shape no setting protects.
func (s *Sentinels) WaitInSync(replicas int, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	for {
		master, why := s.inSync(replicas)
		if why == "" {
			return master, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("the sentinels' master is not in shape after %v: %s", timeout, why)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// inSync returns the master every sentinel names with replicas replicas in sync, or why not.
func (s *Sentinels) inSync(replicas int) (master, why string) {
	for _, n := range s.nodes {
		addr, err := s.masterAt(n)
		if err != nil {
			return "", err.Error()
		}
		if master != "" && addr != master {
			return "", fmt.Sprintf("the sentinels name %s and %s", master, addr)
		}
		master = addr
	}
	info, err := RedisCommand(master, "INFO", "replication")
	if err != nil {
		return "", fmt.Sprintf("master %s: %v", master, err)
	}
	if !strings.Contains(info, "role:master") {
		return "", fmt.Sprintf("master %s is not one: %q", master, info)
	}
	synced := 0
	for _, port := range onlinePorts(info) {
		rinfo, err := RedisCommand("127.0.0.1:"+strconv.Itoa(port), "INFO", "replication")
		if err == nil && replicaInSync(rinfo) {
			synced++
		}
	}
	if synced < replicas {
		return "", fmt.Sprintf("master %s: %d of %d replicas in sync: %q", master, synced, replicas, info)
	}
	return master, ""
}

// Stop stops every sentinel.
func (s *Sentinels) Stop() {
	for _, n := range s.nodes {
		n.Stop()
	}
}
