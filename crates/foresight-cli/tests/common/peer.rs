//! Dispatcher processes for the peer tests: each with its own data directory and config on
//! a shared store, and the counting of runs through the file every job appends to.
#![allow(dead_code)] // each test file uses a different part

use crate::common::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// One dispatcher process.
pub struct Peer {
    pub site: String,
    dir: PathBuf,
    config: PathBuf,
    child: Option<Child>,
    pub url: String,
    starts: u32,
    /// A directory this dispatcher must not see: it runs in a mount namespace of its own
    /// with an empty file system mounted there (as a site on another host would see it).
    hide: Option<PathBuf>,
}

impl Peer {
    pub fn start(root: &Path, site: &str, store: &str, procs: u32) -> Peer {
        Peer::start_with(root, site, store, procs, 1500, 1, 0.3)
    }

    /// A dispatcher with this lease, prior mean runtime (seconds) and α.
    pub fn start_with(
        root: &Path,
        site: &str,
        store: &str,
        procs: u32,
        lease_ms: u64,
        prior: u64,
        alpha: f64,
    ) -> Peer {
        Peer::start_auction(
            root,
            site,
            store,
            procs,
            lease_ms,
            prior,
            &format!("alpha = {alpha}"),
        )
    }

    /// A dispatcher with this lease, prior mean runtime (seconds) and `[dispatcher.auction]`
    /// table body.
    pub fn start_auction(
        root: &Path,
        site: &str,
        store: &str,
        procs: u32,
        lease_ms: u64,
        prior: u64,
        auction: &str,
    ) -> Peer {
        Peer::start_full(root, site, store, procs, lease_ms, prior, auction, "")
    }

    /// A dispatcher as [`Peer::start_auction`] makes it, with `cluster` added to its
    /// cluster's table (e.g. a `work_dir`).
    #[allow(clippy::too_many_arguments)]
    pub fn start_full(
        root: &Path,
        site: &str,
        store: &str,
        procs: u32,
        lease_ms: u64,
        prior: u64,
        auction: &str,
        cluster: &str,
    ) -> Peer {
        let mut p = Peer::unlaunched(root, site, store, procs, lease_ms, prior, auction, cluster);
        p.launch();
        p
    }

    /// A dispatcher as [`Peer::start_full`] makes it, not started yet.
    #[allow(clippy::too_many_arguments)]
    fn unlaunched(
        root: &Path,
        site: &str,
        store: &str,
        procs: u32,
        lease_ms: u64,
        prior: u64,
        auction: &str,
        cluster: &str,
    ) -> Peer {
        let dir = root.join(site);
        std::fs::create_dir_all(&dir).unwrap();
        let config = dir.join("foresight.toml");
        std::fs::write(
            &config,
            format!(
                r#"mode = "dispatcher"
store = "{store}"

[[cluster]]
name = "{site}-c"
procs = {procs}
{cluster}
[dispatcher]
site = "{site}"
lease_ms = {lease_ms}
heartbeat_ms = 250
poll_ms = 200
prior_runtime_seconds = {prior}

[dispatcher.auction]
{auction}
"#
            ),
        )
        .unwrap();
        Peer {
            site: site.to_string(),
            dir,
            config,
            child: None,
            url: String::new(),
            starts: 0,
            hide: None,
        }
    }

    /// A dispatcher as [`Peer::start`] makes it that does not see directory `hidden` (see
    /// [`can_hide`]): an empty file system is mounted over it in its own mount namespace.
    pub fn start_hiding(root: &Path, site: &str, store: &str, procs: u32, hidden: &Path) -> Peer {
        let mut p = Peer::unlaunched(root, site, store, procs, 1500, 1, "alpha = 0.3", "");
        p.hide = Some(hidden.to_path_buf());
        p.launch();
        p
    }

    /// A dispatcher as [`Peer::start`] makes it serving HTTPS with `cert` and `key`, and
    /// trusting the other sites through `ca` alone (`dispatcher.ca_cert`), that does not see
    /// `hidden` when given (see [`Peer::start_hiding`]).
    pub fn start_tls(
        root: &Path,
        site: &str,
        store: &str,
        procs: u32,
        hidden: Option<&Path>,
        (ca, cert, key): (&Path, &Path, &Path),
    ) -> Peer {
        let mut p = Peer::unlaunched(root, site, store, procs, 1500, 1, "alpha = 0.3", "");
        let config = std::fs::read_to_string(&p.config).unwrap().replacen(
            "[dispatcher]\n",
            &format!("[dispatcher]\nca_cert = {:?}\n", ca.display().to_string()),
            1,
        );
        std::fs::write(
            &p.config,
            format!(
                "{config}\n[http]\ntls_cert = {:?}\ntls_key = {:?}\n",
                cert.display().to_string(),
                key.display().to_string()
            ),
        )
        .unwrap();
        p.hide = hidden.map(Path::to_path_buf);
        p.launch();
        p
    }

    pub fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    pub fn launch(&mut self) {
        let url_file = self.data().join("server.url");
        let _ = std::fs::remove_file(&url_file);
        self.starts += 1;
        let log =
            std::fs::File::create(self.dir.join(format!("stderr.{}.log", self.starts))).unwrap();
        let mut command = match &self.hide {
            None => Command::new(BIN),
            Some(hidden) => {
                let mut c = Command::new("unshare");
                c.args(["--mount", "--propagation", "private", "sh", "-c"])
                    .arg("mount -t tmpfs tmpfs \"$0\" && exec \"$@\"")
                    .arg(hidden)
                    .arg(BIN);
                c
            }
        };
        let mut child = command
            .args(["server", "start", "--listen", "127.0.0.1:0", "--config"])
            .arg(&self.config)
            .arg("--data-dir")
            .arg(self.data())
            .env("FORESIGHT_LOG", "foresight_daemon=info")
            .env("FORESIGHT_UNIX_USER", "*=root")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let url = wait_for(
            &format!("dispatcher {} to listen", self.site),
            Duration::from_secs(30),
            || {
                if let Ok(Some(status)) = child.try_wait() {
                    panic!(
                        "dispatcher {} exited with {status}: {}",
                        self.site,
                        self.logs()
                    );
                }
                std::fs::read_to_string(&url_file)
                    .ok()
                    .filter(|s| s.ends_with('\n'))
            },
        );
        self.url = url.trim().to_string();
        self.child = Some(child);
    }

    pub fn signal(&self, sig: &str) {
        let pid = self.child.as_ref().unwrap().id().to_string();
        assert!(Command::new("kill")
            .args([sig, &pid])
            .status()
            .unwrap()
            .success());
    }

    pub fn sigkill(&mut self) {
        let mut c = self.child.take().unwrap();
        c.kill().unwrap();
        c.wait().unwrap();
    }

    /// Dispatcher rounds this peer completed since it last started
    /// (`foresight_dispatcher_rounds_total` on `/metrics`, read as the administrator `admin`).
    pub fn rounds(&self, admin: &str) -> u64 {
        let text = reqwest::blocking::Client::new()
            .get(format!("{}/metrics", self.url))
            .bearer_auth(admin)
            .send()
            .unwrap()
            .text()
            .unwrap();
        text.lines()
            .find_map(|l| {
                l.strip_prefix("foresight_dispatcher_rounds_total ")?
                    .parse()
                    .ok()
            })
            .unwrap_or_else(|| panic!("foresight_dispatcher_rounds_total missing: {text}"))
    }

    pub fn logs(&self) -> String {
        (1..=self.starts)
            .map(|n| {
                let text = std::fs::read_to_string(self.dir.join(format!("stderr.{n}.log")))
                    .unwrap_or_default();
                format!("--- dispatcher {} (run {n}) ---\n{text}", self.site)
            })
            .collect()
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &c.id().to_string()])
                .status();
            let _ = wait_for_exit(&mut c, Duration::from_secs(10));
        }
        if std::thread::panicking() {
            eprintln!("{}", self.logs());
        }
    }
}

pub fn wait_for_exit(c: &mut Child, timeout: Duration) -> bool {
    let deadline = std::time::Instant::now() + timeout;
    while std::time::Instant::now() < deadline {
        if c.try_wait().unwrap().is_some() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = c.kill();
    let _ = c.wait();
    false
}

/// Waits until every peer has completed `n` more rounds than when called (read as the
/// administrator `admin`). With `n >= 2` each has run a whole round that began after the
/// call (the first counted may have been under way already), so whatever such a round
/// decides from the state at the call has been decided: a test waits for this, not for
/// time, before it asserts that something did not happen.
pub fn more_rounds(peers: &[&Peer], admin: &str, n: u64) {
    let from: Vec<u64> = peers.iter().map(|p| p.rounds(admin)).collect();
    wait_for(
        &format!("{n} more dispatcher rounds at every site"),
        Duration::from_secs(60),
        || {
            peers
                .iter()
                .zip(&from)
                .all(|(p, from)| p.rounds(admin) >= from + n)
                .then_some(())
        },
    );
}

/// Waits until whatever is on sale when called would have been sold and started: a whole
/// round at each site (which opens the auction of every job on offer that a site can run,
/// and bids), then `auction` (at least the auctions' length, α × the mean runtime), then a
/// whole round at each site (one of them closed every auction now due, awarding it), then
/// another (the winner, if another site closed its auction, started it).
pub fn a_whole_sale(peers: &[&Peer], admin: &str, auction: Duration) {
    more_rounds(peers, admin, 2);
    // Every such auction is open now; it closes by the clock, `auction` later at most.
    std::thread::sleep(auction);
    more_rounds(peers, admin, 2);
    more_rounds(peers, admin, 2);
}

/// Waits until every attempt any of `peers` launched has ended (its supervisor recorded the
/// outcome in `status.json`): all the lines its command will ever write are written. Answers
/// how many attempts they launched, so that a caller can tell that it looked in the right
/// place.
pub fn every_attempt_ended(peers: &[&Peer]) -> usize {
    let attempts = |p: &Peer| -> Vec<PathBuf> {
        let Ok(clusters) = std::fs::read_dir(p.data().join("clusters")) else {
            return Vec::new();
        };
        clusters
            .flatten()
            .filter_map(|c| std::fs::read_dir(c.path()).ok())
            .flat_map(|attempts| attempts.flatten().map(|a| a.path()))
            .filter(|a| a.join("spec.json").exists())
            .collect()
    };
    wait_for(
        "every launched attempt to end",
        Duration::from_secs(60),
        || {
            let all: Vec<PathBuf> = peers.iter().flat_map(|p| attempts(p)).collect();
            all.iter()
                .all(|a| a.join("status.json").exists())
                .then_some(all.len())
        },
    )
}

/// Runs per job id, from the lines `ID CLUSTER` every run appends to `log`.
pub fn runs(log: &Path) -> BTreeMap<u64, Vec<String>> {
    let mut by_job: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    for line in std::fs::read_to_string(log).unwrap_or_default().lines() {
        let (id, cluster) = line.split_once(' ').unwrap();
        by_job
            .entry(id.parse().unwrap())
            .or_default()
            .push(cluster.to_string());
    }
    by_job
}

pub fn psql(url: &str, sql: &str) -> String {
    foresight_testkit::postgres::server().psql(url, sql)
}

/// A user's budget left and spending as the shared database has them: their row less what
/// their ledger moved since it was last folded in.
pub fn shared_budget(store: &str, user: &str) -> (f64, f64) {
    let out = psql(
        store,
        &format!(
            "SELECT data, COALESCE((SELECT sum(amount) FROM budget_ledger \
             WHERE user_name = '{user}'), 0)::float8 FROM users WHERE name = '{user}'"
        ),
    );
    let (data, moved) = out.rsplit_once('|').unwrap();
    let moved: f64 = moved.parse().unwrap();
    let u: Value = serde_json::from_str(data).unwrap();
    (
        u["budget"].as_f64().unwrap() - moved,
        u["spent"].as_f64().unwrap() + moved,
    )
}

/// A job that appends `ID CLUSTER` to `log`, then sleeps `secs`.
pub fn counted_job(log: &Path, secs: f64) -> Value {
    job_body(
        1,
        60,
        &[
            "sh",
            "-c",
            &format!(
                "echo \"$FORESIGHT_JOB_ID $FORESIGHT_CLUSTER\" >> {}; sleep {secs}",
                log.display()
            ),
        ],
    )
}

/// Whether a dispatcher can be started not seeing a directory (root, with `unshare` and
/// `mount`). Outside CI a missing one skips the test calling this, printing why; under CI it
/// fails it.
pub fn can_hide(test: &str) -> bool {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    let tools = ["unshare", "mount"].iter().all(|t| {
        Command::new("sh")
            .args(["-c", &format!("command -v {t}")])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if root && tools {
        return true;
    }
    let why = format!("{test}: needs root, `unshare` and `mount`");
    assert!(
        std::env::var_os("CI").is_none(),
        "{why} (under CI this is a failure)"
    );
    eprintln!("skipped: {why}");
    false
}

pub fn admin_token(p: &Peer) -> String {
    std::fs::read_to_string(p.data().join("admin.token"))
        .unwrap()
        .trim()
        .to_string()
}
