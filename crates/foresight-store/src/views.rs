//! The records that the API shows as they are, converted `From` into its views: a field
//! added to both is then copied in one place. They live here, beside the records, because
//! the orphan rule allows them nowhere else (the API's crate does not depend on the store).
//! Views that join records with the service's state (a job's planned start, a user's Unix
//! account) are made by the service instead.

use crate::{InputRecord, OutputRecord, Prediction, ReservationRecord, StagingRecord};
use foresight_api::{InputView, OutputSpec, PredictionView, ReservationView, StagingView};

/// A reservation as the API shows it.
impl From<&ReservationRecord> for ReservationView {
    fn from(r: &ReservationRecord) -> ReservationView {
        ReservationView {
            id: r.id,
            kind: r.kind.clone(),
            cluster: r.cluster.clone(),
            procs: r.procs,
            processors: r.processors.clone(),
            start: r.start,
            end: r.end,
            acl: r.acl.clone(),
            state: r.state,
            expires_at: r.expires_at,
            owner: r.owner.clone(),
        }
    }
}

/// A copy's record as the API shows it (inputs in, outputs back): its error is the job's
/// own outputs' error, else its edges' (each naming its edge).
impl From<&StagingRecord> for StagingView {
    fn from(s: &StagingRecord) -> StagingView {
        StagingView {
            cluster: s.cluster.clone(),
            began_at: s.began_at,
            ended_at: s.ended_at,
            error: s.error.clone().or_else(|| {
                let edges: Vec<&str> = s.edges.iter().filter_map(|e| e.error.as_deref()).collect();
                (!edges.is_empty()).then(|| edges.join("; "))
            }),
        }
    }
}

/// A job's runtime prediction as the API shows it.
impl From<&Prediction> for PredictionView {
    fn from(p: &Prediction) -> PredictionView {
        PredictionView {
            seconds: p.seconds,
            predictor: p.predictor.clone(),
            runs: p.runs,
            corrections: p.corrections,
        }
    }
}

/// A job's input file as the API shows it.
impl From<&InputRecord> for InputView {
    fn from(i: &InputRecord) -> InputView {
        InputView {
            path: i.path.clone(),
            cluster: i.cluster.clone(),
            bytes: i.bytes,
        }
    }
}

/// A job's output file as the API shows it.
impl From<&OutputRecord> for OutputSpec {
    fn from(o: &OutputRecord) -> OutputSpec {
        OutputSpec {
            path: o.path.clone(),
            cluster: o.cluster.clone(),
        }
    }
}
