//! The records that the API shows as they are, converted into its views: a field added to
//! both is then copied in one place. Views that join records with the service's state (a
//! job's planned start, a user's Unix account) are made in `views` instead.

use crate::state::stored::ToApi;
use foresight_api::{
    AuctionStage, AuctionView, InputView, OutputSpec, PredictionView, ReservationView, SiteState,
    SiteView, StagingView,
};
use foresight_store::{
    AuctionRecord, InputRecord, OutputRecord, Prediction, ReservationRecord, SiteRecord,
    StagingRecord,
};

/// A reservation as the API shows it.
impl ToApi for &ReservationRecord {
    type Api = ReservationView;
    fn to_api(self) -> ReservationView {
        ReservationView {
            id: self.id,
            kind: self.kind.clone(),
            cluster: self.cluster.clone(),
            procs: self.procs,
            processors: self.processors.clone(),
            start: self.start,
            end: self.end,
            acl: self.acl.clone().to_api(),
            state: self.state.to_api(),
            expires_at: self.expires_at,
            owner: self.owner.clone(),
        }
    }
}

/// A copy's record as the API shows it (inputs in, outputs back): its error is the job's
/// own outputs' error, else its edges' (each naming its edge).
impl ToApi for &StagingRecord {
    type Api = StagingView;
    fn to_api(self) -> StagingView {
        StagingView {
            cluster: self.cluster.clone(),
            began_at: self.began_at,
            ended_at: self.ended_at,
            error: self.error.clone().or_else(|| {
                let edges: Vec<&str> = self
                    .edges
                    .iter()
                    .filter_map(|e| e.error.as_deref())
                    .collect();
                (!edges.is_empty()).then(|| edges.join("; "))
            }),
        }
    }
}

/// A job's runtime prediction as the API shows it.
impl ToApi for &Prediction {
    type Api = PredictionView;
    fn to_api(self) -> PredictionView {
        PredictionView {
            seconds: self.seconds,
            predictor: self.predictor.clone(),
            runs: self.runs,
            corrections: self.corrections,
        }
    }
}

/// A job's input file as the API shows it.
impl ToApi for &InputRecord {
    type Api = InputView;
    fn to_api(self) -> InputView {
        InputView {
            path: self.path.clone(),
            cluster: self.cluster.clone(),
            bytes: self.bytes,
        }
    }
}

/// A job's output file as the API shows it.
impl ToApi for &OutputRecord {
    type Api = OutputSpec;
    fn to_api(self) -> OutputSpec {
        OutputSpec {
            path: self.path.clone(),
            cluster: self.cluster.clone(),
        }
    }
}

/// An auction's stage as the API names it.
impl ToApi for foresight_store::AuctionStage {
    type Api = AuctionStage;
    fn to_api(self) -> AuctionStage {
        use foresight_store::AuctionStage as Stored;
        match self {
            Stored::Queued => AuctionStage::Queued,
            Stored::Open => AuctionStage::Open,
            Stored::Closing => AuctionStage::Closing,
            Stored::Reopening => AuctionStage::Reopening,
            Stored::Unsold => AuctionStage::Unsold,
        }
    }
}

/// A job on offer as the API shows it: the same row.
impl ToApi for AuctionRecord {
    type Api = AuctionView;
    fn to_api(self) -> AuctionView {
        AuctionView {
            job: self.job,
            user: self.user,
            procs: self.procs,
            priority: self.priority,
            stage: self.stage.to_api(),
            opened_by: self.opened_by,
            opened_at: self.opened_at,
            closes_at: self.closes_at,
            bids: self.bids,
            best_bid: self.best_bid,
            best_bidder: self.best_bidder,
            rounds: self.rounds,
            unsold: self.unsold,
            back_off_until: self.back_off_until,
        }
    }
}

/// A site as the API shows it: its lease holding is `up`, else `down`.
impl ToApi for &SiteRecord {
    type Api = SiteView;
    fn to_api(self) -> SiteView {
        SiteView {
            name: self.site.clone(),
            id: self.id,
            state: SiteState::of_lease(self.alive),
            url: self.url.clone(),
            started_at: self.started_at,
            heartbeat_at: self.heartbeat_at,
            lease_ms: self.lease_ms,
            lease_left_ms: self.lease_left_ms,
            max_procs: self.max_procs,
            max_tariff: self.max_tariff,
            claimed: self.claimed,
            running: self.running,
            bids: self.bids,
        }
    }
}
