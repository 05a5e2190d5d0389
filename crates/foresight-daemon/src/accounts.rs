//! Isolation of jobs from each other and from the service.
//!
//! Each Foresight user maps to a Unix account: the one an administrator set on the user
//! record, else the `[unix_user]` table's entry for the name (or its `"*"` entry), else the
//! account of the same name. When the daemon runs as root, every local job runs as its
//! user's account (the supervisor drops to it before `exec`), and a submission by a user
//! whose account does not exist, or whose account would be root without an administrator
//! having chosen it, is refused with 403. The data directory keeps what jobs must not read
//! out of their reach: see [`prepare_data_dir`].

use crate::refusal::Refusal;
use crate::world::World;
use foresight_core::time::Time;
use foresight_core::{JobId, ReservationId};
use foresight_store::JobRecord;
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// A global job: planned by the broker over the grid, and charged by it.
fn is_global(j: &JobRecord) -> bool {
    j.cluster.is_none() && j.reservation.is_none()
}

impl World {
    /// Moves `amount` from job `id`'s user's budget to the job's charge (a negative amount
    /// gives back).
    pub(crate) fn charge(&mut self, id: JobId, amount: f64) {
        let Some(j) = self.jobs.get_mut(&id) else {
            return;
        };
        j.charged += amount;
        self.dirty_jobs.insert(id);
        let user = j.user.clone();
        if let Some(u) = self.users.get_mut(&user) {
            u.spent += amount;
            if let Some(b) = u.budget.as_mut() {
                *b -= amount;
            }
            self.dirty_users.insert(user);
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
    fn worst_case(j: &JobRecord, price: f64) -> f64 {
        price * f64::from(j.procs) * j.walltime as f64
    }

    /// Per user, the most their admitted local jobs (and jobs in administrative
    /// reservations) may still cost: those not final, whose current attempt has not been
    /// charged yet. Only users with a budget are counted.
    pub(crate) fn committed_by_user(&self) -> BTreeMap<String, f64> {
        let mut out = BTreeMap::new();
        for j in self.jobs.values() {
            if j.state.is_final() || self.users.get(&j.user).is_none_or(|u| u.budget.is_none()) {
                continue;
            }
            if let Some(price) = self.local_tariff(j) {
                *out.entry(j.user.clone()).or_insert(0.0) += World::worst_case(j, price);
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
        let committed = self.committed_by_user().remove(&j.user).unwrap_or(0.0);
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
        let committed = self.committed_by_user().remove(&j.user).unwrap_or(0.0);
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

    /// The Unix account `user`'s local jobs run as, and whether an administrator chose it
    /// (only a chosen account may be root).
    pub fn unix_account(&self, user: &str) -> (String, bool) {
        if let Some(a) = self.users.get(user).and_then(|u| u.unix_user.clone()) {
            return (a, true);
        }
        match self
            .unix_users
            .get(user)
            .or_else(|| self.unix_users.get("*"))
        {
            Some(a) => (a.clone(), true),
            None => (user.to_string(), false),
        }
    }
}

/// Refuses (403, naming the user and the account) a submission whose local parts could not
/// run as a proper account. Only checked when the daemon is root and has a local cluster:
/// otherwise every job runs as the daemon's own user and the account is not used.
pub(crate) fn check_runs_as(w: &World, user: &str) -> Result<(), Refusal> {
    if !foresight_rm::account::running_as_root() || w.clusters.iter().all(|c| c.cfg.is_slurm()) {
        return Ok(());
    }
    let (account, chosen) = w.unix_account(user);
    match foresight_rm::account::lookup(&account) {
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

/// Makes the data directory safe before anything is written: files the service creates are
/// private (umask 077: database, WAL, tokens, attempt directories with each job's spec and
/// environment); the directory and `output/` are 0711, so a job's user can open its own
/// output files (0600, owned by that user) by name but nobody can list them; files left by
/// earlier versions are made private too.
pub(crate) fn prepare_data_dir(dir: &Path) -> anyhow::Result<()> {
    foresight_rm::account::private_umask();
    let output = dir.join("output");
    std::fs::create_dir_all(&output)
        .map_err(|e| anyhow::anyhow!("creating data dir {}: {e}", dir.display()))?;
    let chmod = |path: &Path, mode: u32| -> anyhow::Result<()> {
        match std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(anyhow::anyhow!("chmod {mode:o} {}: {e}", path.display())),
        }
    };
    chmod(dir, 0o711)?;
    chmod(&output, 0o711)?;
    chmod(&dir.join("clusters"), 0o700)?;
    for name in [
        "foresight.db",
        "foresight.db-wal",
        "foresight.db-shm",
        "admin.token",
    ] {
        chmod(&dir.join(name), 0o600)?;
    }
    if let Ok(entries) = std::fs::read_dir(&output) {
        for entry in entries.flatten() {
            let meta = entry.metadata();
            if meta.is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o077 != 0) {
                chmod(&entry.path(), 0o600)?;
            }
        }
    }
    Ok(())
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
        asked: [Option<String>; 4],
    ) -> Result<[Option<String>; 4], Refusal> {
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
        Ok(out)
    }

    /// The user record `name`, for an administrator's change: 404 for an unknown or
    /// removed user.
    fn user_mut(&mut self, name: &str) -> Result<&mut foresight_store::UserRecord, Refusal> {
        self.users
            .get_mut(name)
            .filter(|u| !u.removed)
            .ok_or_else(|| Refusal::not_found_at("name", format!("no user {name:?}")))
    }

    /// Replaces the lists the change gives. Names are checked like user names.
    pub fn change_credentials(
        &mut self,
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
        self.dirty_users.insert(name.to_string());
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
        self.dirty_users.insert(name.to_string());
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
        self.dirty_users.insert(name.to_string());
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
        self.dirty_users.insert(name.to_string());
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

    /// Cancels every job of `user` that has not started.
    fn cancel_queued_jobs_of(&mut self, now: Time, user: &str) {
        let queued: Vec<JobId> = self
            .jobs
            .values()
            .filter(|j| {
                j.user == user && !j.state.is_final() && j.state != foresight_api::JobState::Running
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
