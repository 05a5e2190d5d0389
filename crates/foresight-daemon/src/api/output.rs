//! `GET /api/v1/jobs/{id}/output`: a job's output file, to its owner or an administrator,
//! so that `foresight job cat` works from anywhere.

use crate::api::{Caller, Params};
use crate::runtime::Service;
use crate::state::refusal::Refusal;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use serde::Deserialize;
use std::sync::Arc;

/// Which output.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct OutputQuery {
    /// Standard error instead of standard output.
    #[serde(default)]
    stderr: bool,
    /// The part of a co-allocated job (0, 1, …) [default: 0].
    #[serde(default)]
    part: usize,
    /// Only the bytes from this offset on (what `job tail -f` has not seen yet) [default: 0].
    #[serde(default)]
    offset: u64,
}

/// A job's standard output (or error) as plain text.
#[utoipa::path(get, path = "/api/v1/jobs/{id}/output",
    params(("id" = String, Path, description = "Job id, or ARRAY_TASK"), OutputQuery),
    responses((status = 200, body = String, content_type = "text/plain"),
              (status = 404, body = foresight_api::ApiError)))]
pub async fn job_output(
    State(s): State<Arc<Service>>,
    caller: Caller,
    crate::api::JobPath(r): crate::api::JobPath,
    Params(q): Params<OutputQuery>,
) -> Result<impl IntoResponse, Refusal> {
    let id = s.job_id(&caller.0, r)?;
    let j = s.job(&caller.0, id)?;
    let parts = j.parts.len().max(1);
    if q.part >= parts {
        return Err(Refusal::invalid(
            "part",
            format!("job {id} has {parts} part(s): 0 to {}", parts - 1),
        ));
    }
    let which = if q.stderr { "stderr" } else { "stdout" };
    let first = if q.stderr { &j.stderr } else { &j.stdout };
    let Some(first) = first else {
        return Err(Refusal::not_found(format!(
            "job {id} has no {which} yet: it has not started"
        )));
    };
    // Where the part ran on a WIKI peer, the peer has it.
    if let Some(bytes) = s.output_elsewhere(id, q.part, q.stderr, q.offset).await? {
        return Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], bytes));
    }
    // The first part's file names the others: `ID.0.out` → `ID.N.out`.
    let path = std::path::PathBuf::from(first);
    let path = if parts == 1 {
        path
    } else {
        let ext = if q.stderr { "err" } else { "out" };
        path.with_file_name(format!("{id}.{}.{ext}", q.part))
    };
    match read_from(&path, q.offset).await {
        Ok(bytes) => Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Refusal::not_found(format!(
            "job {id}: its {which} (part {}) is not on this server",
            q.part
        ))),
        Err(e) => Err(Refusal::internal(format!(
            "job {id}: reading its {which}: {e}"
        ))),
    }
}

/// The file's bytes from `offset` on (none when it is shorter).
async fn read_from(path: &std::path::Path, offset: u64) -> std::io::Result<Vec<u8>> {
    use tokio::io::{AsyncReadExt, AsyncSeekExt};
    let mut f = tokio::fs::File::open(path).await?;
    f.seek(std::io::SeekFrom::Start(offset)).await?;
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes).await?;
    Ok(bytes)
}
