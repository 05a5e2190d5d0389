//! Budgets shared by peer dispatchers: a user's budget and spending are changed only inside
//! the transactions that start, charge or end jobs, on the user's `users` row taken with
//! `FOR UPDATE`, never written back from a dispatcher's cached copy. So two sites racing for
//! the last of one user's budget are ordered by the database, and one of them is refused.

use crate::{decode, encode, UserRecord};
use sqlx::PgConnection;

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

/// `user`'s budget and spending as the database has them, for a record about to be written
/// from a cached copy (inside the caller's transaction, the row taken `FOR UPDATE`).
pub(crate) async fn current(
    tx: &mut PgConnection,
    user: &str,
) -> std::result::Result<Option<(Option<f64>, f64)>, BudgetError> {
    let data: Option<String> =
        sqlx::query_scalar("SELECT data FROM users WHERE name = $1 FOR UPDATE")
            .bind(user)
            .fetch_optional(&mut *tx)
            .await?;
    data.map(|d| {
        let u: UserRecord = decode("users", user.to_string(), &d)?;
        Ok((u.budget, u.spent))
    })
    .transpose()
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
