//! Who a caller on the local socket is: the Foresight user of their Unix account, chosen
//! here from the kernel's word on their uid (see `api::acceptor::LocalPeer`), so that a
//! user on the service's host needs no token, as with munge under Slurm.
//!
//! The rule, for a service run as root:
//! - root (uid 0) is the administrator: the enabled one mapped to root, else `admin`, else
//!   the first enabled one by name;
//! - any other account is the user whose local jobs run as that account by an explicit
//!   choice (`user add --unix-user`, the `[unix_user]` table's own entry), else the user of
//!   the account's name whose jobs run as that account; the `"*"` entry of `[unix_user]`
//!   names no one (it is a default, not an identity);
//! - an account with no such user gets one of its name on first contact (`[identity]
//!   first_contact = "create"`, the default), or is refused (`"refuse"`).
//!
//! A service run as an ordinary account runs every job as that account: only that account
//! (the administrator, who can read `admin.token` anyway) and root are known on its socket.

use crate::config::identity::FirstContact;
use crate::state::refusal::Refusal;
use crate::state::world::accounts::RunsAsFrom;
use crate::state::world::World;

/// The caller at the other end of the local socket, as the host knows them.
#[derive(Clone, Copy, Debug)]
pub struct LocalCaller<'a> {
    /// Their uid.
    pub uid: u32,
    /// Their account's name, if the password database has one.
    pub account: Option<&'a str>,
    /// The uid the service runs as.
    pub service_uid: u32,
    /// `[identity] first_contact`.
    pub first_contact: FirstContact,
}

/// What a local caller is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LocalIdentity {
    /// The existing user of this name.
    User(String),
    /// Nobody yet: an ordinary user of this name is to be created, its jobs run as the
    /// account of the same name.
    Create(String),
}

impl World {
    /// The Foresight user a local caller is (module doc), or why they are refused (401).
    pub fn local_identity(&self, c: &LocalCaller<'_>) -> Result<LocalIdentity, Refusal> {
        if c.uid == 0 || c.uid == c.service_uid {
            return self.local_administrator(c.account);
        }
        if c.service_uid != 0 {
            return Err(Refusal::unauthenticated(format!(
                "this service runs as uid {}, not root, so every job it starts runs as that \
                 account: only that account and root may use its socket without a token; ask \
                 its administrator for one (`foresight user add NAME`) and give --token",
                c.service_uid
            )));
        }
        let Some(account) = c.account else {
            return Err(Refusal::unauthenticated(format!(
                "uid {} has no account name in this host's password database, so it maps to \
                 no Foresight user; give --token",
                c.uid
            )));
        };
        let mut mapped: Vec<&str> = self
            .users
            .values()
            .filter(|u| !u.removed)
            .filter(|u| {
                let (runs_as, from) = self.runs_as(&u.name, u.unix_user.as_deref());
                runs_as == account
                    && match from {
                        RunsAsFrom::User | RunsAsFrom::Table => true,
                        RunsAsFrom::Name => u.name == account,
                        RunsAsFrom::Default => false,
                    }
            })
            .map(|u| u.name.as_str())
            .collect();
        mapped.sort_unstable();
        if mapped.contains(&account) {
            return Ok(LocalIdentity::User(account.to_string()));
        }
        match mapped.as_slice() {
            [one] => return Ok(LocalIdentity::User(one.to_string())),
            [] => {}
            many => {
                return Err(Refusal::unauthenticated(format!(
                    "Unix account {account:?} is the account of several Foresight users ({}): \
                     give --token to say which one you are",
                    many.join(", ")
                )))
            }
        }
        if let Some(u) = self.users.get(account) {
            let why = if u.removed {
                "was removed (a name is never reused)".to_string()
            } else {
                let (runs_as, _) = self.runs_as(&u.name, u.unix_user.as_deref());
                format!("runs its jobs as Unix account {runs_as:?}, not {account:?}")
            };
            return Err(Refusal::unauthenticated(format!(
                "Foresight user {account:?} {why}, so Unix account {account:?} is not that \
                 user: give --token, or an administrator maps the user with `foresight user \
                 modify {account} --unix-user {account}`"
            )));
        }
        match c.first_contact {
            FirstContact::Create => Ok(LocalIdentity::Create(account.to_string())),
            FirstContact::Refuse => Err(Refusal::unauthenticated(format!(
                "Unix account {account:?} has no Foresight user ([identity] first_contact = \
                 \"refuse\"): an administrator creates one with `foresight user add {account} \
                 --unix-user {account}`"
            ))),
        }
    }

    /// The administrator root (or the service's own account) is on the socket.
    fn local_administrator(&self, account: Option<&str>) -> Result<LocalIdentity, Refusal> {
        let mut admins: Vec<&foresight_store::UserRecord> = self
            .users
            .values()
            .filter(|u| u.admin && !u.removed && !u.disabled)
            .collect();
        // Mapped to the caller's account first, then the one named admin, then by name.
        admins.sort_by_key(|u| {
            let mapped = account.is_some() && u.unix_user.as_deref() == account;
            (!mapped, u.name != "admin", u.name.clone())
        });
        admins
            .first()
            .map(|u| LocalIdentity::User(u.name.clone()))
            .ok_or_else(|| {
                Refusal::unauthenticated("the service has no enabled administrator; give --token")
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use foresight_store::UserRecord;

    fn world(table: &[(&str, &str)]) -> World {
        let mut cfg: crate::config::Config =
            toml::from_str("[[cluster]]\nname = \"a\"\nprocs = 2\n").expect("config");
        for (k, v) in table {
            cfg.unix_user.insert(k.to_string(), v.to_string());
        }
        World::new(&cfg)
    }

    fn user(w: &mut World, name: &str, admin: bool, unix_user: Option<&str>) {
        w.add_user(UserRecord {
            name: name.into(),
            token_hash: format!("t-{name}"),
            admin,
            unix_user: unix_user.map(str::to_string),
            ..Default::default()
        });
    }

    fn caller(uid: u32, account: Option<&str>) -> LocalCaller<'_> {
        LocalCaller {
            uid,
            account,
            service_uid: 0,
            first_contact: FirstContact::Create,
        }
    }

    fn who(w: &World, c: LocalCaller<'_>) -> Result<LocalIdentity, String> {
        w.local_identity(&c).map_err(|e| e.to_string())
    }

    #[test]
    fn root_and_the_services_own_account_are_the_administrator() {
        let mut w = world(&[]);
        user(&mut w, "zed", true, None);
        user(&mut w, "admin", true, None);
        let admin = Ok(LocalIdentity::User("admin".into()));
        assert_eq!(who(&w, caller(0, Some("root"))), admin);
        // The administrator mapped to root wins over the one named admin.
        user(&mut w, "ops", true, Some("root"));
        assert_eq!(
            who(&w, caller(0, Some("root"))),
            Ok(LocalIdentity::User("ops".into()))
        );
        let own = LocalCaller {
            service_uid: 1000,
            ..caller(1000, Some("alice"))
        };
        assert_eq!(who(&w, own), admin);
        // A non-root service knows nobody else on its socket.
        let other = LocalCaller {
            service_uid: 1000,
            ..caller(1001, Some("bob"))
        };
        assert!(who(&w, other).unwrap_err().contains("not root"));
    }

    #[test]
    fn an_account_is_the_user_mapped_to_it_or_of_its_name_never_by_the_star_default() {
        let mut w = world(&[("*", "root"), ("carol", "cc")]);
        user(&mut w, "alice", false, Some("alice"));
        user(&mut w, "bob", false, None);
        user(&mut w, "robert", false, Some("rob"));
        user(&mut w, "carol", false, None);
        let u = |n: &str| Ok(LocalIdentity::User(n.into()));
        assert_eq!(who(&w, caller(1001, Some("alice"))), u("alice"));
        assert_eq!(who(&w, caller(1002, Some("rob"))), u("robert"));
        assert_eq!(who(&w, caller(1003, Some("cc"))), u("carol"));
        // bob's jobs would run as root through "*": Unix bob is not Foresight bob.
        let e = who(&w, caller(1004, Some("bob"))).unwrap_err();
        assert!(e.contains("runs its jobs as Unix account \"root\""), "{e}");
        assert!(e.contains("user modify bob --unix-user bob"), "{e}");
        // Unix carol is not Foresight carol, whose jobs run as cc.
        assert!(who(&w, caller(1005, Some("carol"))).is_err());
        assert_eq!(
            who(&w, caller(1006, Some("dave"))),
            Ok(LocalIdentity::Create("dave".into()))
        );
        assert!(who(&w, caller(1007, None))
            .unwrap_err()
            .contains("uid 1007"));
    }

    #[test]
    fn several_users_on_one_account_and_first_contact_refused_are_explained() {
        let mut w = world(&[]);
        user(&mut w, "x1", false, Some("shared"));
        user(&mut w, "x2", false, Some("shared"));
        let e = who(&w, caller(1001, Some("shared"))).unwrap_err();
        assert!(e.contains("several Foresight users (x1, x2)"), "{e}");
        // The user of the account's own name is the natural choice among several.
        user(&mut w, "shared", false, None);
        assert_eq!(
            who(&w, caller(1001, Some("shared"))),
            Ok(LocalIdentity::User("shared".into()))
        );
        let refuse = LocalCaller {
            first_contact: FirstContact::Refuse,
            ..caller(1002, Some("erin"))
        };
        let e = who(&w, refuse).unwrap_err();
        assert!(e.contains("user add erin --unix-user erin"), "{e}");
        if let Some(u) = w.users.get_mut("x1") {
            u.removed = true;
        }
        let e = who(&w, caller(1003, Some("x1"))).unwrap_err();
        assert!(e.contains("was removed"), "{e}");
    }
}
