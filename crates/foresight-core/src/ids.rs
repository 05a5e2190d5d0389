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
define_id!(
    /// A cluster of the grid: its index in the grid's cluster list, in configuration order.
    /// A bare `usize` (not `u32`) because it only ever indexes that list, so it needs no
    /// cast; the selection engine's packed arrays hold `u32`s and convert at their boundary.
    ClusterId,
    usize
);

impl ClusterId {
    /// Every cluster of a grid of `n` clusters, in order.
    pub fn all(n: usize) -> impl DoubleEndedIterator<Item = ClusterId> + ExactSizeIterator {
        (0..n).map(ClusterId)
    }

    /// Pairs each item of a per-cluster list with its cluster, as `enumerate` pairs it with
    /// its index.
    pub fn enumerate<I: IntoIterator>(items: I) -> impl Iterator<Item = (ClusterId, I::Item)> {
        items
            .into_iter()
            .enumerate()
            .map(|(k, item)| (ClusterId(k), item))
    }
}

impl<T> std::ops::Index<ClusterId> for [T] {
    type Output = T;
    fn index(&self, k: ClusterId) -> &T {
        &self[k.0]
    }
}

impl<T> std::ops::IndexMut<ClusterId> for [T] {
    fn index_mut(&mut self, k: ClusterId) -> &mut T {
        &mut self[k.0]
    }
}

impl<T> std::ops::Index<ClusterId> for Vec<T> {
    type Output = T;
    fn index(&self, k: ClusterId) -> &T {
        &self[k.0]
    }
}

impl<T> std::ops::IndexMut<ClusterId> for Vec<T> {
    fn index_mut(&mut self, k: ClusterId) -> &mut T {
        &mut self[k.0]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_id_indexes_a_per_cluster_list_and_is_a_bare_number_on_the_wire() {
        let mut names = vec!["a", "b", "c"];
        assert_eq!(names[ClusterId(1)], "b");
        names[ClusterId(2)] = "z";
        assert_eq!(names.as_slice()[ClusterId(2)], "z");
        #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
        struct Row {
            cluster: ClusterId,
        }
        let row = Row {
            cluster: ClusterId(2),
        };
        assert_eq!(toml::to_string(&row).unwrap(), "cluster = 2\n");
        assert_eq!(toml::from_str::<Row>("cluster = 2").unwrap(), row);
    }

    #[test]
    fn all_and_enumerate_number_clusters_in_order() {
        assert_eq!(
            ClusterId::all(3).collect::<Vec<_>>(),
            [ClusterId(0), ClusterId(1), ClusterId(2)]
        );
        let pairs: Vec<_> = ClusterId::enumerate(["a", "b"]).collect();
        assert_eq!(pairs, [(ClusterId(0), "a"), (ClusterId(1), "b")]);
    }
}
