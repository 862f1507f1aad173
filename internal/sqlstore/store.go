// Package sqlstore is the database: activities, orders and the embedded mode's grab journal, on
// SQLite (pure Go, one writer, WAL). It is the final guard of a sale: unique keys and conditional
// updates keep orders within stock and per-user limits whatever the stock gate says. Migrations
// are embedded and applied with goose when the store opens.
package sqlstore

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pressly/goose/v3"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"seckill/internal/sale"
)

//go:embed migrations
var migrations embed.FS

var _ sale.Store = (*Store)(nil)

// Store is a sale.Store on a SQL database: SQLite, MySQL (MariaDB, TiDB) or PostgreSQL.
type Store struct {
	w db // writes: the one writer on SQLite, the pool elsewhere
	r db // reads
	// lots places a batch's plain new orders with multi-row statements (placeMany): a few
	// round trips instead of two per order. BenchmarkPlaceOrders measured 5 to 7 times less time
	// per order on MariaDB and PostgreSQL, and about the same on SQLite. Off only to measure.
	lots bool
	// sinks are the relays every order event is written for (EmitTo); none: no events.
	sinks []string
	// only are the relays that take some events alone (EmitOnly), with the types they take.
	only map[string][]sale.EventType
}

// DefaultConns is how many connections a Store keeps to a MariaDB/MySQL or PostgreSQL server at
// most, unless told otherwise (OpenPool). A few per core of the database serve it fully; more
// cost it, PostgreSQL most: a process each, and after an outage every node of a deployment opens
// its whole pool again at once (BENCHMARKS.md §19: Cluster seeds 210 and 214).
const DefaultConns = 16

// MaxConns bounds OpenPool's conns.
const MaxConns = 1000

// Open opens the database named by dsn (sqlite:PATH, mysql://user:pass@host:port/db or
// postgres://user:pass@host:port/db) and migrates it to the latest schema, with DefaultConns.
func Open(ctx context.Context, dsn string) (*Store, error) { return OpenPool(ctx, dsn, DefaultConns) }

// OpenPool is Open with at most conns connections (1 to MaxConns) to a MariaDB/MySQL or
// PostgreSQL server; SQLite always has one writer and its readers.
func OpenPool(ctx context.Context, dsn string, conns int) (*Store, error) {
	if conns < 1 || conns > MaxConns {
		return nil, fmt.Errorf("%w: %d connections to the database: want 1 to %d", sale.ErrInvalid, conns, MaxConns)
	}
	d, w, r, err := openDSN(ctx, dsn, "", "migrations/sqlite", conns)
	if err != nil {
		return nil, err
	}
	return &Store{w: db{DB: w, d: d, stmts: d.statements(w)}, r: db{DB: r, d: d}, lots: true}, nil
}

func sqlitePath(dsn string) (string, error) {
	path, _ := strings.CutPrefix(dsn, "sqlite:")
	if path == "" {
		return "", fmt.Errorf("%w: database %q: empty path", sale.ErrInvalid, dsn)
	}
	return path, nil
}

// openSQLite opens the file at path with one writer connection and a pool of readers, and
// applies the migrations in dir.
func openSQLite(ctx context.Context, path, dir string) (w, r *sql.DB, err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, nil, fmt.Errorf("open database: %w", err)
	}
	// synchronous(FULL): in WAL mode each commit is fsynced, so a 202 survives power loss, not
	// only a crash. Group commit keeps that affordable. _txlock=immediate takes the write lock at
	// BEGIN, so a transaction never fails half-way on a busy upgrade.
	const pragmas = "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=foreign_keys(ON)&_pragma=temp_store(MEMORY)"
	if w, err = sql.Open("sqlite", "file:"+path+pragmas+"&_txlock=immediate"); err != nil {
		return nil, nil, fmt.Errorf("open database: %w", err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	err = migrate(ctx, w, goose.DialectSQLite3, dir)
	if err == nil {
		// A migration that rebuilds a table turns the foreign keys off while it runs, on this,
		// the one writer connection: they are on again whatever became of it.
		_, err = w.ExecContext(ctx, `PRAGMA foreign_keys = ON`)
	}
	if err != nil {
		w.Close()
		return nil, nil, err
	}
	if r, err = sql.Open("sqlite", "file:"+path+pragmas+"&_pragma=query_only(ON)"); err != nil {
		w.Close()
		return nil, nil, fmt.Errorf("open database: %w", err)
	}
	r.SetMaxOpenConns(8)
	r.SetMaxIdleConns(8)
	return w, r, nil
}

func migrate(ctx context.Context, db *sql.DB, dialect goose.Dialect, dir string) error {
	sub, err := fs.Sub(migrations, dir)
	if err != nil {
		return err
	}
	p, err := goose.NewProvider(dialect, db, sub)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// Close closes the database.
func (s *Store) Close() error {
	s.w.stmts.close()
	if s.r.DB == s.w.DB {
		return s.w.Close()
	}
	return errors.Join(s.r.Close(), s.w.Close())
}

// Ping implements sale.Store.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.r.PingContext(ctx); err != nil {
		return fmt.Errorf("%w: database: %v", sale.ErrBusy, err)
	}
	return nil
}

// inTx runs fn in a write transaction and commits it if fn returns nil.
func (s *Store) inTx(ctx context.Context, fn func(tx tx) error) error {
	return inTx(ctx, s.w, fn)
}

// collect reads every row of a query (whose error is err) with scan; none is an empty slice.
func collect[T any](rows *sql.Rows, err error, scan func(row interface{ Scan(...any) error }) (T, error)) ([]T, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// placeholders returns "(?,?,?),(?,?,?)" for rows rows of cols columns.
func placeholders(rows, cols int) string {
	one := "(" + strings.TrimSuffix(strings.Repeat("?,", cols), ",") + ")"
	return strings.TrimSuffix(strings.Repeat(one+",", rows), ",")
}

func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMS(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}
