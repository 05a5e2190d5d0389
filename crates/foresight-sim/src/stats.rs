//! Means over seeded repetitions, with Student-t confidence intervals.
//!
//! One seed of a grid or an auction is one draw of a noisy, chaotic system: a few percent
//! either way is often the schedule's chaos, not the policy. Experiments repeat over seeds and
//! report a mean with its interval, and compare policies on the same seeds pairwise.

use serde::Serialize;
use statrs::distribution::{ContinuousCDF, StudentsT};

/// A sample mean and the half-width of its two-sided confidence interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Estimate {
    /// The sample mean (NaN for no samples).
    pub mean: f64,
    /// Half the interval's width: the true mean lies in `mean ± half_width` at the level
    /// asked. Infinite for a single sample (one draw says nothing about its spread).
    pub half_width: f64,
    /// How many samples.
    pub samples: usize,
}

impl Estimate {
    /// The mean and the 95 % interval of `samples` (Student's t with n − 1 degrees of
    /// freedom: seeds are few, so the normal quantile would be too narrow).
    pub fn ci95(samples: &[f64]) -> Estimate {
        Estimate::with_level(samples, 0.95)
    }

    /// The mean and the two-sided interval at `level` (0 < level < 1).
    pub fn with_level(samples: &[f64], level: f64) -> Estimate {
        let n = samples.len();
        let mean = samples.iter().sum::<f64>() / n as f64;
        if n < 2 {
            return Estimate {
                mean,
                half_width: f64::INFINITY,
                samples: n,
            };
        }
        let var = samples.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        let dof = (n - 1) as f64;
        let t = StudentsT::new(0.0, 1.0, dof)
            .expect("invariant: one or more degrees of freedom")
            .inverse_cdf(0.5 + level / 2.0);
        Estimate {
            mean,
            half_width: t * (var / n as f64).sqrt(),
            samples: n,
        }
    }

    /// Whether the interval leaves out zero: for a paired difference, a sign the seeds
    /// agree on.
    pub fn excludes_zero(&self) -> bool {
        self.mean.abs() > self.half_width
    }
}

impl std::fmt::Display for Estimate {
    /// `mean ± half_width`, with the caller's precision applied to both.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let p = f.precision().unwrap_or(2);
        write!(f, "{:.p$} ± {:.p$}", self.mean, self.half_width)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_t_table() {
        // n = 5, sd = 1: t(0.975, 4) = 2.7764, half-width = 2.7764 / sqrt(5) = 1.2416.
        let xs = [-1.0, -0.5, 0.0, 0.5, 1.0];
        let sd = (2.5f64 / 4.0).sqrt();
        let e = Estimate::ci95(&xs);
        assert_eq!(e.mean, 0.0);
        assert!((e.half_width - 2.776_445 * sd / 5f64.sqrt()).abs() < 1e-5);
        assert!(!e.excludes_zero());
        // n = 10: t(0.975, 9) = 2.2622.
        let ys: Vec<f64> = (0..10).map(|i| 10.0 + i as f64).collect();
        let e = Estimate::ci95(&ys);
        let sd = (ys.iter().map(|y| (y - 14.5f64).powi(2)).sum::<f64>() / 9.0).sqrt();
        assert!((e.half_width - 2.262_157 * sd / 10f64.sqrt()).abs() < 1e-5);
        assert!(e.excludes_zero());
        assert_eq!(format!("{e:.1}"), format!("14.5 ± {:.1}", e.half_width));
    }

    #[test]
    fn one_sample_has_no_interval() {
        let e = Estimate::ci95(&[3.0]);
        assert_eq!(e.mean, 3.0);
        assert!(e.half_width.is_infinite());
        assert!(!e.excludes_zero());
    }
}
