//! The words of an instruction's arguments as the engine's builder reads them: split at
//! whitespace outside quotes, `'…'` kept as written, `"…"` and bare text with `$NAME`,
//! `${NAME}`, `${NAME:-word}` and `${NAME:+word}` replaced from the build's variables,
//! and `\` escaping the next character.

use std::collections::BTreeMap;

/// The words of `text` with the variables in `vars` put in, or what cannot be read (a
/// word longer than `max` bytes among it: substitution can double a word per variable).
pub fn words(
    text: &str,
    vars: &BTreeMap<String, String>,
    max: usize,
) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Err("a `'` is not closed".into()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\' | '$')) => word.push(c),
                            Some(c) => {
                                word.push('\\');
                                word.push(c);
                            }
                            None => return Err("a `\"` is not closed".into()),
                        },
                        Some('$') => {
                            word.push_str(&variable(&mut chars, vars)?);
                            too_long(&word, max)?;
                        }
                        Some(c) => word.push(c),
                        None => return Err("a `\"` is not closed".into()),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(c) = chars.next() {
                    word.push(c);
                }
            }
            '$' => {
                in_word = true;
                word.push_str(&variable(&mut chars, vars)?);
                too_long(&word, max)?;
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        out.push(word);
    }
    Ok(out)
}

fn too_long(word: &str, max: usize) -> Result<(), String> {
    if word.len() > max {
        return Err(format!("a word would be longer than {max} bytes"));
    }
    Ok(())
}

/// The value of the variable after a `$`, the `$` itself when none follows.
fn variable(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
    vars: &BTreeMap<String, String>,
) -> Result<String, String> {
    let lookup = |name: &str| vars.get(name).cloned().unwrap_or_default();
    if chars.peek() == Some(&'{') {
        chars.next();
        let mut inner = String::new();
        loop {
            match chars.next() {
                Some('}') => break,
                Some(c) => inner.push(c),
                None => return Err("a `${` is not closed".into()),
            }
        }
        let (name, modifier) = match inner.find(':') {
            Some(at) => (&inner[..at], Some(&inner[at..])),
            None => (inner.as_str(), None),
        };
        if !is_name(name) {
            return Err(format!("`${{{inner}}}` names no variable"));
        }
        let set = vars.get(name).is_some_and(|value| !value.is_empty());
        return match modifier {
            None => Ok(lookup(name)),
            Some(m) if m.starts_with(":-") => {
                Ok(if set { lookup(name) } else { m[2..].to_owned() })
            }
            Some(m) if m.starts_with(":+") => Ok(if set {
                m[2..].to_owned()
            } else {
                String::new()
            }),
            Some(m) => Err(format!(
                "`${{{name}{m}}}`: only `${{NAME:-word}}` and `${{NAME:+word}}` are taken"
            )),
        };
    }
    let mut name = String::new();
    while let Some(&c) = chars.peek() {
        if c.is_ascii_alphanumeric() || c == '_' {
            name.push(c);
            chars.next();
        } else {
            break;
        }
    }
    if name.is_empty() {
        return Ok("$".into());
    }
    Ok(lookup(&name))
}

/// A variable's name: a letter or `_`, then letters, digits and `_`.
pub fn is_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn vars() -> BTreeMap<String, String> {
        BTreeMap::from([
            ("HOME".into(), "/home/user".into()),
            ("EMPTY".into(), String::new()),
        ])
    }

    #[test]
    fn words_are_split_quoted_and_substituted() {
        let cases: [(&str, &[&str]); 9] = [
            ("a b  c", &["a", "b", "c"]),
            ("A=\"x y\" B='$HOME'", &["A=x y", "B=$HOME"]),
            ("$HOME/bin", &["/home/user/bin"]),
            ("${HOME}x", &["/home/userx"]),
            ("${MISSING:-dflt}", &["dflt"]),
            ("${EMPTY:-dflt} ${HOME:+set}", &["dflt", "set"]),
            ("a\\ b", &["a b"]),
            ("\"\\$HOME\"", &["$HOME"]),
            ("cost$ 5", &["cost$", "5"]),
        ];
        for (text, expected) in cases {
            assert_eq!(words(text, &vars(), 1024).unwrap(), expected, "{text}");
        }
    }

    #[test]
    fn a_word_substitution_doubles_is_bounded() {
        let vars = BTreeMap::from([("A".to_owned(), "a".repeat(600))]);
        assert!(words("$A", &vars, 1024).is_ok());
        assert!(words("$A$A", &vars, 1024).is_err());
        assert!(words("\"${A}${A}\"", &vars, 1024).is_err());
    }

    #[test]
    fn unreadable_words_are_named() {
        for text in ["'open", "\"open", "${OPEN", "${A:?no}", "${1x}"] {
            assert!(words(text, &vars(), 1024).is_err(), "{text}");
        }
    }
}
