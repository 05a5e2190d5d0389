//! Job arrays as `sbatch --array` writes them: `0-99`, `1,3,5-7`, `0-15:4` (every 4th),
//! optionally `%N`: at most N tasks run at once.

use std::fmt;
use std::str::FromStr;

/// A parsed `--array`: the index ranges as written, and the limit on tasks running at once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArraySpec {
    /// `(first, last, step)`, inclusive, as written.
    pub ranges: Vec<(u32, u32, u32)>,
    /// `%N`: at most this many tasks planned or running at once.
    pub limit: Option<u32>,
}

const FORMS: &str = "give indices as 0-99, 1,3,5-7 or 0-15:4, optionally followed by %N";

impl ArraySpec {
    /// How many indices the ranges name, counting repeats: an upper bound of the task count,
    /// known without listing them (so that `0-4000000000` is refused before it is listed).
    pub fn count(&self) -> u64 {
        self.ranges
            .iter()
            .map(|&(a, b, s)| u64::from((b - a) / s) + 1)
            .sum()
    }

    /// The largest index.
    pub fn max_index(&self) -> u32 {
        self.ranges.iter().map(|r| r.1).max().unwrap_or(0)
    }

    /// The task indices, ascending, each once.
    pub fn indices(&self) -> Vec<u32> {
        let mut out = Vec::new();
        for &(a, b, s) in &self.ranges {
            let mut i = a;
            loop {
                out.push(i);
                match i.checked_add(s) {
                    Some(n) if n <= b => i = n,
                    _ => break,
                }
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }
}

impl FromStr for ArraySpec {
    type Err = String;
    fn from_str(text: &str) -> Result<ArraySpec, String> {
        let s = text.trim();
        let (list, limit) = match s.split_once('%') {
            Some((l, n)) => {
                let n: u32 = n.parse().map_err(|_| {
                    format!("{text:?}: the limit {n:?} after '%' is not a number of tasks")
                })?;
                if n == 0 {
                    return Err(format!(
                        "{text:?}: the %N limit on tasks running at once must be at least 1"
                    ));
                }
                (l, Some(n))
            }
            None => (s, None),
        };
        if list.is_empty() {
            return Err(format!("{text:?} names no task index: {FORMS}"));
        }
        let index = |t: &str| -> Result<u32, String> {
            if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
                return Err(format!(
                    "{text:?}: {t:?} is not an array index (a number from 0 to {}); {FORMS}",
                    u32::MAX
                ));
            }
            t.parse()
                .map_err(|_| format!("{text:?}: index {t} is larger than {}", u32::MAX))
        };
        let mut ranges = Vec::new();
        for item in list.split(',') {
            let (range, step) = match item.split_once(':') {
                Some((r, st)) => {
                    let step = index(st)?;
                    if step == 0 {
                        return Err(format!("{text:?}: the step in {item:?} must be at least 1"));
                    }
                    (r, step)
                }
                None => (item, 1),
            };
            let (a, b) = match range.split_once('-') {
                Some((a, b)) => (index(a)?, index(b)?),
                None if step != 1 => {
                    return Err(format!(
                        "{text:?}: a step ({item:?}) needs a range A-B:STEP"
                    ))
                }
                None => {
                    let a = index(range)?;
                    (a, a)
                }
            };
            if b < a {
                return Err(format!(
                    "{text:?}: the range {range:?} ends ({b}) before it starts ({a})"
                ));
            }
            ranges.push((a, b, step));
        }
        Ok(ArraySpec { ranges, limit })
    }
}

impl fmt::Display for ArraySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let items: Vec<String> = self
            .ranges
            .iter()
            .map(|&(a, b, s)| match (a == b, s) {
                (true, _) => a.to_string(),
                (false, 1) => format!("{a}-{b}"),
                (false, s) => format!("{a}-{b}:{s}"),
            })
            .collect();
        f.write_str(&items.join(","))?;
        if let Some(n) = self.limit {
            write!(f, "%{n}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sbatch_forms_expand() {
        let cases: [(&str, Vec<u32>, Option<u32>); 6] = [
            ("0-5", (0..=5).collect(), None),
            ("0-99%10", (0..=99).collect(), Some(10)),
            ("1,3,5-7", vec![1, 3, 5, 6, 7], None),
            ("0-15:4", vec![0, 4, 8, 12], None),
            ("7", vec![7], None),
            ("3,1-3,2%2", vec![1, 2, 3], Some(2)),
        ];
        for (text, want, limit) in cases {
            let a: ArraySpec = text.parse().unwrap();
            assert_eq!(a.indices(), want, "{text}");
            assert_eq!(a.limit, limit, "{text}");
            assert_eq!(a.to_string(), text, "{text} round trip");
        }
        let a: ArraySpec = "0-4294967295:4294967295".parse().unwrap();
        assert_eq!(a.indices(), vec![0, u32::MAX]);
        assert_eq!(a.count(), 2);
        let big: ArraySpec = "0-4000000000".parse().unwrap();
        assert_eq!(big.count(), 4_000_000_001);
        assert_eq!(big.max_index(), 4_000_000_000);
    }

    #[test]
    fn malformed_arrays_are_named() {
        let cases = [
            ("0-99%0", "\"0-99%0\": the %N limit on tasks running at once must be at least 1"),
            ("5-2", "\"5-2\": the range \"5-2\" ends (2) before it starts (5)"),
            ("0-15:0", "\"0-15:0\": the step in \"0-15:0\" must be at least 1"),
            ("", "\"\" names no task index: give indices as 0-99, 1,3,5-7 or 0-15:4, optionally followed by %N"),
            ("%4", "\"%4\" names no task index: give indices as 0-99, 1,3,5-7 or 0-15:4, optionally followed by %N"),
            ("0-9%x", "\"0-9%x\": the limit \"x\" after '%' is not a number of tasks"),
            ("a", "\"a\": \"a\" is not an array index (a number from 0 to 4294967295); give indices as 0-99, 1,3,5-7 or 0-15:4, optionally followed by %N"),
            ("1,,2", "\"1,,2\": \"\" is not an array index (a number from 0 to 4294967295); give indices as 0-99, 1,3,5-7 or 0-15:4, optionally followed by %N"),
            ("-3", "\"-3\": \"\" is not an array index (a number from 0 to 4294967295); give indices as 0-99, 1,3,5-7 or 0-15:4, optionally followed by %N"),
            ("4:2", "\"4:2\": a step (\"4:2\") needs a range A-B:STEP"),
            ("0-5000000000", "\"0-5000000000\": index 5000000000 is larger than 4294967295"),
        ];
        for (input, want) in cases {
            assert_eq!(
                input.parse::<ArraySpec>().unwrap_err(),
                want,
                "input {input:?}"
            );
        }
    }
}
