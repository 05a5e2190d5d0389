//! Users and their tokens: authentication (local and shared), changes to a user or a shared
//! budget, and the users a dispatcher adopts from its peers.

use crate::runtime::views::user_view;
use crate::runtime::Service;
use crate::state::refusal::Refusal;
use crate::state::world::local_identity::{LocalCaller, LocalIdentity};
use crate::state::world::World;
use foresight_api::UserView;
use foresight_core::time::Time;
use foresight_store::UserRecord;
use sha2::{Digest, Sha256};
use std::sync::Arc;

impl Service {
    /// Authenticates a bearer token.
    pub fn authenticate(&self, token: &str) -> Result<UserRecord, Refusal> {
        self.tokens
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&token_hash(token))
            .cloned()
            .filter(|u| !u.removed)
            .ok_or_else(|| Refusal::unauthenticated("unknown token"))
            .and_then(enabled)
    }

    /// Authenticates a caller on the local socket by the uid the kernel gave for it (see
    /// `state::world::local_identity` for who that is), creating the user of an account's
    /// first contact when `[identity] first_contact` says so.
    pub async fn authenticate_local(&self, uid: u32) -> Result<UserRecord, Refusal> {
        let account = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
            .ok()
            .flatten()
            .map(|u| u.name);
        let caller = LocalCaller {
            uid,
            account: account.as_deref(),
            service_uid: nix::unistd::geteuid().as_raw(),
            first_contact: self.cfg.identity.first_contact,
        };
        let found = self.world().local_identity(&caller)?;
        let name = match found {
            LocalIdentity::User(name) => name,
            LocalIdentity::Create(name) => {
                let rec = UserRecord {
                    // Never the SHA-256 of any token: the user has none until an
                    // administrator gives one (`user token`), for use from elsewhere.
                    token_hash: format!("local:{name}"),
                    unix_user: Some(name.clone()),
                    name: name.clone(),
                    ..Default::default()
                };
                match self.add_user(rec).await {
                    Ok(()) => tracing::info!(
                        user = %name,
                        "first contact of Unix account {name:?} on the local socket: created \
                         the Foresight user of that name"
                    ),
                    // Created by a request of theirs a moment ago.
                    Err(Refusal::Conflict { .. }) => {}
                    Err(e) => return Err(e),
                }
                name
            }
        };
        let rec = self.world().users.get(&name).cloned();
        rec.ok_or_else(|| Refusal::unauthenticated(format!("no user {name:?}")))
            .and_then(enabled)
    }

    /// Runs an administrator's change of user `name` and makes the authentication index
    /// follow it at once (a rotated token or a disabled user is refused from the next
    /// request on, before the change is even on disk), then persists. Returns what `op`
    /// returned and the user as changed.
    pub async fn change_user<T>(
        self: &Arc<Self>,
        name: &str,
        op: impl FnOnce(&mut World, Time) -> Result<T, Refusal>,
    ) -> Result<(T, UserView), Refusal> {
        let (out, view) = {
            let mut w = self.world();
            let out = op(&mut w, self.now())?;
            let rec = w
                .users
                .get(name)
                .cloned()
                .ok_or_else(|| Refusal::not_found_at("name", format!("no user {name:?}")))?;
            // Still under the state's lock: no request authenticates with what changed.
            self.remember_users(std::slice::from_ref(&rec));
            (out, user_view(&w, &rec))
        };
        self.wake.notify_one();
        self.flush().await;
        Ok((out, view))
    }

    /// Sets and tops up `name`'s budget where the global queue shares it with other sites
    /// (the copy in this service was changed already, with the same checks): the view
    /// after. `None` when the budget is this service's alone (mode single).
    pub async fn change_shared_budget(
        &self,
        name: &str,
        set: Option<Option<f64>>,
        add: Option<f64>,
    ) -> Result<Option<UserView>, Refusal> {
        let Some((budget, spent)) = self.global_queue.change_budget(name, set, add).await? else {
            return Ok(None);
        };
        let mut w = self.world();
        let u = w
            .users
            .follow_store(name)
            .ok_or_else(|| Refusal::not_found_at("name", format!("no user {name:?}")))?;
        u.budget = budget;
        u.spent = spent;
        let u = u.clone();
        Ok(Some(user_view(&w, &u)))
    }

    /// [`Service::authenticate`]; a token this service has not seen is also looked up in
    /// the global queue (in dispatcher mode, the shared database): its user may have been
    /// created, or given a new token, through another site's dispatcher a moment ago.
    pub async fn authenticate_shared(&self, token: &str) -> Result<UserRecord, Refusal> {
        let known = self.authenticate(token);
        if known.is_ok() {
            return known;
        }
        let hash = token_hash(token);
        let seen = self
            .tokens
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(&hash);
        if seen {
            // Known now: refused for what the record says, or taken in by the dispatcher's
            // own reading of the users since the first look.
            return self.authenticate(token);
        }
        match self.global_queue.user_by_token(&hash).await? {
            Some(u) => {
                self.adopt_users(vec![u]);
                self.authenticate(token)
            }
            None => known,
        }
    }

    /// Takes in users as the shared database has them (dispatcher mode): new ones, changed
    /// ones (see [`World::adopt_user`]) and everyone's budget and spending. The
    /// authentication index follows under the state's lock. Answers whether any record
    /// changed beyond its budget.
    pub(crate) fn adopt_users(&self, users: Vec<UserRecord>) -> bool {
        let now = self.now();
        let mut w = self.world();
        let mut changed = Vec::new();
        for u in users {
            let name = u.name.clone();
            if w.adopt_user(now, u) {
                changed.push(w.users[&name].clone());
            }
        }
        self.remember_users(&changed);
        !changed.is_empty()
    }

    /// Brings the authentication index up to date with these user records.
    pub(crate) fn remember_users(&self, users: &[UserRecord]) {
        if users.is_empty() {
            return;
        }
        let mut tokens = self.tokens.write().unwrap_or_else(|p| p.into_inner());
        for u in users {
            tokens.retain(|_, known| known.name != u.name);
            tokens.insert(u.token_hash.clone(), u.clone());
        }
    }

    /// Stores a new user (admin operation).
    pub async fn add_user(&self, rec: UserRecord) -> Result<(), Refusal> {
        if rec.name.is_empty() || rec.name.contains(char::is_whitespace) {
            return Err(Refusal::invalid(
                "name",
                "must be non-empty, without spaces",
            ));
        }
        crate::state::limits::name("name", &rec.name)?;
        if self.world().users.contains_key(&rec.name) {
            return Err(Refusal::conflict(format!(
                "user {:?} already exists",
                rec.name
            )));
        }
        self.store.insert_user(&rec).await.map_err(|e| match e {
            foresight_store::StoreError::UserExists(n) => {
                Refusal::conflict(format!("user {n:?} already exists"))
            }
            e => Refusal::internal(e.to_string()),
        })?;
        self.remember_users(std::slice::from_ref(&rec));
        self.world().add_user(rec);
        Ok(())
    }
}

/// The user, or the refusal of a disabled one.
fn enabled(u: UserRecord) -> Result<UserRecord, Refusal> {
    if u.disabled {
        Err(Refusal::unauthenticated(format!(
            "user {:?} is disabled (an administrator enables them again with `foresight user \
             enable {}`)",
            u.name, u.name
        )))
    } else {
        Ok(u)
    }
}

/// SHA-256 of a token, hex: what the store keeps instead of the token.
pub fn token_hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// A fresh random token.
pub fn new_token() -> String {
    use rand::RngCore;
    let mut bytes = [0u8; 24];
    rand::thread_rng().fill_bytes(&mut bytes);
    hex::encode(bytes)
}

pub(crate) fn write_secret(path: &std::path::Path, token: &str) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
    writeln!(f, "{token}")?;
    f.sync_all()?;
    Ok(())
}
