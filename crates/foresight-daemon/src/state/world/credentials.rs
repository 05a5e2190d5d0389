//! A job's credentials (group, account, class, QoS) follow its user's. They are taken from
//! the user's record at submission; when an administrator later takes one away, the user's
//! jobs that have not started drop it (for the user's first of that kind, as a submission
//! naming none would get; one without a credential of a kind gets the user's new default),
//! so that a lost credential no longer admits them to any reservation:
//! - a job bound to a reservation that no longer admits it is held, with a reason naming the
//!   credential it lost, and cannot be released until its user qualifies again;
//! - a queued local job is queued again with its new credentials, so that its cluster's
//!   scheduler no longer starts it in a reservation the lost credential opened to it.
//!
//! The same check guards every placement of a bound job (release, restart, a dependency
//! met), so a job never enters a reservation on credentials its user no longer holds.

use super::*;
use foresight_store::CredentialNames;

/// The credential kinds in [`JobRecord::cred`]'s order, as a reason names them.
const KINDS: [&str; 4] = CredentialNames::KINDS;

impl World {
    /// Applies `user`'s current credentials to their jobs that have not started; see the
    /// module docs. Called after every change of the user's credentials.
    pub(crate) fn recheck_credentials(&mut self, now: Time, user: &str) {
        let lists = self.credential_lists(user);
        let ids: Vec<JobId> = self
            .jobs
            .values()
            .filter(|j| j.user == user && j.started_at.is_none() && !j.state.is_final())
            .map(|j| JobId(j.id))
            .collect();
        for id in ids {
            let j = &self.jobs[&id];
            let (cred, lost) = current_cred(&lists, &j.cred);
            if cred == j.cred {
                continue;
            }
            let requeue = j.state == JobState::Pending
                && !j.held
                && !j.links.as_ref().is_some_and(|l| l.waiting)
                && (j.cluster.is_some() || j.reservation.is_some())
                && j.parts.iter().all(|p| {
                    self.cluster_index(&p.cluster)
                        .is_some_and(|k| self.clusters[k].kind.placed_here())
                });
            if let Some(j) = self.jobs.get_mut(&id) {
                j.cred = cred;
            }
            let Some(r) = self.jobs[&id].reservation else {
                if requeue {
                    self.unqueue(now, id);
                    self.submit_local(now, id);
                }
                continue;
            };
            if lost.is_empty() || self.unadmitted(id).is_none() {
                if requeue {
                    self.unqueue(now, id);
                    self.submit_local(now, id);
                }
                continue;
            }
            let reason = format!(
                "held: user {user:?} no longer has {}, which admitted this job to reservation \
                 {r}; release it once an administrator grants it again, or cancel it",
                lost.join(", ")
            );
            let held = self.jobs[&id].held || self.hold(now, id).is_ok();
            if let Some(j) = self.jobs.get_mut_if(&id, |_| held) {
                j.reason = Some(reason);
            }
        }
    }

    /// `user`'s credentials now, by kind in [`JobRecord::cred`]'s order (none for a user
    /// who no longer exists).
    fn credential_lists(&self, user: &str) -> [Vec<String>; 4] {
        match self.users.get(user) {
            Some(u) => {
                let c = &u.credentials;
                [
                    c.groups.clone(),
                    c.accounts.clone(),
                    c.classes.clone(),
                    c.qos.clone(),
                ]
            }
            None => Default::default(),
        }
    }

    /// At restore, before any job is placed: the jobs that have not started take their
    /// users' credentials as they are in the store now, which an administrator may have
    /// changed while the service was down. The placement of a bound job then checks its
    /// reservation against them, as after a change while running.
    pub(super) fn refresh_credentials(&mut self) {
        let mut lists: BTreeMap<String, [Vec<String>; 4]> = BTreeMap::new();
        let ids: Vec<JobId> = self
            .jobs
            .values()
            .filter(|j| j.started_at.is_none() && !j.state.is_final())
            .map(|j| JobId(j.id))
            .collect();
        for id in ids {
            let user = self.jobs[&id].user.clone();
            let kinds = match lists.get(&user) {
                Some(k) => k,
                None => {
                    let k = self.credential_lists(&user);
                    lists.entry(user).or_insert(k)
                }
            };
            let (cred, _) = current_cred(kinds, &self.jobs[&id].cred);
            if let Some(j) = self.jobs.get_mut_if(&id, |j| j.cred != cred) {
                j.cred = cred;
            }
        }
    }

    /// Why job `id`, bound to a reservation, may not be placed in it with its credentials
    /// now; None when it may (or is not bound to a live reservation).
    pub(super) fn unadmitted(&self, id: JobId) -> Option<String> {
        let j = self.jobs.get(&id)?;
        let r = j.reservation?;
        let res = self.reservations.get(&ReservationId(r))?;
        if World::acl_admits(&res.acl, &j.user, Some(j)) {
            return None;
        }
        let acl = &res.acl;
        let mut admits = Vec::new();
        for (what, list) in [
            ("users", &acl.users),
            ("groups", &acl.groups),
            ("accounts", &acl.accounts),
            ("classes", &acl.classes),
            ("qos", &acl.qos),
        ] {
            if !list.is_empty() {
                admits.push(format!("{what} {}", list.join(",")));
            }
        }
        if let Some(job) = acl.job {
            admits.push(format!("job {job}"));
        }
        let theirs: Vec<String> = j
            .cred
            .by_kind()
            .into_iter()
            .zip(KINDS)
            .filter_map(|(c, kind)| c.as_ref().map(|c| format!("{kind} {c:?}")))
            .collect();
        Some(format!(
            "reservation {r} admits {} and no credential user {:?} holds now ({})",
            if admits.is_empty() {
                "nobody".to_string()
            } else {
                admits.join("; ")
            },
            j.user,
            if theirs.is_empty() {
                "none".to_string()
            } else {
                theirs.join(", ")
            }
        ))
    }
}

/// A job's credentials `cred` against its user's `lists` now: each credential the user no
/// longer holds is replaced by their first of that kind (as a submission naming none would
/// get), and one not given takes the user's default; with the credentials it lost, named.
fn current_cred(
    lists: &[Vec<String>; 4],
    cred: &CredentialNames,
) -> (CredentialNames, Vec<String>) {
    let mut lost = Vec::new();
    let cred: [Option<String>; 4] = cred.clone().into();
    let mut now = cred.clone();
    for (k, c) in cred.iter().enumerate() {
        match c {
            Some(name) if !lists[k].contains(name) => {
                lost.push(format!("{} {name:?}", KINDS[k]));
                now[k] = lists[k].first().cloned();
            }
            // None stands for the user's default, which they may have now.
            None => now[k] = lists[k].first().cloned(),
            Some(_) => {}
        }
    }
    (now.into(), lost)
}
