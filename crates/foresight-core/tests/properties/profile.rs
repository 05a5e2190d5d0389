//! Property tests of [`Profile`] against a brute-force oracle: a vector of free processors
//! per second on a small horizon `[0, H)`, with every processor free outside it.
//! STYLE.md §8 invariants (1)–(3): spans never overbook, take-then-give restores an equal
//! profile, and `earliest` is the earliest feasible start.

use foresight_core::{Dur, FirstFree, Horizons, Profile, Time};
use proptest::prelude::*;

const H: i64 = 48;

/// Free processors per second on `[0, H)`; `cap` everywhere else.
#[derive(Clone, Debug)]
struct Oracle {
    cap: i64,
    free: Vec<i64>,
}

impl Oracle {
    fn new(cap: u32) -> Oracle {
        Oracle {
            cap: i64::from(cap),
            free: vec![i64::from(cap); H as usize],
        }
    }

    fn at(&self, t: i64) -> i64 {
        if (0..H).contains(&t) {
            self.free[t as usize]
        } else {
            self.cap
        }
    }

    fn add(&mut self, start: i64, end: i64, delta: i64) {
        for t in start.max(0)..end.min(H) {
            self.free[t as usize] += delta;
        }
    }

    /// Fewest free on `[a, b)`, with `credit` more on `[from, to)`; the capacity if empty.
    fn min_free_with(&self, a: i64, b: i64, (from, to, credit): (i64, i64, i64)) -> i64 {
        if b <= a {
            return self.cap;
        }
        // Before 0 and after max(H, to) the value is constant: one instant of each suffices.
        let lo = a.max(-1);
        let hi = b.min(H.max(to) + 1);
        (lo..hi)
            .map(|t| self.at(t) + if from <= t && t < to { credit } else { 0 })
            .min()
            .unwrap_or(self.cap)
    }

    fn min_free(&self, a: i64, b: i64) -> i64 {
        self.min_free_with(a, b, (0, 0, 0))
    }

    fn earliest_with(
        &self,
        after: i64,
        procs: u32,
        dur: i64,
        credit: (i64, i64, i64),
    ) -> Option<i64> {
        // From max(H, to) on exactly `cap` are free: the search can stop there (a job larger
        // than the capacity can only start where the credit lifts the free count).
        let last = after.max(H).max(credit.1);
        (after..=last).find(|&t| self.min_free_with(t, t + dur, credit) >= i64::from(procs))
    }

    fn earliest(&self, after: i64, procs: u32, dur: i64) -> Option<i64> {
        self.earliest_with(after, procs, dur, (0, 0, 0))
    }
}

/// A span `[start, end)` of `procs` processors.
type Span = (i64, i64, u32);

fn span() -> impl Strategy<Value = Span> {
    (0..H, 1i64..=20, 1u32..=8).prop_map(|(s, len, p)| (s, (s + len).min(H), p))
}

/// Capacity and spans taken in order, each cut down to the processors still free on it so
/// that nothing is overbooked (a span with none free is dropped).
fn profile_input() -> impl Strategy<Value = (u32, Vec<Span>)> {
    (1u32..=8, proptest::collection::vec(span(), 0..20)).prop_map(|(cap, spans)| {
        let mut o = Oracle::new(cap);
        let mut kept = Vec::new();
        for (s, e, p) in spans {
            let p = i64::from(p).min(o.min_free(s, e));
            if p >= 1 {
                o.add(s, e, -p);
                kept.push((s, e, p as u32));
            }
        }
        (cap, kept)
    })
}

fn build(cap: u32, spans: &[Span]) -> (Profile, Oracle) {
    let mut p = Profile::new(cap);
    let mut o = Oracle::new(cap);
    for &(s, e, k) in spans {
        p.take(Time(s), Time(e), k);
        o.add(s, e, -i64::from(k));
    }
    (p, o)
}

fn time(t: Option<i64>) -> Option<Time> {
    t.map(Time)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn queries_match_the_oracle(
        (cap, spans) in profile_input(),
        queries in proptest::collection::vec((-3..H + 3, 1u32..=9, 1i64..=H, 0i64..=H), 1..12),
    ) {
        let (p, o) = build(cap, &spans);
        prop_assert!(p.is_consistent(), "{:?}", p.steps());
        prop_assert_eq!(p.capacity(), cap);
        prop_assert!(p.steps().len() <= 2 * spans.len() + 1, "too many steps: {:?}", p.steps());
        for t in -2..H + 2 {
            prop_assert_eq!(p.free_at(Time(t)), o.at(t), "free_at {}", t);
        }
        for (after, procs, dur, len) in queries {
            prop_assert_eq!(
                p.earliest(Time(after), procs, Dur(dur)),
                time(o.earliest(after, procs, dur)),
                "earliest(after {}, procs {}, dur {})", after, procs, dur
            );
            prop_assert_eq!(
                p.min_free(Time(after), Time(after + len)),
                o.min_free(after, after + len),
                "min_free [{}, {})", after, after + len
            );
            prop_assert_eq!(
                p.fits(Time(after), procs, Dur(dur)),
                o.min_free(after, after + dur) >= i64::from(procs),
                "fits(at {}, procs {}, dur {})", after, procs, dur
            );
        }
    }

    #[test]
    fn earliest_is_feasible_and_nothing_earlier_is(
        (cap, spans) in profile_input(),
        after in 0..H,
        procs in 1u32..=8,
        dur in 1i64..=H,
    ) {
        let (p, _) = build(cap, &spans);
        match p.earliest(Time(after), procs, Dur(dur)) {
            Some(t) => {
                prop_assert!(t >= Time(after));
                prop_assert!(p.fits(t, procs, Dur(dur)));
                for s in after..t.0 {
                    prop_assert!(!p.fits(Time(s), procs, Dur(dur)), "fits earlier at {}", s);
                }
            }
            None => prop_assert!(procs > cap),
        }
    }

    #[test]
    fn take_then_give_restores_an_equal_profile(
        (cap, spans) in profile_input(),
        extra in span(),
    ) {
        let (p, o) = build(cap, &spans);
        let (s, e, k) = extra;
        let k = k.min(cap);
        let mut q = p.clone();
        q.take(Time(s), Time(e), k);
        if o.min_free(s, e) >= i64::from(k) {
            prop_assert!(q.is_consistent());
        }
        q.give(Time(s), Time(e), k);
        prop_assert_eq!(&q, &p);
        // Giving back every span, in any order, gives the empty profile.
        let mut q = p.clone();
        for &(s, e, k) in spans.iter().rev() {
            q.give(Time(s), Time(e), k);
            prop_assert!(q.is_consistent());
        }
        prop_assert_eq!(q, Profile::new(cap));
    }

    #[test]
    fn the_representation_is_canonical(
        (cap, spans) in profile_input(),
    ) {
        // The same function built in another order is the same value.
        let (p, _) = build(cap, &spans);
        let mut rev = spans.clone();
        rev.reverse();
        let (q, _) = build(cap, &rev);
        prop_assert_eq!(&p, &q);
        prop_assert!(p.steps().windows(2).all(|w| w[0].at < w[1].at && w[0].free != w[1].free));
    }

    #[test]
    fn advance_keeps_the_future(
        (cap, spans) in profile_input(),
        now in 0..H,
        queries in proptest::collection::vec((0..H + 3, 1u32..=8, 1i64..=H), 1..8),
    ) {
        let (p, _) = build(cap, &spans);
        let mut q = p.clone();
        q.advance(Time(now));
        prop_assert!(q.steps().len() <= p.steps().len());
        prop_assert!(q.steps()[0].at <= Time(now));
        for t in now..H + 2 {
            prop_assert_eq!(q.free_at(Time(t)), p.free_at(Time(t)));
        }
        for (after, procs, dur) in queries {
            let after = after.max(now);
            prop_assert_eq!(
                q.earliest(Time(after), procs, Dur(dur)),
                p.earliest(Time(after), procs, Dur(dur))
            );
            prop_assert_eq!(
                q.min_free(Time(after), Time(after + dur)),
                p.min_free(Time(after), Time(after + dur))
            );
        }
        // Spans added after advancing behave as before.
        q.take(Time(now), Time(now + 5), 1);
        q.give(Time(now), Time(now + 5), 1);
        for t in now..H + 2 {
            prop_assert_eq!(q.free_at(Time(t)), p.free_at(Time(t)));
        }
    }

    #[test]
    fn window_has_capacity_only_inside(
        procs in 1u32..=8,
        start in 0..H,
        len in 1..H,
        after in -3..H,
        want in 1u32..=9,
        dur in 1i64..=H,
    ) {
        let w = Profile::window(procs, Time(start), Time(start + len));
        prop_assert!(w.is_consistent());
        let inside = |t: i64| start <= t && t < start + len;
        for t in -2..start + len + 2 {
            prop_assert_eq!(w.free_at(Time(t)), if inside(t) { i64::from(procs) } else { 0 });
        }
        let all_inside = start <= after && after + dur <= start + len;
        prop_assert_eq!(
            w.min_free(Time(after), Time(after + dur)),
            if all_inside { i64::from(procs) } else { 0 }
        );
        prop_assert_eq!(w.fits(Time(after), want, Dur(dur)), all_inside && want <= procs);
        let first = after.max(start);
        let want_start = (want <= procs && first + dur <= start + len).then_some(Time(first));
        prop_assert_eq!(w.earliest(Time(after), want, Dur(dur)), want_start);
    }

    #[test]
    fn earliest_before_matches_the_oracle(
        (cap, spans) in profile_input(),
        which in any::<prop::sample::Index>(),
        after in 0..H,
        dur in 1i64..=H,
        limit in 0..H + 8,
    ) {
        // As the scheduler uses it: the credit is the span the job itself holds.
        let (p, o) = build(cap, &spans);
        let (from, to, procs) = if spans.is_empty() {
            (H, H + dur, 1)
        } else {
            *which.get(&spans)
        };
        let credit = (from, to, i64::from(procs));
        let mut want = o.earliest_with(after, procs, dur, credit);
        if want.is_some_and(|t| t >= limit) {
            want = None;
        }
        prop_assert_eq!(
            p.earliest_before(Time(after), procs, Dur(dur), (Time(from), Time(to), i64::from(procs)), Time(limit)),
            time(want),
            "earliest_before(after {}, procs {}, dur {}, credit [{}, {}) +{}, limit {})",
            after, procs, dur, from, to, procs, limit
        );
    }

    #[test]
    fn earliest_before_with_any_credit_matches_the_oracle(
        (cap, spans) in profile_input(),
        after in 0..H,
        procs in 1u32..=8,
        dur in 1i64..=H,
        (from, to) in (0..H, 0..H + 8),
        credit in 0i64..=8,
        limit in 0..H + 8,
    ) {
        let (p, o) = build(cap, &spans);
        let mut want = o.earliest_with(after, procs, dur, (from, to, credit));
        if want.is_some_and(|t| t >= limit) {
            want = None;
        }
        prop_assert_eq!(
            p.earliest_before(Time(after), procs, Dur(dur), (Time(from), Time(to), credit), Time(limit)),
            time(want),
            "earliest_before(after {}, procs {}, dur {}, credit [{}, {}) +{}, limit {})",
            after, procs, dur, from, to, credit, limit
        );
    }

    #[test]
    fn horizons_and_first_free_match_the_oracle(
        (cap, spans) in profile_input(),
        now in 0..H + 2,
    ) {
        let (p, o) = build(cap, &spans);
        let mut h = Horizons::default();
        p.horizons(Time(now), &mut h);
        let free_now = o.at(now);
        for k in 0..=free_now.max(0) as u32 {
            let got = h.get(k);
            let want = (now..H).find(|&t| o.at(t) < i64::from(k)).map_or(Time::MAX, Time);
            prop_assert_eq!(got, want, "horizons[{}] at {}", k, now);
        }
        let mut f = FirstFree::default();
        p.first_free(Time(now), &mut f);
        for k in 0..=cap {
            let got = f.get(k);
            let want = (now..=now.max(H)).find(|&t| o.at(t) >= i64::from(k)).map_or(Time::MAX, Time);
            prop_assert_eq!(got, want, "first_free[{}] at {}", k, now);
        }
    }

    #[test]
    fn an_earlier_start_lies_before_the_end_of_a_gain(
        (cap, spans) in profile_input(),
        changes in proptest::collection::vec((any::<bool>(), span()), 0..8),
        (after, later) in (0..H, 0i64..8),
        procs in 1u32..=8,
        dur in 1i64..=H,
    ) {
        // What the scheduler relies on to skip re-checking a reservation: once the earliest
        // start was `e` at `version`, a start before `e` found later (from a later instant)
        // lies in a window that meets a span gained since, so before its end.
        let (mut p, _) = build(cap, &spans);
        let Some(first) = p.earliest(Time(after), procs, Dur(dur)) else { return Ok(()) };
        let version = p.version();
        for (give, (s, e, k)) in changes {
            if give {
                let k = i64::from(k).min(i64::from(cap) - p.steps().iter().map(|x| x.free).max().unwrap_or(0));
                if k >= 1 {
                    p.give(Time(s), Time(e), k as u32);
                }
            } else {
                let k = i64::from(k).min(p.min_free(Time(s), Time(e)));
                if k >= 1 {
                    p.take(Time(s), Time(e), k as u32);
                }
            }
        }
        let now = after + later;
        p.advance(Time(now));
        if let Some(t) = p.earliest(Time(now), procs, Dur(dur)) {
            if t < first {
                let end = p.gained_since(version);
                prop_assert!(end.is_some_and(|end| t < end), "start {:?} before {:?}, gains end {:?}", t, first, end);
            }
        }
        if p.version() == version {
            prop_assert_eq!(p.gained_since(version), None);
        }
    }
}
