//! The auction's options: every choice seed 001 leaves open is named here, with its default.

use crate::time::Dur;
use serde::{Deserialize, Serialize};

/// How an auction is run. Times are not in seconds but in units of the mean runtime of
/// recently finished jobs (the seed's у.е.), so that one configuration fits any workload and
/// results depend only on these ratios.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuctionConfig {
    /// Auction length as a fraction of the mean runtime (the seed's α). Default 0.35, the middle
    /// of the seed's optimum 0.3–0.4.
    pub alpha: f64,
    /// The bid's weights.
    pub weights: BidWeights,
    /// The opening (minimum) bid the seed's auctioneer may set: bids below it are refused.
    /// Default none (`"none"` in a file, or the key left out): every site able to run the job
    /// now bids, so the price only ranks sites (free beats preempting, cheap preemption beats
    /// costly, data-local beats staging) and never keeps a job of an absolute priority
    /// waiting while some site could preempt for it. A number is a minimum price: with 0, a
    /// site whose preemption and staging cost outweigh the processors it offers does not bid.
    #[serde(with = "opening_bid_form")]
    pub opening_bid: Option<f64>,
    /// Whether processors offered beyond the job's need count in the bid.
    pub procs_cap: ProcsCap,
    /// Who wins among equal highest bids.
    pub tie: Tie,
    /// What happens to a job whose auction closes without a valid bid.
    pub unsold: Unsold,
    /// What keeps one site from offering the same processors in two open auctions.
    pub overcommit: Overcommit,
}

impl Default for AuctionConfig {
    fn default() -> Self {
        AuctionConfig {
            alpha: 0.35,
            weights: BidWeights::default(),
            opening_bid: None,
            procs_cap: ProcsCap::Uncapped,
            tie: Tie::LowestSite,
            unsold: Unsold::Wait,
            overcommit: Overcommit::Reserve,
        }
    }
}

impl AuctionConfig {
    /// Every problem with the options, one message each naming the field (empty when valid).
    pub fn problems(&self) -> Vec<String> {
        let mut p = Vec::new();
        if !(self.alpha.is_finite() && self.alpha > 0.0) {
            p.push(format!("alpha must be positive, got {}", self.alpha));
        }
        for (name, w) in [
            ("weights.procs", self.weights.procs),
            ("weights.preempt", self.weights.preempt),
            ("weights.stage", self.weights.stage),
        ] {
            if !(w.is_finite() && w >= 0.0) {
                p.push(format!("{name} must be a number >= 0, got {w}"));
            }
        }
        if self.opening_bid.is_some_and(f64::is_nan) {
            p.push("opening_bid must be a number or \"none\"".into());
        }
        if let Unsold::Reopen { delay } = self.unsold {
            if !(delay.is_finite() && delay >= 0.0) {
                p.push(format!("unsold.delay must be a number >= 0, got {delay}"));
            }
        }
        p
    }

    /// Whether a bid at `amount` clears the opening bid (always, without one).
    pub fn clears_opening(&self, amount: f64) -> bool {
        self.opening_bid.is_none_or(|min| amount >= min)
    }
}

/// The file form of [`AuctionConfig::opening_bid`]: a number, or the string `"none"` (TOML has
/// no null; a JSON `null` reads as none too), so that the effective config prints and reads
/// back the same.
mod opening_bid_form {
    use serde::de::{self, Deserializer, Visitor};
    use serde::Serializer;
    use std::fmt;

    pub fn serialize<S: Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(x) => s.serialize_f64(*x),
            None => s.serialize_str("none"),
        }
    }

    struct Form;

    impl Visitor<'_> for Form {
        type Value = Option<f64>;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a number or \"none\"")
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Option<f64>, E> {
            Ok(Some(v))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Option<f64>, E> {
            Ok(Some(v as f64))
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Option<f64>, E> {
            Ok(Some(v as f64))
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Option<f64>, E> {
            match v {
                "none" => Ok(None),
                other => Err(E::invalid_value(de::Unexpected::Str(other), &self)),
            }
        }
        fn visit_unit<E: de::Error>(self) -> Result<Option<f64>, E> {
            Ok(None)
        }
        fn visit_none<E: de::Error>(self) -> Result<Option<f64>, E> {
            Ok(None)
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
        d.deserialize_any(Form)
    }
}

/// Bid = `procs` × processors offered / need − `preempt` × priority-weighted work preempted
/// / (need × mean runtime) − `stage` × staging time / mean runtime. Each term is a pure
/// number, so the weights compare like with like whatever the job's size and the workload's
/// time scale. The seed fixes only the signs; the defaults make a free site beat one that
/// must preempt a job of its own size, and a site holding the input beat one that must
/// fetch it for a tenth of a mean runtime when both offer the same processors.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BidWeights {
    /// Weight of the processors offered (in multiples of the need). Default 1.
    pub procs: f64,
    /// Weight of the preempted work. Default 0.25: preempting a job of the same size and
    /// priority 0 with a mean runtime left costs a quarter of the processors term.
    pub preempt: f64,
    /// Weight of the staging time. Default 1.
    pub stage: f64,
}

impl Default for BidWeights {
    fn default() -> Self {
        BidWeights {
            procs: 1.0,
            preempt: 0.25,
            stage: 1.0,
        }
    }
}

/// Whether processors beyond the job's need count in the bid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProcsCap {
    /// Every processor a site offers counts: the seed's "as many resources as possible", so
    /// the least loaded site wins among those that stage alike (the default).
    Uncapped,
    /// Only the need counts: every site able to run the job offers the same, and preemption
    /// and staging decide.
    Need,
}

/// Who wins among equal highest bids.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tie {
    /// The site with the lowest id (the default: reproducible whatever the order of bids).
    LowestSite,
    /// The site whose standing bid was placed first (a re-bid counts as placed anew).
    EarliestBid,
}

/// What happens to a job whose auction closes without a valid bid.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "rule")]
pub enum Unsold {
    /// It stays in the global queue and is auctioned again at the next load change of any
    /// site, when processors may have come free (the default).
    Wait,
    /// It is auctioned again after `delay` mean runtimes (0: at once, which extends the
    /// auction by α again).
    Reopen {
        /// Mean runtimes to wait, >= 0.
        delay: f64,
    },
}

impl Unsold {
    /// How long after its close an unsold job is auctioned again, when the mean runtime is
    /// `mean_runtime` seconds: `delay` mean runtimes rounded to whole seconds (a negative
    /// delay as 0), or `None` under [`Unsold::Wait`]. The one place the delay becomes time.
    pub fn reopen_after(&self, mean_runtime: f64) -> Option<Dur> {
        match *self {
            Unsold::Wait => None,
            Unsold::Reopen { delay } => Some(Dur(((delay * mean_runtime).round() as i64).max(0))),
        }
    }
}

/// What keeps one site from winning two auctions with the same processors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Overcommit {
    /// A standing bid holds the processors it offers: the site's bids in other open auctions
    /// may offer only what is left of its capacity (the default).
    Reserve,
    /// A site may offer the same processors everywhere; when it wins one auction its standing
    /// bids elsewhere lapse until it bids again with its new load.
    LapseOnAward,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct File {
        auction: AuctionConfig,
    }

    fn read(text: &str) -> Result<AuctionConfig, String> {
        toml::from_str::<File>(text)
            .map(|f| f.auction)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn opening_bid_is_none_unless_a_number_is_given() {
        for (name, text, want) in [
            ("left out", "[auction]\nalpha = 0.3", None),
            ("none", "[auction]\nopening_bid = \"none\"", None),
            ("zero", "[auction]\nopening_bid = 0.0", Some(0.0)),
            ("integer", "[auction]\nopening_bid = 0", Some(0.0)),
            ("negative", "[auction]\nopening_bid = -1e9", Some(-1e9)),
        ] {
            let cfg = read(text).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(cfg.opening_bid, want, "{name}");
            let back = toml::to_string(&File {
                auction: cfg.clone(),
            })
            .expect(name);
            assert_eq!(read(&back), Ok(cfg), "{name} prints and reads back: {back}");
        }
        let err = read("[auction]\nopening_bid = \"free\"").unwrap_err();
        assert!(
            err.contains("opening_bid") && err.contains("\"none\""),
            "{err}"
        );
        assert_eq!(AuctionConfig::default().opening_bid, None);
    }

    #[test]
    fn only_a_set_opening_bid_refuses_and_nan_is_a_problem() {
        let none = AuctionConfig::default();
        assert!(none.clears_opening(-1e12) && none.problems().is_empty());
        let zero = AuctionConfig {
            opening_bid: Some(0.0),
            ..AuctionConfig::default()
        };
        assert!(zero.clears_opening(0.0) && !zero.clears_opening(-0.001));
        let nan = AuctionConfig {
            opening_bid: Some(f64::NAN),
            ..AuctionConfig::default()
        };
        assert_eq!(
            nan.problems(),
            vec!["opening_bid must be a number or \"none\""]
        );
    }
}
