package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	"github.com/pressly/goose/v3"

	"seckill/internal/sale"
)

// dialect is what differs between the databases. Queries are written once, for SQLite, with ?
// placeholders and ON CONFLICT DO NOTHING; q rewrites them for the others.
type dialect struct {
	name       string
	goose      goose.Dialect
	migrations string
	numbered   bool   // $1, $2 placeholders (PostgreSQL)
	returning  bool   // new ids come from INSERT ... RETURNING, not LastInsertId (PostgreSQL)
	returnsAll bool   // a multi-row INSERT ... RETURNING gives back every row's id (SQLite, PostgreSQL)
	ignoreDup  string // what ON CONFLICT DO NOTHING becomes
	isolation  sql.IsolationLevel
	unique     func(error) bool
	retryable  func(error) bool // the transaction lost a deadlock or a serialization race
	invalid    func(error) bool // the statement was refused for its data: a foreign key, a check, a value that does not fit

	cache sync.Map // query -> rewritten query
	lots  sync.Map // row count -> the multi-row INSERT of that many orders (insertLotQuery)
}

var (
	sqliteDialect = &dialect{name: "sqlite", goose: goose.DialectSQLite3, migrations: "migrations/sqlite",
		returnsAll: true, ignoreDup: " ON CONFLICT DO NOTHING",
		unique:    func(err error) bool { return err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed") },
		retryable: func(error) bool { return false },
		invalid: func(err error) bool {
			if err == nil {
				return false
			}
			m := err.Error()
			return strings.Contains(m, "FOREIGN KEY constraint failed") || strings.Contains(m, "CHECK constraint failed") ||
				strings.Contains(m, "NOT NULL constraint failed") || strings.Contains(m, "string or blob too big")
		}}

	// READ COMMITTED: a transaction that lost a unique-key race must see the winner's row when it
	// looks for it; InnoDB's default snapshot would hide it.
	mysqlDialect = &dialect{name: "mysql", goose: goose.DialectMySQL, migrations: "migrations/mysql",
		ignoreDup: " ON DUPLICATE KEY UPDATE token = token", isolation: sql.LevelReadCommitted,
		unique: func(err error) bool {
			var me *mysql.MySQLError
			return errors.As(err, &me) && me.Number == 1062
		},
		retryable: func(err error) bool {
			var me *mysql.MySQLError
			return errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205) // deadlock, lock wait timeout
		},
		invalid: func(err error) bool {
			var me *mysql.MySQLError
			// foreign key, not null, out of range, incorrect value, too long, check
			return errors.As(err, &me) && slices.Contains([]uint16{1452, 1048, 1264, 1366, 1406, 3819}, me.Number)
		}}

	postgresDialect = &dialect{name: "postgres", goose: goose.DialectPostgres, migrations: "migrations/postgres",
		numbered: true, returning: true, returnsAll: true, ignoreDup: " ON CONFLICT DO NOTHING",
		unique: func(err error) bool {
			var pe *pgconn.PgError
			return errors.As(err, &pe) && pe.Code == "23505"
		},
		retryable: func(err error) bool {
			var pe *pgconn.PgError
			return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01") // serialization, deadlock
		},
		invalid: func(err error) bool {
			var pe *pgconn.PgError
			// data exceptions; foreign key, not null, check violations
			return errors.As(err, &pe) && (strings.HasPrefix(pe.Code, "22") || pe.Code == "23503" || pe.Code == "23502" || pe.Code == "23514")
		}}
)

// keepFirst ends an INSERT that keeps the row already there when col's unique key meets one: ON
// CONFLICT DO NOTHING, which MySQL says as an update of col to itself (ignoreDup names the
// orders' token, the column most inserts meet on).
func (d *dialect) keepFirst(col string) string {
	if d == mysqlDialect {
		return " ON DUPLICATE KEY UPDATE " + col + " = " + col
	}
	return " ON CONFLICT DO NOTHING"
}

// addTo ends an INSERT into table that adds its col to the row already there when the key of
// cols meets one (a counter many writers add to).
func (d *dialect) addTo(table, col string, key ...string) string {
	if d == mysqlDialect {
		return " ON DUPLICATE KEY UPDATE " + col + " = " + col + " + VALUES(" + col + ")"
	}
	return " ON CONFLICT (" + strings.Join(key, ", ") + ") DO UPDATE SET " + col + " = " + table + "." + col + " + excluded." + col
}

// q returns query written for this dialect, from a cache of the queries it has seen.
func (d *dialect) q(query string) string {
	if d == sqliteDialect {
		return query
	}
	if v, ok := d.cache.Load(query); ok {
		return v.(string)
	}
	out := d.rewrite(query)
	d.cache.Store(query, out)
	return out
}

// rewrite writes query for this dialect, without the cache: for queries built per call (a
// multi-row INSERT), which would fill it.
func (d *dialect) rewrite(query string) string {
	if d == sqliteDialect {
		return query
	}
	out := strings.ReplaceAll(query, " ON CONFLICT DO NOTHING", d.ignoreDup)
	if d.numbered {
		var b strings.Builder
		n := 0
		for i := 0; i < len(out); i++ {
			if out[i] == '?' {
				n++
				b.WriteString("$" + strconv.Itoa(n))
				continue
			}
			b.WriteByte(out[i])
		}
		out = b.String()
	}
	return out
}

// openDSN opens the database named by dsn: sqlite:PATH, mysql://user:pass@host:port/db or
// postgres://user:pass@host:port/db?sslmode=disable. For SQLite it returns a single writer and
// a pool of readers; for the others one pool of conns connections at most serves both.
func openDSN(ctx context.Context, dsn, sqliteSuffix, sqliteMigrations string, conns int) (d *dialect, w, r *sql.DB, err error) {
	switch {
	case strings.HasPrefix(dsn, "sqlite:"):
		path, err := sqlitePath(dsn)
		if err != nil {
			return nil, nil, nil, err
		}
		w, r, err := openSQLite(ctx, path+sqliteSuffix, sqliteMigrations)
		return sqliteDialect, w, r, err
	case strings.HasPrefix(dsn, "mysql://"):
		cfg, err := mysqlConfig(dsn)
		if err != nil {
			return nil, nil, nil, err
		}
		conn, err := mysql.NewConnector(cfg)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("%w: database: %v", sale.ErrInvalid, err)
		}
		db := sql.OpenDB(conn)
		return mysqlDialect, db, db, setUp(ctx, db, mysqlDialect, conns)
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("%w: database: %v", sale.ErrInvalid, err)
		}
		return postgresDialect, db, db, setUp(ctx, db, postgresDialect, conns)
	}
	return nil, nil, nil, fmt.Errorf("%w: database %q: want sqlite:PATH, mysql://... or postgres://...", sale.ErrInvalid, dsn)
}

// setUp sizes a server database's pool (conns, each kept once opened), waits for it to answer
// and migrates it.
func setUp(ctx context.Context, db *sql.DB, d *dialect, conns int) error {
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	db.SetConnMaxIdleTime(5 * time.Minute)
	ping, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := db.PingContext(ping); err != nil {
		db.Close()
		return fmt.Errorf("%w: %s database: %v", sale.ErrBusy, d.name, err)
	}
	if err := migrate(ctx, db, d.goose, d.migrations); err != nil {
		db.Close()
		return err
	}
	return nil
}

// MySQLDriverDSN turns seckill's mysql://user:pass@host:port/db[?tls=...] into the form of
// github.com/go-sql-driver/mysql (user:pass@tcp(host:port)/db?...), with the timeouts the store
// opens it with: for what opens the database itself, the tests that look at it behind the store.
// It is the store's one reading of a MySQL DSN. Errors: sale.ErrInvalid.
func MySQLDriverDSN(dsn string) (string, error) {
	cfg, err := mysqlConfig(dsn)
	if err != nil {
		return "", err
	}
	return cfg.FormatDSN(), nil
}

// mysqlConfig turns mysql://user:pass@host:port/db[?tls=true|skip-verify|preferred] into the
// driver's configuration.
func mysqlConfig(dsn string) (*mysql.Config, error) {
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme != "mysql" || u.Host == "" || strings.Trim(u.Path, "/") == "" {
		return nil, fmt.Errorf("%w: database: want mysql://user:pass@host:port/db", sale.ErrInvalid)
	}
	cfg := mysql.NewConfig()
	cfg.User = u.User.Username()
	cfg.Passwd, _ = u.User.Password()
	cfg.Net, cfg.Addr = "tcp", u.Host
	if u.Port() == "" {
		cfg.Addr += ":3306"
	}
	cfg.DBName = strings.Trim(u.Path, "/")
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = 5*time.Second, 30*time.Second, 30*time.Second
	for k, v := range u.Query() {
		switch k {
		case "tls":
			cfg.TLSConfig = v[0]
		default:
			return nil, fmt.Errorf("%w: database: unknown MySQL parameter %q", sale.ErrInvalid, k)
		}
	}
	return cfg, nil
}

// db is a connection pool that speaks its dialect: every query, written for SQLite, is rewritten
// on its way in.
type db struct {
	*sql.DB
	d *dialect
	// stmts, on SQLite's writer, keeps the order placement's statements prepared across its
	// transactions; nil elsewhere.
	stmts *statements
}

// statements are a SQLite writer's statements prepared once for the life of the pool instead of
// once per transaction: placing a batch of orders runs the same few statements every time, and on
// SQLite, where the statements run in the process, preparing them again cost a quarter of the
// placement's CPU (docs/BENCHMARKS.md §11). They are prepared ahead of the transaction that
// uses them (prepare), since on SQLite the transaction holds the writer's one connection that
// preparing on the pool would wait for. A multi-row INSERT has a shape per row count, so the
// cache holds at most maxStatements; a statement not in it is prepared in its transaction.
type statements struct {
	db  *sql.DB
	max int // maxStatements
	mu  sync.Mutex
	m   map[string]*sql.Stmt
}

// maxStatements bounds a writer's prepared statements: a batch's multi-row INSERTs (one per row
// count up to the largest batch, 512) and the dozen single statements.
const maxStatements = 600

// statements returns the cache of statements for the writer w: SQLite's alone. A server's pool of
// 64 connections would hold each statement once a connection, on the server: MySQL allows
// 16,382 prepared statements for all its clients together (max_prepared_stmt_count), and pgx
// already keeps its own cache of statements on each PostgreSQL connection. There each
// transaction prepares what it runs, a round trip the network's other round trips dwarf.
func (d *dialect) statements(w *sql.DB) *statements {
	if d != sqliteDialect {
		return nil
	}
	return &statements{db: w, max: maxStatements, m: map[string]*sql.Stmt{}}
}

// prepare prepares on the pool those of queries (written for the dialect already) it does not
// hold yet, while there is room. It must not be called in a transaction of the pool, and it
// does not hold the lock while it prepares: preparing waits for the connection, which a
// transaction asking for a statement (in) may hold.
func (c *statements) prepare(ctx context.Context, queries ...string) error {
	for _, q := range queries {
		c.mu.Lock()
		_, held := c.m[q]
		full := len(c.m) >= c.max
		c.mu.Unlock()
		if held || full {
			continue
		}
		st, err := c.db.PrepareContext(ctx, q)
		if err != nil {
			return err
		}
		c.mu.Lock()
		if _, held := c.m[q]; held || len(c.m) >= c.max { // another caller was first
			st.Close()
		} else {
			c.m[q] = st
		}
		c.mu.Unlock()
	}
	return nil
}

// in returns the pool's statement of query as t's; ok is false when it has not been prepared.
func (c *statements) in(ctx context.Context, t *sql.Tx, query string) (st *sql.Stmt, ok bool) {
	c.mu.Lock()
	st, ok = c.m[query]
	c.mu.Unlock()
	if !ok {
		return nil, false
	}
	return t.StmtContext(ctx, st), true
}

// close closes the statements prepared.
func (c *statements) close() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for q, st := range c.m {
		st.Close()
		delete(c.m, q)
	}
}

func (x db) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return x.DB.ExecContext(ctx, x.d.q(query), args...)
}

func (x db) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return x.DB.QueryContext(ctx, x.d.q(query), args...)
}

func (x db) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return x.DB.QueryRowContext(ctx, x.d.q(query), args...)
}

// tx is a transaction that speaks its dialect.
type tx struct {
	*sql.Tx
	d     *dialect
	stmts *statements // its writer's
}

func (x tx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return x.Tx.ExecContext(ctx, x.d.q(query), args...)
}

func (x tx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return x.Tx.QueryContext(ctx, x.d.q(query), args...)
}

func (x tx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return x.Tx.QueryRowContext(ctx, x.d.q(query), args...)
}

func (x tx) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	return x.Tx.PrepareContext(ctx, x.d.q(query))
}

// prepared returns query (written for the dialect already) prepared for the transaction: its
// writer's statement when the writer keeps them, or one prepared now that the caller closes
// (owned).
func (x tx) prepared(ctx context.Context, query string) (st *sql.Stmt, owned bool, err error) {
	if x.stmts != nil {
		if st, ok := x.stmts.in(ctx, x.Tx, query); ok {
			return st, false, nil
		}
	}
	st, err = x.Tx.PrepareContext(ctx, query)
	return st, err == nil, err
}

// inTx runs fn in a write transaction on w and commits it if fn returns nil. A transaction that
// loses a deadlock (MySQL) or a serialization race (PostgreSQL) is run again, a few times, so fn
// must set everything it reports afresh on each run; one that loses every time ends in
// sale.ErrContended (busy for the caller, not a failure of the database).
func inTx(ctx context.Context, w db, fn func(tx tx) error) error {
	var opts *sql.TxOptions
	if w.d.isolation != sql.LevelDefault {
		opts = &sql.TxOptions{Isolation: w.d.isolation}
	}
	const attempts = 8
	for attempt := 1; ; attempt++ {
		err := runTx(ctx, w, opts, fn)
		if err == nil || !w.d.retryable(err) {
			return err
		}
		if attempt == attempts {
			return fmt.Errorf("%w: %d times: %w", sale.ErrContended, attempts, err)
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(attempt) * time.Duration(1+rand.IntN(5)) * time.Millisecond):
		}
	}
}

func runTx(ctx context.Context, w db, opts *sql.TxOptions, fn func(tx tx) error) error {
	t, err := w.BeginTx(ctx, opts)
	if err != nil {
		return err
	}
	if err := fn(tx{Tx: t, d: w.d, stmts: w.stmts}); err != nil {
		t.Rollback()
		return err
	}
	return t.Commit()
}

// forUpdate ends a SELECT that locks the rows it reads until the transaction ends. SQLite needs
// none: its one writer runs one transaction at a time.
func (d *dialect) forUpdate() string {
	if d == sqliteDialect {
		return ""
	}
	return " FOR UPDATE"
}
