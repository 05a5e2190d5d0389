//! The store's own names for the API's enums and ACL types it persists. The records keep the
//! API's types in memory (the service works with those), but a record is written and read
//! through the types here: their serde names are the ones every existing database holds, so
//! a rename in `foresight-api` no longer changes what is on disk, and a variant the API adds
//! fails to compile here (every conversion is an exhaustive `match`) until the store decides
//! how to write it.
//!
//! **The serde names below are an on-disk format: never change one.** A new variant is a new
//! name; an old name stays readable for as long as databases may hold it.

use foresight_api::{
    AclSpec, DependencyKind, FailurePolicy, JobState, MapperName, ReservationState, UserCredentials,
};
use serde::{de::DeserializeOwned, Deserialize, Deserializer, Serialize, Serializer};

/// An API type that the store writes in a form of its own.
pub trait Persisted: Clone {
    /// The store's form: what is serialized into the record.
    type Stored: Serialize + DeserializeOwned + From<Self> + Into<Self>;
}

/// `#[serde(with = "crate::format::stored")]`: a field of a [`Persisted`] type, written in
/// its store form.
pub(crate) mod stored {
    use super::*;

    pub(crate) fn serialize<T: Persisted, S: Serializer>(
        value: &T,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        T::Stored::from(value.clone()).serialize(s)
    }

    pub(crate) fn deserialize<'de, T: Persisted, D: Deserializer<'de>>(
        d: D,
    ) -> Result<T, D::Error> {
        T::Stored::deserialize(d).map(Into::into)
    }
}

/// `#[serde(with = "crate::format::stored_option")]`: as [`stored`], for an optional field.
pub(crate) mod stored_option {
    use super::*;

    pub(crate) fn serialize<T: Persisted, S: Serializer>(
        value: &Option<T>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        value.clone().map(T::Stored::from).serialize(s)
    }

    pub(crate) fn deserialize<'de, T: Persisted, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<T>, D::Error> {
        Ok(Option::<T::Stored>::deserialize(d)?.map(Into::into))
    }
}

/// Writes the conversions both ways between an API enum and the store's, variant by variant.
macro_rules! same_variants {
    ($api:ident <-> $stored:ident { $($variant:ident),* $(,)? }) => {
        impl From<$api> for $stored {
            fn from(v: $api) -> Self {
                match v {
                    $($api::$variant => $stored::$variant,)*
                }
            }
        }

        impl From<$stored> for $api {
            fn from(v: $stored) -> Self {
                match v {
                    $($stored::$variant => $api::$variant,)*
                }
            }
        }

        impl Persisted for $api {
            type Stored = $stored;
        }
    };
}

/// Writes the conversions both ways between an API struct and the store's, field by field
/// (destructured, so that a field the API adds fails to compile here).
macro_rules! same_fields {
    ($api:ident <-> $stored:ident { $($field:ident),* $(,)? }) => {
        impl From<$api> for $stored {
            fn from(v: $api) -> Self {
                let $api { $($field),* } = v;
                $stored { $($field),* }
            }
        }

        impl From<$stored> for $api {
            fn from(v: $stored) -> Self {
                let $stored { $($field),* } = v;
                $api { $($field),* }
            }
        }

        impl Persisted for $api {
            type Stored = $stored;
        }
    };
}

/// A job's state as stored, in its record and in the `state` column.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StoredJobState {
    /// `pending`.
    Pending,
    /// `planned`.
    Planned,
    /// `reserved`.
    Reserved,
    /// `running`.
    Running,
    /// `completed`.
    Completed,
    /// `failed`.
    Failed,
    /// `cancelled`.
    Cancelled,
    /// `timeout`.
    Timeout,
}

impl StoredJobState {
    /// The name in the `state` column (the one in the record, too): the load of unfinished
    /// jobs and the global queue filter on it.
    pub fn as_str(self) -> &'static str {
        match self {
            StoredJobState::Pending => "pending",
            StoredJobState::Planned => "planned",
            StoredJobState::Reserved => "reserved",
            StoredJobState::Running => "running",
            StoredJobState::Completed => "completed",
            StoredJobState::Failed => "failed",
            StoredJobState::Cancelled => "cancelled",
            StoredJobState::Timeout => "timeout",
        }
    }
}

same_variants!(JobState <-> StoredJobState {
    Pending, Planned, Reserved, Running, Completed, Failed, Cancelled, Timeout,
});

/// A reservation's state as stored, in its record and in the `state` column.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StoredReservationState {
    /// `tentative`.
    Tentative,
    /// `committed`.
    Committed,
    /// `active`.
    Active,
    /// `finished`.
    Finished,
    /// `released`.
    Released,
    /// `expired`.
    Expired,
}

impl StoredReservationState {
    /// The name in the `state` column (the one in the record, too).
    pub fn as_str(self) -> &'static str {
        match self {
            StoredReservationState::Tentative => "tentative",
            StoredReservationState::Committed => "committed",
            StoredReservationState::Active => "active",
            StoredReservationState::Finished => "finished",
            StoredReservationState::Released => "released",
            StoredReservationState::Expired => "expired",
        }
    }
}

same_variants!(ReservationState <-> StoredReservationState {
    Tentative, Committed, Active, Finished, Released, Expired,
});

/// What a dependency waits for, as stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StoredDependencyKind {
    /// `after`.
    After,
    /// `afterany`.
    AfterAny,
    /// `afterok`.
    AfterOk,
    /// `afternotok`.
    AfterNotOk,
}

same_variants!(DependencyKind <-> StoredDependencyKind {
    After, AfterAny, AfterOk, AfterNotOk,
});

/// A workflow's mapping algorithm, as stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StoredMapper {
    /// `dsc`.
    Dsc,
    /// `heft`.
    Heft,
    /// `greedy`.
    Greedy,
}

same_variants!(MapperName <-> StoredMapper { Dsc, Heft, Greedy });

/// What a workflow's failed task does, as stored: the word `"cancel"`, or `{"retry": N}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "PolicyForm", into = "PolicyForm")]
pub enum StoredFailurePolicy {
    /// `"cancel"`.
    Cancel,
    /// `{"retry": N}`.
    Retry(u32),
}

/// The two JSON forms of [`StoredFailurePolicy`].
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum PolicyForm {
    Word(String),
    Retry { retry: u32 },
}

impl TryFrom<PolicyForm> for StoredFailurePolicy {
    type Error = String;
    fn try_from(p: PolicyForm) -> Result<Self, String> {
        match p {
            PolicyForm::Word(w) if w == "cancel" => Ok(StoredFailurePolicy::Cancel),
            PolicyForm::Word(w) => Err(format!("unknown failure policy {w:?}")),
            PolicyForm::Retry { retry } => Ok(StoredFailurePolicy::Retry(retry)),
        }
    }
}

impl From<StoredFailurePolicy> for PolicyForm {
    fn from(p: StoredFailurePolicy) -> PolicyForm {
        match p {
            StoredFailurePolicy::Cancel => PolicyForm::Word("cancel".into()),
            StoredFailurePolicy::Retry(retry) => PolicyForm::Retry { retry },
        }
    }
}

impl From<FailurePolicy> for StoredFailurePolicy {
    fn from(p: FailurePolicy) -> Self {
        match p {
            FailurePolicy::Cancel => StoredFailurePolicy::Cancel,
            FailurePolicy::Retry(n) => StoredFailurePolicy::Retry(n),
        }
    }
}

impl From<StoredFailurePolicy> for FailurePolicy {
    fn from(p: StoredFailurePolicy) -> Self {
        match p {
            StoredFailurePolicy::Cancel => FailurePolicy::Cancel,
            StoredFailurePolicy::Retry(n) => FailurePolicy::Retry(n),
        }
    }
}

impl Persisted for FailurePolicy {
    type Stored = StoredFailurePolicy;
}

/// Who may use a reservation, as stored. Unknown fields are refused, as they always were.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoredAcl {
    /// Users admitted.
    #[serde(default)]
    pub users: Vec<String>,
    /// Groups admitted.
    #[serde(default)]
    pub groups: Vec<String>,
    /// Accounts admitted.
    #[serde(default)]
    pub accounts: Vec<String>,
    /// Classes admitted.
    #[serde(default)]
    pub classes: Vec<String>,
    /// QoS levels admitted.
    #[serde(default)]
    pub qos: Vec<String>,
    /// The one job admitted.
    #[serde(default)]
    pub job: Option<u64>,
}

same_fields!(AclSpec <-> StoredAcl { users, groups, accounts, classes, qos, job });

/// What a user may name in a job, as stored.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredCredentials {
    /// Groups.
    #[serde(default)]
    pub groups: Vec<String>,
    /// Accounts.
    #[serde(default)]
    pub accounts: Vec<String>,
    /// Classes (queues).
    #[serde(default)]
    pub classes: Vec<String>,
    /// Qualities of service.
    #[serde(default)]
    pub qos: Vec<String>,
}

same_fields!(UserCredentials <-> StoredCredentials { groups, accounts, classes, qos });

#[cfg(test)]
mod tests {
    use crate::{JobRecord, ReservationRecord, UserRecord, WorkflowRecord};
    use foresight_api::{
        AclSpec, DependencyKind, FailurePolicy, JobState, MapperName, ReservationState,
        UserCredentials,
    };
    use serde_json::{json, Value};

    /// Decodes `stored` as a `T`, checks it with `check`, and writes it back: the same JSON.
    fn loads_and_writes_back<T: serde::Serialize + serde::de::DeserializeOwned>(
        stored: Value,
        check: impl Fn(&T),
    ) {
        let record: T = serde_json::from_value(stored.clone()).unwrap();
        check(&record);
        assert_eq!(serde_json::to_value(&record).unwrap(), stored);
    }

    /// A job record as databases hold it (the text of its `data` column), with every field
    /// an API enum could reach.
    fn job(state: &str, state_after: Value, kind: &str) -> Value {
        let text = r#"{"user":"ann","name":null,"procs":2,"walltime":60,"price":null,
            "cluster":null,"reservation":null,"allow_early_start":false,"co_allocate":false,
            "command":["true"],"env":{},"cwd":null,"cred":[null,null,null,null],
            "state":"STATE","state_after":AFTER,"held":false,"suspended":false,"priority":0,
            "requeue":false,"exit_code":null,"signal":null,"reason":null,"submitted_at":1000,
            "first_planned_start":null,"planned_start":null,"started_at":null,"ended_at":null,
            "charged":0.0,"settled":0.0,"parts":[],"attempt":0,"stdout":null,"stderr":null,
            "links":{"dependency":{"text":"afterok:1","any":false,"singleton":false,
            "on":[{"kind":"KIND","target":"1","jobs":[1]}]},"waiting":true}}"#;
        let text = text
            .replace("STATE", state)
            .replace("AFTER", &state_after.to_string())
            .replace("KIND", kind);
        serde_json::from_str(&text).unwrap()
    }

    #[test]
    fn job_records_in_todays_format_load_and_are_written_the_same() {
        let states = [
            ("pending", JobState::Pending),
            ("planned", JobState::Planned),
            ("reserved", JobState::Reserved),
            ("running", JobState::Running),
            ("completed", JobState::Completed),
            ("failed", JobState::Failed),
            ("cancelled", JobState::Cancelled),
            ("timeout", JobState::Timeout),
        ];
        let kinds = [
            ("after", DependencyKind::After),
            ("afterany", DependencyKind::AfterAny),
            ("afterok", DependencyKind::AfterOk),
            ("afternotok", DependencyKind::AfterNotOk),
        ];
        for (i, (name, state)) in states.into_iter().enumerate() {
            let (kind_name, kind) = kinds[i % kinds.len()];
            loads_and_writes_back(job(name, Value::Null, kind_name), |j: &JobRecord| {
                assert_eq!(j.state, state, "{name}");
                assert_eq!(j.state_after, None, "{name}");
                assert_eq!(j.state_column(), name);
                let on = &j.links.as_ref().unwrap().dependency.as_ref().unwrap().on;
                assert_eq!(on[0].kind, kind, "{kind_name}");
            });
            loads_and_writes_back(job("running", json!(name), "after"), |j: &JobRecord| {
                assert_eq!(j.state_after, Some(state), "{name}");
            });
        }
    }

    #[test]
    fn reservation_records_in_todays_format_load_and_are_written_the_same() {
        let states = [
            ("tentative", ReservationState::Tentative),
            ("committed", ReservationState::Committed),
            ("active", ReservationState::Active),
            ("finished", ReservationState::Finished),
            ("released", ReservationState::Released),
            ("expired", ReservationState::Expired),
        ];
        for (name, state) in states {
            let stored = json!({
                "kind": "admin", "cluster": "c1", "procs": 4, "start": 10, "end": 20,
                "acl": {
                    "users": ["ann"], "groups": ["g"], "accounts": [], "classes": ["batch"],
                    "qos": [], "job": 7
                },
                "state": name, "expires_at": null, "owner": "root"
            });
            loads_and_writes_back(stored, |r: &ReservationRecord| {
                assert_eq!(r.state, state, "{name}");
                assert_eq!(r.state_column(), name);
                assert_eq!(
                    r.acl,
                    AclSpec {
                        users: vec!["ann".into()],
                        groups: vec!["g".into()],
                        classes: vec!["batch".into()],
                        job: Some(7),
                        ..AclSpec::default()
                    }
                );
            });
        }
        // An ACL with a field it never had is refused, as it was.
        let odd = json!({
            "kind": "admin", "cluster": "c1", "procs": 4, "start": 10, "end": 20,
            "acl": {"hosts": []}, "state": "active", "expires_at": null, "owner": "root"
        });
        assert!(serde_json::from_value::<ReservationRecord>(odd).is_err());
    }

    #[test]
    fn user_records_in_todays_format_load_and_are_written_the_same() {
        let stored = json!({
            "admin": false, "budget": 10.0, "spent": 1.5,
            "credentials": {
                "groups": ["physics"], "accounts": ["p1", "p2"], "classes": [], "qos": ["high"]
            },
            "disabled": false, "removed": false
        });
        loads_and_writes_back(stored, |u: &UserRecord| {
            assert_eq!(
                u.credentials,
                UserCredentials {
                    groups: vec!["physics".into()],
                    accounts: vec!["p1".into(), "p2".into()],
                    classes: vec![],
                    qos: vec!["high".into()],
                }
            );
        });
        // Written before users had credentials: none.
        let old: UserRecord =
            serde_json::from_value(json!({"admin": true, "budget": null, "spent": 0.0})).unwrap();
        assert_eq!(old.credentials, UserCredentials::default());
    }

    #[test]
    fn workflow_records_in_todays_format_load_and_are_written_the_same() {
        let cases = [
            (
                "dsc",
                MapperName::Dsc,
                json!("cancel"),
                FailurePolicy::Cancel,
            ),
            (
                "heft",
                MapperName::Heft,
                json!({"retry": 2}),
                FailurePolicy::Retry(2),
            ),
            (
                "greedy",
                MapperName::Greedy,
                json!({"retry": 0}),
                FailurePolicy::Retry(0),
            ),
        ];
        for (name, mapper, policy, on_failure) in cases {
            let stored = json!({
                "user": "ann", "name": "pair", "mapper": name, "on_failure": policy,
                "submitted_at": 1000, "tasks": [], "edges": []
            });
            loads_and_writes_back(stored, |w: &WorkflowRecord| {
                assert_eq!(w.mapper, mapper, "{name}");
                assert_eq!(w.on_failure, on_failure, "{name}");
            });
        }
        let odd = json!({
            "user": "ann", "name": "pair", "mapper": "dsc", "on_failure": "ignore",
            "submitted_at": 1000, "tasks": [], "edges": []
        });
        assert!(serde_json::from_value::<WorkflowRecord>(odd).is_err());
    }
}
