//! Why the state or the service did not do what was asked, in the domain's words. `api/mod.rs`
//! maps each kind to a status code; nothing below the API speaks HTTP.

/// A refused or failed operation, naming the request field at fault where there is one.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum Refusal {
    /// A field's value cannot be accepted (out of range, malformed, unknown name).
    #[error("{field}: {reason}")]
    Invalid {
        /// The request field at fault (`jobs[2].walltime` in a batch).
        field: String,
        /// What is wrong and what would be accepted.
        reason: String,
    },
    /// No credentials, or credentials nobody holds.
    #[error("{0}")]
    Unauthenticated(String),
    /// A known user who may not do this.
    #[error("{reason}")]
    Forbidden {
        /// The request field whose value is not allowed.
        field: String,
        /// Why not.
        reason: String,
    },
    /// The named job, reservation or user does not exist (or is not visible to the caller).
    #[error("{reason}")]
    NotFound {
        /// The request field that named it (`id`, `name`), when known.
        field: Option<String>,
        /// What was looked for.
        reason: String,
    },
    /// The thing exists but its state forbids the change (already ended, not held, taken).
    #[error("{reason}")]
    Conflict {
        /// The request field to change to resolve it, when one is at fault.
        field: Option<String>,
        /// The state in the way.
        reason: String,
    },
    /// The worst-case cost exceeds the user's remaining budget.
    #[error("{reason}")]
    OverBudget {
        /// The field that sets the cost (`price`, or `jobs[2].price` in a batch).
        field: String,
        /// The cost and the budget.
        reason: String,
    },
    /// The service failed, not the request (store writer gone, a planning task panicked).
    #[error("{0}")]
    Internal(String),
}

impl Refusal {
    /// A field's value cannot be accepted.
    pub fn invalid(field: &str, reason: impl Into<String>) -> Refusal {
        Refusal::Invalid {
            field: field.into(),
            reason: reason.into(),
        }
    }

    /// No or unknown credentials.
    pub fn unauthenticated(reason: impl Into<String>) -> Refusal {
        Refusal::Unauthenticated(reason.into())
    }

    /// A known user, not allowed.
    pub fn forbidden(field: &str, reason: impl Into<String>) -> Refusal {
        Refusal::Forbidden {
            field: field.into(),
            reason: reason.into(),
        }
    }

    /// Nothing by that name or id.
    pub fn not_found(reason: impl Into<String>) -> Refusal {
        Refusal::NotFound {
            field: None,
            reason: reason.into(),
        }
    }

    /// Nothing by the name or id given in `field`.
    pub fn not_found_at(field: &str, reason: impl Into<String>) -> Refusal {
        Refusal::NotFound {
            field: Some(field.into()),
            reason: reason.into(),
        }
    }

    /// The state forbids it.
    pub fn conflict(reason: impl Into<String>) -> Refusal {
        Refusal::Conflict {
            field: None,
            reason: reason.into(),
        }
    }

    /// The state forbids it, and `field` is what to change.
    pub fn conflict_at(field: &str, reason: impl Into<String>) -> Refusal {
        Refusal::Conflict {
            field: Some(field.into()),
            reason: reason.into(),
        }
    }

    /// Over budget.
    pub fn over_budget(reason: impl Into<String>) -> Refusal {
        Refusal::OverBudget {
            field: "price".into(),
            reason: reason.into(),
        }
    }

    /// The service failed.
    pub fn internal(reason: impl Into<String>) -> Refusal {
        Refusal::Internal(reason.into())
    }

    /// The request field at fault, if any.
    pub fn field(&self) -> Option<&str> {
        match self {
            Refusal::Invalid { field, .. }
            | Refusal::Forbidden { field, .. }
            | Refusal::OverBudget { field, .. } => Some(field),
            Refusal::NotFound { field, .. } | Refusal::Conflict { field, .. } => field.as_deref(),
            Refusal::Unauthenticated(_) | Refusal::Internal(_) => None,
        }
    }

    /// What is wrong, without the field.
    pub fn reason(&self) -> &str {
        match self {
            Refusal::Invalid { reason, .. }
            | Refusal::Forbidden { reason, .. }
            | Refusal::NotFound { reason, .. }
            | Refusal::Conflict { reason, .. }
            | Refusal::OverBudget { reason, .. } => reason,
            Refusal::Unauthenticated(r) | Refusal::Internal(r) => r,
        }
    }

    /// The same refusal about element `index` of a batch (`jobs[index].field`).
    pub fn at(self, index: usize) -> Refusal {
        let prefix = |f: Option<String>| match f {
            Some(f) => format!("jobs[{index}].{f}"),
            None => format!("jobs[{index}]"),
        };
        match self {
            Refusal::Invalid { field, reason } => Refusal::Invalid {
                field: prefix(Some(field)),
                reason,
            },
            Refusal::Forbidden { field, reason } => Refusal::Forbidden {
                field: prefix(Some(field)),
                reason,
            },
            Refusal::NotFound { field, reason } => Refusal::NotFound {
                field: Some(prefix(field)),
                reason,
            },
            Refusal::Conflict { field, reason } => Refusal::Conflict {
                field: Some(prefix(field)),
                reason,
            },
            Refusal::OverBudget { field, reason } => Refusal::OverBudget {
                field: prefix(Some(field)),
                reason,
            },
            other => other,
        }
    }
}
