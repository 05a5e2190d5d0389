//! The Slurm-facing layer of the Slurm adapter: running Slurm's standard commands against one
//! cluster, building their command lines, and parsing what they print into typed data.
//!
//! # Layout
//! - `runner`: [`Invocation`], [`CommandOutput`], the [`CommandRunner`] trait, [`SystemRunner`]
//!   (real processes, `SLURM_CONF` per call, optionally as another user) and [`FakeRunner`].
//! - `commands`: typed requests and the command lines they become ([`SbatchRequest`],
//!   [`ReservationRequest`], [`JobControl`], ...).
//! - `parse`: one parser per command output; never panics, errors name the command and quote
//!   the text.
//! - `model`: [`Node`], [`Partition`], [`Job`], [`Reservation`], [`Submitted`], [`TestOnly`],
//!   [`Snapshot`].
//! - `client`: [`SlurmClient`], which ties them together for one cluster.
//! - `cluster`: [`SlurmCluster`], the [`crate::ResourceManager`] of a Slurm cluster, built on
//!   the client.
//! - `error`: [`SlurmError`], [`FailureKind`].
//!
//! # Interface: the CLI, and which output format where
//! The adapter runs the client commands (`sinfo`, `squeue`, `scontrol`, `sbatch`, `scancel`),
//! not `slurmrestd`: the commands are on every Slurm site with no extra daemon, JWT set-up or
//! API version to pick (22.05's REST plugins are `v0.0.36..38`, reservations only in the newer
//! ones), and they work wherever the daemon can read `slurm.conf` and talk to munge. Formats,
//! as checked against Slurm 22.05.8 (Debian 12) — see `tests/fixtures/slurm/` for the outputs:
//!
//! - **Nodes: `sinfo --json`**. Supported in 22.05 (openapi v0.0.38 schema), with CPUs total /
//!   allocated / idle, state and state flags, partitions and reason per node: no column widths,
//!   no locale. Its answer has no partitions in 22.05.
//! - **Jobs: `squeue --json`**. Supported; gives user, state, reason, CPUs, time limit
//!   (minutes, `null` = unlimited), priority, reservation and **epoch** times. For a pending job
//!   `start_time` is Slurm's own expected start from the backfill scheduler — the same value
//!   `squeue --start` prints (checked: fixture `squeue-start-busy.out`) — so one query serves the
//!   forecast and `squeue --start` is not needed. In 22.05 it ignores `-j`/`-u` filters and
//!   also lists finished jobs until `MinJobAge`; we take all and filter here. It exits 0 even
//!   when the controller is down and reports that in its `errors` array, which is checked.
//! - **Partitions and reservations: `scontrol show partition|reservation -o`** (one
//!   `Key=Value` line per record): **`scontrol` has no `--json` in 22.05** (it arrives in 23.02
//!   with the data_parser plugins), and `sinfo --json` has no partitions.
//! - **`sbatch --parsable`** (`ID` or `ID;CLUSTER`), **`sbatch --test-only`** (one line on
//!   stderr), **`scontrol create reservation`** (`Reservation created: NAME`) and **`scontrol
//!   ping`**: the only forms these commands have.
//! - Failures: the exit status and stderr, classified into [`FailureKind`].
//!
//! Every command runs with `TZ=UTC`, `SLURM_TIME_FORMAT=standard` and `LC_ALL=C`
//! ([`FIXED_ENV`]), so the timestamps `scontrol` and `sbatch --test-only` print, and those we
//! pass to `--begin` and `StartTime=`, are UTC `YYYY-MM-DDTHH:MM:SS` whatever the host's zone or
//! the user's `SLURM_TIME_FORMAT`; the runner clears the rest of the environment, so no
//! `SQUEUE_FORMAT`, `SBATCH_*` or `SLURM_*` variable of the daemon changes what runs.

mod client;
mod cluster;
mod commands;
mod error;
mod free_cores;
mod model;
mod parse;
mod runner;
mod time;

pub use client::SlurmClient;
pub(crate) use cluster::effective_user_name;
pub use cluster::SlurmCluster;
pub use commands::{
    delete_reservation_args, foresight_reservation_id, minutes_ceil, parse_part_name, part_name,
    reservation_name, scancel_args, shell_command, shell_quote, update_begin_args,
    update_reservation_args, JobControl, JobScript, Naming, ReservationRequest, ReservationSize,
    SbatchRequest, StartTime, FORESIGHT_PREFIX, PING, SHOW_PARTITIONS, SHOW_RESERVATIONS,
    SINFO_JSON, SQUEUE_JSON,
};
pub use error::{FailureKind, SlurmError};
pub use model::{
    Job, JobState, Node, NodeState, Partition, Reservation, SlurmJobId, Snapshot, Submitted,
    TestOnly, TimeLimit,
};
pub use parse::{
    check_status, parse_key_values, parse_partitions, parse_ping, parse_reservation_created,
    parse_reservations, parse_sbatch_parsable, parse_sinfo_json, parse_squeue_json,
    parse_test_only, JsonAnswer,
};
pub use runner::{CommandOutput, CommandRunner, FakeRunner, Invocation, SystemRunner, FIXED_ENV};
pub use time::{format_timestamp, parse_duration, parse_timestamp};
