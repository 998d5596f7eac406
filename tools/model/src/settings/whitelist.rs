//! The passthrough whitelist: which libraries' queues bypass the rings and the window.
//!
//! `XHSA_PASSTHROUGH_LIBS` (alias `XSCHED_PASSTHROUGH_LIBS`) and the config file's
//! `passthrough_libs` name libraries whose HSA queues libxhsa leaves alone (for example a
//! library that polls its own queue, or a communication library whose ranks must never be held
//! back). The edge finds the library behind a queue from the caller's return address (`dladdr`,
//! e.g. `/opt/rocm/lib/libhipblas.so.2.1.60102`) or from a code object URI
//! (`file:///opt/rocm/lib/librocblas.so.4#offset=123&size=456`), and asks [`Whitelist::matches`].
//!
//! **List syntax**: comma-separated; whitespace around entries is ignored, empty entries are
//! skipped (`" libhipblas.so, librocblas.so.4,, "` is two entries). An entry with a `/` is reduced
//! to its file name: directories are not compared.
//!
//! **Matching** is on the file name only (the part after the last `/`, with a `file://` URI's
//! scheme, host, `#fragment` and `?query` removed and `%XX` escapes decoded), never on
//! substrings of other names:
//!
//! | entry             | matches                                                          | does not match                      |
//! |-------------------|------------------------------------------------------------------|-------------------------------------|
//! | `libhipblas.so`   | `libhipblas.so`, `libhipblas.so.2`, `libhipblas.so.2.1.60102`    | `libhipblaslt.so`, `libhipblas.a`   |
//! | `libhipblas.so.2` | `libhipblas.so.2`, `libhipblas.so.2.1.60102`                     | `libhipblas.so`, `libhipblas.so.20` |
//! | `libhipblas`      | `libhipblas.so`, `libhipblas.so.2.1.60102`                       | `libhipblaslt.so`, `libhipblas-d.so`|
//! | `libhip.so`       | `libhip.so.6`                                                    | `libhipblas.so`                     |
//!
//! A version suffix is one or more `.`-separated components, each starting with a digit and made
//! of ASCII letters and digits (`.2`, `.2.1.60102`, `.6.0.0git`). Matching is case-sensitive, as
//! file names are. Prefer unversioned entries: a process that loaded `libhipblas.so.2` does not
//! match the entry `libhipblas.so.2.1.60102`.
#![forbid(unsafe_code)]

use std::borrow::Cow;

/// A parsed passthrough list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Whitelist {
    entries: Vec<String>,
}

impl Whitelist {
    /// Parses a comma-separated list (see the module doc). Never fails: there is no malformed
    /// list, only entries that match nothing.
    pub fn parse(list: &str) -> Whitelist {
        Whitelist::from_entries(list.split(','))
    }

    /// A list of these entries, normalized (trimmed, empty ones dropped, directories removed,
    /// duplicates dropped).
    pub fn from_entries<I, S>(entries: I) -> Whitelist
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut list = Whitelist::default();
        list.extend(entries);
        list
    }

    /// Adds entries (normalized like [`from_entries`](Whitelist::from_entries)).
    pub fn extend<I, S>(&mut self, entries: I)
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        for entry in entries {
            let entry = entry.as_ref().trim();
            let entry = entry.rsplit('/').next().unwrap_or(entry);
            if !entry.is_empty() && !self.entries.iter().any(|e| e == entry) {
                self.entries.push(entry.to_string());
            }
        }
    }

    /// The entries, in the order given.
    pub fn entries(&self) -> &[String] {
        &self.entries
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entry matching the library at `location` (a path or a `file://` URI), if any.
    pub fn matches(&self, location: &str) -> Option<&str> {
        let name = library_file_name(location)?;
        self.entries.iter().map(String::as_str).find(|entry| name_matches(entry, &name))
    }
}

/// The file name of a library path or `file://` code object URI; `None` for other URI schemes
/// (`memory://...`: a code object loaded from memory has no file) or a path ending in `/`.
pub fn library_file_name(location: &str) -> Option<Cow<'_, str>> {
    let location = location.trim();
    let path: Cow<'_, str> = if let Some(rest) = location.strip_prefix("file://") {
        // `file://host/path`: the path starts at the first `/` after the authority.
        let rest = &rest[rest.find('/')?..];
        let end = rest.find(['#', '?']).unwrap_or(rest.len());
        percent_decode(&rest[..end])
    } else if location.contains("://") {
        return None;
    } else {
        Cow::Borrowed(location)
    };
    let name = match path {
        Cow::Borrowed(p) => Cow::Borrowed(p.rsplit('/').next().unwrap_or(p)),
        Cow::Owned(p) => Cow::Owned(p.rsplit('/').next().unwrap_or(&p).to_string()),
    };
    (!name.is_empty()).then_some(name)
}

fn percent_decode(s: &str) -> Cow<'_, str> {
    if !s.contains('%') {
        return Cow::Borrowed(s);
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(hi), Some(lo)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((hi * 16 + lo) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    Cow::Owned(String::from_utf8_lossy(&out).into_owned())
}

/// Whether `rest` is a version suffix: `(.<digit>[0-9A-Za-z]*)+`.
fn is_version_suffix(rest: &str) -> bool {
    let Some(components) = rest.strip_prefix('.') else { return false };
    components.split('.').all(|c| {
        c.as_bytes().first().is_some_and(u8::is_ascii_digit)
            && c.bytes().all(|b| b.is_ascii_alphanumeric())
    })
}

/// Whether the whitelist entry `entry` matches the library file name `name` (see the module doc).
pub fn name_matches(entry: &str, name: &str) -> bool {
    if entry.is_empty() {
        return false;
    }
    if name == entry {
        return true;
    }
    let Some(rest) = name.strip_prefix(entry) else { return false };
    if entry.ends_with(".so") || entry.contains(".so.") {
        // `libhipblas.so` or `libhipblas.so.2`: only a version may follow.
        is_version_suffix(rest)
    } else {
        // `libhipblas`: `.so`, then optionally a version.
        match rest.strip_prefix(".so") {
            Some("") => true,
            Some(version) => is_version_suffix(version),
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parse_tolerates_whitespace_and_empty_entries() {
        let w = Whitelist::parse(" libhipblas.so, librocblas.so.4 ,,\t, ");
        assert_eq!(w.entries(), &["libhipblas.so", "librocblas.so.4"]);
        assert!(Whitelist::parse("").is_empty());
        assert!(Whitelist::parse(" , ,").is_empty());
        assert_eq!(Whitelist::parse("/opt/rocm/lib/libhipblas.so").entries(), &["libhipblas.so"]);
        assert_eq!(Whitelist::parse("a.so,a.so, a.so").entries(), &["a.so"]);
        let mut w = Whitelist::parse("a.so");
        w.extend(["b.so", "a.so"]);
        assert_eq!(w.entries(), &["a.so", "b.so"]);
    }

    #[test]
    fn file_names_of_paths_and_uris() {
        let name = |s| library_file_name(s).map(|c| c.into_owned());
        assert_eq!(
            name("/opt/rocm/lib/libhipblas.so.2.1.60102").as_deref(),
            Some("libhipblas.so.2.1.60102")
        );
        assert_eq!(name("libhipblas.so").as_deref(), Some("libhipblas.so"));
        assert_eq!(
            name("file:///opt/rocm/lib/librocblas.so.4#offset=123&size=456").as_deref(),
            Some("librocblas.so.4")
        );
        assert_eq!(
            name("file://localhost/opt/rocm/lib/librocblas.so.4#offset=1").as_deref(),
            Some("librocblas.so.4")
        );
        assert_eq!(name("file:///opt/my%20libs/libfoo.so?x=1").as_deref(), Some("libfoo.so"));
        assert_eq!(name("file:///opt/lib/lib%2Bplus.so").as_deref(), Some("lib+plus.so"));
        assert_eq!(
            name("file:///opt/lib/lib%zz.so").as_deref(),
            Some("lib%zz.so"),
            "bad escapes are kept"
        );
        assert_eq!(name("file:///opt/lib/lib%2").as_deref(), Some("lib%2"));
        assert_eq!(name("memory://1234#offset=0x7f00&size=4096"), None);
        assert_eq!(name("file://"), None);
        assert_eq!(name("/opt/rocm/lib/"), None);
        assert_eq!(name(""), None);
    }

    #[test]
    fn matching_rules() {
        let yes = [
            ("libhipblas.so", "libhipblas.so"),
            ("libhipblas.so", "libhipblas.so.2"),
            ("libhipblas.so", "libhipblas.so.2.1.60102"),
            ("libhipblas.so.2", "libhipblas.so.2.1.60102"),
            ("libhipblas.so.2.1.60102", "libhipblas.so.2.1.60102"),
            ("libhipblas", "libhipblas.so"),
            ("libhipblas", "libhipblas.so.2.1.60102"),
            ("libhip.so", "libhip.so.6"),
            ("librocblas.so.4", "librocblas.so.4"),
            ("libamdhip64.so", "libamdhip64.so.6.0.0git"),
            ("kernels.hsaco", "kernels.hsaco"),
        ];
        for (entry, name) in yes {
            assert!(name_matches(entry, name), "{entry} should match {name}");
        }
        let no = [
            ("libhip.so", "libhipblas.so"),
            ("libhip", "libhipblas.so"),
            ("libhipblas.so", "libhipblaslt.so"),
            ("libhipblas.so", "libhipblaslt.so.0.7"),
            ("libhipblas", "libhipblaslt.so"),
            ("libhipblas", "libhipblas-d.so"),
            ("libhipblas.so", "libhipblas.a"),
            ("libhipblas.so", "libhipblas.so."),
            ("libhipblas.so", "libhipblas.so..2"),
            ("libhipblas.so", "libhipblas.so.x2"),
            ("libhipblas.so", "libhipblas.so.2-rc1"),
            ("libhipblas.so.2", "libhipblas.so"),
            ("libhipblas.so.2", "libhipblas.so.20"),
            ("libhipblas.so.2", "libhipblas.so.20.1"),
            ("libhipblas.so.2.1.60102", "libhipblas.so.2"),
            ("LIBHIPBLAS.SO", "libhipblas.so"),
            ("blas.so", "libhipblas.so"),
            ("", "libhipblas.so"),
            ("libhipblas.so", "xlibhipblas.so"),
        ];
        for (entry, name) in no {
            assert!(!name_matches(entry, name), "{entry} should not match {name}");
        }
    }

    #[test]
    fn whitelist_matches_paths_and_uris() {
        let w = Whitelist::parse("libhipblas.so, librocblas.so.4, libMIOpen");
        assert_eq!(w.matches("/opt/rocm/lib/libhipblas.so.2.1.60102"), Some("libhipblas.so"));
        assert_eq!(
            w.matches("file:///opt/rocm/lib/librocblas.so.4#offset=123&size=456"),
            Some("librocblas.so.4")
        );
        assert_eq!(
            w.matches("file:///opt/rocm/lib/librocblas.so.4.2.0#offset=1&size=2"),
            Some("librocblas.so.4")
        );
        assert_eq!(w.matches("/opt/rocm-6.1.2/lib/libMIOpen.so.1.0.60102"), Some("libMIOpen"));
        assert_eq!(w.matches("/opt/rocm/lib/librocblas.so.3"), None);
        assert_eq!(w.matches("/opt/rocm/lib/libhipblaslt.so.0"), None);
        assert_eq!(w.matches("/opt/rocm/lib/libamdhip64.so.6"), None);
        assert_eq!(w.matches("memory://42#offset=0&size=1"), None);
        // Directory names do not matter, even if they look like an entry.
        assert_eq!(w.matches("/opt/libhipblas.so/libother.so"), None);
        assert_eq!(Whitelist::default().matches("/opt/rocm/lib/libhipblas.so"), None);
    }

    proptest! {
        /// An entry `stem.so` matches `stem.so` plus any numeric version, and a name that extends
        /// the stem with more characters never matches.
        #[test]
        fn versions_match_and_longer_names_do_not(
            stem in "lib[a-z0-9_]{1,12}",
            version in proptest::collection::vec(0u32..100_000, 0..4),
            extra in "[a-z0-9_-]{1,6}",
            dir in "(/[a-z0-9.]{1,8}){0,3}",
        ) {
            let entry = format!("{stem}.so");
            let suffix: String = version.iter().map(|v| format!(".{v}")).collect();
            let path = format!("{dir}/{stem}.so{suffix}");
            prop_assert!(Whitelist::parse(&entry).matches(&path).is_some());
            prop_assert!(Whitelist::parse(&stem).matches(&path).is_some());
            let uri = format!("file://{path}#offset=1&size=2");
            prop_assert!(Whitelist::parse(&entry).matches(&uri).is_some());
            let other = format!("{dir}/{stem}{extra}.so{suffix}");
            prop_assert!(Whitelist::parse(&entry).matches(&other).is_none());
            prop_assert!(Whitelist::parse(&stem).matches(&other).is_none());
        }
    }
}
