//! The enums and ACL types the store persists, its own: their serde names are the ones every
//! existing database holds, so nothing outside the store (the API least of all) changes what
//! is on disk. The service converts them to and from the API's types on its side.
//!
//! **The serde names below are an on-disk format: never change one.** A new variant is a new
//! name; an old name stays readable for as long as databases may hold it.

use serde::{Deserialize, Serialize};

/// A job's state as stored, in its record and in the `state` column.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    /// `pending`.
    #[default]
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

impl JobState {
    /// Final states never change again: the store loads only the jobs not in one.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            JobState::Completed | JobState::Failed | JobState::Cancelled | JobState::Timeout
        )
    }

    /// The name in the `state` column (the one in the record, too): the load of unfinished
    /// jobs and the global queue filter on it.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Pending => "pending",
            JobState::Planned => "planned",
            JobState::Reserved => "reserved",
            JobState::Running => "running",
            JobState::Completed => "completed",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
            JobState::Timeout => "timeout",
        }
    }
}

impl std::str::FromStr for JobState {
    type Err = String;
    /// The state of a `state` column, as [`JobState::as_str`] names it.
    fn from_str(s: &str) -> Result<Self, String> {
        [
            JobState::Pending,
            JobState::Planned,
            JobState::Reserved,
            JobState::Running,
            JobState::Completed,
            JobState::Failed,
            JobState::Cancelled,
            JobState::Timeout,
        ]
        .into_iter()
        .find(|state| state.as_str() == s)
        .ok_or_else(|| format!("unknown job state {s:?}"))
    }
}

impl std::fmt::Display for JobState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A reservation's state as stored, in its record and in the `state` column.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReservationState {
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

impl ReservationState {
    /// Still holding processors?
    pub fn is_live(self) -> bool {
        matches!(
            self,
            ReservationState::Tentative | ReservationState::Committed | ReservationState::Active
        )
    }

    /// The name in the `state` column (the one in the record, too).
    pub fn as_str(self) -> &'static str {
        match self {
            ReservationState::Tentative => "tentative",
            ReservationState::Committed => "committed",
            ReservationState::Active => "active",
            ReservationState::Finished => "finished",
            ReservationState::Released => "released",
            ReservationState::Expired => "expired",
        }
    }
}

impl std::fmt::Display for ReservationState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a dependency waits for, as stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DependencyKind {
    /// `after`.
    After,
    /// `afterany`.
    AfterAny,
    /// `afterok`.
    AfterOk,
    /// `afternotok`.
    AfterNotOk,
}

impl DependencyKind {
    /// The keyword, as sbatch spells it (and the record holds it).
    pub fn as_str(self) -> &'static str {
        match self {
            DependencyKind::After => "after",
            DependencyKind::AfterAny => "afterany",
            DependencyKind::AfterOk => "afterok",
            DependencyKind::AfterNotOk => "afternotok",
        }
    }
}

/// A workflow's mapping algorithm, as stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MapperName {
    /// `dsc`.
    Dsc,
    /// `heft`.
    Heft,
    /// `greedy`.
    Greedy,
}

/// What a workflow's failed task does, as stored: the word `"cancel"`, or `{"retry": N}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "PolicyForm", into = "PolicyForm")]
pub enum FailurePolicy {
    /// `"cancel"`.
    Cancel,
    /// `{"retry": N}`.
    Retry(u32),
}

/// The two JSON forms of [`FailurePolicy`].
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum PolicyForm {
    Word(String),
    Retry { retry: u32 },
}

impl TryFrom<PolicyForm> for FailurePolicy {
    type Error = String;
    fn try_from(p: PolicyForm) -> Result<Self, String> {
        match p {
            PolicyForm::Word(w) if w == "cancel" => Ok(FailurePolicy::Cancel),
            PolicyForm::Word(w) => Err(format!("unknown failure policy {w:?}")),
            PolicyForm::Retry { retry } => Ok(FailurePolicy::Retry(retry)),
        }
    }
}

impl From<FailurePolicy> for PolicyForm {
    fn from(p: FailurePolicy) -> PolicyForm {
        match p {
            FailurePolicy::Cancel => PolicyForm::Word("cancel".into()),
            FailurePolicy::Retry(retry) => PolicyForm::Retry { retry },
        }
    }
}

/// Who may use a reservation, as stored. Unknown fields are refused, as they always were.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AclSpec {
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

/// What a user may name in a job, as stored.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserCredentials {
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

#[cfg(test)]
mod tests {
    use super::{
        AclSpec, DependencyKind, FailurePolicy, JobState, MapperName, ReservationState,
        UserCredentials,
    };
    use crate::{JobRecord, ReservationRecord, UserRecord, WorkflowRecord};
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
