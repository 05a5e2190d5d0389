//! `foresight user`: users, their budgets, credentials and tokens (administrators).

use super::input::bad;
use super::{Client, Connection};
use crate::format::{OutOnly, OutputOpt};
use crate::table::{printable, table};
use anyhow::Result;
use clap::{Args, Subcommand};
use foresight_api::{
    BudgetChange, CreateUser, CreatedUser, CredentialsChange, UnixUserChange, UserStateChange,
    UserView,
};
/// User commands (administrators).
#[derive(Subcommand)]
pub enum UserCommand {
    /// Create a user; prints their token once.
    Add(AddUserOpts),
    /// List users and budgets.
    List(OutOnly),
    /// Set or top up a budget: `--set 1000`, `--set unlimited`, `--add 50`.
    Budget(BudgetOpts),
    /// Change a user: `--unix-user ACCOUNT` (the Unix account their local jobs run as when
    /// the server is root), `--default-unix-user` (back to the server's default), and the
    /// credentials they may name in a job: `--groups a,b --accounts x --classes q --qos
    /// normal` (each replaces theirs; the first is their default; `''` empties it).
    Modify(ModifyUserOpts),
    /// Token commands: `user token rotate NAME` prints a new token; the old one is refused
    /// at once.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Disable a user: their token is refused at once and their jobs that have not started
    /// are cancelled (running ones finish); their history stays.
    Disable(NameOpts),
    /// Enable a disabled user again.
    Enable(NameOpts),
    /// Remove a user: disabled for good, token gone, jobs that have not started cancelled;
    /// their history stays and the name is never reused.
    Remove(NameOpts),
    /// Who am I?
    Whoami(OutOnly),
}

/// Token commands (administrators).
#[derive(Subcommand)]
pub enum TokenCommand {
    /// Give a user a new token and print it (once); the old one stops working at once.
    Rotate(NameOpts),
}

/// A user's name (and the output format).
#[derive(Args)]
pub struct NameOpts {
    /// Name.
    name: String,
    #[command(flatten)]
    out: OutputOpt,
}

/// Options of `user add`.
#[derive(Args)]
pub struct AddUserOpts {
    /// Name.
    name: String,
    /// Budget [default: unlimited].
    #[arg(long)]
    budget: Option<f64>,
    /// Make an administrator.
    #[arg(long)]
    admin: bool,
    /// The Unix account their local jobs run as when the server is root [default: the
    /// server's `[unix_user]` table, else the account of the same name]. Only an account
    /// chosen here or in the table may be root.
    #[arg(long, value_name = "ACCOUNT")]
    unix_user: Option<String>,
    #[command(flatten)]
    out: OutputOpt,
}

/// Options of `user modify`.
#[derive(Args)]
pub struct ModifyUserOpts {
    /// Name.
    name: String,
    /// The Unix account their local jobs run as when the server is root.
    #[arg(long, value_name = "ACCOUNT", conflicts_with = "default_unix_user")]
    unix_user: Option<String>,
    /// Forget the account set with `--unix-user`: the server's default applies again.
    #[arg(long)]
    default_unix_user: bool,
    /// The groups they belong to (comma-separated; the first is their default).
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    groups: Option<Vec<String>>,
    /// The accounts they may charge (comma-separated; the first is their default).
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    accounts: Option<Vec<String>>,
    /// The classes (queues) they may use (comma-separated; the first is their default).
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    classes: Option<Vec<String>>,
    /// The qualities of service they may use (comma-separated; the first is their default).
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    qos: Option<Vec<String>>,
    #[command(flatten)]
    out: OutputOpt,
}

/// Options of `user budget`.
#[derive(Args)]
pub struct BudgetOpts {
    /// Name.
    name: String,
    /// New budget, or `unlimited`.
    #[arg(long)]
    set: Option<String>,
    /// Amount to add (negative to take away).
    #[arg(long, allow_hyphen_values = true)]
    add: Option<f64>,
    #[command(flatten)]
    out: OutputOpt,
}

/// Runs a user command.
pub fn user(conn: &Connection, cmd: UserCommand) -> Result<()> {
    let c = Client::new(conn)?;
    let disabled = matches!(cmd, UserCommand::Disable(_));
    // Most commands print the user as they are now.
    let (u, out): (UserView, OutputOpt) = match cmd {
        UserCommand::Add(o) => {
            let u: CreatedUser = c.post(
                "/users",
                &CreateUser {
                    name: o.name,
                    admin: o.admin,
                    budget: o.budget,
                    unix_user: o.unix_user,
                },
            )?;
            warn_of(&u.user.warnings);
            return o.out.output.print(&u, || format!("{}\n", u.token));
        }
        UserCommand::List(o) => {
            let us: Vec<UserView> = c.get("/users", &[])?;
            return o.out.output.print(&us, || users_table(&us));
        }
        UserCommand::Budget(o) => (budget(&c, &o)?, o.out),
        UserCommand::Modify(o) => {
            let out = o.out;
            (modify(&c, o)?, out)
        }
        UserCommand::Token(TokenCommand::Rotate(o)) => {
            let u: CreatedUser = c.post(&format!("/users/{}/token", o.name), &())?;
            return o.out.output.print(&u, || format!("{}\n", u.token));
        }
        UserCommand::Disable(o) | UserCommand::Enable(o) => {
            let u: UserView = c.post(
                &format!("/users/{}/state", o.name),
                &UserStateChange { disabled },
            )?;
            (u, o.out)
        }
        UserCommand::Remove(o) => {
            let u: UserView = c.delete(&format!("/users/{}", o.name))?;
            return o
                .out
                .output
                .print(&u, || format!("user {} removed\n", printable(&u.name)));
        }
        UserCommand::Whoami(o) => (c.get("/whoami", &[])?, o.out),
    };
    out.output
        .print(&u, || users_table(std::slice::from_ref(&u)))
}

/// Runs `user budget`: the user as they are after the change.
fn budget(c: &Client, o: &BudgetOpts) -> Result<UserView> {
    let set = match o.set.as_deref() {
        None => None,
        Some("unlimited") => Some(None),
        Some(s) => Some(Some(s.parse::<f64>().map_err(|_| {
            bad(format!("--set {s:?}: expected a number or 'unlimited'"))
        })?)),
    };
    if set.is_none() && o.add.is_none() {
        return Err(bad("give --set or --add".into()));
    }
    c.post(
        &format!("/users/{}/budget", o.name),
        &BudgetChange { set, add: o.add },
    )
}

/// Runs `user modify`: the user as they are after the changes.
fn modify(c: &Client, o: ModifyUserOpts) -> Result<UserView> {
    // `--groups ''` empties the list.
    let list = |v: Option<Vec<String>>| {
        v.map(|l| l.into_iter().filter(|x| !x.is_empty()).collect::<Vec<_>>())
    };
    let creds = CredentialsChange {
        groups: list(o.groups),
        accounts: list(o.accounts),
        classes: list(o.classes),
        qos: list(o.qos),
    };
    let unix = o.unix_user.is_some() || o.default_unix_user;
    if !unix && creds == CredentialsChange::default() {
        return Err(bad(
            "give --unix-user, --default-unix-user, --groups, --accounts, --classes \
             or --qos"
                .into(),
        ));
    }
    let mut u: Option<UserView> = None;
    if unix {
        let changed: UserView = c.post(
            &format!("/users/{}/unix-user", o.name),
            &UnixUserChange {
                unix_user: o.unix_user,
            },
        )?;
        warn_of(&changed.warnings);
        u = Some(changed);
    }
    if creds != CredentialsChange::default() {
        u = Some(c.post(&format!("/users/{}/credentials", o.name), &creds)?);
    }
    Ok(u.expect("invariant: one change was sent"))
}

/// The users as a table: role, budget and what they spent.
fn users_table(us: &[UserView]) -> String {
    let rows: Vec<Vec<String>> = us
        .iter()
        .map(|u| {
            vec![
                u.name.clone(),
                format!(
                    "{}{}",
                    if u.admin { "admin" } else { "user" },
                    if u.disabled { " (disabled)" } else { "" }
                ),
                u.budget.map_or("unlimited".into(), |b| format!("{b:.2}")),
                format!("{:.2}", u.spent),
                unix_account(u),
            ]
        })
        .collect();
    table(&["NAME", "ROLE", "BUDGET", "SPENT", "UNIX"], &rows)
}

/// The Unix account a user's jobs run as, marked with the rule that chose it when no
/// administrator did (`nobody (default *)`), so that a mapped user never reads as unmapped.
fn unix_account(u: &UserView) -> String {
    let Some(account) = u.runs_as.as_deref().or(u.unix_user.as_deref()) else {
        return "-".into();
    };
    let why = match u.runs_as_from.as_deref() {
        Some("table") => " ([unix_user])",
        Some("default") => " (default *)",
        Some("name") => " (own name)",
        _ => "",
    };
    format!("{}{why}", printable(account))
}

/// The server's warnings about a change, on stderr.
fn warn_of(warnings: &[String]) {
    for w in warnings {
        eprintln!("warning: {}", printable(w));
    }
}
