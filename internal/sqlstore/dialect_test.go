package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"testing"

	"github.com/go-sql-driver/mysql"

	"seckill/internal/sale"
)

// The store's one reading of a MySQL DSN, which the tests that open the database themselves use
// too (MySQLDriverDSN).
func TestMySQLDriverDSN(t *testing.T) {
	const timeouts = "readTimeout=30s&timeout=5s&writeTimeout=30s"
	tests := []struct{ in, want string }{
		{"mysql://root@127.0.0.1:3306/shop", "root@tcp(127.0.0.1:3306)/shop?" + timeouts},
		{"mysql://u:p%40ss@db:13306/x", "u:p@ss@tcp(db:13306)/x?" + timeouts},
		{"mysql://u@db/x?tls=skip-verify", "u@tcp(db:3306)/x?readTimeout=30s&timeout=5s&tls=skip-verify&writeTimeout=30s"},
	}
	for _, tt := range tests {
		got, err := MySQLDriverDSN(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("MySQLDriverDSN(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"postgres://x@y/z", "mysql://u@db", "mysql:///x", "mysql://u@db/x?charset=latin1", "mysql://u@db:x/y"} {
		if got, err := MySQLDriverDSN(bad); !errors.Is(err, sale.ErrInvalid) {
			t.Errorf("MySQLDriverDSN(%q) = %q, %v; want ErrInvalid", bad, got, err)
		}
	}
}

// TestATransactionThatKeepsLosingIsContended: a transaction that loses a deadlock is run again;
// one that loses every time ends in sale.ErrContended, busy for the caller and a verdict for the
// breaker (the database answered), the driver's error kept in the chain. One that loses once
// and then commits is a success; another error is the error, after one run.
func TestATransactionThatKeepsLosingIsContended(t *testing.T) {
	sqlite, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer sqlite.Close()
	// MySQL's reading of errors, on a database the test needs no server for.
	w := db{DB: sqlite, d: &dialect{name: "mysql errors", retryable: mysqlDialect.retryable}}
	deadlock := &mysql.MySQLError{Number: 1213, Message: "Deadlock found when trying to get lock"}
	for _, c := range []struct {
		name   string
		losses int
		other  error
		runs   int
	}{{"always", 100, nil, 8}, {"once", 1, nil, 2}, {"another error", 0, io.ErrUnexpectedEOF, 1}} {
		runs := 0
		err := inTx(context.Background(), w, func(tx) error {
			runs++
			if runs <= c.losses {
				return deadlock
			}
			return c.other
		})
		switch {
		case runs != c.runs:
			t.Errorf("%s: %d runs, want %d", c.name, runs, c.runs)
		case c.losses > c.runs:
			var me *mysql.MySQLError
			if !errors.Is(err, sale.ErrContended) || !errors.Is(err, sale.ErrBusy) || !sale.IsVerdict(err) || !errors.As(err, &me) {
				t.Errorf("%s: %v; want ErrContended (busy, a verdict) with the deadlock in the chain", c.name, err)
			}
		case !errors.Is(err, c.other) || errors.Is(err, sale.ErrContended):
			t.Errorf("%s: %v, want %v", c.name, err, c.other)
		}
	}
}
