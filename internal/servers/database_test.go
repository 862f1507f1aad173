package servers

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"seckill/internal/testtier"
)

func TestCheckDatabaseName(t *testing.T) {
	for _, name := range []string{"a", "shop", "t12_testfoo_bar", "0", strings.Repeat("z", 63)} {
		if err := checkDatabaseName(name); err != nil {
			t.Errorf("checkDatabaseName(%q) = %v, want nil", name, err)
		}
	}
	for _, name := range []string{"", strings.Repeat("z", 64), "Shop", "a-b", "a b", "x; DROP DATABASE y", "a`b", "é"} {
		if err := checkDatabaseName(name); err == nil {
			t.Errorf("checkDatabaseName(%q) = nil, want an error", name)
		}
	}
}

// database is what MariaDB and Postgres have in common, for testDatabase.
type database interface {
	Port() int
	Kill()
	Restart() error
	Stop()
	Close()
	CreateDatabase(name string) (string, error)
	DropDatabase(name string) error
}

// dialect is how testDatabase talks to one kind of server.
type dialect struct {
	driver    string                // database/sql driver name
	dsn       func(port int) string // seckill DSN of database shop
	driverDSN func(port int) string // the driver's DSN of database shop
	insert    string                // INSERT of one name, with the driver's placeholder
	dir       string                // the server's temp dir
}

// testDatabase runs a server through its life: databases created and dropped, bad names refused,
// data kept across Kill and Restart and across Stop and Restart, files removed by Close.
func testDatabase(t *testing.T, srv database, d dialect) {
	if _, err := srv.CreateDatabase("shop; DROP DATABASE mysql"); err == nil {
		t.Error("CreateDatabase accepted a name with SQL in it")
	}
	if err := srv.DropDatabase("Shop"); err == nil {
		t.Error("DropDatabase accepted a name with a capital letter")
	}

	dsn, err := srv.CreateDatabase("shop")
	if err != nil {
		t.Fatalf("CreateDatabase: %v", err)
	}
	if want := d.dsn(srv.Port()); dsn != want {
		t.Errorf("CreateDatabase(shop) = %q, want %q", dsn, want)
	}
	if _, err := srv.CreateDatabase("shop"); err == nil {
		t.Error("CreateDatabase of an existing database succeeded")
	}

	db, err := sql.Open(d.driver, d.driverDSN(srv.Port()))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE TABLE item (id INT PRIMARY KEY, name VARCHAR(64) NOT NULL)"); err != nil {
		t.Fatalf("create table: %v", err)
	}
	if _, err := db.Exec(d.insert, "survivor"); err != nil {
		t.Fatalf("insert: %v", err)
	}
	wantSurvivor := func(after string) {
		t.Helper()
		var got string
		if err := db.QueryRow("SELECT name FROM item WHERE id = 1").Scan(&got); err != nil || got != "survivor" {
			t.Fatalf("item 1 after %s: %q, %v; want survivor", after, got, err)
		}
	}
	wantDown := func(after string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := db.PingContext(ctx); err == nil {
			t.Fatalf("ping succeeded after %s", after)
		}
	}

	srv.Kill()
	wantDown("Kill")
	srv.Kill() // a second Kill does nothing
	if err := srv.Restart(); err != nil {
		t.Fatalf("Restart after Kill: %v", err)
	}
	wantSurvivor("Kill and Restart")

	srv.Stop()
	wantDown("Stop")
	if err := srv.Restart(); err != nil {
		t.Fatalf("Restart after Stop: %v", err)
	}
	wantSurvivor("Stop and Restart")

	// db still holds a connection to shop, idle in its pool, as a test that did not close its
	// pool would: DropDatabase must get through it (PostgreSQL needs WITH (FORCE) for that).
	if err := srv.DropDatabase("shop"); err != nil {
		t.Fatalf("DropDatabase: %v", err)
	}
	if err := srv.DropDatabase("shop"); err != nil {
		t.Errorf("DropDatabase of a database dropped already: %v", err)
	}
	if _, err := srv.CreateDatabase("shop"); err != nil {
		t.Errorf("CreateDatabase after DropDatabase: %v", err)
	}

	srv.Close()
	if _, err := os.Stat(d.dir); !os.IsNotExist(err) {
		t.Errorf("temp dir %s after Close: %v, want it gone", d.dir, err)
	}
	srv.Close() // a second Close does nothing
}

func TestMariaDB(t *testing.T) {
	testtier.NeedsServer(t, "mariadbd")
	t.Parallel()
	m, err := StartMariaDB()
	if err != nil {
		t.Fatalf("StartMariaDB: %v", err)
	}
	t.Cleanup(m.Close)
	testDatabase(t, m, dialect{
		driver:    "mysql",
		dsn:       func(port int) string { return fmt.Sprintf("mysql://root@127.0.0.1:%d/shop", port) },
		driverDSN: func(port int) string { return fmt.Sprintf("root@tcp(127.0.0.1:%d)/shop", port) },
		insert:    "INSERT INTO item (id, name) VALUES (1, ?)",
		dir:       m.dir,
	})
}

func TestPostgres(t *testing.T) {
	testtier.NeedsServer(t, "postgres")
	t.Parallel()
	pg, err := StartPostgres()
	if err != nil {
		t.Fatalf("StartPostgres: %v", err)
	}
	t.Cleanup(pg.Close)
	dsn := func(port int) string {
		return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/shop?sslmode=disable", port)
	}
	testDatabase(t, pg, dialect{
		driver:    "pgx",
		dsn:       dsn,
		driverDSN: dsn,
		insert:    "INSERT INTO item (id, name) VALUES (1, $1)",
		dir:       pg.dir,
	})
}

// TestMariaDBsStartTogether bootstraps several servers at once, as two test packages do: each
// keeps its temporary tables in a tmpdir of its own, where another's start cannot remove them.
func TestMariaDBsStartTogether(t *testing.T) {
	testtier.NeedsServer(t, "mariadbd")
	t.Parallel()
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			m, err := StartMariaDB()
			if err == nil {
				t.Cleanup(m.Close)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("%d servers bootstrapped at once: %v", n, err)
	}
}
