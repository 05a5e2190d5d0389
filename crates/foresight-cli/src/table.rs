//! Text for people: tables padded by hand, run times as squeue shows them, and whatever the
//! server sent made safe to print on a terminal.

/// `text` safe to print on a terminal: control characters (escape sequences that could move
/// the cursor, retitle the window or clear the screen), bidirectional controls (which make a
/// name print as another) and invisible characters are shown escaped, as `\u{1b}` or
/// `\u{202e}`: a server may send anything.
pub fn printable(text: &str) -> String {
    foresight_api::text::escaped(text).into_owned()
}

/// `text` followed by spaces up to `width` characters (never truncated).
pub fn pad(text: &str, width: usize) -> String {
    let mut s = text.to_string();
    s.extend(std::iter::repeat_n(
        ' ',
        width.saturating_sub(text.chars().count()),
    ));
    s
}

/// Rows under a header, columns padded to their widest cell. Padding is done by hand:
/// `format!`'s width panics from 65536 on, and a name may be that long.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| r.iter().map(|c| printable(c)).collect())
        .collect();
    let mut width: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in &rows {
        for (i, cell) in r.iter().enumerate() {
            width[i] = width[i].max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 < cells.len() {
                s.push_str(&pad(c, width[i] + 2));
            } else {
                s.push_str(c);
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(header.iter().map(|h| h.to_string()).collect());
    for r in &rows {
        out.push_str(&line(r.clone()));
    }
    out
}

/// Elapsed time as squeue shows it: `M:SS`, `H:MM:SS`, `D-HH:MM:SS`.
pub fn squeue_time(secs: i64) -> String {
    let s = secs.max(0);
    let (d, h, m, s) = (s / 86_400, s / 3_600 % 24, s / 60 % 60, s % 60);
    match (d, h) {
        (0, 0) => format!("{m}:{s:02}"),
        (0, _) => format!("{h}:{m:02}:{s:02}"),
        _ => format!("{d}-{h:02}:{m:02}:{s:02}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_server_returns_cannot_drive_the_terminal() {
        assert_eq!(printable("Größe\tok"), "Größe\\u{9}ok");
        assert_eq!(printable("\u{1b}]0;owned\u{7}"), "\\u{1b}]0;owned\\u{7}");
        let t = table(&["NAME", "X"], &[vec!["a\u{1b}[2J".into(), "1".into()]]);
        assert!(!t.contains('\u{1b}'), "{t:?}");
        assert!(t.contains("a\\u{1b}[2J  1"), "{t:?}");
        let long = "n".repeat(70_000);
        assert!(table(&["NAME"], &[vec![long]]).len() > 70_000);
    }
}
