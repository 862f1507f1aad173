package redisstore

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"seckill/internal/redistest"
	"seckill/internal/sale"
	"seckill/internal/servers"
)

// aclArgs gives a server a user "app" that may do everything and leaves the default user only
// the harness's probes: a client that does not log in as app can run no script.
var aclArgs = []string{
	"--user", "default", "on", "nopass", "-@all", "+ping", "+info", "+cluster|info", "+cluster|nodes", "+cluster|keyslot",
	"--user", "app", "on", ">app-secret", "~*", "&*", "+@all",
}

// sells loads an activity through rdb and grabs a unit of it: what a node does first on a Redis.
func sells(t *testing.T, rdb redis.UniversalClient, id string) {
	t.Helper()
	ctx := context.Background()
	a := item(id, 3, 1)
	g := New(rdb)
	if err := g.Load(ctx, a, sale.GateState{}); err != nil {
		t.Fatalf("load %s: %v", id, err)
	}
	if _, err := g.Grab(ctx, a, sale.GrabRequest{ActivityID: a.ID, UserID: "u1", Now: a.StartAt}); err != nil {
		t.Fatalf("grab %s: %v", id, err)
	}
	if n, err := g.Remaining(ctx, a); err != nil || n != 2 {
		t.Fatalf("remaining of %s: %d, %v; want 2", id, n, err)
	}
}

// TestDialTLSAndACL: a server behind TLS and an ACL user is reached with rediss://user:pass@
// and the CA given; without the CA, with a wrong password or in plain TCP it is not, and without
// the user nothing can be done there.
func TestDialTLSAndACL(t *testing.T) {
	ctx := context.Background()
	files := redistest.TLSFiles(t)
	_, addr := redistest.StartTLS(t, files, aclArgs...)
	sells(t, dial(t, "rediss://app:app-secret@"+addr+"/0?ca="+files.CA), "tls")
	for name, spec := range map[string]string{
		"no CA":          "rediss://app:app-secret@" + addr + "/0",
		"wrong password": "rediss://app:wrong@" + addr + "/0?ca=" + files.CA,
		"plain TCP":      "redis://app:app-secret@" + addr + "/0",
	} {
		if rdb, err := Dial(ctx, spec); err == nil {
			rdb.Close()
			t.Errorf("%s: Dial(%s) succeeded", name, redactSpec(spec))
		}
	}
	anon := dial(t, "rediss://"+addr+"/0?ca="+files.CA)
	if err := anon.Get(ctx, "{act:tls}:stock").Err(); !redis.IsPermissionError(err) {
		t.Fatalf("a read as the default user: %v, want NOPERM", err)
	}
}

// TestDialClusterWithTLSAndACL: a Redis Cluster whose nodes speak TLS (clients, bus and
// replication) and know only an ACL user is reached with rediss://user:pass@seed,seed and sells
// on every master.
func TestDialClusterWithTLSAndACL(t *testing.T) {
	files := redistest.TLSFiles(t)
	c := redistest.StartClusterWith(t, servers.ClusterOptions{TLS: &files, Extra: aclArgs, Auth: "app:app-secret"})
	rdb := dial(t, "rediss://app:app-secret@"+c.TLSSeeds()+"?ca="+files.CA)
	for _, id := range []string{"a", "b", "c", "d", "e", "f"} { // slots on every master
		sells(t, rdb, "tls-"+id)
	}
	if err := Ping(context.Background(), rdb); err != nil {
		t.Fatalf("ping every master over TLS: %v", err)
	}
	if rdb, err := Dial(context.Background(), "rediss://app:wrong@"+c.TLSSeeds()+"?ca="+files.CA); err == nil {
		rdb.Close()
		t.Error("a cluster client with a wrong password dialled")
	}
}
