package servers

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
)

// MariaDB is a mariadbd started by StartMariaDB, with a data dir of its own in a temp dir and a
// passwordless root. Its methods may be called from several goroutines.
type MariaDB struct {
	mariadbd string
	dir      string // the temp dir: data dir, socket, pid file, error log
	port     int

	mu   sync.Mutex
	proc *Process // the last server process started
}

// LogPath returns the path of the server's error log.
func (m *MariaDB) LogPath() string { return filepath.Join(m.dir, "err.log") }

// StartMariaDB creates a data dir in a new temp dir (mariadb-install-db), starts mariadbd on a
// free loopback port and waits until it accepts connections. The caller must Close the server,
// which removes the temp dir.
func StartMariaDB() (_ *MariaDB, err error) {
	mariadbd, err := FindBinary("mariadbd", "/usr/sbin/mariadbd")
	if err != nil {
		return nil, err
	}
	installDB, err := FindBinary("mariadb-install-db", "/usr/bin/mariadb-install-db")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "seckill-mariadb-")
	if err != nil {
		return nil, fmt.Errorf("create temp dir: %w", err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	if err := initMariaDBDataDir(installDB, dir); err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	m := &MariaDB{mariadbd: mariadbd, dir: dir, port: port}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.launch(); err != nil {
		return nil, err
	}
	return m, nil
}

// initMariaDBDataDir creates the system tables in dir/data, with a passwordless root.
func initMariaDBDataDir(installDB, dir string) error {
	tmp, err := mariaDBTmpDir(dir)
	if err != nil {
		return err
	}
	args := []string{
		"--no-defaults",
		"--datadir=" + filepath.Join(dir, "data"),
		"--tmpdir=" + tmp,
		"--auth-root-authentication-method=normal",
		"--skip-test-db",
	}
	if os.Geteuid() == 0 {
		args = append(args, "--user=root")
	}
	cmd := exec.Command(installDB, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("mariadb-install-db: %w\n%s", err, Tail(out))
	}
	return nil
}

// mariaDBTmpDir makes the server's own temporary directory in dir. A MariaDB server starting
// removes the leftover temporary tables it finds in its tmpdir: two servers sharing /tmp (two
// test packages bootstrapping at once) removed each other's, and mariadb-install-db failed with
// "Unknown table 'mysql.tmp_user_sys'".
func mariaDBTmpDir(dir string) (string, error) {
	tmp := filepath.Join(dir, "tmp")
	return tmp, os.MkdirAll(tmp, 0o700)
}

// Port returns the TCP port the server listens on, on 127.0.0.1.
func (m *MariaDB) Port() int { return m.port }

// Kill kills the server with SIGKILL, as a crash would, and waits for it to exit. It does
// nothing if the server is not running.
func (m *MariaDB) Kill() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.proc.Kill()
}

// Restart starts the server again on the same data dir and port, killing it first if it is
// still running, and waits until it accepts connections.
func (m *MariaDB) Restart() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.proc.Kill()
	return m.launch()
}

// Stop shuts the server down with SIGTERM, and SIGKILL if it has not exited after 10 s. It does
// nothing if the server is not running. The server may be restarted after it.
func (m *MariaDB) Stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.proc.Stop(syscall.SIGTERM, dbStopTimeout)
}

// Close stops the server, as Stop does, and removes its temp dir, data included. The server
// cannot be restarted after it.
func (m *MariaDB) Close() {
	m.Stop()
	os.RemoveAll(m.dir)
}

// CreateDatabase creates the database name, which must be 1 to 63 lowercase letters, digits and
// underscores, and returns its DSN in seckill's form, mysql://root@127.0.0.1:PORT/NAME.
func (m *MariaDB) CreateDatabase(name string) (dsn string, err error) {
	if err := checkDatabaseName(name); err != nil {
		return "", err
	}
	if err := adminExec("mysql", m.adminDSN(), "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	return fmt.Sprintf("mysql://root@127.0.0.1:%d/%s", m.port, name), nil
}

// DropDatabase drops the database name, if it exists. name must be 1 to 63 lowercase letters,
// digits and underscores.
func (m *MariaDB) DropDatabase(name string) error {
	if err := checkDatabaseName(name); err != nil {
		return err
	}
	if err := adminExec("mysql", m.adminDSN(), "DROP DATABASE IF EXISTS "+name); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	return nil
}

// launch starts mariadbd on the data dir and port and waits until it is ready. The caller holds
// m.mu.
func (m *MariaDB) launch() error {
	logPath := m.LogPath()
	cmd := exec.Command(m.mariadbd, m.serverArgs(logPath)...)
	cmd.Dir = m.dir
	p, err := Launch(cmd, logPath, func(p *Process) error {
		return waitDBReady(p, "mysql", m.adminDSN())
	})
	if err != nil {
		return fmt.Errorf("mariadbd on port %d: %w", m.port, err)
	}
	m.proc = p
	return nil
}

// serverArgs returns mariadbd's command line: no config files, loopback only, kept light.
func (m *MariaDB) serverArgs(logPath string) []string {
	args := []string{
		"--no-defaults",
		"--datadir=" + filepath.Join(m.dir, "data"),
		"--tmpdir=" + filepath.Join(m.dir, "tmp"), // made by initMariaDBDataDir
		"--socket=" + filepath.Join(m.dir, "sock"),
		"--port=" + strconv.Itoa(m.port),
		"--bind-address=127.0.0.1",
		"--log-error=" + logPath,
		"--pid-file=" + filepath.Join(m.dir, "pid"),
		"--skip-log-bin",
		"--innodb-buffer-pool-size=64M",
		"--skip-name-resolve",
		"--max-connections=500",
	}
	if os.Geteuid() == 0 {
		args = append(args, "--user=root") // mariadbd refuses to run as root without it
	}
	return args
}

// adminDSN is the driver DSN of root on the server, with no database selected.
func (m *MariaDB) adminDSN() string {
	return fmt.Sprintf("root@tcp(127.0.0.1:%d)/", m.port)
}
