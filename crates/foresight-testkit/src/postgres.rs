//! A throwaway PostgreSQL server for tests, from the distribution's server binaries
//! (Debian's `postgresql` package: `/usr/lib/postgresql/*/bin`, or `FORESIGHT_PG_BIN`).
//!
//! The first call of [`database`] in a test binary runs `initdb` on a temporary directory and
//! `pg_ctl start` on a free loopback port (its Unix socket in that directory, `trust`
//! authentication, no fsync: nothing in it outlives the tests). Every call then creates a
//! fresh database, so tests share one server and never each other's tables. When the test
//! binary exits, however it exits (even SIGKILL), a small guard process sees its pipe close,
//! stops the server and deletes the directory.
//!
//! `initdb` refuses to run as root: as root, the server runs as the `postgres` account (or
//! `nobody`), through `runuser`, in a directory it owns. Missing binaries fail the test with a
//! message saying what to install; they never make it pass silently.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};

/// The superuser the server is initialised with (any password is accepted: `trust`).
pub const SUPERUSER: &str = "postgres";

/// The running server of this test binary.
#[derive(Debug)]
pub struct PgServer {
    port: u16,
    bin: PathBuf,
    next: AtomicU32,
    /// Its data directory, log and `postgres` options, to restart it.
    data: PathBuf,
    log: PathBuf,
    opts: String,
    /// The write end of the guard's pipe: closed when this process exits.
    _guard: Mutex<ChildStdin>,
}

static SERVER: OnceLock<PgServer> = OnceLock::new();

/// An open `psql` session ([`PgServer::session`]); dropping it ends the session.
#[derive(Debug)]
pub struct PsqlSession {
    child: Child,
    /// Open while the session lasts: psql ends at its end of input.
    _stdin: ChildStdin,
}

impl Drop for PsqlSession {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The server of this test binary, started on first use. Panics with what to install when
/// PostgreSQL's server binaries are missing, or with the server's log when it fails to start.
pub fn server() -> &'static PgServer {
    SERVER.get_or_init(|| PgServer::start().unwrap_or_else(|e| panic!("{e}")))
}

/// A new, empty database on the shared server: its URL
/// (`postgres://postgres@127.0.0.1:PORT/test_N`).
pub fn database() -> String {
    server().create_database()
}

impl PgServer {
    /// The port it listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's log file: what it logs (with `log_statement = 'all'`, every statement
    /// it is sent) lands here, so a benchmark can count what it really sent.
    pub fn log_path(&self) -> &std::path::Path {
        &self.log
    }

    /// The URL of database `db` on this server.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://{SUPERUSER}@127.0.0.1:{}/{db}", self.port)
    }

    /// Creates a new, empty database and returns its URL.
    pub fn create_database(&self) -> String {
        let name = format!("test_{}", self.next.fetch_add(1, Ordering::Relaxed));
        let out = Command::new(self.bin.join("createdb"))
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                SUPERUSER,
            ])
            .arg(&name)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("running {}/createdb: {e}", self.bin.display()));
        assert!(
            out.status.success(),
            "createdb {name} on port {}: {}",
            self.port,
            String::from_utf8_lossy(&out.stderr)
        );
        self.url(&name)
    }

    /// Runs `sql` with `psql` on the database at `url` (of this server); its output,
    /// unaligned, one row a line, columns separated by `|`. Panics with psql's error.
    pub fn psql(&self, url: &str, sql: &str) -> String {
        let out = Command::new(self.bin.join("psql"))
            .args([
                "-X",
                "-A",
                "-t",
                "-v",
                "ON_ERROR_STOP=1",
                "-d",
                url,
                "-c",
                sql,
            ])
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("running {}/psql: {e}", self.bin.display()));
        assert!(
            out.status.success(),
            "psql {sql:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Opens a `psql` session on the database at `url` (of this server), runs `sql` in it
    /// and returns once it has run; the session, and whatever it holds (an advisory lock),
    /// lasts until the returned value is dropped. Panics with psql's error.
    pub fn session(&self, url: &str, sql: &str) -> PsqlSession {
        let mut child = Command::new(self.bin.join("psql"))
            .args(["-X", "-A", "-t", "-q", "-v", "ON_ERROR_STOP=1", "-d", url])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("running {}/psql: {e}", self.bin.display()));
        let mut stdin = child.stdin.take().expect("invariant: piped");
        writeln!(stdin, "{sql}\n\\echo foresight-session-ready")
            .unwrap_or_else(|e| panic!("writing to psql: {e}"));
        let stdout = child.stdout.take().expect("invariant: piped");
        let ready = BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .any(|l| l == "foresight-session-ready");
        if !ready {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            let _ = child.wait();
            panic!("psql {sql:?}: {err}");
        }
        PsqlSession {
            child,
            _stdin: stdin,
        }
    }

    /// Stops the server (`-m fast`: clients are disconnected), waits `down`, and starts it
    /// again on the same port with the same data. For tests of reconnection: every test of
    /// the binary shares the server, so such a test belongs in a test binary of its own.
    pub fn restart(&self, down: std::time::Duration) {
        let owner = Owner::current().unwrap_or_else(|e| panic!("{e}"));
        let stop = owner
            .command(&self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(&self.data)
            .args(["-m", "fast", "-w", "stop"])
            .current_dir(self.data.parent().unwrap_or(&self.data))
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("running pg_ctl stop: {e}"));
        assert!(
            stop.status.success(),
            "pg_ctl stop: {}",
            String::from_utf8_lossy(&stop.stderr)
        );
        std::thread::sleep(down);
        let start = owner
            .command(&self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(&self.data)
            .arg("-l")
            .arg(&self.log)
            .args(["-w", "-t", "60", "-o", &self.opts, "start"])
            .current_dir(self.data.parent().unwrap_or(&self.data))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("running pg_ctl start: {e}"));
        assert!(
            start.status.success(),
            "pg_ctl start: {}",
            String::from_utf8_lossy(&start.stderr)
        );
    }

    fn start() -> Result<PgServer, String> {
        let bin = binaries()?;
        let owner = Owner::current()?;
        let tmp = tempfile::Builder::new()
            .prefix("foresight-pg-")
            .tempdir()
            .map_err(|e| format!("creating a temporary directory for PostgreSQL: {e}"))?;
        let dir = tmp.keep();
        owner.give(&dir)?;
        // From here on the guard owns the directory: it deletes it when this process exits.
        let data = dir.join("data");
        let mut stop = owner.command(&bin.join("pg_ctl"));
        stop.arg("-D")
            .arg(&data)
            .args(["-m", "immediate", "-w", "stop"]);
        let mut guard = Command::new("sh");
        guard
            .args([
                "-c",
                r#"dir=$1; shift; read -r _ignored; "$@" >/dev/null 2>&1; rm -rf -- "$dir""#,
                "foresight-pg-guard",
            ])
            .arg(&dir)
            .arg(stop.get_program())
            .args(stop.get_args())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // Its own process group: a Ctrl-C of the tests does not kill it before it cleans up.
        std::os::unix::process::CommandExt::process_group(&mut guard, 0);
        let mut guard = guard
            .spawn()
            .map_err(|e| format!("starting the PostgreSQL guard (sh): {e}"))?;
        let guard_pipe = guard.stdin.take().ok_or("the guard has no stdin")?;

        let out = owner
            .command(&bin.join("initdb"))
            .arg("-D")
            .arg(&data)
            .args(["-U", SUPERUSER, "--auth=trust", "--no-sync", "-E", "UTF8"])
            .args(["--locale=C"])
            .current_dir(&dir)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("running {}/initdb: {e}", bin.display()))?;
        if !out.status.success() {
            return Err(format!(
                "initdb in {} failed: {}{}",
                dir.display(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let log = dir.join("server.log");
        let mut last = String::new();
        // A free port can be taken between our probe and the server's bind: try a few.
        for _ in 0..5 {
            let port = free_port()?;
            let opts = format!(
                "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off \
                 -c synchronous_commit=off -c full_page_writes=off",
                dir.display()
            );
            let status = owner
                .command(&bin.join("pg_ctl"))
                .arg("-D")
                .arg(&data)
                .arg("-l")
                .arg(&log)
                .args(["-w", "-t", "60", "-o", &opts, "start"])
                .current_dir(&dir)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .map_err(|e| format!("running {}/pg_ctl: {e}", bin.display()))?;
            if status.success() {
                return Ok(PgServer {
                    port,
                    bin,
                    next: AtomicU32::new(0),
                    data,
                    log,
                    opts,
                    _guard: Mutex::new(guard_pipe),
                });
            }
            last = String::new();
            if let Ok(mut f) = std::fs::File::open(&log) {
                let _ = f.read_to_string(&mut last);
            }
        }
        Err(format!(
            "pg_ctl start failed 5 times in {}; server log:\n{last}",
            dir.display()
        ))
    }
}

/// The directory holding `initdb`, `pg_ctl` and `createdb`.
fn binaries() -> Result<PathBuf, String> {
    let has = |d: &Path| {
        ["initdb", "pg_ctl", "createdb"]
            .iter()
            .all(|b| d.join(b).is_file())
    };
    if let Some(d) = std::env::var_os("FORESIGHT_PG_BIN") {
        let d = PathBuf::from(d);
        return if has(&d) {
            Ok(d)
        } else {
            Err(format!(
                "FORESIGHT_PG_BIN={} has no initdb, pg_ctl and createdb",
                d.display()
            ))
        };
    }
    // Debian: /usr/lib/postgresql/<major>/bin; the newest major wins.
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let major = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            has(&bin).then_some((major, bin))
        })
        .collect();
    found.sort();
    if let Some((_, bin)) = found.pop() {
        return Ok(bin);
    }
    if let Some(d) = std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .find(|d| has(d))
    {
        return Ok(d);
    }
    Err(
        "these tests need a PostgreSQL server's binaries (initdb, pg_ctl, createdb), found \
         neither under /usr/lib/postgresql/*/bin nor on PATH nor in FORESIGHT_PG_BIN: install \
         them, e.g. `apt-get install -y postgresql` as root on Debian (scripts/test.sh does)"
            .into(),
    )
}

/// Any free loopback port, as the kernel picks it.
fn free_port() -> Result<u16, String> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("finding a free port: {e}"))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("finding a free port: {e}"))
}

/// Who runs the server: this process, or (as root, which `initdb` refuses) another account.
struct Owner {
    account: Option<nix::unistd::User>,
}

impl Owner {
    fn current() -> Result<Owner, String> {
        if !nix::unistd::geteuid().is_root() {
            return Ok(Owner { account: None });
        }
        for name in ["postgres", "nobody"] {
            if let Ok(Some(u)) = nix::unistd::User::from_name(name) {
                return Ok(Owner { account: Some(u) });
            }
        }
        Err(
            "running as root, and neither a `postgres` nor a `nobody` account exists to run \
             the test PostgreSQL server as (initdb refuses root)"
                .into(),
        )
    }

    /// Hands `dir` to the account.
    fn give(&self, dir: &Path) -> Result<(), String> {
        if let Some(u) = &self.account {
            nix::unistd::chown(dir, Some(u.uid), Some(u.gid))
                .map_err(|e| format!("chown {} to {}: {e}", dir.display(), u.name))?;
        }
        Ok(())
    }

    fn command(&self, program: &Path) -> Command {
        match &self.account {
            None => Command::new(program),
            Some(u) => {
                let mut c = Command::new("runuser");
                c.args(["-u", &u.name, "--"]).arg(program);
                c
            }
        }
    }
}
