package servers

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
)

// Postgres is a postgres started by StartPostgres, with a cluster of its own in a temp dir whose
// superuser postgres needs no password. PostgreSQL refuses to run as root, so when the caller
// runs as root the server runs as the postgres OS user. Its methods may be called from several
// goroutines.
type Postgres struct {
	postgres string              // path of the postgres binary, next to initdb
	cred     *syscall.Credential // whom to run as; nil for the current user
	dir      string              // the temp dir: data dir, socket, log
	port     int

	mu   sync.Mutex
	proc *Process // the last server process started
}

// LogPath returns the path of the server's log.
func (pg *Postgres) LogPath() string { return filepath.Join(pg.dir, "postgres.log") }

// StartPostgres creates a cluster in a new temp dir (initdb of the newest
// /usr/lib/postgresql/VERSION, else initdb in PATH), starts postgres on a free loopback port and
// waits until it accepts connections. The caller must Close the server, which removes the temp
// dir.
func StartPostgres() (_ *Postgres, err error) {
	initdb, err := findInitdb()
	if err != nil {
		return nil, err
	}
	cred, err := postgresUser()
	if err != nil {
		return nil, err
	}
	dir, err := makePostgresDir(cred)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	if err := initPostgresCluster(initdb, cred, dir); err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	pg := &Postgres{
		postgres: filepath.Join(filepath.Dir(initdb), "postgres"),
		cred:     cred,
		dir:      dir,
		port:     port,
	}
	pg.mu.Lock()
	defer pg.mu.Unlock()
	if err := pg.launch(); err != nil {
		return nil, err
	}
	return pg, nil
}

// findInitdb returns the initdb of the newest /usr/lib/postgresql/VERSION, else initdb in PATH.
func findInitdb() (string, error) {
	paths, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(paths) == 0 {
		path, err := exec.LookPath("initdb")
		if err != nil {
			return "", errors.New("initdb is not installed (not in /usr/lib/postgresql/*/bin nor in PATH)")
		}
		return path, nil
	}
	sort.Slice(paths, func(i, j int) bool { return postgresVersion(paths[i]) < postgresVersion(paths[j]) })
	return paths[len(paths)-1], nil
}

// postgresVersion returns the VERSION of /usr/lib/postgresql/VERSION/bin/initdb as a number
// (9.6, 15).
func postgresVersion(initdb string) float64 {
	v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(filepath.Dir(initdb))), 64)
	return v
}

// postgresUser returns the credential of the postgres OS user if we run as root (the server
// refuses to run as root), else nil.
func postgresUser() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, so the server must run as user postgres: %w", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("uid of postgres: %w", err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("gid of postgres: %w", err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// makePostgresDir creates the temp dir, owned by cred's user if cred is not nil.
func makePostgresDir(cred *syscall.Credential) (string, error) {
	dir, err := os.MkdirTemp("", "seckill-postgres-")
	if err != nil {
		return "", fmt.Errorf("create temp dir: %w", err)
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return "", fmt.Errorf("chown temp dir: %w", err)
		}
	}
	return dir, nil
}

// initPostgresCluster creates a cluster in dir/data whose superuser postgres needs no password.
func initPostgresCluster(initdb string, cred *syscall.Credential, dir string) error {
	cmd := exec.Command(initdb,
		"-D", filepath.Join(dir, "data"),
		"-U", "postgres",
		"-A", "trust",
		"-E", "UTF8",
		"--no-locale", // C collation, whatever locales this machine has
		"--no-sync",   // the cluster is thrown away
	)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %w\n%s", err, Tail(out))
	}
	return nil
}

// Port returns the TCP port the server listens on, on 127.0.0.1.
func (pg *Postgres) Port() int { return pg.port }

// Kill kills the server and its backends with SIGKILL, as a crash would, and waits for it to
// exit. It does nothing if the server is not running.
func (pg *Postgres) Kill() {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	pg.proc.Kill()
}

// Restart starts the server again on the same data dir and port, killing it first if it is
// still running, and waits until it accepts connections.
func (pg *Postgres) Restart() error {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	pg.proc.Kill()
	return pg.launch()
}

// Stop shuts the server down, and SIGKILLs it if it has not exited after 10 s. It sends SIGINT,
// PostgreSQL's fast shutdown: SIGTERM would be a smart shutdown, which waits for every client to
// disconnect. It does nothing if the server is not running. The server may be restarted after
// it.
func (pg *Postgres) Stop() {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	pg.proc.Stop(syscall.SIGINT, dbStopTimeout)
}

// Close stops the server, as Stop does, and removes its temp dir, data included. The server
// cannot be restarted after it.
func (pg *Postgres) Close() {
	pg.Stop()
	os.RemoveAll(pg.dir)
}

// CreateDatabase creates the database name, which must be 1 to 63 lowercase letters, digits and
// underscores, and returns its DSN as superuser postgres,
// postgres://postgres@127.0.0.1:PORT/NAME?sslmode=disable.
func (pg *Postgres) CreateDatabase(name string) (dsn string, err error) {
	if err := checkDatabaseName(name); err != nil {
		return "", err
	}
	if err := adminExec("pgx", pg.dsn("postgres"), "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	return pg.dsn(name), nil
}

// DropDatabase drops the database name, if it exists, closing any connection to it first (WITH
// (FORCE)): PostgreSQL refuses to drop a database in use. name must be 1 to 63 lowercase
// letters, digits and underscores.
func (pg *Postgres) DropDatabase(name string) error {
	if err := checkDatabaseName(name); err != nil {
		return err
	}
	if err := adminExec("pgx", pg.dsn("postgres"), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	return nil
}

// launch starts postgres on the data dir and port and waits until it is ready. The caller holds
// pg.mu.
func (pg *Postgres) launch() error {
	cmd := exec.Command(pg.postgres,
		"-D", filepath.Join(pg.dir, "data"),
		"-p", strconv.Itoa(pg.port),
		"-k", pg.dir,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "max_connections=200",
		"-c", "shared_buffers=32MB",
	)
	cmd.Dir = pg.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: pg.cred} // Launch adds Setpgid and Pdeathsig
	p, err := Launch(cmd, pg.LogPath(), func(p *Process) error {
		return waitDBReady(p, "pgx", pg.dsn("postgres"))
	})
	if err != nil {
		return fmt.Errorf("postgres on port %d: %w", pg.port, err)
	}
	pg.proc = p
	return nil
}

// dsn returns the DSN of database name on the server, as superuser postgres.
func (pg *Postgres) dsn(name string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", pg.port, name)
}
