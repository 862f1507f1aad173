package mysqltest_test

import (
	"database/sql"
	"os"
	"strconv"
	"strings"
	"testing"

	"seckill/internal/mysqltest"
	"seckill/internal/sqlstore"
)

func TestMain(m *testing.M) {
	code := m.Run()
	mysqltest.Stop()
	os.Exit(code)
}

// open opens the database named by a seckill DSN and closes it when t ends.
func open(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	driverDSN, err := sqlstore.MySQLDriverDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("mysql", driverDSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// createItem creates table item holding one row, (1, name).
func createItem(t *testing.T, db *sql.DB, name string) {
	t.Helper()
	if _, err := db.Exec("CREATE TABLE item (id INT PRIMARY KEY, name VARCHAR(64) NOT NULL)"); err != nil {
		t.Fatalf("create table: %v", err)
	}
	if _, err := db.Exec("INSERT INTO item (id, name) VALUES (1, ?)", name); err != nil {
		t.Fatalf("insert: %v", err)
	}
}

// wantItem checks that row 1 of table item is named want.
func wantItem(t *testing.T, db *sql.DB, want string) {
	t.Helper()
	var got string
	if err := db.QueryRow("SELECT name FROM item WHERE id = 1").Scan(&got); err != nil {
		t.Fatalf("select: %v", err)
	}
	if got != want {
		t.Errorf("item 1 is named %q, want %q", got, want)
	}
}

func TestDSNGivesDistinctDatabases(t *testing.T) {
	dsn1, dsn2 := mysqltest.DSN(t), mysqltest.DSN(t)
	if dsn1 == dsn2 {
		t.Fatalf("two calls gave the same DSN %s", dsn1)
	}
	port := strconv.Itoa(mysqltest.Server(t).Port())
	for _, dsn := range []string{dsn1, dsn2} {
		if want := "mysql://root@127.0.0.1:" + port + "/"; !strings.HasPrefix(dsn, want) {
			t.Errorf("DSN %s does not start with %s", dsn, want)
		}
	}
	db1, db2 := open(t, dsn1), open(t, dsn2)

	createItem(t, db1, "gadget")
	wantItem(t, db1, "gadget")
	var n int
	err := db2.QueryRow("SELECT COUNT(*) FROM item").Scan(&n)
	if err == nil || !strings.Contains(err.Error(), "exist") {
		t.Errorf("counting table item, created in %s, in %s: got error %v, want one saying it does not exist",
			dsn1, dsn2, err)
	}
}

func TestKillRestartKeepsData(t *testing.T) {
	dsn := mysqltest.DSN(t)
	db := open(t, dsn)
	createItem(t, db, "survivor")
	db.Close()

	server := mysqltest.Server(t)
	server.Kill()
	if err := open(t, dsn).Ping(); err == nil {
		t.Fatal("ping succeeded after Kill")
	}
	server.Restart(t)
	wantItem(t, open(t, dsn), "survivor")
}
