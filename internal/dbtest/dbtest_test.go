package dbtest_test

import (
	"database/sql"
	"os"
	"strconv"
	"strings"
	"testing"

	"seckill/internal/dbtest"
	"seckill/internal/sqlstore"
)

func TestMain(m *testing.M) {
	code := m.Run()
	dbtest.StopAll()
	os.Exit(code)
}

// server is what the tests need of a kind of server: its DSNs and how the driver opens one, its
// port, and its faults.
type server struct {
	name           string
	dsn            func(t testing.TB) string
	driver         string
	driverDSN      func(dsn string) (string, error)
	prefix, suffix string // of a DSN, after the port and after the database name
	placeholder    string // the driver's first bind parameter
	port           func(t testing.TB) int
	kill           func(t testing.TB)
	restart        func(t testing.TB)
}

var kinds = []server{
	{
		name: "mariadb", dsn: dbtest.MySQLDSN, driver: "mysql", driverDSN: sqlstore.MySQLDriverDSN,
		prefix: "mysql://root@127.0.0.1:", placeholder: "?",
		port:    func(t testing.TB) int { return dbtest.MariaDB(t).Port() },
		kill:    func(t testing.TB) { dbtest.MariaDB(t).Kill() },
		restart: func(t testing.TB) { dbtest.MariaDB(t).Restart(t) },
	},
	{
		name: "postgres", dsn: dbtest.PostgresDSN, driver: "pgx", driverDSN: func(dsn string) (string, error) { return dsn, nil },
		prefix: "postgres://postgres@127.0.0.1:", suffix: "?sslmode=disable", placeholder: "$1",
		port:    func(t testing.TB) int { return dbtest.Postgres(t).Port() },
		kill:    func(t testing.TB) { dbtest.Postgres(t).Kill() },
		restart: func(t testing.TB) { dbtest.Postgres(t).Restart(t) },
	},
}

// open opens the database named by a seckill DSN and closes it when t ends.
func (k server) open(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	driverDSN, err := k.driverDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open(k.driver, driverDSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// createItem creates table item holding one row, (1, name).
func (k server) createItem(t *testing.T, db *sql.DB, name string) {
	t.Helper()
	if _, err := db.Exec("CREATE TABLE item (id INT PRIMARY KEY, name VARCHAR(64) NOT NULL)"); err != nil {
		t.Fatalf("create table: %v", err)
	}
	if _, err := db.Exec("INSERT INTO item (id, name) VALUES (1, "+k.placeholder+")", name); err != nil {
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
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			dsn1, dsn2 := k.dsn(t), k.dsn(t)
			if dsn1 == dsn2 {
				t.Fatalf("two calls gave the same DSN %s", dsn1)
			}
			port := strconv.Itoa(k.port(t))
			for _, dsn := range []string{dsn1, dsn2} {
				if want := k.prefix + port + "/"; !strings.HasPrefix(dsn, want) {
					t.Errorf("DSN %s does not start with %s", dsn, want)
				}
				if !strings.HasSuffix(dsn, k.suffix) {
					t.Errorf("DSN %s does not end with %s", dsn, k.suffix)
				}
			}
			db1, db2 := k.open(t, dsn1), k.open(t, dsn2)

			k.createItem(t, db1, "gadget")
			wantItem(t, db1, "gadget")
			var n int
			err := db2.QueryRow("SELECT COUNT(*) FROM item").Scan(&n)
			if err == nil || !strings.Contains(err.Error(), "exist") {
				t.Errorf("counting table item, created in %s, in %s: got error %v, want one saying it does not exist",
					dsn1, dsn2, err)
			}
		})
	}
}

func TestKillRestartKeepsData(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			dsn := k.dsn(t)
			db := k.open(t, dsn)
			k.createItem(t, db, "survivor")
			db.Close()

			k.kill(t)
			if err := k.open(t, dsn).Ping(); err == nil {
				t.Fatal("ping succeeded after Kill")
			}
			k.restart(t)
			wantItem(t, k.open(t, dsn), "survivor")
		})
	}
}
