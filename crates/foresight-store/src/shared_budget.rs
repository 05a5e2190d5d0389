//! Budgets shared by peer dispatchers: a user's budget and spending are changed only inside
//! the transactions that start, charge or end jobs, on the user's `users` row taken with
//! `FOR UPDATE`, never written back from a dispatcher's cached copy. So two sites racing for
//! the last of one user's budget are ordered by the database, and one of them is refused.

use crate::{decode, encode, UserRecord};
use sqlx::PgConnection;

/// What a job has taken from its user's budget so far, from what it was `charged` (its
/// record's total, every run included) and what was `prepaid` for it (the hold its site
/// took as it started it, see [`crate::JobRecord::prepaid`]):
/// - without a hold, what it was charged;
/// - while it has a hold and has not `ended`, the whole hold: its charges are paid from it;
/// - once it has ended, what it was charged, at most the hold: the rest of the hold goes
///   back. A job preempted and requeued runs again within the same hold; what its runs
///   cost beyond the hold is not taken from the budget, so a preemption never takes the
///   budget below what the hold left.
pub fn budget_taken(charged: f64, prepaid: f64, ended: bool) -> f64 {
    if prepaid <= 0.0 {
        charged
    } else if ended {
        charged.clamp(0.0, prepaid)
    } else {
        prepaid
    }
}

/// What a local job of a peer dispatcher has taken from its user's budget so far, from what
/// it was `charged` (every attempt that has stopped) and the `hold` its site took as it
/// accepted it (its worst case at its cluster's tariff, see
/// [`crate::JobRecord::budget_hold`]): until it has `ended`, what it was charged plus the
/// hold, which covers the attempt not charged yet; once it has ended, what it was charged,
/// the hold going back. So a requeued job's next attempt is covered again, and a job
/// cancelled before it started gives the whole hold back.
pub fn local_taken(charged: f64, hold: f64, ended: bool) -> f64 {
    if ended || hold <= 0.0 {
        charged
    } else {
        charged + hold
    }
}

/// Moves `amount` from `user`'s budget to their spending (a negative amount gives back),
/// inside the caller's transaction. With `require`, refuses (changing nothing, answering the
/// budget left) when a limited budget holds less than `amount`. A user without a row (a
/// name no longer known) is left alone.
pub(crate) async fn take(
    tx: &mut PgConnection,
    user: &str,
    amount: f64,
    require: bool,
) -> std::result::Result<std::result::Result<(), f64>, BudgetError> {
    let data: Option<String> =
        sqlx::query_scalar("SELECT data FROM users WHERE name = $1 FOR UPDATE")
            .bind(user)
            .fetch_optional(&mut *tx)
            .await?;
    let Some(data) = data else {
        return Ok(Ok(()));
    };
    let mut u: UserRecord = decode("users", user.to_string(), &data)?;
    if require {
        if let Some(left) = u.budget.filter(|b| *b < amount) {
            return Ok(Err(left));
        }
    }
    u.spent += amount;
    if let Some(b) = u.budget.as_mut() {
        *b -= amount;
    }
    sqlx::query("UPDATE users SET data = $2 WHERE name = $1")
        .bind(user)
        .bind(encode(&u))
        .execute(&mut *tx)
        .await?;
    Ok(Ok(()))
}

/// Takes the holds of a dispatcher's new local jobs ([`crate::JobRecord::budget_hold`])
/// from their users' budgets, inside the transaction that stores them (checked by the
/// caller: a hold taken here is never refused). Answers what was taken.
pub(crate) async fn take_holds(
    tx: &mut PgConnection,
    jobs: &[crate::JobRecord],
) -> std::result::Result<f64, BudgetError> {
    let mut taken = 0.0;
    for j in jobs {
        if !crate::is_global(j) && j.budget_hold > 0.0 && j.budget_hold.is_finite() {
            take(tx, &j.user, j.budget_hold, false).await?.ok();
            taken += j.budget_hold;
        }
    }
    Ok(taken)
}

/// A database error, or a user row that does not decode.
#[derive(Debug)]
pub(crate) enum BudgetError {
    Db(sqlx::Error),
    Store(crate::StoreError),
}

impl From<sqlx::Error> for BudgetError {
    fn from(e: sqlx::Error) -> Self {
        BudgetError::Db(e)
    }
}

impl From<crate::StoreError> for BudgetError {
    fn from(e: crate::StoreError) -> Self {
        BudgetError::Store(e)
    }
}

impl BudgetError {
    /// As a store error naming the database.
    pub(crate) fn at(self, name: &str) -> crate::StoreError {
        match self {
            BudgetError::Db(source) => crate::StoreError::Database {
                path: name.to_string(),
                source,
            },
            BudgetError::Store(e) => e,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::budget_taken;

    #[test]
    fn a_held_job_takes_its_hold_while_it_runs_and_what_it_was_charged_once_it_ends() {
        // A hold of 120 (4 processors × 30 s × tariff 1) for a job that used 4 × 7 s = 28.
        struct Case {
            name: &'static str,
            charged: f64,
            prepaid: f64,
            ended: bool,
            want: f64,
        }
        let cases = [
            Case {
                name: "no hold: the charge",
                charged: 28.0,
                prepaid: 0.0,
                ended: false,
                want: 28.0,
            },
            Case {
                name: "no hold, ended",
                charged: 28.0,
                prepaid: 0.0,
                ended: true,
                want: 28.0,
            },
            Case {
                name: "running: the hold",
                charged: 120.0,
                prepaid: 120.0,
                ended: false,
                want: 120.0,
            },
            Case {
                name: "running, refunded: still the hold",
                charged: 28.0,
                prepaid: 120.0,
                ended: false,
                want: 120.0,
            },
            Case {
                name: "ended: its charge, 92 back",
                charged: 28.0,
                prepaid: 120.0,
                ended: true,
                want: 28.0,
            },
            Case {
                name: "ended, never ran",
                charged: 0.0,
                prepaid: 120.0,
                ended: true,
                want: 0.0,
            },
            // Requeued after 7 s (28), then a whole second run (120): 148 charged, the
            // hold of 120 taken, never more.
            Case {
                name: "rerun beyond the hold: the hold",
                charged: 148.0,
                prepaid: 120.0,
                ended: true,
                want: 120.0,
            },
        ];
        for c in cases {
            assert_eq!(
                budget_taken(c.charged, c.prepaid, c.ended),
                c.want,
                "{}",
                c.name
            );
        }
        // Settling moves what the job has taken from its hold (120) to its charge (28):
        // 92 goes back, whenever the last charge is written.
        let before = budget_taken(120.0, 120.0, false);
        assert_eq!(before - budget_taken(120.0, 120.0, true), 0.0);
        assert_eq!(
            budget_taken(120.0, 120.0, true) - budget_taken(28.0, 120.0, true),
            92.0
        );
    }
}
