//! Typed identifiers. Each kind of id is its own type so that a job id can never be passed
//! where a user id is meant; all of them are plain numbers on the wire.

/// Defines a Copy/Ord/Hash newtype over an integer that serializes as the bare number.
#[macro_export]
macro_rules! define_id {
    ($(#[$meta:meta])* $name:ident, $repr:ty) => {
        $(#[$meta])*
        #[derive(
            Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash,
            serde::Serialize, serde::Deserialize,
        )]
        #[serde(transparent)]
        pub struct $name(pub $repr);

        impl $name {
            /// The bare number.
            pub const fn as_num(self) -> $repr {
                self.0
            }
        }

        impl From<$repr> for $name {
            fn from(n: $repr) -> Self {
                $name(n)
            }
        }

        impl From<$name> for $repr {
            fn from(id: $name) -> $repr {
                id.0
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    };
}

define_id!(
    /// A job, numbered by a counter so that the simulator and the service number alike.
    JobId,
    u64
);
define_id!(
    /// A user (credential), as numbered by the trace or the user table.
    UserId,
    u32
);
define_id!(
    /// A Unix-style group (credential).
    GroupId,
    u32
);
define_id!(
    /// An accounting project (credential).
    AccountId,
    u32
);
define_id!(
    /// A class or queue (credential; SWF field 15).
    ClassId,
    u32
);
define_id!(
    /// A quality-of-service level (credential).
    QosId,
    u32
);
define_id!(
    /// An administrative advance reservation.
    ReservationId,
    u64
);
