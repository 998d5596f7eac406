//! `xhsactl check-config FILE`: an `XHSA_CONFIG` file checked by libxhsa's own parser
//! ([`xhsa_model::settings::config::Config::parse`], so the verdict is exactly what a process loading
//! it would say), each problem placed at its line and column.
#![forbid(unsafe_code)]

use xhsa_model::settings::config::{Config, SettingError};

/// One problem of a config file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// 1-based line and column, when the key was found in the text.
    pub at: Option<(usize, usize)>,
    /// The key (`priority`, `process[1].priority`), empty for the whole file.
    pub key: String,
    /// The value found, as TOML.
    pub value: Option<String>,
    /// What is wrong, with the accepted forms.
    pub problem: String,
    /// What a process does about it.
    pub fallback: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some((l, c)) = self.at {
            write!(f, "line {l}, column {c}: ")?;
        }
        if !self.key.is_empty() {
            write!(f, "key `{}`: ", self.key)?;
        }
        if let Some(v) = &self.value {
            write!(f, "value {v}: ")?;
        }
        write!(f, "{} ({})", self.problem, self.fallback)
    }
}

/// The problems of config text `text` (empty: valid).
pub fn check(text: &str, origin: &str) -> Vec<Problem> {
    let (_, errors) = Config::parse(text, origin);
    errors.iter().map(|e| place(e, text, origin)).collect()
}

fn place(e: &SettingError, text: &str, origin: &str) -> Problem {
    let key =
        e.setting.strip_prefix(origin).and_then(|k| k.strip_prefix(": ")).unwrap_or("").to_string();
    let at = if key.is_empty() { syntax_position(&e.problem) } else { locate(text, &key) };
    Problem {
        at,
        key,
        value: e.value.clone(),
        problem: e.problem.clone(),
        fallback: e.fallback.clone(),
    }
}

/// `line N, column M` in a TOML parser message.
fn syntax_position(msg: &str) -> Option<(usize, usize)> {
    let rest = &msg[msg.find("line ")? + 5..];
    let (line, rest) = rest.split_once(", column ")?;
    let col: String = rest.chars().take_while(char::is_ascii_digit).collect();
    Some((line.trim().parse().ok()?, col.parse().ok()?))
}

/// Where `key` (`window`, `passthrough_libs[2]`, `process[1].priority`, `library[0]`) is written.
pub fn locate(text: &str, key: &str) -> Option<(usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let (head, field) = match key.split_once('.') {
        Some((h, f)) => (h, Some(f)),
        None => (key, None),
    };
    let (name, index) = match head.split_once('[') {
        Some((n, i)) => (n, i.trim_end_matches(']').parse::<usize>().ok()),
        None => (head, None),
    };
    let assigns = |line: &str, k: &str| -> Option<usize> {
        let trimmed = line.trim_start();
        let rest = trimmed.strip_prefix(k)?;
        rest.trim_start().starts_with('=').then(|| line.len() - trimmed.len() + 1)
    };
    // A rule: the index-th `[[name]]` header, then the field inside its section.
    let headers: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.trim() == format!("[[{name}]]"))
        .map(|(i, _)| i)
        .collect();
    if let (Some(i), false) = (index, headers.is_empty()) {
        let start = *headers.get(i)?;
        let Some(field) = field else {
            return Some((start + 1, lines[start].find('[').unwrap_or(0) + 1));
        };
        for (n, line) in lines.iter().enumerate().skip(start + 1) {
            if line.trim_start().starts_with('[') {
                break;
            }
            if let Some(c) = assigns(line, field) {
                return Some((n + 1, c));
            }
        }
        return Some((start + 1, 1));
    }
    // A top-level key: before the first table header.
    for (n, line) in lines.iter().enumerate() {
        if line.trim_start().starts_with('[') {
            break;
        }
        if let Some(c) = assigns(line, name) {
            return Some((n + 1, c));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problems_are_placed_at_their_keys() {
        let text = "priority = 300\nwindow = 2\n  windw = 3\n\n[[process]]\nname = \"a\"\npriority = 1\n\n[[process]]\nname = \"b\"\npriority = \"x\"\n";
        let p = check(text, "f.toml");
        assert_eq!(p.len(), 3, "{p:?}");
        let by_key =
            |k: &str| p.iter().find(|x| x.key == k).unwrap_or_else(|| panic!("{k}: {p:?}"));
        assert_eq!(by_key("priority").at, Some((1, 1)));
        assert!(by_key("priority").problem.contains("-256..=255"));
        assert_eq!(by_key("windw").at, Some((3, 3)));
        assert!(by_key("windw").problem.contains("accepted keys"));
        assert_eq!(by_key("process[1].priority").at, Some((11, 1)));
        assert!(by_key("process[1].priority")
            .to_string()
            .starts_with("line 11, column 1: key `process[1].priority`: value \"x\": "));
    }

    #[test]
    fn syntax_errors_keep_the_parsers_position_and_valid_files_have_no_problem() {
        let p = check("priority = = 1\n", "f.toml");
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].at, Some((1, 12)), "{}", p[0]);
        assert!(check("priority = 3\ncontrol_max_level = 0\n[[library]]\nname = \"librccl.so\"\npriority = 9\n", "f").is_empty());
    }
}
