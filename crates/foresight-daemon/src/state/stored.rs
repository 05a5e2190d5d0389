//! The store's enums and ACL types beside the API's: the store owns what it persists, the
//! API what it carries, and the service converts between them here, variant by variant and
//! field by field (destructured, so that a variant or field added on either side fails to
//! compile until its conversion is written).
//!
//! The conversions are traits of their own, not `From`: both sides are foreign types, and
//! the orphan rule allows `From` only in their crates, which do not depend on each other.

use foresight_api as api;
use foresight_store as store;

/// A value the store persists, as the API shows it.
pub(crate) trait ToApi {
    /// The API's type.
    type Api;
    /// The API's form of `self`.
    fn to_api(self) -> Self::Api;
}

/// A value the API carries, as the store persists it.
pub(crate) trait ToStored {
    /// The store's type.
    type Stored;
    /// The store's form of `self`.
    fn to_stored(self) -> Self::Stored;
}

/// Writes both conversions between an API enum and the store's, variant by variant.
macro_rules! same_variants {
    ($name:ident { $($variant:ident),* $(,)? }) => {
        impl ToApi for store::$name {
            type Api = api::$name;
            fn to_api(self) -> api::$name {
                match self {
                    $(store::$name::$variant => api::$name::$variant,)*
                }
            }
        }

        impl ToStored for api::$name {
            type Stored = store::$name;
            fn to_stored(self) -> store::$name {
                match self {
                    $(api::$name::$variant => store::$name::$variant,)*
                }
            }
        }
    };
}

/// Writes both conversions between an API struct and the store's, field by field.
macro_rules! same_fields {
    ($name:ident { $($field:ident),* $(,)? }) => {
        impl ToApi for store::$name {
            type Api = api::$name;
            fn to_api(self) -> api::$name {
                let store::$name { $($field),* } = self;
                api::$name { $($field),* }
            }
        }

        impl ToStored for api::$name {
            type Stored = store::$name;
            fn to_stored(self) -> store::$name {
                let api::$name { $($field),* } = self;
                store::$name { $($field),* }
            }
        }
    };
}

same_variants!(JobState {
    Pending,
    Planned,
    Reserved,
    Running,
    Completed,
    Failed,
    Cancelled,
    Timeout,
});
same_variants!(ReservationState {
    Tentative,
    Committed,
    Active,
    Finished,
    Released,
    Expired,
});
same_variants!(DependencyKind {
    After,
    AfterAny,
    AfterOk,
    AfterNotOk,
});
same_variants!(MapperName { Dsc, Heft, Greedy });
same_fields!(AclSpec {
    users,
    groups,
    accounts,
    classes,
    qos,
    job
});
same_fields!(UserCredentials {
    groups,
    accounts,
    classes,
    qos
});

impl ToApi for store::FailurePolicy {
    type Api = api::FailurePolicy;
    fn to_api(self) -> api::FailurePolicy {
        match self {
            store::FailurePolicy::Cancel => api::FailurePolicy::Cancel,
            store::FailurePolicy::Retry(n) => api::FailurePolicy::Retry(n),
        }
    }
}

impl ToStored for api::FailurePolicy {
    type Stored = store::FailurePolicy;
    fn to_stored(self) -> store::FailurePolicy {
        match self {
            api::FailurePolicy::Cancel => store::FailurePolicy::Cancel,
            api::FailurePolicy::Retry(n) => store::FailurePolicy::Retry(n),
        }
    }
}

impl<T: ToApi> ToApi for Option<T> {
    type Api = Option<T::Api>;
    fn to_api(self) -> Option<T::Api> {
        self.map(ToApi::to_api)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every state has the same name on both sides, so that the API shows what is stored.
    #[test]
    fn states_keep_their_names_both_ways() {
        let jobs = [
            api::JobState::Pending,
            api::JobState::Planned,
            api::JobState::Reserved,
            api::JobState::Running,
            api::JobState::Completed,
            api::JobState::Failed,
            api::JobState::Cancelled,
            api::JobState::Timeout,
        ];
        for s in jobs {
            assert_eq!(s.to_stored().as_str(), s.as_str());
            assert_eq!(s.to_stored().to_api(), s);
        }
        let reservations = [
            api::ReservationState::Tentative,
            api::ReservationState::Committed,
            api::ReservationState::Active,
            api::ReservationState::Finished,
            api::ReservationState::Released,
            api::ReservationState::Expired,
        ];
        for s in reservations {
            assert_eq!(s.to_stored().as_str(), s.as_str());
            assert_eq!(s.to_stored().to_api(), s);
        }
        let kinds = [
            api::DependencyKind::After,
            api::DependencyKind::AfterAny,
            api::DependencyKind::AfterOk,
            api::DependencyKind::AfterNotOk,
        ];
        for k in kinds {
            assert_eq!(k.to_stored().as_str(), k.as_str());
            assert_eq!(k.to_stored().to_api(), k);
        }
        for p in [api::FailurePolicy::Cancel, api::FailurePolicy::Retry(3)] {
            assert_eq!(p.to_stored().to_api(), p);
        }
    }
}
