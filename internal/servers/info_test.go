package servers

import (
	"slices"
	"testing"
)

// A master counts a replica online once its data are sent, while the replica may still be
// loading them; only the replica's own INFO says it is in sync.
func TestAReplicaStillLoadingIsNotInSync(t *testing.T) {
	master := "# Replication\r\nrole:master\r\nconnected_slaves:2\r\n" +
		"slave0:ip=127.0.0.1,port=7001,state=online,offset=5208,lag=0\r\n" +
		"slave1:ip=127.0.0.1,port=7002,state=wait_bgsave,offset=0,lag=0\r\n" +
		"master_failover_state:no-failover\r\n"
	if got := onlinePorts(master); !slices.Equal(got, []int{7001}) {
		t.Errorf("onlinePorts = %v, want [7001]", got)
	}
	loading := "# Replication\r\nrole:slave\r\nmaster_host:127.0.0.1\r\nmaster_port:7000\r\n" +
		"master_link_status:down\r\nmaster_sync_in_progress:1\r\n"
	linked := "# Replication\r\nrole:slave\r\nmaster_host:127.0.0.1\r\nmaster_port:7000\r\n" +
		"master_link_status:up\r\nmaster_sync_in_progress:0\r\n"
	for _, c := range []struct {
		info string
		want bool
	}{{loading, false}, {linked, true}, {master, false}} {
		if got := replicaInSync(c.info); got != c.want {
			t.Errorf("replicaInSync(%q) = %v, want %v", c.info, got, c.want)
		}
	}
}
