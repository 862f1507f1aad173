package sqlstore

import (
	"errors"
	"testing"

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
