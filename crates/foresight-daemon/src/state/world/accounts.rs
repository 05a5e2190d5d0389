//! Isolation of jobs from each other and from the service.
//!
//! Each Foresight user maps to a Unix account: the one an administrator set on the user
//! record, else the `[unix_user]` table's entry for the name (or its `"*"` entry), else the
//! account of the same name. When the daemon runs as root, every local job runs as its
//! user's account (the supervisor drops to it before `exec`), and a submission by a user
//! whose account does not exist, or whose account would be root without an administrator
//! having chosen it, is refused with 403. The data directory keeps what jobs must not read
//! out of their reach: see `runtime::data_dir::prepare`.

use crate::config::identity::RootJobs;
use crate::state::refusal::Refusal;
use crate::state::world::World;
use foresight_core::time::Time;
use foresight_core::{JobId, ReservationId};
use foresight_store::CredentialNames;
use foresight_store::JobRecord;
use std::collections::BTreeMap;
use std::path::Path;

/// A global job: planned by the broker over the grid, and charged by it.
fn is_global(j: &JobRecord) -> bool {
    j.cluster.is_none() && j.reservation.is_none()
}

impl World {
    /// Follows in this copy of `user`'s record the holds `jobs` took from the shared budget
    /// as they were stored (dispatcher mode): spent, and gone from what is left.
    pub(crate) fn holds_taken(&mut self, user: &str, jobs: &[JobRecord]) {
        let held: f64 = jobs.iter().map(|j| j.budget_hold).sum();
        if held > 0.0 {
            if let Some(u) = self.users.follow_store(user) {
                u.spent += held;
                if let Some(b) = u.budget.as_mut() {
                    *b -= held;
                }
            }
        }
    }

    /// Moves `amount` from job `id`'s user's budget to the job's charge (a negative amount
    /// gives back). A prepaid job's charge is paid from its hold, which left the budget as
    /// its site started it: the budget is not moved again (the shared database settles the
    /// charge against the hold, see [`foresight_store::budget_taken`]); so is a held local
    /// job's ([`foresight_store::local_taken`]).
    pub(crate) fn charge(&mut self, id: JobId, amount: f64) {
        let Some(j) = self.jobs.get_mut(&id) else {
            return;
        };
        j.charged += amount;
        if j.prepaid > 0.0 || j.budget_hold > 0.0 {
            return;
        }
        let user = j.user.clone();
        if let Some(u) = self.users.get_mut(&user) {
            u.spent += amount;
            if let Some(b) = u.budget.as_mut() {
                *b -= amount;
            }
        }
    }

    /// The price per processor-second a local job, or a job in an administrative
    /// reservation, pays: its cluster's base tariff (`None` for a global job, or a cluster
    /// that no longer exists).
    pub(crate) fn local_tariff(&self, j: &JobRecord) -> Option<f64> {
        if is_global(j) {
            return None;
        }
        let cluster = match j.reservation {
            Some(r) => self
                .reservations
                .get(&ReservationId(r))
                .map(|r| r.cluster.as_str()),
            None => j.cluster.as_deref(),
        }?;
        let k = self.cluster_index(cluster)?;
        Some(self.broker.clusters[k].tariff.base)
    }

    /// What the attempt of local job `id` that ended at `now` owes: its processors from its
    /// start to `now`, at most its walltime, at its cluster's base tariff. `None` for a
    /// global job (the broker charges those) or one that never started.
    pub(crate) fn local_charge(&self, now: Time, id: JobId) -> Option<f64> {
        let j = self.jobs.get(&id)?;
        let price = self.local_tariff(j)?;
        let used = (now.secs() - j.started_at?).clamp(0, j.walltime.max(0));
        let amount = price * f64::from(j.procs) * used as f64;
        (amount != 0.0).then_some(amount)
    }

    /// The most a job may cost: every processor at `price` for its whole walltime.
    pub(crate) fn worst_case(j: &JobRecord, price: f64) -> f64 {
        price * f64::from(j.procs) * j.walltime as f64
    }

    /// The price per processor-second a job is admitted at: its cluster's base tariff for a
    /// local job or one in an administrative reservation, else the price it offers (or the
    /// default maximum price).
    pub(crate) fn admission_price(&self, j: &JobRecord) -> f64 {
        match self.local_tariff(j) {
            Some(p) => p,
            None if is_global(j) => j.price.unwrap_or_else(|| self.default_price()),
            None => 0.0,
        }
    }

    /// What job `id` counts toward its user's uncharged total: the worst case of a local job
    /// (or a job in an administrative reservation) that is not final, whose current attempt
    /// is charged only when it stops, unless a hold in the shared budget covers it.
    fn uncharged_worst_case(&self, id: JobId) -> Option<(&str, f64)> {
        let j = self.jobs.get(&id)?;
        // A held job's worst case has left the shared budget already.
        if j.state.is_final() || j.budget_hold > 0.0 {
            return None;
        }
        let price = self.local_tariff(j)?;
        Some((j.user.as_str(), World::worst_case(j, price)))
    }

    /// Brings job `id`'s share of its user's uncharged total up to date: called when a job
    /// is taken in or restored, and for every job changed since the last recount (every
    /// change to a job marks it, so a charge, a cancel or an end is seen there).
    pub(crate) fn recount(&mut self, id: JobId) {
        let now = self
            .uncharged_worst_case(id)
            .map(|(u, w)| (u.to_string(), w));
        self.uncharged.set(id, now);
    }

    /// [`World::recount`] for every job changed since the last recount: before an
    /// admission, a cycle and a write, so that the corrections
    /// [`World::uncharged_of`] adds walk only what changed since (a few jobs, whatever
    /// the queue holds or how long since the last write).
    pub(crate) fn recount_changed(&mut self) {
        for id in self.jobs.take_to_recount() {
            self.recount(id);
        }
    }

    /// Sets aside what the local jobs among `records`, admitted but not yet stored, may
    /// cost; the ticket gives it back ([`Uncharged::release`]) when they are taken in or
    /// refused by the store.
    pub(crate) fn set_aside_admitted(&mut self, records: &[JobRecord]) -> u64 {
        let mut by_user: BTreeMap<&str, f64> = BTreeMap::new();
        for j in records.iter().filter(|j| j.budget_hold <= 0.0) {
            if let Some(price) = self.local_tariff(j) {
                *by_user.entry(j.user.as_str()).or_insert(0.0) += World::worst_case(j, price);
            }
        }
        let shares = by_user
            .into_iter()
            .map(|(u, w)| (u.to_string(), w))
            .collect();
        self.uncharged.set_aside(shares)
    }

    /// How the jobs changed since their last recount move their users' uncharged totals:
    /// `(user, +now − counted)` for each such local job (a global job never counts).
    fn uncharged_corrections(&self) -> impl Iterator<Item = (&str, f64)> + '_ {
        self.jobs
            .to_recount()
            .iter()
            .filter(|id| self.jobs.get(id).is_none_or(|j| !is_global(j)))
            .flat_map(|&id| {
                let counted = self.uncharged.of_job(id).map(|(u, w)| (u, -w));
                let now = self.uncharged_worst_case(id);
                counted.into_iter().chain(now)
            })
    }

    /// What `user`'s admitted local jobs may still cost: the running total, corrected for
    /// jobs changed since their last recount (a few, not every record), and what is set
    /// aside for jobs being stored.
    pub(crate) fn uncharged_of(&self, user: &str) -> f64 {
        let correction: f64 = self
            .uncharged_corrections()
            .filter(|(u, _)| *u == user)
            .map(|(_, w)| w)
            .sum();
        (self.uncharged.total(user) + self.uncharged.aside(user) + correction).max(0.0)
    }

    /// What the broker may plan with for `user`: their budget less what their local jobs
    /// may still cost (`None`: unlimited). Set at each cycle and whenever a local job is
    /// admitted, so that a job admitted while a cycle plans off the lock is counted when the
    /// cycle's decisions are carried out.
    pub(crate) fn plannable_budget(&self, user: &str) -> Option<f64> {
        let b = self.users.get(user)?.budget?;
        Some((b - self.uncharged_of(user)).max(0.0))
    }

    /// Tells the broker what `user` may still plan with.
    pub(crate) fn sync_broker_budget(&mut self, user: &str) {
        if !self.users.contains_key(user) {
            return;
        }
        self.recount_changed();
        let left = self.plannable_budget(user);
        let id = foresight_core::UserId(self.intern(0, user));
        self.broker.set_budget(id, left);
    }

    /// [`World::sync_broker_budget`] for every user, with one recount of the changed jobs
    /// rather than one per user: after a cycle every planned job is changed.
    pub(crate) fn sync_broker_budgets(&mut self) {
        self.recount_changed();
        let left: Vec<(String, Option<f64>)> = self
            .users
            .keys()
            .map(|name| (name.clone(), self.plannable_budget(name)))
            .collect();
        for (name, left) in left {
            let id = foresight_core::UserId(self.intern(0, &name));
            self.broker.set_budget(id, left);
        }
    }

    /// The uncharged total of every user by a scan of every record: what the running total
    /// must always equal.
    #[cfg(test)]
    pub(crate) fn uncharged_by_scan(&self) -> BTreeMap<String, f64> {
        let mut out = BTreeMap::new();
        for &id in self.jobs.keys() {
            if let Some((u, w)) = self.uncharged_worst_case(id) {
                *out.entry(u.to_string()).or_insert(0.0) += w;
            }
        }
        out
    }

    /// 402 unless a running local job's next attempt fits the budget: what this attempt
    /// owes so far is charged when it stops, and the next may again cost its worst case, so
    /// what is left after the charge must still cover everything the user's local jobs may
    /// cost. (A global job's next attempt waits for budget in the broker instead.)
    pub(crate) fn check_rerun_budget(&self, now: Time, id: JobId) -> Result<(), Refusal> {
        let Some(j) = self.jobs.get(&id) else {
            return Ok(());
        };
        let Some(left) = self.users.get(&j.user).and_then(|u| u.budget) else {
            return Ok(());
        };
        if self.local_tariff(j).is_none() {
            return Ok(());
        }
        let owed = self.local_charge(now, id).unwrap_or(0.0);
        let committed = self.uncharged_of(&j.user);
        if left - owed < committed {
            return Err(Refusal::over_budget(format!(
                "running job {id} again may cost up to its worst case once more: {:.2} left \
                 after this attempt's {owed:.2}, less {committed:.2} that {}'s local jobs may \
                 still cost, is not enough",
                left - owed,
                j.user
            )));
        }
        Ok(())
    }

    /// 402 unless job `j`'s worst case at `price` fits what its user has left, less what
    /// their admitted local jobs may still cost.
    pub(crate) fn check_budget(&self, j: &JobRecord, price: f64) -> Result<(), Refusal> {
        let Some(left) = self.users.get(&j.user).and_then(|u| u.budget) else {
            return Ok(());
        };
        let worst = World::worst_case(j, price);
        let committed = self.uncharged_of(&j.user);
        if worst + committed > left {
            let owed = if committed > 0.0 {
                format!(", less {committed:.2} its unfinished local jobs may still cost")
            } else {
                String::new()
            };
            return Err(Refusal::over_budget(format!(
                "worst-case cost {worst:.2} ({} procs × {} s × {price} per processor-second) \
                 exceeds the remaining budget {left:.2} of {}{owed}",
                j.procs, j.walltime, j.user
            )));
        }
        Ok(())
    }

    /// 402 (naming `field`) unless the jobs of one request together fit `user`'s budget:
    /// each admitted job's worst case × how many jobs it makes (an array's tasks), plus what
    /// the user's local jobs may still cost. Each job alone passed [`World::admit`]; this is
    /// the check they cannot dodge by coming together.
    pub(crate) fn check_budget_together(
        &self,
        user: &str,
        jobs: &[(&JobRecord, usize)],
        field: &str,
    ) -> Result<(), Refusal> {
        let Some(left) = self.users.get(user).and_then(|u| u.budget) else {
            return Ok(());
        };
        let count: usize = jobs.iter().map(|(_, n)| n).sum();
        if count < 2 {
            return Ok(());
        }
        let worst: f64 = jobs
            .iter()
            .map(|(j, n)| World::worst_case(j, self.admission_price(j)) * *n as f64)
            .sum();
        let committed = self.uncharged_of(user);
        if worst + committed > left {
            let owed = if committed > 0.0 {
                format!(", less {committed:.2} the unfinished local jobs may still cost")
            } else {
                String::new()
            };
            return Err(Refusal::OverBudget {
                field: field.into(),
                reason: format!(
                    "the {count} jobs together may cost {worst:.2} at worst, more than the \
                     remaining budget {left:.2} of {user}{owed}; none was submitted"
                ),
            });
        }
        Ok(())
    }

    /// The Unix account `user`'s local jobs run as, and whether an administrator chose it
    /// (only a chosen account may be root).
    pub fn unix_account(&self, user: &str) -> (String, bool) {
        let set = self.users.get(user).and_then(|u| u.unix_user.as_deref());
        let (account, from) = self.runs_as(user, set);
        (account, from != RunsAsFrom::Name)
    }

    /// The Unix account the local jobs of user `name` run as when `set` is the account an
    /// administrator set on their record, and the rule that chose it. One function for
    /// launching and for showing, so that a user view says who really owns the processes.
    pub(crate) fn runs_as(&self, name: &str, set: Option<&str>) -> (String, RunsAsFrom) {
        if let Some(a) = set {
            return (a.to_string(), RunsAsFrom::User);
        }
        if let Some(a) = self.launch.unix_users.get(name) {
            return (a.clone(), RunsAsFrom::Table);
        }
        match self.launch.unix_users.get("*") {
            Some(a) => (a.clone(), RunsAsFrom::Default),
            None => (name.to_string(), RunsAsFrom::Name),
        }
    }
}

/// Which rule chose the Unix account a user's local jobs run as ([`World::runs_as`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunsAsFrom {
    /// Set on the user by an administrator.
    User,
    /// The `[unix_user]` table's entry for the user's name.
    Table,
    /// The `[unix_user]` table's `"*"` entry, for everyone without one of their own.
    Default,
    /// No mapping: the account of the user's own name.
    Name,
}

impl RunsAsFrom {
    /// The name the API gives the rule (`runs_as_from`).
    pub fn as_str(self) -> &'static str {
        match self {
            RunsAsFrom::User => "user",
            RunsAsFrom::Table => "table",
            RunsAsFrom::Default => "default",
            RunsAsFrom::Name => "name",
        }
    }
}

/// Refuses (403, naming the user and the account) a submission whose local parts could not
/// run as a proper account. Only checked when the daemon is root and has a local cluster:
/// otherwise every job runs as the daemon's own user and the account is not used.
pub(crate) fn check_runs_as(w: &World, user: &str) -> Result<(), Refusal> {
    if !foresight_rm::account::running_as_root() || !has_local_cluster(w) {
        return Ok(());
    }
    let (account, chosen) = w.unix_account(user);
    match foresight_rm::account::lookup(&account) {
        Ok(Some(a)) if a.uid == 0 && w.launch.root_jobs == RootJobs::Refuse => {
            Err(Refusal::forbidden(
                "user",
                format!(
                    "user {user:?} would run as root, and no job runs as root on this service \
                     ([identity] root_jobs = \"refuse\"): submit as an ordinary account"
                ),
            ))
        }
        Ok(Some(a)) if a.uid == 0 && !chosen => Err(Refusal::forbidden(
            "user",
            format!(
                "user {user:?} would run as root (the account of the same name); jobs run as \
                 root only when an administrator maps the user to root on purpose \
                 (`foresight user modify {user} --unix-user root`)"
            ),
        )),
        Ok(Some(_)) => Ok(()),
        Ok(None) => Err(Refusal::forbidden(
            "user",
            format!(
                "user {user:?} has no Unix account to run local jobs as: account {account:?} \
                 does not exist on this host (an administrator can map the user with \
                 `foresight user modify {user} --unix-user ACCOUNT` or the [unix_user] table)"
            ),
        )),
        Err(e) => Err(Refusal::internal(e)),
    }
}

/// Checks the Unix account an administrator maps a user to (`user add --unix-user`, `user
/// modify --unix-user`). Where it matters, when the service is root and has a local cluster
/// (jobs then run as that account), an account that does not exist on this host is refused
/// (400 naming it); otherwise it is accepted and the warning to give is returned.
/// `local`: whether the service has a local cluster ([`has_local_cluster`]).
pub(crate) fn check_mapped_account(local: bool, account: &str) -> Result<Option<String>, Refusal> {
    let root = foresight_rm::account::running_as_root();
    let exists = foresight_rm::account::lookup(account).map(|a| a.is_some());
    mapped_account_verdict(account, exists, root && local)
}

/// True when a cluster of the service is local (jobs run as their user's Unix account when
/// the service is root), not Slurm.
pub(crate) fn has_local_cluster(w: &World) -> bool {
    w.clusters.iter().any(|c| c.kind.runs_as_unix_account())
}

/// [`check_mapped_account`]'s verdict: `exists` is the lookup's answer, `used` whether jobs
/// run as the account (root with a local cluster).
fn mapped_account_verdict(
    account: &str,
    exists: Result<bool, String>,
    used: bool,
) -> Result<Option<String>, Refusal> {
    match (exists, used) {
        (Ok(true), _) => Ok(None),
        (Ok(false), true) => Err(Refusal::invalid(
            "unix_user",
            format!(
                "Unix account {account:?} does not exist on the service's host; local jobs run \
                 as this account, so create it first (useradd) or name an existing one"
            ),
        )),
        (Ok(false), false) => Ok(Some(format!(
            "Unix account {account:?} does not exist on the service's host; accepted because \
             the service is not root (jobs run as the service's own user), but the user's \
             local jobs would be refused once it runs as root"
        ))),
        (Err(e), true) => Err(Refusal::internal(e)),
        (Err(e), false) => Ok(Some(format!(
            "{e}; accepted because the service is not root"
        ))),
    }
}

/// The working directory of a job that names none (a REST submission without `cwd`): the
/// output directory when the job runs as the daemon's own account or as root, which can
/// enter it; otherwise the home directory of the job's account (`/` when it has none), since
/// the data directory is closed to every other account.
pub(crate) fn default_cwd(output_dir: &Path, account: &str) -> std::path::PathBuf {
    if !foresight_rm::account::running_as_root() {
        return output_dir.to_path_buf();
    }
    match foresight_rm::account::lookup(account) {
        Ok(Some(a)) if a.uid == 0 => output_dir.to_path_buf(),
        Ok(Some(a)) if a.home.is_dir() => a.home,
        _ => std::path::PathBuf::from("/"),
    }
}

/// The four credential kinds a job names, in [`JobRecord::cred`]'s order: the request field
/// that names each, and the `user modify` option that grants them.
const CREDENTIAL_FIELDS: [(&str, &str); 4] = [
    ("group", "groups"),
    ("account", "accounts"),
    ("class", "classes"),
    ("qos", "qos"),
];

impl World {
    /// A job's credentials (group, account, class, QoS) from what it asks: each asked one
    /// must be among the user's (refused with 403 naming the field), an absent one is the
    /// user's first of its kind. The user's record is the only source: a job's claim alone
    /// admits it to no reservation.
    pub fn job_credentials(
        &self,
        user: &str,
        asked: CredentialNames,
    ) -> Result<CredentialNames, Refusal> {
        let asked: [Option<String>; 4] = asked.into();
        let mine = self.users.get(user).map(|u| &u.credentials);
        let lists: [&[String]; 4] = match mine {
            Some(c) => [&c.groups, &c.accounts, &c.classes, &c.qos],
            None => [&[], &[], &[], &[]],
        };
        let mut out: [Option<String>; 4] = Default::default();
        for (k, ask) in asked.into_iter().enumerate() {
            out[k] = match ask {
                None => lists[k].first().cloned(),
                Some(name) if lists[k].contains(&name) => Some(name),
                Some(name) => {
                    let (field, option) = CREDENTIAL_FIELDS[k];
                    let theirs = if lists[k].is_empty() {
                        "they have none".to_string()
                    } else {
                        format!("theirs: {}", lists[k].join(", "))
                    };
                    return Err(Refusal::forbidden(
                        field,
                        format!(
                            "user {user:?} may not use {field} {name:?} ({theirs}); an \
                             administrator grants it with `foresight user modify {user} \
                             --{option} …`"
                        ),
                    ));
                }
            };
        }
        Ok(out.into())
    }

    /// The user record `name`, for an administrator's change: 404 for an unknown or
    /// removed user.
    fn user_mut(&mut self, name: &str) -> Result<&mut foresight_store::UserRecord, Refusal> {
        self.users
            .get_mut(name)
            .filter(|u| !u.removed)
            .ok_or_else(|| Refusal::not_found_at("name", format!("no user {name:?}")))
    }

    /// Replaces the lists the change gives. Names are checked like user names. The user's
    /// jobs that have not started follow at once (see `world::credentials`).
    pub fn change_credentials(
        &mut self,
        now: Time,
        name: &str,
        change: foresight_api::CredentialsChange,
    ) -> Result<&foresight_store::UserRecord, Refusal> {
        let fields = [
            ("groups", &change.groups),
            ("accounts", &change.accounts),
            ("classes", &change.classes),
            ("qos", &change.qos),
        ];
        for (field, list) in fields {
            for v in list.iter().flatten() {
                if v.is_empty()
                    || v.len() > 64
                    || v.chars()
                        .any(|c| c.is_whitespace() || c.is_control() || c == ',')
                {
                    return Err(Refusal::invalid(
                        field,
                        format!("{v:?}: a name is 1 to 64 characters without spaces, commas or control characters"),
                    ));
                }
            }
        }
        let u = self.user_mut(name)?;
        let c = &mut u.credentials;
        for (from, to) in [
            (change.groups, &mut c.groups),
            (change.accounts, &mut c.accounts),
            (change.classes, &mut c.classes),
            (change.qos, &mut c.qos),
        ] {
            if let Some(mut list) = from {
                // Order matters (the first is the default): drop later repeats only.
                let mut seen = std::collections::BTreeSet::new();
                list.retain(|v| seen.insert(v.clone()));
                *to = list;
            }
        }
        self.recheck_credentials(now, name);
        Ok(&self.users[name])
    }

    /// Sets or tops up a budget. Budgets are finite: a sum that would overflow is refused
    /// rather than becoming "unlimited"; `set` to `None` makes it unlimited; `add` to an
    /// unlimited budget is refused (there is nothing to add to).
    pub fn change_budget(
        &mut self,
        name: &str,
        set: Option<Option<f64>>,
        add: Option<f64>,
    ) -> Result<&foresight_store::UserRecord, Refusal> {
        if let Some(Some(b)) = set {
            if !b.is_finite() || b < 0.0 {
                return Err(Refusal::invalid(
                    "set",
                    format!("must be a finite number >= 0, or null for unlimited; got {b}"),
                ));
            }
        }
        if let Some(a) = add {
            if !a.is_finite() {
                return Err(Refusal::invalid(
                    "add",
                    format!("must be a finite number; got {a}"),
                ));
            }
        }
        let u = self.user_mut(name)?;
        let mut budget = u.budget;
        if let Some(s) = set {
            budget = s;
        }
        if let Some(a) = add {
            let Some(b) = budget else {
                return Err(Refusal::invalid(
                    "add",
                    format!(
                        "user {name:?}'s budget is unlimited: nothing to add to (set a number \
                         with `set` first)"
                    ),
                ));
            };
            let sum = b + a;
            if !sum.is_finite() {
                return Err(Refusal::invalid(
                    "add",
                    format!(
                        "{b:e} + {a:e} is beyond the largest budget, {:e}; set the budget to \
                         unlimited instead (`set`: null)",
                        f64::MAX
                    ),
                ));
            }
            if sum < 0.0 {
                return Err(Refusal::invalid(
                    "add",
                    format!("would make the budget negative ({b:.2} + {a:.2})"),
                ));
            }
            budget = Some(sum);
        }
        u.budget = budget;
        Ok(&self.users[name])
    }

    /// Gives a user a new token (its SHA-256): the old one is refused from now on.
    pub fn set_token_hash(
        &mut self,
        name: &str,
        hash: String,
    ) -> Result<&foresight_store::UserRecord, Refusal> {
        let u = self.user_mut(name)?;
        u.token_hash = hash;
        Ok(&self.users[name])
    }

    /// Disables (or enables again) a user. Disabling refuses their token and cancels their
    /// jobs that have not started (running ones finish and are charged); their history
    /// stays. The last enabled administrator cannot be disabled.
    pub fn set_disabled(
        &mut self,
        now: Time,
        name: &str,
        disabled: bool,
    ) -> Result<&foresight_store::UserRecord, Refusal> {
        let u = self.user_mut(name)?;
        if disabled && u.admin {
            let others = self
                .users
                .values()
                .any(|o| o.admin && !o.disabled && !o.removed && o.name != name);
            if !others {
                return Err(Refusal::conflict(format!(
                    "user {name:?} is the last enabled administrator"
                )));
            }
        }
        let u = self.user_mut(name)?;
        u.disabled = disabled;
        if disabled {
            self.cancel_queued_jobs_of(now, name);
        }
        Ok(&self.users[name])
    }

    /// Removes a user: disabled for good, token gone, name never reused (see
    /// [`foresight_store::UserRecord::removed`]).
    pub fn remove_user(&mut self, now: Time, name: &str) -> Result<(), Refusal> {
        self.set_disabled(now, name, true)?;
        let u = self.user_mut(name)?;
        u.removed = true;
        // Unique and never the hash of any token (a SHA-256 is 64 hex digits).
        u.token_hash = format!("removed:{name}");
        Ok(())
    }

    /// Takes in a user as the shared database has them (dispatcher mode: another site
    /// created or changed them, or charged their jobs). A new user is added; a known one
    /// takes in what changed in the database since this site last read it, keeping this
    /// site's own changes not yet written ([`foresight_store::merge_user`]); the budget and
    /// spending are always the database's. A user disabled elsewhere has their jobs here
    /// that have not started cancelled, as if disabled here. Answers whether the record
    /// changed beyond the budget (the authentication index must follow).
    pub(crate) fn adopt_user(&mut self, now: Time, u: foresight_store::UserRecord) -> bool {
        let Some(old) = self.users.get(&u.name) else {
            self.add_user(u);
            return true;
        };
        let base = self.users_base.get(&u.name).unwrap_or(old);
        let mut merged = match foresight_store::merge_user(base, old, &u) {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(user = %u.name, "taking in the shared record whole: {e}");
                u.clone()
            }
        };
        merged.budget = u.budget;
        merged.spent = u.spent;
        let mut before = old.clone();
        before.budget = u.budget;
        before.spent = u.spent;
        let name = u.name.clone();
        self.users_base.insert(name.clone(), u);
        if merged == before {
            if let Some(old) = self.users.follow_store(&name) {
                *old = merged;
            }
            return false;
        }
        let newly_disabled = merged.disabled && !before.disabled;
        self.users.load(name.clone(), merged);
        if newly_disabled {
            self.cancel_queued_jobs_of(now, &name);
        }
        true
    }

    /// Cancels every job of `user` that has not started.
    fn cancel_queued_jobs_of(&mut self, now: Time, user: &str) {
        let queued: Vec<JobId> = self
            .jobs
            .values()
            .filter(|j| {
                j.user == user
                    && !j.state.is_final()
                    && j.state != foresight_store::JobState::Running
            })
            .map(|j| JobId(j.id))
            .collect();
        for id in queued {
            let _ = self.cancel(now, id);
            if let Some(j) = self.jobs.get_mut(&id) {
                j.reason = Some(format!("cancelled: user {user:?} was disabled"));
            }
        }
    }
}

/// Per user, the running total of the worst cases of their admitted local jobs whose
/// current attempt is not charged yet, with each job's share, so that a budget check reads
/// one number instead of scanning every job record.
#[derive(Debug, Default)]
pub(crate) struct Uncharged {
    by_job: BTreeMap<JobId, (String, f64)>,
    /// The total and how many jobs make it (at none, it is reset to exactly 0).
    by_user: BTreeMap<String, (f64, usize)>,
    /// Set aside for admitted jobs being stored, by ticket: their users' shares.
    aside: BTreeMap<u64, Vec<(String, f64)>>,
    next_ticket: u64,
}

impl Uncharged {
    /// Job `id` now counts `share` (user, worst case), or nothing.
    fn set(&mut self, id: JobId, share: Option<(String, f64)>) {
        if let Some((user, w)) = self.by_job.remove(&id) {
            if let Some(t) = self.by_user.get_mut(&user) {
                t.0 -= w;
                t.1 -= 1;
                if t.1 == 0 {
                    self.by_user.remove(&user);
                }
            }
        }
        if let Some((user, w)) = share {
            let t = self.by_user.entry(user.clone()).or_insert((0.0, 0));
            t.0 += w;
            t.1 += 1;
            self.by_job.insert(id, (user, w));
        }
    }

    /// Sets aside these shares until the ticket is released.
    fn set_aside(&mut self, shares: Vec<(String, f64)>) -> u64 {
        self.next_ticket += 1;
        if !shares.is_empty() {
            self.aside.insert(self.next_ticket, shares);
        }
        self.next_ticket
    }

    /// Gives back what a ticket set aside (the jobs are counted now, or were not stored).
    pub(crate) fn release(&mut self, ticket: u64) {
        self.aside.remove(&ticket);
    }

    fn aside(&self, user: &str) -> f64 {
        self.aside
            .values()
            .flatten()
            .filter(|(u, _)| u == user)
            .map(|(_, w)| w)
            .sum()
    }

    fn total(&self, user: &str) -> f64 {
        self.by_user.get(user).map_or(0.0, |t| t.0)
    }

    fn of_job(&self, id: JobId) -> Option<(&str, f64)> {
        self.by_job.get(&id).map(|(u, w)| (u.as_str(), *w))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_account_is_refused_where_jobs_run_as_it_and_warned_of_elsewhere() {
        assert_eq!(mapped_account_verdict("alice", Ok(true), true), Ok(None));
        assert_eq!(mapped_account_verdict("alice", Ok(true), false), Ok(None));
        let refused = mapped_account_verdict("ghost", Ok(false), true).unwrap_err();
        assert_eq!(refused.field(), Some("unix_user"));
        assert!(
            refused
                .to_string()
                .contains("Unix account \"ghost\" does not exist on the service's host"),
            "{refused}"
        );
        let warning = mapped_account_verdict("ghost", Ok(false), false)
            .unwrap()
            .unwrap();
        assert!(warning.contains("\"ghost\" does not exist"), "{warning}");
        assert!(warning.contains("not root"), "{warning}");
        assert!(mapped_account_verdict("x", Err("nss down".into()), true).is_err());
        assert!(mapped_account_verdict("x", Err("nss down".into()), false)
            .unwrap()
            .is_some());
    }
}
