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

	"github.com/pressly/goose/v3"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"seckill/internal/sale"
)

//go:embed migrations
var migrations embed.FS

var _ sale.Store = (*Store)(nil)

// Store is a sale.Store on a SQL database. The embedded gate's journal is part of it too.
type Store struct {
	w *sql.DB // the one writer
	r *sql.DB // readers
}

// Open opens the database named by dsn ("sqlite:PATH") and migrates it to the latest schema.
func Open(ctx context.Context, dsn string) (*Store, error) {
	path, err := sqlitePath(dsn)
	if err != nil {
		return nil, err
	}
	w, r, err := openSQLite(ctx, path, "migrations/sqlite")
	if err != nil {
		return nil, err
	}
	return &Store{w: w, r: r}, nil
}

func sqlitePath(dsn string) (string, error) {
	path, ok := strings.CutPrefix(dsn, "sqlite:")
	if !ok {
		return "", fmt.Errorf("%w: database %q: only sqlite:PATH is supported so far", sale.ErrInvalid, dsn)
	}
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
	const pragmas = "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=foreign_keys(ON)"
	if w, err = sql.Open("sqlite", "file:"+path+pragmas+"&_txlock=immediate"); err != nil {
		return nil, nil, fmt.Errorf("open database: %w", err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	if err := migrate(ctx, w, dir); err != nil {
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

func migrate(ctx context.Context, db *sql.DB, dir string) error {
	sub, err := fs.Sub(migrations, dir)
	if err != nil {
		return err
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, db, sub)
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
	return errors.Join(s.r.Close(), s.w.Close())
}

// Ping implements sale.Store.
func (s *Store) Ping(ctx context.Context) error {
	var one int
	if err := s.r.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		return fmt.Errorf("%w: database: %v", sale.ErrBusy, err)
	}
	return nil
}

// inTx runs fn in a write transaction and commits it if fn returns nil.
func (s *Store) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return inTx(ctx, s.w, fn)
}

func inTx(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// placeholders returns "(?,?,?),(?,?,?)" for rows rows of cols columns.
func placeholders(rows, cols int) string {
	one := "(" + strings.TrimSuffix(strings.Repeat("?,", cols), ",") + ")"
	return strings.TrimSuffix(strings.Repeat(one+",", rows), ",")
}
