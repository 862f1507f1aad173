//go:build !release

package main

import (
	"os"
	"path/filepath"
	"testing"
)

// loggedDB is a database bench started, as far as saveLogs sees it: its log.
type loggedDB struct {
	database
	log string
}

func (d loggedDB) LogPath() string { return d.log }

// A failing seed keeps the servers' logs: bench removes the servers' directories when it ends.
func TestAFailingSeedKeepsTheServersLogs(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "err.log")
	if err := os.WriteFile(log, []byte("[ERROR] InnoDB: a deadlock\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := &owned{db: loggedDB{log: log}}
	kept, err := o.saveLogs(filepath.Join(dir, "seckill-nemesis-sentinel-3-servers"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(kept, "database.log"))
	if err != nil || string(b) != "[ERROR] InnoDB: a deadlock\n" {
		t.Fatalf("the database's log kept as %q (%v)", b, err)
	}
	if _, err := (&owned{}).saveLogs(filepath.Join(dir, "none")); err == nil {
		t.Fatal("saveLogs of no servers: no error")
	}
}
