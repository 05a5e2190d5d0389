//! What the client checks of its command line before asking the server: refusals with exit
//! code 2, walltimes, prices and moments.

use anyhow::Result;
use foresight_api::parse_duration;
/// Input refused before asking the server: exit code 2, like a refusal by the server.
pub(crate) fn bad(message: String) -> anyhow::Error {
    crate::commands::plan::BadInput(message).into()
}

/// `-t/--time`: a walltime, positive.
pub(super) fn walltime_ok(text: &str) -> Result<()> {
    let secs = parse_duration(text).map_err(|e| bad(format!("-t/--time: {e}")))?;
    if secs <= 0 {
        return Err(bad(format!("-t/--time: must be positive, got {text:?}")));
    }
    Ok(())
}

/// `--price P`: a number, finite (NaN would be sent as `null`, which means the default
/// price); its range is the server's to check.
pub(super) fn parse_price(s: &str) -> std::result::Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(p) if p.is_finite() => Ok(p),
        _ => Err(format!("{s:?} is not a finite number")),
    }
}

/// A time given on the command line (`--start`, `--from`, `--to`, `--begin`), in the
/// local zone.
pub(super) fn moment(s: &str, now: i64, what: &str) -> Result<i64> {
    crate::moment::parse_moment(s, now, &crate::moment::local_zone())
        .map_err(|e| bad(format!("--{what}: {e}")))
}

/// `--begin`, read now (so that `now+1hour` counts from the command).
pub(super) fn begin_of(text: Option<&str>) -> Result<Option<i64>> {
    text.map(|b| moment(b, crate::moment::now(), "begin"))
        .transpose()
}
