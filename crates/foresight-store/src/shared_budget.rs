//! Budgets shared by peer dispatchers: a user's budget and spending are the database's,
//! never written back from a dispatcher's cached copy. What jobs take and give back is
//! appended to a ledger (`migrations/postgres/0012_budget_ledger.sql`) in the transactions
//! that start, charge or end them, without taking the user's `users` row: a user's budget
//! left is their row's less the sum of their ledger. Only a check that a limited budget
//! covers an amount (a hold, an admission, a change of the budget) serialises, on the
//! user's budget lock ([`lock`]), so two sites racing for the last of one user's budget
//! are ordered by the database, and one of them is refused.

use crate::{decode, encode, Result, UserRecord};
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
/// budget left) when a limited budget holds less than `amount`: that check takes the user's
/// budget lock ([`lock`]); without it the movement is one append to the ledger, which
/// locks nothing another site waits for. A user without a row (a name no longer known) is
/// left alone.
pub(crate) async fn take(
    tx: &mut PgConnection,
    user: &str,
    amount: f64,
    require: bool,
) -> std::result::Result<std::result::Result<(), f64>, BudgetError> {
    if require {
        lock(tx, user).await?;
        let Some(u) = current(tx, user).await? else {
            return Ok(Ok(()));
        };
        if let Some(left) = u.budget.filter(|b| *b < amount) {
            return Ok(Err(left));
        }
    }
    sqlx::query(
        "INSERT INTO budget_ledger (user_name, amount) SELECT $1, $2 \
         WHERE EXISTS (SELECT 1 FROM users WHERE name = $1)",
    )
    .bind(user)
    .bind(amount)
    .execute(&mut *tx)
    .await?;
    Ok(Ok(()))
}

/// Takes `user`'s budget lock for the caller's transaction: checks that a limited budget
/// covers something, and changes of the budget itself, are ordered by it (movements that
/// check nothing do not take it).
pub(crate) async fn lock(
    tx: &mut PgConnection,
    user: &str,
) -> std::result::Result<(), sqlx::Error> {
    sqlx::query("SELECT pg_advisory_xact_lock(hashtext('foresight budget'), hashtext($1))")
        .bind(user)
        .execute(&mut *tx)
        .await?;
    Ok(())
}

/// `user` as the database has them now, their ledger summed in (`None`: no such user).
pub(crate) async fn current(
    tx: &mut PgConnection,
    user: &str,
) -> std::result::Result<Option<UserRecord>, BudgetError> {
    let row: Option<(String, f64)> = sqlx::query_as(&format!(
        "SELECT u.data, {LEDGER_SUM} FROM users u WHERE u.name = $1"
    ))
    .bind(user)
    .fetch_optional(&mut *tx)
    .await?;
    let Some((data, moved)) = row else {
        return Ok(None);
    };
    let mut u: UserRecord = decode("users", user.to_string(), &data)?;
    apply(&mut u, moved);
    Ok(Some(u))
}

/// The sum of the ledger of the user row `u`, as a column.
pub(crate) const LEDGER_SUM: &str = "COALESCE((SELECT sum(l.amount) FROM budget_ledger l \
                                     WHERE l.user_name = u.name), 0)::float8";

/// How many ledger rows of one user are folded into their row by the next reading of every
/// user ([`fold`]): reading a budget sums at most about this many rows.
pub(crate) const FOLD_AFTER: i64 = 256;

/// Takes `moved` (the sum of a user's ledger) from their stored budget into their spending.
pub(crate) fn apply(u: &mut UserRecord, moved: f64) {
    if moved != 0.0 {
        u.spent += moved;
        if let Some(b) = u.budget.as_mut() {
            *b -= moved;
        }
    }
}

/// Folds `user`'s ledger into their `users` row (taken `FOR UPDATE`, under their budget
/// lock), in the caller's transaction: the row's budget and spending then say all, and the
/// rows folded are gone. Answers the user as folded (`None`: no such user).
pub(crate) async fn fold(
    tx: &mut PgConnection,
    user: &str,
) -> std::result::Result<Option<UserRecord>, BudgetError> {
    lock(tx, user).await?;
    let data: Option<String> =
        sqlx::query_scalar("SELECT data FROM users WHERE name = $1 FOR UPDATE")
            .bind(user)
            .fetch_optional(&mut *tx)
            .await?;
    let Some(data) = data else {
        return Ok(None);
    };
    let mut u: UserRecord = decode("users", user.to_string(), &data)?;
    let moved: f64 = sqlx::query_scalar(
        "WITH d AS (DELETE FROM budget_ledger WHERE user_name = $1 RETURNING amount) \
         SELECT COALESCE(sum(amount), 0)::float8 FROM d",
    )
    .bind(user)
    .fetch_one(&mut *tx)
    .await?;
    apply(&mut u, moved);
    if moved != 0.0 {
        sqlx::query("UPDATE users SET data = $2 WHERE name = $1")
            .bind(user)
            .bind(encode(&u))
            .execute(&mut *tx)
            .await?;
    }
    u.name = user.to_string();
    Ok(Some(u))
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

/// Users as the shared database has them, their ledgers summed in.
impl crate::SharedQueue {
    /// Every user as the database has them (created, changed or charged by any site): a
    /// dispatcher's copy is refreshed from these. The ledger of a user whose rows have piled
    /// up past `FOLD_AFTER` rows is folded into their row first (rarely: once per that many
    /// charges), so that reading budgets stays cheap.
    pub async fn users(&self) -> Result<Vec<UserRecord>> {
        let read = format!(
            "SELECT u.name, u.token_hash, u.data, {LEDGER_SUM}, (SELECT count(*) \
             FROM budget_ledger l WHERE l.user_name = u.name) FROM users u ORDER BY u.name"
        );
        let mut rows: Vec<(String, String, String, f64, i64)> = sqlx::query_as(&read)
            .fetch_all(&self.pool)
            .await
            .map_err(self.db())?;
        let piled: Vec<String> = rows
            .iter()
            .filter(|r| r.4 > FOLD_AFTER)
            .map(|r| r.0.clone())
            .collect();
        if !piled.is_empty() {
            for user in piled {
                let mut tx = self.pool.begin().await.map_err(self.db())?;
                fold(&mut tx, &user).await.map_err(|e| e.at(&self.name))?;
                tx.commit().await.map_err(self.db())?;
            }
            rows = sqlx::query_as(&read)
                .fetch_all(&self.pool)
                .await
                .map_err(self.db())?;
        }
        rows.into_iter()
            .map(|(name, token, data, moved, _)| user_of((name, token, data, moved)))
            .collect()
    }

    /// The user whose token has this hash, as the database has them: a token a dispatcher
    /// has not seen may be a user another site created or gave a new token a moment ago.
    pub async fn user_by_token(&self, token_hash: &str) -> Result<Option<UserRecord>> {
        let row: Option<(String, String, String, f64)> = sqlx::query_as(&format!(
            "SELECT u.name, u.token_hash, u.data, {LEDGER_SUM} FROM users u \
             WHERE u.token_hash = $1"
        ))
        .bind(token_hash)
        .fetch_optional(&self.pool)
        .await
        .map_err(self.db())?;
        row.map(user_of).transpose()
    }

    /// Sets (`set`; `Some(None)`: unlimited) and then tops up (`add`) `user`'s budget in the
    /// database, in one transaction under the user's budget lock, their ledger folded in
    /// first. Answers the budget and spending after, or `None` for an unknown user; `Err`
    /// text when `add` meets an unlimited budget.
    pub async fn change_budget(
        &self,
        user: &str,
        set: Option<Option<f64>>,
        add: Option<f64>,
    ) -> Result<Option<std::result::Result<(Option<f64>, f64), String>>> {
        let mut tx = self.pool.begin().await.map_err(self.db())?;
        let Some(mut u) = fold(&mut tx, user).await.map_err(|e| e.at(&self.name))? else {
            return Ok(None);
        };
        if let Some(s) = set {
            u.budget = s;
        }
        if let Some(a) = add {
            match u.budget.as_mut() {
                Some(b) => *b += a,
                None => {
                    return Ok(Some(Err(format!(
                        "user {user:?}'s budget is unlimited: nothing to add to (set a number \
                         with `set` first)"
                    ))))
                }
            }
        }
        sqlx::query("UPDATE users SET data = $2 WHERE name = $1")
            .bind(user)
            .bind(encode(&u))
            .execute(&mut *tx)
            .await
            .map_err(self.db())?;
        crate::shared_queue::notify_users(&mut tx)
            .await
            .map_err(self.db())?;
        crate::shared_queue::back_on_sale(&mut tx, user)
            .await
            .map_err(|e| e.at(&self.name))?;
        tx.commit().await.map_err(self.db())?;
        Ok(Some(Ok((u.budget, u.spent))))
    }
}

/// A user row with the sum of its ledger, as the user it says.
pub(crate) fn user_of(
    (name, token_hash, data, moved): (String, String, String, f64),
) -> Result<UserRecord> {
    let mut u: UserRecord = decode("users", name.clone(), &data)?;
    apply(&mut u, moved);
    u.name = name;
    u.token_hash = token_hash;
    Ok(u)
}

/// Every user's ledger summed, by name: what [`crate::Store::load_users`] of a dispatcher
/// adds to the rows it reads.
pub(crate) async fn ledger_sums(
    pool: &sqlx::PgPool,
) -> std::result::Result<std::collections::HashMap<String, f64>, sqlx::Error> {
    let rows: Vec<(String, f64)> = sqlx::query_as(
        "SELECT user_name, sum(amount)::float8 FROM budget_ledger GROUP BY user_name",
    )
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().collect())
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
