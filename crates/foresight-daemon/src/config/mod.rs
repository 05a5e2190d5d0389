//! The daemon's configuration: a TOML file, or embedded defaults (one local cluster with as
//! many processors as the machine has cores).

pub mod dispatcher;
pub mod grid;
pub mod http;
pub mod identity;
pub mod kind;
pub mod wiki_rm;

use foresight_core::broker::ClusterSpec;
use foresight_core::licence::LicencePool;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Everything the daemon can be told.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// This instance's name: what it creates in Slurm is named `<instance>-<id>`
    /// (reservations) and `<instance>-<job>.<attempt>` (jobs), and it reconciles only those,
    /// so several instances may share a Slurm cluster. Letters, digits and `_`.
    #[serde(default = "default_instance")]
    pub instance: String,
    /// Address to listen on; port 0 picks a free port (written to `DATA_DIR/server.url`).
    #[serde(default = "default_listen")]
    pub listen: String,
    /// Where the database, tokens and job directories live.
    #[serde(default = "default_data_dir")]
    pub data_dir: PathBuf,
    /// Where jobs, reservations and users are kept: a `postgres://user:password@host:port/db`
    /// URL (the database must exist; its tables are created), or an SQLite file path or
    /// `sqlite://PATH`. Unset: the SQLite file `DATA_DIR/foresight.db`. Tokens, job output
    /// and the lock stay in the data directory either way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<String>,
    /// `single` (the default: this service alone plans the grid) or `dispatcher` (one of
    /// several peer dispatchers sharing a PostgreSQL store, see `[dispatcher]`).
    #[serde(default)]
    pub mode: crate::config::dispatcher::Mode,
    /// The `[dispatcher]` table: site, lease, auction (for `mode = "dispatcher"`).
    #[serde(default)]
    pub dispatcher: crate::config::dispatcher::DispatcherConfig,
    /// Stand by for the service that holds the PostgreSQL store, and take over when it
    /// stops or dies: no single machine's loss stops the grid. Until then every request is
    /// answered 503 (`not_active`), which sends sites and clients to the next address.
    #[serde(default)]
    pub standby: bool,
    /// Scheduling cycle interval, milliseconds: arrivals wait at most this long for a cycle.
    #[serde(default = "default_cycle_ms")]
    pub cycle_ms: u64,
    /// How far ahead the planner looks, seconds.
    #[serde(default = "default_horizon")]
    pub horizon_seconds: i64,
    /// Global jobs planned to start within this many seconds are reserved now.
    #[serde(default = "default_lead")]
    pub lead_time_seconds: i64,
    /// At most this many queued global jobs are planned per cycle, in priority order.
    #[serde(default = "default_plan_depth")]
    pub plan_depth: usize,
    /// Runtime prediction (`none`, `tsafrir`, `app`): local policies plan each job with the
    /// runtime predicted from the finished runs of its user (`tsafrir`) or of its application
    /// and parameters on its cluster (`app`) instead of its walltime, which stays the kill.
    /// A cluster's own `predict` wins for its local policy.
    #[serde(default)]
    pub predict: foresight_core::predict::Predictor,
    /// Backfill order of local policies (`fcfs`, or `spf`: shortest planned runtime first);
    /// a cluster's own `backfill_order` wins.
    #[serde(default)]
    pub backfill_order: foresight_core::BackfillOrder,
    /// How the plan of a job that outlived its prediction grows (`estimate`, the default:
    /// straight to its walltime; `incremental`: the paper's steps from the first prediction,
    /// 1 min, 5 min, … 100 h); a cluster's own `correction` wins. Local policies keep
    /// EASY's promise to the first reserved job once it has waited a day (the starvation
    /// guard).
    #[serde(default = "foresight_core::predict::correction::grid_default")]
    pub correction: foresight_core::predict::Correction,
    /// Seconds between SIGTERM and SIGKILL when a job overruns or is cancelled.
    #[serde(default = "default_grace")]
    pub grace_seconds: u64,
    /// Seconds one copy of a job's files may take, all its files together: a part's input
    /// copy, or the copy of a job's outputs back home. At the timeout the copying process
    /// is killed and the copy fails, naming the file and this key (an input or output that
    /// is a named pipe, or a hung file system, would otherwise hold it forever). One key
    /// for both: a copy is a copy, and a file system that hangs hangs both ways. The old
    /// name `output_copy_timeout_seconds` is still read. Default: one hour.
    #[serde(
        default = "default_copy_timeout",
        alias = "output_copy_timeout_seconds"
    )]
    pub copy_timeout_seconds: u64,
    /// At most this many bytes in each output file of a local job (earlier attempts'
    /// output included); what a job writes beyond is dropped and the file ends with a line
    /// saying so, so that a runaway job cannot fill the data directory's disk. Unset: no cap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_bytes: Option<u64>,
    /// How local jobs are confined, so that nothing they start outlives them: `"auto"` (the
    /// default: a cgroup v2 per job where cgroup v2 is writable, else the session sweep),
    /// `"cgroup"` (a cgroup or the service refuses to start) or `"session"` (the supervisor's
    /// session and process-group sweep only).
    #[serde(default)]
    pub confinement: foresight_rm::Confinement,
    /// The clusters of the grid.
    #[serde(default = "default_clusters")]
    pub cluster: Vec<ClusterConfig>,
    /// Licence pools (`[[licence]] name = "ansys" count = 4 clusters = ["a"]`): jobs of
    /// those clusters that ask for them (`--licence ansys:2`) start only when they are free.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub licence: Vec<LicencePool>,
    /// Users known from the start (more can be added through the API).
    #[serde(default)]
    pub user: Vec<UserConfig>,
    /// The `[unix_user]` table: Foresight user name → the Unix account their local jobs run
    /// as when the daemon is root. The key `"*"` maps every user without an entry of their
    /// own (e.g. `"*" = "nobody"`, or root on a single-user test machine). Unmapped users run
    /// as the account of their own name; an account set on the user record (`user add
    /// --unix-user`) wins over this table. Also `FORESIGHT_UNIX_USER="NAME=ACCOUNT,..."`.
    #[serde(default)]
    pub unix_user: std::collections::BTreeMap<String, String>,
    /// The `[http]` table: HTTPS (`tls_cert`, `tls_key`) and connection limits.
    #[serde(default)]
    pub http: crate::config::http::HttpConfig,
    /// The `[identity]` table: the local socket through which callers on this host are
    /// known by their Unix account, without a token, and the policy for jobs as root.
    #[serde(default)]
    pub identity: crate::config::identity::IdentityConfig,
    /// This service is a site of a grid whose centre is on another host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grid: Option<crate::config::grid::GridConfig>,
}

/// One cluster. Processes of the `local` kind run at this machine's speed, so leave its
/// `speed` at 1 unless the machine is faster or slower than the reference; `groups` describe
/// a machine whose processors differ (the local executor runs a part on the processors the
/// planner chose, so its limit follows their speed).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// Name, processors, speeds, policy, prices and link: the keys `sim grid`'s clusters
    /// have too, with the same meaning.
    #[serde(flatten)]
    pub spec: ClusterSpec,
    /// Resource manager: `local` (processes on this machine, scheduled by Foresight) or
    /// `slurm` (a Slurm cluster, reached through its commands).
    #[serde(default = "default_kind")]
    pub kind: String,
    /// `slurm`: the cluster's `slurm.conf` (passed as `SLURM_CONF` to every command).
    #[serde(default)]
    pub slurm_conf: Option<PathBuf>,
    /// `slurm`: the partition global jobs and reservations use (else Slurm's default).
    #[serde(default)]
    pub partition: Option<String>,
    /// `slurm`: the account global jobs are charged to.
    #[serde(default)]
    pub account: Option<String>,
    /// `slurm`: the user Foresight acts as (reservations are made for this user and jobs run
    /// as this user; acting as another user needs root). Default: the daemon's own user.
    #[serde(default)]
    pub slurm_user: Option<String>,
    /// `slurm`: how often the cluster is read (jobs, nodes, reservations), milliseconds.
    #[serde(default = "default_sync_ms")]
    pub sync_ms: u64,
    /// `local`: who starts the cluster's queued jobs. `"local"` (the default): its own
    /// `policy`. `"wiki"`: a WIKI scheduler (Maui, Moab) through the `[cluster.wiki]` server;
    /// jobs queued here wait for its `STARTJOB`, and global jobs are not planned here.
    #[serde(default = "default_scheduler")]
    pub scheduler: String,
    /// `[cluster.wiki]` of a `local` cluster: the WIKI server through which a scheduler
    /// (Maui, Moab) drives it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wiki: Option<WikiConfig>,
    /// `[cluster.wiki_rm]` of a `wiki` cluster: the WIKI resource manager Foresight schedules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wiki_rm: Option<crate::config::wiki_rm::WikiRmConfig>,
    /// Kind `site`: the site on another host that lends this cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub site: Option<crate::config::grid::SiteLinkConfig>,
    /// This cluster's own scratch file system, for a cluster that does not share its jobs'
    /// working directories: a job placed here that was not submitted to it runs in
    /// `WORK_DIR/job-ID` (made as the job's account), its inputs are copied there, and its
    /// outputs back from there. Unset: the cluster sees the working directory the job names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_dir: Option<PathBuf>,
}

/// Reads of a cluster's shared settings (`c.name`, `c.procs`, `c.speed_groups()`) go to
/// its [`ClusterSpec`], as they would if the keys were declared here.
impl std::ops::Deref for ClusterConfig {
    type Target = ClusterSpec;
    fn deref(&self) -> &ClusterSpec {
        &self.spec
    }
}

/// One end of Maui's WIKI interface for a cluster (see docs/src/operator/wiki.md).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WikiConfig {
    /// The address the WIKI server listens on (`host:port`, the `HOST`/`PORT` of Maui's
    /// `RMCFG`); port 0 picks one, written to `DATA_DIR/wiki-<cluster>.addr`.
    pub listen: String,
    /// A file holding the shared key, a decimal number (the N of Maui's
    /// `configure --with-key=N`). Read at start, never logged.
    pub key_file: PathBuf,
    /// The only addresses requests are accepted from (Maui's host).
    #[serde(default)]
    pub allowed_peers: Vec<std::net::IpAddr>,
    /// `AUTH=` of the frames this end sends. Default: the daemon's user name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<String>,
}

impl WikiConfig {
    /// The shared key, read from `key_file`; the error names the file, never its contents.
    pub fn read_key(&self) -> anyhow::Result<foresight_rm::wiki::Key> {
        let text = read_text(&self.key_file).map_err(|e| {
            anyhow::anyhow!("reading WIKI key file {}: {e}", self.key_file.display())
        })?;
        foresight_rm::wiki::Key::parse(&text).map_err(|_| {
            anyhow::anyhow!(
                "WIKI key file {}: must hold one decimal number below 2^32 (Maui's \
                 --with-key=N)",
                self.key_file.display()
            )
        })
    }
}

/// A user configured up front.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserConfig {
    /// Name.
    pub name: String,
    /// SHA-256 of the bearer token, hex (`printf %s TOKEN | sha256sum`).
    pub token_sha256: String,
    /// Administrator?
    #[serde(default)]
    pub admin: bool,
    /// Budget; unlimited when absent.
    #[serde(default)]
    pub budget: Option<f64>,
    /// The Unix account the user's local jobs run as (see `[unix_user]`).
    #[serde(default)]
    pub unix_user: Option<String>,
}

fn default_instance() -> String {
    "foresight".into()
}
fn default_listen() -> String {
    "127.0.0.1:8642".into()
}
/// The data directory used when none is given: `$FORESIGHT_DATA_DIR`, else
/// `$XDG_DATA_HOME/foresight`, else `~/.local/share/foresight`.
pub fn default_data_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("FORESIGHT_DATA_DIR") {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_DATA_HOME") {
        return PathBuf::from(d).join("foresight");
    }
    match std::env::var_os("HOME") {
        Some(h) => PathBuf::from(h).join(".local/share/foresight"),
        None => PathBuf::from("foresight-data"),
    }
}
fn default_cycle_ms() -> u64 {
    200
}
fn default_horizon() -> i64 {
    7 * 86_400
}
fn default_lead() -> i64 {
    60
}
fn default_plan_depth() -> usize {
    256
}
fn default_grace() -> u64 {
    5
}
fn default_copy_timeout() -> u64 {
    3_600
}
fn default_sync_ms() -> u64 {
    1_000
}
fn default_kind() -> String {
    "local".into()
}
fn default_scheduler() -> String {
    "local".into()
}
fn default_clusters() -> Vec<ClusterConfig> {
    let procs = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    vec![ClusterConfig::local("local", procs)]
}

impl ClusterConfig {
    /// A `local` cluster of `procs` processors with every other setting at its default.
    pub fn local(name: &str, procs: u32) -> ClusterConfig {
        ClusterConfig {
            spec: ClusterSpec::new(name, procs),
            kind: default_kind(),
            slurm_conf: None,
            partition: None,
            account: None,
            slurm_user: None,
            sync_ms: default_sync_ms(),
            scheduler: default_scheduler(),
            wiki: None,
            wiki_rm: None,
            site: None,
            work_dir: None,
        }
    }

    /// True when a WIKI scheduler (Maui), not this cluster's own policy, starts its jobs.
    pub fn is_wiki_scheduled(&self) -> bool {
        self.kind == "local" && self.scheduler == "wiki"
    }

    /// True when Slurm, not Foresight, schedules this cluster.
    pub fn is_slurm(&self) -> bool {
        self.kind == "slurm"
    }

    /// True when the service mirrors this cluster from a resource manager's snapshots
    /// (Slurm, or a WIKI resource manager Foresight schedules) instead of running it.
    pub fn is_remote(&self) -> bool {
        self.is_slurm() || self.kind == "wiki" || self.kind == "site"
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            instance: default_instance(),
            listen: default_listen(),
            data_dir: default_data_dir(),
            store: None,
            mode: Default::default(),
            dispatcher: Default::default(),
            standby: false,
            cycle_ms: default_cycle_ms(),
            horizon_seconds: default_horizon(),
            lead_time_seconds: default_lead(),
            plan_depth: default_plan_depth(),
            predict: Default::default(),
            backfill_order: Default::default(),
            correction: foresight_core::predict::correction::grid_default(),
            grace_seconds: default_grace(),
            copy_timeout_seconds: default_copy_timeout(),
            max_output_bytes: None,
            confinement: Default::default(),
            cluster: default_clusters(),
            licence: Vec::new(),
            user: Vec::new(),
            unix_user: std::collections::BTreeMap::new(),
            http: Default::default(),
            identity: Default::default(),
            grid: None,
        }
    }
}

impl Config {
    /// Adds the `NAME=ACCOUNT,...` entries of `FORESIGHT_UNIX_USER` to `[unix_user]` (they
    /// win over the file's).
    pub fn unix_users_from_env(&mut self, value: &str) -> anyhow::Result<()> {
        for entry in value.split(',').filter(|e| !e.trim().is_empty()) {
            let Some((name, account)) = entry.split_once('=') else {
                anyhow::bail!("FORESIGHT_UNIX_USER: {entry:?} is not NAME=ACCOUNT");
            };
            self.unix_user
                .insert(name.trim().to_string(), account.trim().to_string());
        }
        Ok(())
    }

    /// Reads and checks a configuration file.
    pub fn read(path: &Path) -> anyhow::Result<Config> {
        let text =
            read_text(path).map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
        let cfg: Config =
            toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        cfg.check()
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        Ok(cfg)
    }

    /// The store this configuration names (the SQLite file in the data directory unless
    /// `store` is set).
    pub fn store_location(&self) -> anyhow::Result<foresight_store::StoreLocation> {
        match &self.store {
            None => Ok(foresight_store::StoreLocation::Sqlite(
                self.data_dir.join("foresight.db"),
            )),
            Some(s) => {
                foresight_store::StoreLocation::parse(s).map_err(|e| anyhow::anyhow!("store: {e}"))
            }
        }
    }

    /// Refuses a dispatcher without its site or its shared store: checked once the command
    /// line has had its say (`--mode`, `--site`, `--store` complete a file).
    pub fn check_mode(&self) -> anyhow::Result<()> {
        self.dispatcher.check(self.mode, self.store.as_deref())?;
        if self.standby {
            self.check_standby()?;
        }
        Ok(())
    }

    /// Refuses a standby that could not take over: it needs the active service's
    /// PostgreSQL store, and clusters it reaches from its own host.
    fn check_standby(&self) -> anyhow::Result<()> {
        if self.mode != crate::config::dispatcher::Mode::Single {
            anyhow::bail!(
                "standby: a dispatcher needs no standby (its peers sell its jobs when it \
                 stops); standby is for a service in mode single"
            );
        }
        if !matches!(
            self.store_location()?,
            foresight_store::StoreLocation::Postgres(_)
        ) {
            anyhow::bail!(
                "standby: a standby takes over the active service's store, which must be a \
                 PostgreSQL database both reach (--store postgres://…)"
            );
        }
        if let Some((i, c)) = self
            .cluster
            .iter()
            .enumerate()
            .find(|(_, c)| c.kind == "local")
        {
            anyhow::bail!(
                "standby: cluster[{i}] ({}) is local: its jobs run on the active service's \
                 host, which a standby cannot reach; lend it from a site (kind = \"site\") \
                 or drive it through Slurm",
                c.name
            );
        }
        Ok(())
    }

    /// Refuses what cannot run, naming the field.
    pub fn check(&self) -> anyhow::Result<()> {
        self.http.check()?;
        self.identity.check()?;
        self.store_location()?;
        for (name, account) in &self.unix_user {
            if account.is_empty() || account.contains(['\0', ':', '/', ' ']) {
                anyhow::bail!("unix_user.{name}: {account:?} is not a Unix account name");
            }
        }
        foresight_rm::slurm::Naming::instance(&self.instance)
            .map_err(|e| anyhow::anyhow!("instance: {e}"))?;
        if self.cluster.is_empty() {
            anyhow::bail!("cluster: at least one cluster is needed");
        }
        let mut names = std::collections::BTreeSet::new();
        for (i, c) in self.cluster.iter().enumerate() {
            let at = format!("cluster[{i}] ({})", c.name);
            if c.name.is_empty() || c.name.contains(['/', ' ']) {
                anyhow::bail!("{at}: name must be non-empty, without '/' or spaces");
            }
            if !names.insert(&c.name) {
                anyhow::bail!("{at}: name used twice");
            }
            match c.kind.as_str() {
                "local" => {
                    if c.slurm_conf.is_some() {
                        anyhow::bail!("{at}: slurm_conf is for kind = \"slurm\" clusters");
                    }
                    match (c.scheduler.as_str(), &c.wiki) {
                        ("local", _) => {}
                        ("wiki", Some(_)) => {}
                        ("wiki", _) => anyhow::bail!(
                            "{at}: scheduler = \"wiki\" needs [cluster.wiki] with listen \
                             (the address Maui connects to)"
                        ),
                        (other, _) => anyhow::bail!(
                            "{at}: scheduler {other:?} is not supported (supported: local, wiki)"
                        ),
                    }
                }
                "slurm" => {
                    let Some(conf) = &c.slurm_conf else {
                        anyhow::bail!(
                            "{at}: kind = \"slurm\" needs slurm_conf (the path of its slurm.conf)"
                        );
                    };
                    if !conf.is_absolute() {
                        anyhow::bail!(
                            "{at}: slurm_conf must be an absolute path, not {}",
                            conf.display()
                        );
                    }
                    if c.sync_ms == 0 {
                        anyhow::bail!("{at}: sync_ms must be at least 1");
                    }
                }
                "wiki" => crate::config::wiki_rm::check(&at, c)?,
                "site" => crate::config::grid::check_site_cluster(&at, c)?,
                other => anyhow::bail!(
                    "{at}: kind {other:?} is not supported (supported: local, slurm, wiki, site)"
                ),
            }
            if let Some(w) = c.work_dir.as_ref().filter(|w| !w.is_absolute()) {
                anyhow::bail!(
                    "{at}: work_dir must be an absolute path, not {}",
                    w.display()
                );
            }
            if c.kind != "site" && c.site.is_some() {
                anyhow::bail!("{at}: [cluster.site] is for kind = \"site\" clusters");
            }
            if c.kind != "wiki" && c.wiki_rm.is_some() {
                anyhow::bail!("{at}: [cluster.wiki_rm] is for kind = \"wiki\" clusters");
            }
            if c.kind != "local" && (c.scheduler != "local" || c.wiki.is_some()) {
                anyhow::bail!(
                    "{at}: scheduler and [cluster.wiki] are for kind = \"local\" clusters"
                );
            }
            // A cluster whose resource manager reports its size may leave procs out.
            c.spec
                .check(c.kind == "local")
                .map_err(|e| anyhow::anyhow!("cluster[{i}]: {e}"))?;
            if c.kind != "local" && c.groups.is_some() {
                // Its size comes from its resource manager, which says nothing of speeds.
                anyhow::bail!("{at}: groups are for kind = \"local\" clusters; give speed");
            }
        }
        let known: Vec<&str> = self.cluster.iter().map(|c| c.name.as_str()).collect();
        foresight_core::licence::check_pools(&self.licence, &known)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        for pool in &self.licence {
            for c in self
                .cluster
                .iter()
                .filter(|c| pool.clusters.contains(&c.name))
            {
                if c.kind != "local" || c.scheduler != "local" {
                    anyhow::bail!(
                        "licence {:?}: cluster {:?} is not scheduled by Foresight (kind = \
                         \"local\", scheduler = \"local\"), so its licences cannot be held",
                        pool.name,
                        c.name
                    );
                }
            }
        }
        if self.cycle_ms == 0 {
            anyhow::bail!("cycle_ms must be at least 1");
        }
        if self.copy_timeout_seconds == 0 {
            // Every copy would fail at once.
            anyhow::bail!("copy_timeout_seconds must be at least 1");
        }
        if self.horizon_seconds <= 0 || self.lead_time_seconds < 0 {
            anyhow::bail!("horizon_seconds must be > 0 and lead_time_seconds >= 0");
        }
        for u in &self.user {
            if u.token_sha256.len() != 64 || !u.token_sha256.bytes().all(|b| b.is_ascii_hexdigit())
            {
                anyhow::bail!("user {}: token_sha256 must be 64 hex digits", u.name);
            }
        }
        if let Some(g) = &self.grid {
            crate::config::grid::check_grid(g, &self.cluster)?;
        }
        Ok(())
    }
}

/// The most bytes a configuration, key or token file may hold: 16 MiB, far above any written
/// by hand; a FIFO or `/dev/zero` given as one ends in an error, not in memory exhausted.
pub const MAX_FILE_BYTES: u64 = 16 << 20;

/// The text of `path`, within [`MAX_FILE_BYTES`].
pub fn read_text(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("longer than {MAX_FILE_BYTES} bytes, the most such a file may hold"),
        ));
    }
    String::from_utf8(bytes).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "stream did not contain valid UTF-8",
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str) -> Result<Config, String> {
        let cfg: Config = toml::from_str(text).map_err(|e| e.to_string())?;
        cfg.check().map_err(|e| e.to_string())?;
        Ok(cfg)
    }

    #[test]
    fn a_standby_needs_postgres_and_clusters_it_can_reach() {
        let standby = |store: &str, kind: &str| {
            let site = r#"
[cluster.site]
site = "umea"
cluster = "abisko"
token_file = "/etc/umea.token"
"#;
            let text = format!(
                "standby = true\nstore = \"{store}\"\n[[cluster]]\nname = \"c\"\nkind = \"{kind}\"\nprocs = 4\n{}",
                if kind == "site" { site } else { "" }
            );
            let cfg: Config = toml::from_str(&text).map_err(|e| e.to_string())?;
            cfg.check().map_err(|e| e.to_string())?;
            cfg.check_mode().map_err(|e| e.to_string())
        };
        assert_eq!(standby("postgres://fs@db/grid", "site"), Ok(()));
        let e = standby("/var/lib/foresight.db", "site").unwrap_err();
        assert!(e.contains("must be a PostgreSQL database"), "{e}");
        let e = standby("postgres://fs@db/grid", "local").unwrap_err();
        assert!(e.contains("cluster[0] (c) is local"), "{e}");
    }

    #[test]
    fn the_grid_examples_are_valid() {
        let centre = check(include_str!("../../../../examples/grid-centre.toml")).unwrap();
        assert!(centre.cluster.iter().all(|c| c.kind == "site"));
        let site = check(include_str!("../../../../examples/grid-site.toml")).unwrap();
        assert_eq!(site.grid.unwrap().lend["abisko"], 32);
    }

    #[test]
    fn grid_settings_are_read_and_checked() {
        let centre = check(
            r#"
[[cluster]]
name = "umea-abisko"
kind = "site"
[cluster.site]
site = "umea"
cluster = "abisko"
token_file = "/etc/umea.token"
"#,
        )
        .unwrap();
        let s = centre.cluster[0].site.as_ref().unwrap();
        assert_eq!((s.lease_seconds, s.timeout_ms), (30, 10_000));
        assert!(centre.cluster[0].is_remote());
        let bad = [
            (
                "[[cluster]]\nname = \"x\"\nkind = \"site\"\n",
                "needs [cluster.site]",
            ),
            (
                "[[cluster]]\nname = \"x\"\nprocs = 2\n[cluster.site]\nsite = \"u\"\ntoken_file = \"/t\"\n",
                "[cluster.site] is for kind = \"site\"",
            ),
            (
                "[[cluster]]\nname = \"a\"\nprocs = 2\n[grid]\ncentres = [\"https://c\"]\nsite = \"u\"\ntoken_file = \"/t\"\nlend = { b = 2 }\n",
                "[grid] lend: no cluster \"b\" here",
            ),
            (
                "[[cluster]]\nname = \"a\"\nprocs = 2\n[grid]\ncentres = [\"c:1\"]\nsite = \"u\"\ntoken_file = \"/t\"\nlend = { a = 2 }\n",
                "must start with https://",
            ),
            (
                "[[cluster]]\nname = \"a\"\nprocs = 2\n[grid]\ncentres = [\"https://c\"]\nsite = \"u u\"\ntoken_file = \"/t\"\nlend = { a = 2 }\n",
                "[grid] site \"u u\"",
            ),
            // A cluster Maui schedules through WIKI holds no reservation for the grid.
            (
                "[[cluster]]\nname = \"a\"\nprocs = 2\nscheduler = \"wiki\"\n[cluster.wiki]\nlisten = \"127.0.0.1:0\"\nkey_file = \"/k\"\n[grid]\ncentres = [\"https://c\"]\nsite = \"u\"\ntoken_file = \"/t\"\nlend = { a = 2 }\n",
                "[grid] lend: cluster \"a\" is of kind \"local\" with scheduler \"wiki\"",
            ),
        ];
        for (text, want) in bad {
            let e = check(text).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
        }
    }

    #[test]
    fn wiki_settings_are_read_and_checked() {
        let cfg = check(
            r#"
[[cluster]]
name = "maui"
procs = 4
scheduler = "wiki"
[cluster.wiki]
listen = "127.0.0.1:15004"
key_file = "/etc/foresight/wiki.key"
allowed_peers = ["10.0.0.5", "::1"]
"#,
        )
        .unwrap();
        let c = &cfg.cluster[0];
        assert!(c.is_wiki_scheduled());
        let w = c.wiki.as_ref().unwrap();
        assert_eq!(w.allowed_peers.len(), 2);
        assert_eq!(w.listen, "127.0.0.1:15004");

        let e = check("[[cluster]]\nname = \"a\"\nprocs = 1\nscheduler = \"wiki\"\n").unwrap_err();
        assert!(
            e.contains("cluster[0] (a)") && e.contains("[cluster.wiki]"),
            "{e}"
        );
        let e = check("[[cluster]]\nname = \"a\"\nprocs = 1\nscheduler = \"maui\"\n").unwrap_err();
        assert!(e.contains("\"maui\" is not supported"), "{e}");
        let e = check(
            "[[cluster]]\nname = \"s\"\nkind = \"slurm\"\nslurm_conf = \"/x\"\nscheduler = \"wiki\"\n",
        )
        .unwrap_err();
        assert!(e.contains("kind = \"local\""), "{e}");
        let e = check(
            "[[cluster]]\nname = \"a\"\nprocs = 1\n[cluster.wiki]\nlisten = \"x\"\nkey_file = \"/k\"\nallowed_peers = [\"host\"]\n",
        )
        .unwrap_err();
        assert!(e.contains("allowed_peers") || e.contains("invalid"), "{e}");
    }

    #[test]
    fn a_copy_timeout_of_zero_is_refused_and_the_old_name_still_read() {
        let base = "[[cluster]]\nname = \"a\"\nprocs = 1\n";
        assert_eq!(check(base).unwrap().copy_timeout_seconds, 3_600);
        for key in ["copy_timeout_seconds", "output_copy_timeout_seconds"] {
            let e = check(&format!("{key} = 0\n{base}")).unwrap_err();
            assert!(
                e.contains("copy_timeout_seconds must be at least 1"),
                "{key}: {e}"
            );
            let cfg = check(&format!("{key} = 5\n{base}")).unwrap();
            assert_eq!(cfg.copy_timeout_seconds, 5, "{key}");
        }
        // Both names at once: which one counts would be a guess.
        let e = check(&format!(
            "copy_timeout_seconds = 5\noutput_copy_timeout_seconds = 6\n{base}"
        ))
        .unwrap_err();
        assert!(e.contains("duplicate field `copy_timeout_seconds`"), "{e}");
    }

    #[test]
    fn the_key_is_read_from_its_file_and_never_shown() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        let wiki = |p: &Path| WikiConfig {
            listen: "127.0.0.1:0".into(),
            key_file: p.to_path_buf(),
            allowed_peers: vec![],
            auth: None,
        };
        std::fs::write(&path, "4418\n").unwrap();
        let key = wiki(&path).read_key().unwrap();
        assert_eq!(key, foresight_rm::wiki::Key::new(4418));
        std::fs::write(&path, "secret-4418x\n").unwrap();
        let e = wiki(&path).read_key().unwrap_err().to_string();
        assert!(e.contains(&path.display().to_string()), "{e}");
        assert!(!e.contains("secret"), "{e}");
        let e = wiki(&dir.path().join("missing")).read_key().unwrap_err();
        assert!(e.to_string().contains("missing"), "{e}");
    }
}
