//! Text that people choose and others read (user, job and workflow names): the characters
//! it may not hold, and how a client shows text it receives without letting it act on the
//! terminal.

use std::borrow::Cow;

/// True for a character that changes how the text around it is shown, or hides, without
/// being seen itself: control characters (C0, DEL, C1: escape sequences), the
/// bidirectional controls (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069, which can
/// make `evil` print as `live`), zero-width and other invisible format characters (U+200B,
/// U+2060, U+FEFF, tag characters…), line and paragraph separators, and blank fillers
/// that look like nothing.
pub fn is_hidden(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{00AD}'                      // soft hyphen
                | '\u{034F}'                // combining grapheme joiner
                | '\u{0600}'..='\u{0605}'   // Arabic number signs (format)
                | '\u{061C}'                // Arabic letter mark
                | '\u{06DD}'
                | '\u{070F}'
                | '\u{08E2}'
                | '\u{115F}' | '\u{1160}'   // Hangul fillers
                | '\u{17B4}' | '\u{17B5}'
                | '\u{180B}'..='\u{180F}'   // Mongolian selectors and vowel separator
                | '\u{200B}'..='\u{200F}'   // zero-width space, (non-)joiner, LRM, RLM
                | '\u{2028}'..='\u{202E}'   // separators, LRE, RLE, PDF, LRO, RLO
                | '\u{2060}'..='\u{206F}'   // word joiner, invisible operators, LRI..PDI
                | '\u{3164}'                // Hangul filler
                | '\u{FEFF}'                // zero-width no-break space (BOM)
                | '\u{FFA0}'                // halfwidth Hangul filler
                | '\u{FFF9}'..='\u{FFFB}'   // interlinear annotation
                | '\u{110BD}' | '\u{110CD}'
                | '\u{13430}'..='\u{1343F}'
                | '\u{1BCA0}'..='\u{1BCA3}'
                | '\u{1D173}'..='\u{1D17A}'
                | '\u{E0000}'..='\u{E0FFF}' // tags and variation selectors supplement
        )
}

/// The first hidden character of `s` ([`is_hidden`]) and its position in characters.
pub fn find_hidden(s: &str) -> Option<(usize, char)> {
    s.chars().enumerate().find(|(_, c)| is_hidden(*c))
}

/// Why `s`, a name a person chose, is refused, naming the character and where it is; None
/// when it may be shown as it is.
pub fn hidden_problem(s: &str) -> Option<String> {
    find_hidden(s).map(|(i, c)| {
        format!(
            "must not contain control, bidirectional or invisible characters, found {} at \
             character {}",
            c.escape_unicode(),
            i + 1
        )
    })
}

/// `text` safe to show on a terminal: each hidden character ([`is_hidden`]) is written
/// escaped, as `\u{202e}`, so that what it would do is seen instead of done.
pub fn escaped(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_hidden) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(
        text.chars()
            .map(|c| {
                if is_hidden(c) {
                    c.escape_unicode().to_string()
                } else {
                    c.to_string()
                }
            })
            .collect(),
    )
}

/// JSON text (as serde_json writes it) with each hidden character written as a `\uXXXX`
/// escape: the same JSON value, safe to show on a terminal. serde_json escapes C0 controls
/// itself but writes DEL, C1 controls and the bidirectional controls raw. Outside strings
/// such JSON holds only ASCII punctuation, digits and letters, so every hidden character is
/// inside a string, where the escape means the same character.
pub fn escaped_json(json: &str) -> Cow<'_, str> {
    if !json.chars().any(is_hidden) {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if is_hidden(c) && !matches!(c, '\n' | '\t' | '\r') {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{u:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_characters_are_found_and_named() {
        for c in [
            '\u{1b}',
            '\u{7f}',
            '\u{9b}',
            '\u{202a}',
            '\u{202e}',
            '\u{2066}',
            '\u{2069}',
            '\u{200e}',
            '\u{200f}',
            '\u{061c}',
            '\u{200b}',
            '\u{feff}',
            '\u{e0041}',
        ] {
            assert!(is_hidden(c), "{}", c.escape_unicode());
        }
        for c in ['a', 'ß', 'é', '中', '😀', ' ', '-', '\u{fe0f}'] {
            assert!(!is_hidden(c), "{}", c.escape_unicode());
        }
        assert_eq!(hidden_problem("Größe 1"), None);
        assert_eq!(
            hidden_problem("ab\u{202e}cd").unwrap(),
            "must not contain control, bidirectional or invisible characters, found \
             \\u{202e} at character 3"
        );
    }

    #[test]
    fn escaping_shows_what_would_act() {
        assert_eq!(escaped("plain é"), "plain é");
        assert_eq!(escaped("a\u{202e}b\u{1b}[2J"), "a\\u{202e}b\\u{1b}[2J");
        let v = serde_json::json!({"name": "x\u{202e}y\u{85}\u{1F600}\u{e0041}", "n": 1});
        let text = serde_json::to_string_pretty(&v).unwrap();
        let safe = escaped_json(&text);
        assert!(!safe.chars().any(is_hidden) || safe.chars().all(|c| c == '\n' || !is_hidden(c)));
        assert!(
            safe.contains("x\\u202ey\\u0085\u{1F600}\\udb40\\udc41"),
            "{safe}"
        );
        assert_eq!(serde_json::from_str::<serde_json::Value>(&safe).unwrap(), v);
    }
}
