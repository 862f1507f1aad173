package servers

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	_ "github.com/go-sql-driver/mysql" // registers the "mysql" database/sql driver
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
)

// What MariaDB and PostgreSQL share: checking database names, running an admin statement and
// waiting until a starting server accepts connections.

const (
	dbReadyTimeout = 60 * time.Second // how long a starting server may take to accept connections
	dbStopTimeout  = 10 * time.Second // how long Stop waits for a shutdown before SIGKILL
	dbAdminTimeout = 30 * time.Second // how long CREATE and DROP DATABASE may take
)

// checkDatabaseName returns an error unless name is 1 to 63 lowercase letters, digits and
// underscores. The name is interpolated into CREATE and DROP DATABASE, which take no
// parameters, so nothing else may get through; 63 is PostgreSQL's limit (MariaDB's is 64).
func checkDatabaseName(name string) error {
	if len(name) == 0 || len(name) > 63 {
		return fmt.Errorf("database name %q: want 1 to 63 characters", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return fmt.Errorf("database name %q: want only lowercase letters, digits and underscores", name)
		}
	}
	return nil
}

// adminExec runs one statement on the database/sql driver's dsn, on a connection of its own.
func adminExec(driver, dsn, stmt string) error {
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), dbAdminTimeout)
	defer cancel()
	_, err = db.ExecContext(ctx, stmt)
	return err
}

// waitDBReady pings the server at the database/sql driver's dsn until it answers, p exits or
// dbReadyTimeout passes.
func waitDBReady(p *Process, driver, dsn string) error {
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	return p.WaitReady(dbReadyTimeout, 100*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return db.PingContext(ctx)
	})
}
