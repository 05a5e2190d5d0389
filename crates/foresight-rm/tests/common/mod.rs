//! What the live Slurm tests share: which clusters to use, and the clock.
#![allow(clippy::unwrap_used, dead_code)]

use std::time::{SystemTime, UNIX_EPOCH};

/// The clusters named in `FORESIGHT_SLURM_CONFS` (`c1=/path/slurm.conf,c2=...`), as
/// (name, conf); `None` when it is unset or empty (the live tests are then skipped).
pub fn clusters() -> Option<Vec<(String, String)>> {
    let spec = std::env::var("FORESIGHT_SLURM_CONFS")
        .ok()
        .filter(|s| !s.trim().is_empty())?;
    let list = spec
        .split(',')
        .map(|item| {
            let (name, conf) = item.split_once('=').unwrap_or_else(|| {
                panic!("FORESIGHT_SLURM_CONFS: expected NAME=PATH, got {item:?}")
            });
            (name.trim().to_owned(), conf.trim().to_owned())
        })
        .collect();
    Some(list)
}

/// Unix seconds now.
pub fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}
