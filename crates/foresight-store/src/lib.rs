//! Durable state of the service: jobs, reservations, users and workflows. Every write is one
//! transaction that is on disk when the call returns; the plan is not stored, it is derived
//! from these on start-up.
//!
//! # Layout
//! - [`Store`]: the trait the daemon writes through.
//! - [`SqliteStore`]: the embedded default (WAL, `synchronous = FULL`), with versioned
//!   migrations under `migrations/sqlite/`.
//! - [`PgStore`]: PostgreSQL, the same schema under `migrations/postgres/`.
//! - [`JobState`], [`ReservationState`], [`AclSpec`] and the other types of `format`: the
//!   store's own enums and ACL types in its records, so that nothing outside the store sets
//!   the on-disk format (the service converts them to and from the API's).
//! - `tables`: the statements the two run alike, written once over both drivers; each
//!   backend's file keeps only what differs (PostgreSQL's dispatcher sites, budgets and
//!   notifications, SQLite's single-service tables).
//! - [`StoreLocation`] and [`open`]: the backend chosen by a path or a URL.
//! - [`Holder`]: one service per store; `sqlite_lock` holds an SQLite file, `pg_lock` a
//!   PostgreSQL database, and a refused service is told who holds it.
//! - [`SharedQueue`]: the global queue, auctions and leases shared by peer dispatchers
//!   (PostgreSQL only).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod format;
mod holder;
mod location;
mod pg_lock;
mod postgres;
mod shared_budget;
mod shared_peers;
mod shared_queue;
mod shared_round;
mod shared_view;
mod sqlite;
mod sqlite_lock;
mod tables;

pub use format::{
    AclSpec, DependencyKind, FailurePolicy, JobState, MapperName, ReservationState, UserCredentials,
};
pub use holder::Holder;
pub use location::StoreLocation;
pub use postgres::PgStore;
pub use shared_budget::{budget_taken, local_taken};
pub use shared_peers::{Awarded, Peer};
pub use shared_queue::{
    is_global, Claim, Closed, DueAuction, JobStanding, OpOutcome, OverBudget, QueueOp, QueuedJob,
    SharedJob, SharedQueue, Start, Submitted, GLOBAL_CHANNEL, USERS_CHANGED,
};
pub use shared_round::{Glance, NewBid, StandingOwn};
pub use shared_view::{AuctionCounts, AuctionRecord, AuctionStage, SiteRecord};
pub use sqlite::SqliteStore;

use serde::{de::DeserializeOwned, Deserialize, Serialize};
use std::collections::BTreeMap;

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database refused or failed.
    #[error("database {path}: {source}")]
    Database {
        /// The database file or URL.
        path: String,
        /// The driver's error.
        #[source]
        source: sqlx::Error,
    },
    /// A schema migration failed.
    #[error("migrating database {path}: {source}")]
    Migrate {
        /// The database file or URL.
        path: String,
        /// The migrator's error.
        #[source]
        source: sqlx::migrate::MigrateError,
    },
    /// A stored record does not decode (written by a newer version, or damaged).
    #[error("{table} row {id}: stored record does not decode: {source}")]
    Decode {
        /// The table.
        table: &'static str,
        /// The row.
        id: String,
        /// The decoder's error.
        #[source]
        source: serde_json::Error,
    },
    /// The location does not name a store (bad URL, unknown scheme).
    #[error("store location {location}: {reason}")]
    BadLocation {
        /// The location as given, without its password.
        location: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The database server cannot be reached or refuses the login.
    #[error("cannot connect to the database at {location}: {reason}")]
    Unreachable {
        /// The URL, without its password.
        location: String,
        /// The driver's reason.
        reason: String,
    },
    /// Another service holds the database.
    #[error(
        "database {location} is in use by {holder}: one service per database; stop that one \
         or give another database"
    )]
    InUse {
        /// The URL, without its password.
        location: String,
        /// Who holds it, as the database server knows it.
        holder: String,
    },
    /// This service's lock on the database ended with its connection (a server restart)
    /// and is not taken again yet: nothing is written meanwhile.
    #[error(
        "database {location}: this service's lock on it ended with its connection; nothing is \
         written until it is taken again"
    )]
    LockLost {
        /// The URL, without its password.
        location: String,
    },
    /// A user name or token is taken.
    #[error("user {0:?} already exists")]
    UserExists(String),
    /// An auction was settled as awarded to a site that has no live bid in it: the outcome
    /// was not chosen from that auction's bids (nothing was written).
    #[error("job {job}: site id {site} has no live bid in its auction")]
    NoSuchBidder {
        /// The job on sale.
        job: u64,
        /// The site id the outcome names.
        site: u32,
    },
    /// A round asked to bid twice for one job in one statement (nothing was written).
    #[error("job {0}: bid for twice in one round")]
    BidTwice(u64),
}

/// Shorthand.
pub type Result<T> = std::result::Result<T, StoreError>;

/// Processors of one cluster held or used by a job.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PartRecord {
    /// Cluster name.
    pub cluster: String,
    /// How many.
    pub procs: u32,
    /// Which, once started.
    #[serde(default)]
    pub processors: Vec<u32>,
    /// The reservation holding them, for global jobs.
    #[serde(default)]
    pub reservation: Option<u64>,
    /// Set when this part's process has ended.
    #[serde(default)]
    pub ended: bool,
    /// The resource manager's id of the part (a Slurm job id), once submitted there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external: Option<String>,
    /// When this part started, as its resource manager reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<i64>,
    /// When this part ended, as its supervisor (or resource manager) recorded it: the parts
    /// of a co-allocated job end apart, and `job history` times each.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<i64>,
    /// For a global job's part, the speed of the slowest processor the planner chose for
    /// it: the job's parts run at the slowest of these, which turns its elapsed time into
    /// reference seconds for its runtime statistics. `None` for a local job's part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed: Option<f64>,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

fn is_zero_secs(x: &i64) -> bool {
    *x == 0
}

/// The credentials a job names, by name: what reservation ACLs read (the core interns them
/// as `foresight_core::Credentials`). Stored as the array `[group, account, class, qos]`,
/// the form records have always had.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "[Option<String>; 4]", into = "[Option<String>; 4]")]
pub struct CredentialNames {
    /// The group (Unix-like group of users).
    pub group: Option<String>,
    /// The account charged.
    pub account: Option<String>,
    /// The class (queue).
    pub class: Option<String>,
    /// The quality of service.
    pub qos: Option<String>,
}

impl CredentialNames {
    /// The request field that names each kind, in the stored order.
    pub const KINDS: [&'static str; 4] = ["group", "account", "class", "qos"];

    /// Each kind's name, in [`CredentialNames::KINDS`]' order.
    pub fn by_kind(&self) -> [&Option<String>; 4] {
        [&self.group, &self.account, &self.class, &self.qos]
    }
}

impl From<[Option<String>; 4]> for CredentialNames {
    fn from([group, account, class, qos]: [Option<String>; 4]) -> Self {
        CredentialNames {
            group,
            account,
            class,
            qos,
        }
    }
}

impl From<CredentialNames> for [Option<String>; 4] {
    fn from(c: CredentialNames) -> Self {
        [c.group, c.account, c.class, c.qos]
    }
}

/// A job as stored: the request plus everything that happened to it. `Default` is a pending job of nobody with nothing
/// set, so that tests and builders name only what they need.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    /// Id (assigned by the store).
    #[serde(skip)]
    pub id: u64,
    /// Owner.
    pub user: String,
    /// Name.
    pub name: Option<String>,
    /// Processors.
    pub procs: u32,
    /// Walltime, seconds.
    pub walltime: i64,
    /// Max price per processor-second.
    pub price: Option<f64>,
    /// Local job of this cluster, if asked.
    pub cluster: Option<String>,
    /// Bound to this advance reservation.
    pub reservation: Option<u64>,
    /// May start before its reservation.
    pub allow_early_start: bool,
    /// May be split over clusters.
    pub co_allocate: bool,
    /// Program and arguments.
    pub command: Vec<String>,
    /// Extra environment.
    pub env: BTreeMap<String, String>,
    /// Working directory.
    pub cwd: Option<String>,
    /// Group, account, class and QoS names, for reservation ACLs.
    #[serde(default)]
    pub cred: CredentialNames,
    /// State.
    pub state: JobState,
    /// The final state already decided while parts are still stopping (cancel, timeout, a
    /// failed part).
    #[serde(default)]
    pub state_after: Option<JobState>,
    /// Held.
    pub held: bool,
    /// Suspended.
    pub suspended: bool,
    /// Since when its running attempt is suspended by `job suspend` (not by preemption,
    /// which [`PreemptionRecord`] times), while it is: what `run_secs` leaves out. A field
    /// of the stored record, so that it needs no migration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspended_since: Option<i64>,
    /// Seconds its running attempt spent suspended by `job suspend` before
    /// `suspended_since`: neither run time nor walltime.
    #[serde(default, skip_serializing_if = "is_zero_secs")]
    pub suspended_secs: i64,
    /// Absolute priority level of a global job: it preempts running global jobs of lower
    /// levels.
    #[serde(default)]
    pub priority: u32,
    /// When preempted, killed and queued again instead of suspended.
    #[serde(default)]
    pub requeue: bool,
    /// Its running attempt is being killed to run again as its next attempt (preempted,
    /// requeued, or lost): kept so that a restart before the kill is over still requeues
    /// it. A field of the stored record, so that it needs no migration.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub requeue_pending: bool,
    /// Exit code.
    pub exit_code: Option<i32>,
    /// Fatal signal.
    pub signal: Option<i32>,
    /// Why it is where it is.
    pub reason: Option<String>,
    /// Submitted.
    pub submitted_at: i64,
    /// First planned start.
    pub first_planned_start: Option<i64>,
    /// Latest planned start.
    pub planned_start: Option<i64>,
    /// Started.
    pub started_at: Option<i64>,
    /// Ended.
    pub ended_at: Option<i64>,
    /// Charged, over every attempt.
    pub charged: f64,
    /// The part of `charged` that earlier attempts used: settled, never refunded (a
    /// requeued job's new reservation is refunded on its own).
    #[serde(default)]
    pub settled: f64,
    /// What its user paid for it before it came here: in dispatcher mode, the hold the site
    /// that started it took from the user's shared budget (its worst case at the cluster's
    /// tariff). `charged` is settled against it when it ends ([`budget_taken`]); 0 for
    /// every other job.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub prepaid: f64,
    /// In dispatcher mode, what a local job's site took from its user's limited shared
    /// budget as it accepted it: the job's worst case at its cluster's tariff, so that every
    /// site's admissions see it. Its charges are settled against it ([`local_taken`]); 0
    /// for every other job, and once a peer gave it back because the site died.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub budget_hold: f64,
    /// Where it runs.
    pub parts: Vec<PartRecord>,
    /// Run attempt (requeues add one).
    pub attempt: u32,
    /// Standard output file.
    pub stdout: Option<String>,
    /// Standard error file.
    pub stderr: Option<String>,
    /// Its dependencies and array membership; `None` for a job that has neither. A field
    /// of the stored record (not a column), so that it needs no migration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub links: Option<Links>,
    /// Not eligible to start before this instant (`--begin`), seconds since the epoch. A
    /// field of the stored record, so that it needs no migration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub begin: Option<i64>,
    /// Features its cluster must offer (`--requires`). A field of the stored record, so
    /// that it needs no migration.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requires: Vec<String>,
    /// Licences it holds while it runs, by pool (`--licence ansys:2`). A field of the
    /// stored record, so that it needs no migration.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub licences: BTreeMap<String, u32>,
    /// What preemption by higher priority levels did to a global job: kept so that a
    /// restart knows a job stopped for another is not running (it holds no processors and
    /// resumes by itself), and what its stopped time was. A field of the stored record, so
    /// that it needs no migration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemption: Option<PreemptionRecord>,
    /// The application it runs, as named at submission (`--app`), for runtime prediction;
    /// `None`: its program. A field of the stored record, so that it needs no migration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app: Option<String>,
    /// The runtime its cluster's local policy plans with instead of the walltime, seconds,
    /// and where it came from; `None`: planned with the walltime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prediction: Option<Prediction>,
    /// Its input files, measured at submission (`--input`). A field of the stored record,
    /// so that it needs no migration.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<InputRecord>,
    /// Each copy of its inputs to a cluster it runs on, in order: kept so that `job show`
    /// says when staging began and ended, and why it failed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub staging: Vec<StagingRecord>,
    /// Its output files (`--output-file`), copied back once it completes. A field of the
    /// stored record, so that it needs no migration.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outputs: Vec<OutputRecord>,
    /// The copy of its outputs back: `ended_at` is `None` while it runs, and a restart
    /// finds it so and copies again (a completed job is loaded like any other).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_staging: Option<StagingRecord>,
}

impl JobRecord {
    /// Its state as the `state` column holds it: the store's name, not the API's.
    pub(crate) fn state_column(&self) -> &'static str {
        self.state.as_str()
    }
}

/// One output file of a job: where it is written and where it is copied to.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputRecord {
    /// Path relative to the job's working directory.
    pub path: String,
    /// The cluster it is copied to; `None`: where the job was submitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
}

/// One input file of a job: where it lives and how big it was at submission.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputRecord {
    /// Absolute path on its cluster.
    pub path: String,
    /// The cluster holding it; `None`: where the job was submitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// The site holding it, for a global job's input among peer dispatchers: a winner at
    /// another site fetches it from there over the network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub site: Option<String>,
    /// Size at submission, bytes.
    pub bytes: u64,
}

/// A copy of a job's inputs to one cluster, seconds since the epoch.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StagingRecord {
    /// The cluster copied to.
    pub cluster: String,
    /// The run attempt it was for.
    #[serde(default)]
    pub attempt: u32,
    /// When the copy began.
    pub began_at: i64,
    /// When it ended, done or failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<i64>,
    /// Why it failed: a job's own outputs not copied, which fails every job that waits
    /// for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The workflow edges whose files an output copy takes to their successors, each with
    /// its own outcome: an edge whose files fail fails only its successor.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub edges: Vec<EdgeCopyRecord>,
}

/// The files of a workflow edge (or of several edges to one successor) in a task's output
/// copy.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EdgeCopyRecord {
    /// How the copy names the edge, in its errors too: `edge A -> B`.
    pub label: String,
    /// The successor's job: the one job this edge's files wait, or fail, for.
    pub job: u64,
    /// The successor's cluster, where the files go.
    pub cluster: String,
    /// Why copying the edge's files failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A global job's time stopped by preemption (absolute priorities), in seconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PreemptionRecord {
    /// When it was stopped, while it is; `None` once it runs again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<i64>,
    /// Run time it had left when stopped: the length of the reservation it resumes in.
    #[serde(default)]
    pub left: i64,
    /// Time spent stopped before `since` (every earlier preemption): neither run nor
    /// charged.
    #[serde(default)]
    pub suspended: i64,
}

/// A prediction of a job's runtime as the scheduler uses it, and where it came from.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prediction {
    /// The runtime planned now (the first guess, or its last correction), seconds in the
    /// units of the job's walltime: on the reference processor for a global job (each part
    /// is planned by it stretched as the walltime is to the part's window), on its
    /// cluster's processors for a local one.
    pub seconds: i64,
    /// The predictor (`tsafrir`, `app`).
    pub predictor: String,
    /// How many earlier runs it was drawn from (0: none, so the walltime).
    pub runs: u32,
    /// How often it was corrected because the job outlived it.
    #[serde(default)]
    pub corrections: u32,
}

/// A job's relations to other jobs: what it waits for, and the array it belongs to.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Links {
    /// What it waits for, resolved to job ids at submission.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dependency: Option<DependencyRecord>,
    /// The array it is a task of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub array: Option<ArrayTask>,
    /// Waiting for its dependencies, its array's limit or its singleton turn: not handed to
    /// any scheduler until they hold. Kept so that a restart knows which jobs still wait.
    #[serde(default)]
    pub waiting: bool,
}

/// A dependency as submitted, with the job ids each condition resolved to.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DependencyRecord {
    /// As written (`afterok:12,singleton`), for people.
    pub text: String,
    /// One condition is enough (`?`); otherwise all must hold (`,`).
    #[serde(default)]
    pub any: bool,
    /// At most one job of the same name and user planned or running at a time.
    #[serde(default)]
    pub singleton: bool,
    /// The conditions on other jobs.
    #[serde(default)]
    pub on: Vec<ConditionRecord>,
}

/// One condition: every job it names (one, or every task of an array) must satisfy `kind`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConditionRecord {
    /// What is waited for.
    pub kind: DependencyKind,
    /// The job as named (`12`, `12_3`).
    pub target: String,
    /// The jobs it resolved to.
    pub jobs: Vec<u64>,
}

/// A task of an array job.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ArrayTask {
    /// The array job's id: the id of its first task. 0 until the store has numbered it.
    #[serde(default)]
    pub job: u64,
    /// This task's index (`FORESIGHT_ARRAY_TASK_ID`).
    pub task: u32,
    /// Position in the array (0 for the first task): the array job's id is this task's id
    /// minus `position` (ids of one submission are consecutive), should `job` be 0.
    #[serde(default)]
    pub position: u32,
    /// At most this many of the array's tasks planned or running at once (`%N`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

/// A reservation as stored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReservationRecord {
    /// Id (assigned by the caller, unique).
    #[serde(skip)]
    pub id: u64,
    /// `admin` or `job`.
    pub kind: String,
    /// Cluster.
    pub cluster: String,
    /// Processors.
    pub procs: u32,
    /// Which processors, when it names them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub processors: Vec<u32>,
    /// Start.
    pub start: i64,
    /// End.
    pub end: i64,
    /// Who may use it.
    pub acl: AclSpec,
    /// State.
    pub state: ReservationState,
    /// Expiry of a tentative reservation.
    pub expires_at: Option<i64>,
    /// Who made it.
    pub owner: String,
}

impl ReservationRecord {
    /// Its state as the `state` column holds it: the store's name, not the API's.
    pub(crate) fn state_column(&self) -> &'static str {
        self.state.as_str()
    }
}

/// A user as stored.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct UserRecord {
    /// Name (unique).
    #[serde(skip)]
    pub name: String,
    /// SHA-256 of the bearer token, hex.
    #[serde(skip)]
    pub token_hash: String,
    /// Administrator.
    pub admin: bool,
    /// Budget left; `None` = unlimited.
    pub budget: Option<f64>,
    /// Charged so far.
    pub spent: f64,
    /// The Unix account set by an administrator (`None`: the `[unix_user]` table, else the
    /// user's own name). Set explicitly, it may be root; by default it never is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unix_user: Option<String>,
    /// What the user may name in a job (groups, accounts, classes, QoS), set by an
    /// administrator: reservation ACLs read these, never a job's own claims.
    #[serde(default)]
    pub credentials: UserCredentials,
    /// A disabled user's token is refused.
    #[serde(default)]
    pub disabled: bool,
    /// Removed: the record stays so that the name is never reused for someone else (the
    /// user's jobs keep their history under it); the token is gone.
    #[serde(default)]
    pub removed: bool,
}

/// A user record to write, and the record its writer changed it from.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct UserChange {
    /// The record as the writer last read it from the store (or last wrote it): the fields
    /// where `user` differs from it are the writer's change. `None`: write `user` whole.
    pub base: Option<UserRecord>,
    /// The record as the writer has it now.
    pub user: UserRecord,
}

impl From<UserRecord> for UserChange {
    fn from(user: UserRecord) -> Self {
        UserChange { base: None, user }
    }
}

/// The user row as the store has it (`token_hash`, `data`), and what `c` writes over it: its
/// changes merged onto that row when it has a base, else its whole record. Both backends
/// write users through this, so that they merge alike.
pub(crate) fn user_to_write(
    c: &UserChange,
    (hash, data): (String, String),
) -> Result<(UserRecord, UserRecord)> {
    let mut theirs: UserRecord = decode("users", c.user.name.clone(), &data)?;
    theirs.name = c.user.name.clone();
    theirs.token_hash = hash;
    let mine = match &c.base {
        Some(base) => merge_user(base, &c.user, &theirs).map_err(|source| StoreError::Decode {
            table: "users",
            id: c.user.name.clone(),
            source,
        })?,
        None => c.user.clone(),
    };
    Ok((theirs, mine))
}

/// A three-way merge of user records: every field (down to each list of the credentials)
/// that `mine` changed from `base` is taken from `mine`, every other from `theirs`. So
/// changes to different fields from two writers both stand, and for one field changed by
/// both the merge that runs later (the later writer) decides.
pub fn merge_user(
    base: &UserRecord,
    mine: &UserRecord,
    theirs: &UserRecord,
) -> std::result::Result<UserRecord, serde_json::Error> {
    let value = |u: &UserRecord| serde_json::to_value(u);
    let merged = merge_value(&value(base)?, &value(mine)?, value(theirs)?);
    let mut out: UserRecord = serde_json::from_value(merged)?;
    out.name = theirs.name.clone();
    out.token_hash = if mine.token_hash != base.token_hash {
        mine.token_hash.clone()
    } else {
        theirs.token_hash.clone()
    };
    Ok(out)
}

fn merge_value(
    base: &serde_json::Value,
    mine: &serde_json::Value,
    theirs: serde_json::Value,
) -> serde_json::Value {
    use serde_json::Value;
    match (base, mine, theirs) {
        (Value::Object(b), Value::Object(m), Value::Object(mut t)) => {
            let keys: std::collections::BTreeSet<&String> = b.keys().chain(m.keys()).collect();
            for k in keys {
                match (b.get(k), m.get(k)) {
                    (bv, mv) if bv == mv => {}
                    (_, None) => {
                        t.remove(k);
                    }
                    (Some(bv), Some(mv)) => {
                        let tv = t.remove(k).unwrap_or(Value::Null);
                        t.insert(k.clone(), merge_value(bv, mv, tv));
                    }
                    (None, Some(mv)) => {
                        t.insert(k.clone(), mv.clone());
                    }
                }
            }
            Value::Object(t)
        }
        (b, m, t) => {
            if b == m {
                t
            } else {
                m.clone()
            }
        }
    }
}

/// A workflow as stored: its tasks (each a job of `jobs`), their edges, where and when the
/// mapping placed each task, and how many times each was retried. Its state is not stored:
/// it is derived from its tasks' jobs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkflowRecord {
    /// Id (assigned by the store).
    #[serde(skip)]
    pub id: u64,
    /// Owner: every task's job is the owner's.
    pub user: String,
    /// Name.
    pub name: String,
    /// The mapping algorithm that placed the tasks.
    pub mapper: MapperName,
    /// What a failed task does.
    pub on_failure: FailurePolicy,
    /// Submitted.
    pub submitted_at: i64,
    /// The tasks, in submission order.
    pub tasks: Vec<WorkflowTaskRecord>,
    /// Data edges, as indices into `tasks`.
    pub edges: Vec<WorkflowEdgeRecord>,
}

/// One task of a stored workflow.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkflowTaskRecord {
    /// Its name in the workflow.
    pub name: String,
    /// Its job: 0 until the store has numbered it (filled in by
    /// [`Store::insert_workflow`]).
    pub job: u64,
    /// The cluster the mapping chose.
    pub cluster: String,
    /// The start the mapping planned.
    pub planned_start: i64,
    /// The end the mapping planned.
    pub planned_end: i64,
    /// Runs after a failure so far.
    #[serde(default)]
    pub retries: u32,
    /// The reservation holding its slot (a workflow reserved two-phase).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<u64>,
}

/// Data from one task to another, by task index.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkflowEdgeRecord {
    /// The producing task.
    pub from: usize,
    /// The consuming task.
    pub to: usize,
    /// MB moved, as the user gave it: the mapping's weight.
    pub data_mb: f64,
    /// Files copied from the producer's working directory to the consumer's, relative to
    /// both (absent in records written before edges named files).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
}

/// One finished run of a job, for runtime prediction (the statistics store, seed 003): who
/// ran what, with which parameters, on which processor type, and for how long.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunRecord {
    /// The job that ran.
    pub job: u64,
    /// Its owner.
    pub user: String,
    /// The application: the `--app` name, or the program the job ran.
    pub app: String,
    /// The application's parameters that shape its runtime (processors and arguments).
    pub params: String,
    /// The processor type: the cluster it ran on; `None` for a global job, whose runtime
    /// counts on the reference processor.
    pub cluster: Option<String>,
    /// How long it ran, seconds.
    pub runtime: i64,
    /// When it ended, seconds since the epoch.
    pub ended_at: i64,
    /// Whether `runtime` counts on the reference processor: true for a global job's run
    /// stored since global runs are kept so; false for a local job's run (on its cluster's
    /// processors) and for a global job's run stored before, which holds its elapsed time
    /// on the clusters it ran on (the service converts or drops those at start).
    #[serde(default)]
    pub on_reference: bool,
}

/// Durable state behind one interface, so that the SQLite default and a PostgreSQL backend
/// are interchangeable.
#[async_trait::async_trait]
pub trait Store: Send + Sync {
    /// Stores new jobs in one transaction; returns their ids in order. The jobs are durable
    /// when this returns.
    async fn insert_jobs(&self, jobs: &[JobRecord]) -> Result<Vec<u64>>;
    /// Writes the current state of jobs, all in one transaction.
    async fn update_jobs(&self, jobs: &[JobRecord]) -> Result<()>;
    /// Every job (or only those not yet final), by id.
    async fn load_jobs(&self, unfinished_only: bool) -> Result<Vec<JobRecord>>;
    /// Writes reservations (new or changed; ids are the caller's), in one transaction.
    async fn put_reservations(&self, rs: &[ReservationRecord]) -> Result<()>;
    /// Every reservation, by id.
    async fn load_reservations(&self) -> Result<Vec<ReservationRecord>>;
    /// Stores a new user; refuses a taken name.
    async fn insert_user(&self, u: &UserRecord) -> Result<()>;
    /// Writes users' budgets, roles, credentials and tokens, in one transaction. A change
    /// with a base writes only the fields its writer changed, onto the row as the store has
    /// it ([`merge_user`]), so that a writer with a stale copy undoes no one else's change;
    /// a change without a base writes the whole record. A peer dispatcher's budget and
    /// spending are never written from its copy: the database's stand.
    async fn update_users(&self, changes: &[UserChange]) -> Result<()>;
    /// Every user.
    async fn load_users(&self) -> Result<Vec<UserRecord>>;
    /// Stores a workflow and its tasks' jobs in one transaction: all or nothing. The jobs
    /// are numbered in order and `tasks[i].job` is set to the i-th job's id in the stored
    /// workflow; returns the workflow's id and the jobs' ids.
    async fn insert_workflow(
        &self,
        wf: &WorkflowRecord,
        jobs: &[JobRecord],
    ) -> Result<(u64, Vec<u64>)>;
    /// Writes the current state of workflows, all in one transaction.
    async fn update_workflows(&self, wfs: &[WorkflowRecord]) -> Result<()>;
    /// Every workflow, by id.
    async fn load_workflows(&self) -> Result<Vec<WorkflowRecord>>;
    /// Adds finished runs to the statistics store, in one transaction, in order.
    async fn insert_runs(&self, runs: &[RunRecord]) -> Result<()>;
    /// The runs a predictor may still look at: the last `per_key` of every user on every
    /// processor type (cluster, or the reference processor) and the last `per_key` of every
    /// (application, parameters, cluster), oldest first. Replayed in this order they leave
    /// each user's and each application's last `per_key` runs in place.
    async fn load_runs(&self, per_key: usize) -> Result<Vec<RunRecord>>;
    /// Records the `nonce` of a signed request by `signer` (`site NAME`, `peer NAME`) seen
    /// at `now`, first forgetting those seen more than `window` seconds before: true the
    /// first time, false for a replay. Kept in the store, so that a request captured on the
    /// wire is refused after a restart and by a standby that took over, within the window
    /// its timestamp stays valid.
    async fn first_use_of_nonce(
        &self,
        signer: &str,
        nonce: &str,
        now: i64,
        window: i64,
    ) -> Result<bool>;
    /// Finishes writing and closes (graceful shutdown).
    async fn close(&self);
    /// Returns once another service has taken the store from this one ([`StoreError::InUse`]
    /// naming it): this one may write nothing more and must stop. A PostgreSQL database can
    /// be taken while this service's lock is gone with its connection (`pg_lock`); an
    /// SQLite file never can, and this never returns for it.
    async fn taken_over(&self) -> StoreError {
        std::future::pending().await
    }
}

/// Opens the store at `location` for this process, without a data directory to name; see
/// [`open_by`].
pub async fn open(location: &StoreLocation) -> Result<std::sync::Arc<dyn Store>> {
    open_by(location, &Holder::this_process(None)).await
}

/// Takes the store at `location` for `holder` (creating an SQLite file, or the tables in an
/// existing PostgreSQL database) with its schema up to date. One service per store: refused
/// with [`StoreError::InUse`], naming the holder, while another service holds it.
pub async fn open_by(
    location: &StoreLocation,
    holder: &Holder,
) -> Result<std::sync::Arc<dyn Store>> {
    Ok(match location {
        StoreLocation::Sqlite(path) => {
            std::sync::Arc::new(SqliteStore::open_by(path, holder).await?)
        }
        StoreLocation::Postgres(url) => {
            std::sync::Arc::new(PgStore::open_by(url, None, holder).await?)
        }
    })
}

fn decode<T: DeserializeOwned>(table: &'static str, id: String, data: &str) -> Result<T> {
    serde_json::from_str(data).map_err(|source| StoreError::Decode { table, id, source })
}

fn encode<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).expect("invariant: records serialize")
}

#[cfg(test)]
mod credential_names_tests {
    use super::CredentialNames;

    #[test]
    fn credential_names_keep_the_stored_array_form() {
        let c = CredentialNames {
            group: Some("physics".into()),
            account: None,
            class: Some("batch".into()),
            qos: None,
        };
        let stored = serde_json::json!(["physics", null, "batch", null]);
        assert_eq!(serde_json::to_value(&c).unwrap(), stored);
        assert_eq!(
            serde_json::from_value::<CredentialNames>(stored).unwrap(),
            c
        );
    }
}
