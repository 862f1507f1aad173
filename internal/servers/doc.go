// Package servers starts and controls real Redis, MariaDB and PostgreSQL server processes on
// loopback, for the integration tests (through redistest and dbtest, which wrap it for
// testing.TB) and for seckill bench's fault scenarios, which start, SIGKILL and restart servers
// themselves.
//
// Every server runs in a process group of its own with Pdeathsig SIGKILL, so that it dies with
// the process that started it even if that is killed. A server that cannot start is reported
// with the end of its log in the error.
//
// The package never imports testing: it is linked into the seckill binary.
package servers
