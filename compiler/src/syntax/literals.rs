//! Literal values: string escapes, `"""` block dedenting, durations, integers and numbers.
//! Each function returns the value or a problem (message, help) for an E013.

/// A bad literal: what is wrong, and how to fix it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct LiteralError {
    pub message: String,
    pub help: Option<String>,
}

impl LiteralError {
    fn new(message: impl Into<String>, help: Option<&str>) -> LiteralError {
        LiteralError {
            message: message.into(),
            help: help.map(str::to_string),
        }
    }
}

pub(crate) const DURATION_UNITS_HELP: &str = "durations are a whole number glued to a unit: `ms`, `s`, `m` or `h` (e.g. `250ms`, `30s`, `15m`, `2h`), or several, largest unit first (`4m50s`)";

/// The value of a `"..."` string (with the quotes), with escapes processed:
/// `\"` `\\` `\n` `\t` `\r` `\0` `\u{...}`.
pub(crate) fn unescape(quoted: &str) -> Result<String, LiteralError> {
    let inner = quoted
        .strip_prefix('"')
        .and_then(|rest| rest.strip_suffix('"'))
        .unwrap_or(quoted);
    if !inner.contains('\\') {
        return Ok(inner.to_string());
    }
    let mut value = String::with_capacity(inner.len());
    let mut characters = inner.chars();
    while let Some(character) = characters.next() {
        if character != '\\' {
            value.push(character);
            continue;
        }
        match characters.next() {
            Some('"') => value.push('"'),
            Some('\\') => value.push('\\'),
            Some('n') => value.push('\n'),
            Some('t') => value.push('\t'),
            Some('r') => value.push('\r'),
            Some('0') => value.push('\0'),
            Some('u') => {
                let rest = characters.as_str();
                let code = rest
                    .strip_prefix('{')
                    .and_then(|rest| rest.split_once('}'))
                    .map(|(hex, _)| hex);
                let parsed = code
                    .filter(|hex| (1..=6).contains(&hex.len()))
                    .and_then(|hex| u32::from_str_radix(hex, 16).ok())
                    .and_then(char::from_u32);
                match (code, parsed) {
                    (Some(hex), Some(decoded)) => {
                        value.push(decoded);
                        // Skip `{hex}`.
                        for _ in 0..hex.len() + 2 {
                            characters.next();
                        }
                    }
                    _ => {
                        return Err(LiteralError::new(
                            "bad unicode escape",
                            Some("write a unicode escape as `\\u{1F600}` (1 to 6 hex digits)"),
                        ));
                    }
                }
            }
            Some(other) => {
                return Err(LiteralError::new(
                    format!("unknown escape `\\{other}`"),
                    Some(
                        "escapes are `\\\"` `\\\\` `\\n` `\\t` `\\r` `\\0` `\\u{...}`; write `\\\\` for a backslash",
                    ),
                ));
            }
            None => value.push('\\'),
        }
    }
    Ok(value)
}

/// The value of a `"""..."""` block (with the quotes), indentation stripped like Rust's
/// `indoc`: a line break right after the opening quotes is dropped, a last line holding
/// only whitespace is dropped, and the indentation common to the remaining lines (after
/// the first, and ignoring blank lines) is removed.
pub(crate) fn dedent_block(quoted: &str) -> String {
    let inner = quoted
        .strip_prefix("\"\"\"")
        .and_then(|rest| rest.strip_suffix("\"\"\""))
        .unwrap_or(quoted);
    // Text right after the opening quotes is kept as written; after a line break, the
    // first line is dedented like the others.
    let (inner, first_line_as_is) = match inner
        .strip_prefix("\r\n")
        .or_else(|| inner.strip_prefix('\n'))
    {
        Some(rest) => (rest, false),
        None => (inner, true),
    };
    let mut lines: Vec<&str> = inner
        .split('\n')
        .map(|line| line.strip_suffix('\r').unwrap_or(line))
        .collect();
    if lines.len() > 1 && lines.last().is_some_and(|last| is_blank(last)) {
        lines.pop();
    }
    let indent_of = |line: &str| line.len() - line.trim_start_matches([' ', '\t']).len();
    let common = lines
        .iter()
        .enumerate()
        .filter(|(index, line)| (*index != 0 || !first_line_as_is) && !is_blank(line))
        .map(|(_, line)| indent_of(line))
        .min()
        .unwrap_or(0);
    let mut value = String::with_capacity(inner.len());
    for (index, line) in lines.iter().enumerate() {
        if index > 0 {
            value.push('\n');
        }
        if index == 0 && first_line_as_is {
            value.push_str(line);
        } else if !is_blank(line) {
            value.push_str(line.get(common..).unwrap_or(line));
        }
    }
    value
}

fn is_blank(line: &str) -> bool {
    line.trim_matches([' ', '\t', '\r']).is_empty()
}

/// Milliseconds of a duration literal such as `250ms`, `30s`, `15m`, `2h`, or a compound
/// form with the largest unit first, each unit once (`4m50s`, `1h30m`, `2s500ms`).
pub(crate) fn duration_millis(text: &str) -> Result<u64, LiteralError> {
    let mut rest = text;
    let mut total: u64 = 0;
    // The rank of the last unit read: each next one must be smaller.
    let mut last_rank = usize::MAX;
    let too_large = || {
        LiteralError::new(
            format!("duration `{text}` is too large"),
            Some(DURATION_UNITS_HELP),
        )
    };
    loop {
        let number_length = rest
            .bytes()
            .take_while(|byte| byte.is_ascii_digit() || *byte == b'_' || *byte == b'.')
            .count();
        let (number, after) = rest.split_at(number_length.min(rest.len()));
        if number.contains('.') {
            return Err(LiteralError::new(
                format!("fractional duration `{text}`"),
                Some("write a whole number in a smaller unit, e.g. `1500ms` instead of `1.5s`"),
            ));
        }
        let unit_length = after
            .bytes()
            .take_while(|byte| !byte.is_ascii_digit())
            .count();
        let (unit, tail) = after.split_at(unit_length.min(after.len()));
        let (rank, factor): (usize, u64) = match unit {
            "h" => (0, 3_600_000),
            "m" => (1, 60_000),
            "s" => (2, 1_000),
            "ms" => (3, 1),
            "" => {
                return Err(LiteralError::new(
                    format!("duration `{text}` has no unit"),
                    Some(DURATION_UNITS_HELP),
                ));
            }
            other => {
                return Err(LiteralError::new(
                    format!("unknown duration unit `{}`", other.trim()),
                    Some(DURATION_UNITS_HELP),
                ));
            }
        };
        if number.is_empty() || (last_rank != usize::MAX && rank <= last_rank) {
            return Err(LiteralError::new(
                format!("duration `{text}` is not a number and a unit, largest unit first"),
                Some(DURATION_UNITS_HELP),
            ));
        }
        last_rank = rank;
        let digits: String = number.chars().filter(|c| *c != '_').collect();
        let part = digits
            .parse::<u64>()
            .ok()
            .and_then(|value| value.checked_mul(factor))
            .ok_or_else(too_large)?;
        total = total.checked_add(part).ok_or_else(too_large)?;
        if tail.is_empty() {
            return Ok(total);
        }
        rest = tail;
    }
}

/// The value of a non-negative integer literal (underscores allowed as separators).
pub(crate) fn integer(text: &str) -> Result<u64, LiteralError> {
    let digits: String = text.chars().filter(|c| *c != '_').collect();
    digits.parse::<u64>().map_err(|_| {
        LiteralError::new(
            format!("integer `{text}` is too large"),
            Some("integers must fit in 64 bits"),
        )
    })
}

/// The exact value of an integer literal (an optional `-`, digits and `_`), or `None` when
/// it is not one or does not fit an `i64`.
pub(crate) fn signed_integer(text: &str) -> Option<i64> {
    let cleaned: String = text.chars().filter(|c| *c != '_').collect();
    cleaned.parse::<i64>().ok()
}

/// The value of a number literal, and whether it was written as an integer.
pub(crate) fn number(text: &str) -> Result<(f64, bool), LiteralError> {
    let cleaned: String = text.chars().filter(|c| *c != '_').collect();
    let is_integer = !cleaned.contains(['.', 'e', 'E']);
    match cleaned.parse::<f64>() {
        Ok(value) if value.is_finite() => Ok((value, is_integer)),
        _ => Err(LiteralError::new(
            format!("number `{text}` is out of range"),
            None,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_dedent(input: &str, expect: &str) {
        assert_eq!(dedent_block(input), expect, "input: {input:?}");
    }

    #[test]
    fn dedents_blocks_like_indoc() {
        check_dedent("\"\"\"Six roles.\"\"\"", "Six roles.");
        check_dedent(
            "\"\"\"\n    Carry out {{ x }}\n  \"\"\"",
            "Carry out {{ x }}",
        );
        check_dedent("\"\"\"\n    a\n      b\n\n    c\n\"\"\"", "a\n  b\n\nc");
        check_dedent("\"\"\"\n\ta\n\t\"\"\"", "a");
        check_dedent("\"\"\"first\n    second\n    \"\"\"", "first\nsecond");
        check_dedent("\"\"\"\"\"\"", "");
        check_dedent("\"\"\"\r\n    a\r\n    b\r\n  \"\"\"", "a\nb");
    }

    fn check_duration(input: &str, expect: Result<u64, &str>) {
        let got = duration_millis(input).map_err(|error| error.message);
        assert_eq!(got, expect.map_err(str::to_string), "input: {input:?}");
    }

    #[test]
    fn durations() {
        check_duration("250ms", Ok(250));
        check_duration("30s", Ok(30_000));
        check_duration("15m", Ok(900_000));
        check_duration("2h", Ok(7_200_000));
        check_duration("1_000ms", Ok(1000));
        check_duration("3d", Err("unknown duration unit `d`"));
        check_duration("4m50s", Ok(290_000));
        check_duration("1h30m", Ok(5_400_000));
        check_duration("2s500ms", Ok(2_500));
        check_duration(
            "50s4m",
            Err("duration `50s4m` is not a number and a unit, largest unit first"),
        );
        check_duration(
            "1m1m",
            Err("duration `1m1m` is not a number and a unit, largest unit first"),
        );
        check_duration("4m50", Err("duration `4m50` has no unit"));
        check_duration("30", Err("duration `30` has no unit"));
        check_duration("1.5s", Err("fractional duration `1.5s`"));
        check_duration(
            "99999999999999999999h",
            Err("duration `99999999999999999999h` is too large"),
        );
        check_duration(
            "9999999999999999h",
            Err("duration `9999999999999999h` is too large"),
        );
    }

    #[test]
    fn escapes() {
        assert_eq!(
            unescape(r#""a\"b\\c\nd\te""#),
            Ok("a\"b\\c\nd\te".to_string())
        );
        assert_eq!(
            unescape(r#""\u{48}\u{1F600}!""#),
            Ok("H\u{1F600}!".to_string())
        );
        assert!(unescape(r#""\q""#).is_err());
        assert!(unescape(r#""\u{110000}""#).is_err());
        assert!(unescape(r#""\u{}""#).is_err());
        assert!(unescape(r#""\u48""#).is_err());
    }
}
