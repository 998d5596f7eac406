//! Settings: the environment, the config file, and which priority a queue gets.
//!
//! Nothing here panics or exits: every malformed value becomes a [`SettingError`] that names the
//! variable (or file and key), the value, the accepted forms and what is used instead; the edge
//! logs each once. A malformed value is ignored — the setting falls back as if it were not set
//! (to the next source in the precedence below, finally the built-in default). A variable set to
//! the empty string (or only whitespace) counts as not set.
//!
//! # Environment
//!
//! | variable | alias | accepted | default |
//! |---|---|---|---|
//! | `XHSA_PRIORITY` | `XSCHED_AUTO_XQUEUE_PRIORITY` | integer `-256..=255`, higher is more urgent (XSched's range and meaning, see [`crate::priority`]) | config, else 0 |
//! | `XHSA_WINDOW` | | integer `1..=1024`: W of the level-1 window (libxhsa's `path::window`) | config, else 2 |
//! | `XHSA_DISABLE` | | `0`/`1`/`true`/`false`/`yes`/`no` (any case): `1` makes libxhsa a pure passthrough and skips the config file | `0` |
//! | `XHSA_PASSTHROUGH_LIBS` | `XSCHED_PASSTHROUGH_LIBS` | comma-separated library names ([`crate::settings::whitelist`]), e.g. `libhipblas.so,librocblas.so.4` | none |
//! | `XHSA_CONFIG` | | path of a TOML config file (below); no file is read unless it is set | none |
//! | `XHSA_LOG` | | a level (`off`, `error`, `warn`, `info`, `debug`, `trace`) or a comma-separated list of `LEVEL` and `TARGET=LEVEL` directives, `TARGET` being `xhsa` or a path under it ([`log_filter`]) | `warn` |
//! | `XHSA_RESERVE` | | `CUS@LEVEL` ([`crate::partition`]): queues of level ≥ `LEVEL` run on a reserved partition of about `CUS` CUs (whole XCCs on a multi-XCC GPU), every other queue on the rest; `auto@LEVEL`: sized live from measured demand; `none`: one partition, the whole GPU; every process sharing a GPU should use the same value | config, else `auto@1` (the processes above the default level) |
//! | `XHSA_POLICY` | | `strict`, `weights:HIGH:LOW`, `slo:K` or `cap:PCT` ([`crate::sharing`]): how this process's lower-priority queues share the GPU with higher work | config, else `slo:1.2` |
//! | `XHSA_BOARD_DIR` | | directory of the per-GPU boards (the board (`xhsa_board::shared`)); every process that shares a GPU must use the same one | `/dev/shm` |
//! | `XHSA_TRACE` | | a file path (`%p`: the process id, `%%`: `%`): write a trace of this process there (libxhsa's `trace`, `docs/trace.md`); read by libxhsa's `trace::settings` | none: no trace |
//! | `XHSA_TRACE_BUFFER` | | integer `16..=16777216`: events per trace buffer (libxhsa's `trace::settings`) | 65536 |
//!
//! When a variable and its alias are both set, the `XHSA_` one is used (and the alias reported
//! if it differs). The passthrough list is the union of the environment's and the config file's.
//!
//! # Config file (`XHSA_CONFIG`)
//!
//! ```toml
//! priority = 0                      # default level of every process, -256..=255
//! window = 2                        # W, 1..=1024
//! passthrough_libs = ["libhipblas.so", "librocblas.so.4"]   # or one comma-separated string
//! board_dir = "/var/run/xhsa"      # directory of the per-GPU boards (XHSA_BOARD_DIR wins); all
//!                                   #   processes sharing a GPU, in any container, use the same one
//! board_group = "mlusers"           # share the per-GPU board with this group (name or gid);
//!                                   #   without it each user's processes have their own board
//! control_max_level = 0             # the highest level `xhsactl set-priority` may give this
//!                                   #   process's queues when a non-root user asks, -256..=255
//!                                   #   (default 255: no cap); root is never capped
//! reserve = "20@10"                 # levels >= 10 run on 20 reserved CUs, the rest on the
//!                                   #   other CUs (XHSA_RESERVE wins)
//! policy = "weights:3:1"            # held queues still get a quarter of the time
//!                                   #   (XHSA_POLICY wins; crate::sharing)
//!
//! [[process]]                       # per-process-name rule; the first match wins
//! name = "inference-server"         # the executable's file name or the process name (comm);
//! priority = 10                     #   a name containing '/' is compared with the full exe path
//!
//! [[library]]                       # per-library rule, for queues a library creates; first match wins
//! name = "librccl.so"               # matched like the passthrough list (file name, versions tolerated)
//! priority = 20
//! ```
//!
//! Top-level keys: `priority`, `window`, `passthrough_libs`, `board_dir`, `board_group`, `control_max_level`, `reserve`, `policy`, `process`, `library`; rule keys:
//! `name`, `priority`. An unknown key is reported with the accepted ones and ignored; a rule
//! without a valid `name` and `priority` is reported and skipped; a file that is not TOML is
//! reported and ignored as a whole.
//!
//! # Priority precedence
//!
//! A queue's [`Priority`] is a level and a stream priority ([`crate::priority`]). The
//! level comes from the first of:
//!
//! 1. `XHSA_PRIORITY` (or its alias): whoever launched this process stated its priority outright;
//! 2. the first `[[library]]` rule matching the library that created the queue (the most specific
//!    rule of the site-wide file);
//! 3. the first `[[process]]` rule matching the process;
//! 4. the config file's top-level `priority`;
//! 5. 0, XSched's default.
//!
//! The stream priority is what the application set with `hsa_amd_queue_set_priority` (HIP's
//! stream priorities; `NORMAL` until set). It orders the queues *within* their level and can never
//! lift a queue above another process's higher level: the operator keeps the order between
//! processes, and HIP stream priorities keep their meaning inside one.
//!
//! One concern per file: [`env`] (the variables), [`file`] (the config file), [`log_filter`]
//! (`XHSA_LOG`), [`identity`] (who the process is), [`priority`] (which level a queue gets),
//! [`settings`] (all of them together), [`error`] (what could not be used).
#![forbid(unsafe_code)]

pub mod env;
pub mod error;
pub mod file;
pub mod identity;
pub mod log_filter;
pub mod priority;
pub mod settings;

pub use env::*;
pub use error::*;
pub use file::*;
pub use identity::*;
pub use log_filter::*;
pub use priority::*;
pub use settings::*;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::priority::{Level, Priority, StreamPriority};

    use crate::window_size::WindowSize;
    use proptest::prelude::*;
    use std::ffi::OsString;
    use std::path::{Path, PathBuf};

    use crate::settings::lookup_in as env;

    fn lvl(n: i64) -> Level {
        Level::new(n).unwrap()
    }

    #[test]
    fn empty_environment_gives_defaults() {
        let (e, errors) = EnvSettings::from_lookup(env(&[]));
        assert!(errors.is_empty());
        assert_eq!(e, EnvSettings::default());
        let (s, errors) = Settings::load(env(&[]), |_| panic!("no file to read"));
        assert!(errors.is_empty());
        assert_eq!(s.window, WindowSize::DEFAULT);
        assert!(
            !s.disable && s.passthrough.is_empty() && s.env_priority.is_none() && s.log.is_none()
        );
    }

    #[test]
    fn valid_environment() {
        let (e, errors) = EnvSettings::from_lookup(env(&[
            ("XHSA_PRIORITY", " -12 "),
            ("XHSA_WINDOW", "8"),
            ("XHSA_DISABLE", "Yes"),
            ("XHSA_PASSTHROUGH_LIBS", "libhipblas.so, librocblas.so.4,,"),
            ("XHSA_CONFIG", "/etc/xhsa.toml"),
            ("XHSA_LOG", "xhsa=debug"),
        ]));
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(e.priority, Some(lvl(-12)));
        assert_eq!(e.window.map(WindowSize::get), Some(8));
        assert!(e.disable);
        assert_eq!(e.passthrough_libs.entries(), &["libhipblas.so", "librocblas.so.4"]);
        assert_eq!(e.config_path.as_deref(), Some(Path::new("/etc/xhsa.toml")));
        assert_eq!(e.log.as_deref(), Some("xhsa=debug"));
    }

    #[test]
    fn policy_from_environment_or_config_and_bad_forms_named() {
        use crate::sharing::Sharing;
        let file = |text: &'static str| move |_: &Path| Ok(text.to_string());
        let (s, errors) = Settings::load(env(&[]), |_| panic!("no file"));
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(s.policy, Sharing::Slo { target_pct: 120 }, "the default");
        assert_eq!(s.policy, crate::sharing::DEFAULT_POLICY);
        let (s, errors) = Settings::load(
            env(&[("XHSA_CONFIG", "/c.toml"), ("XHSA_POLICY", "cap:40")]),
            file("policy = \"weights:3:1\""),
        );
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(s.policy, Sharing::Cap { pct: 40 }, "the environment wins");
        let (s, _) =
            Settings::load(env(&[("XHSA_CONFIG", "/c.toml")]), file("policy = \"slo:1.2\""));
        assert_eq!(s.policy, Sharing::Slo { target_pct: 120 });
        let (s, errors) = Settings::load(env(&[("XHSA_POLICY", "strict")]), |_| panic!("no file"));
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(s.policy, Sharing::Strict, "strict when asked");
        let (s, errors) = Settings::load(env(&[("XHSA_POLICY", "fair")]), |_| panic!("no file"));
        assert_eq!(s.policy, crate::sharing::DEFAULT_POLICY);
        let text = errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n");
        assert!(
            text.starts_with("XHSA_POLICY=\"fair\": expected strict, weights:HIGH:LOW"),
            "{text}"
        );
        assert!(text.contains("else the default (slo:1.2x)"), "{text}");
        let (s, errors) = Settings::load(env(&[("XHSA_CONFIG", "/c.toml")]), file("policy = 3"));
        assert_eq!(s.policy, crate::sharing::DEFAULT_POLICY);
        assert!(errors[0].to_string().contains("/c.toml: policy"), "{errors:?}");
        assert!(errors[0].to_string().contains("slo:K"), "{errors:?}");
    }

    #[test]
    fn reserve_from_environment_or_config_and_bad_forms_named() {
        use crate::partition::Reserve;
        let file = |text: &'static str| move |_: &Path| Ok(text.to_string());
        let (s, errors) = Settings::load(env(&[("XHSA_RESERVE", "20@10")]), |_| panic!("no file"));
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(s.reserve, Reserve::parse("20@10"));
        let (s, errors) = Settings::load(env(&[]), |_| panic!("no file"));
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(s.reserve, Reserve::parse("auto@1"), "the default");
        assert_eq!(s.reserve, Some(crate::partition::DEFAULT_RESERVE));
        for off in ["none", " Off "] {
            let (s, errors) = Settings::load(env(&[("XHSA_RESERVE", off)]), |_| panic!("no file"));
            assert!(errors.is_empty(), "{errors:?}");
            assert_eq!(s.reserve, None, "{off}: one partition");
        }
        let (s, _) = Settings::load(
            env(&[("XHSA_CONFIG", "/c.toml"), ("XHSA_RESERVE", "none")]),
            file("reserve = \"40@5\""),
        );
        assert_eq!(s.reserve, None, "the environment's none wins over the file");
        let (s, _) = Settings::load(env(&[("XHSA_CONFIG", "/c.toml")]), file("reserve = \"none\""));
        assert_eq!(s.reserve, None, "the file's none");
        let (s, errors) =
            Settings::load(env(&[("XHSA_CONFIG", "/c.toml")]), file("reserve = \"40@5\""));
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(s.reserve, Reserve::parse("40@5"));
        let (s, _) = Settings::load(
            env(&[("XHSA_CONFIG", "/c.toml"), ("XHSA_RESERVE", "20@10")]),
            file("reserve = \"40@5\""),
        );
        assert_eq!(s.reserve, Reserve::parse("20@10"), "the environment wins");
        let (s, errors) = Settings::load(env(&[("XHSA_RESERVE", "20")]), |_| panic!("no file"));
        assert_eq!(s.reserve, Some(crate::partition::DEFAULT_RESERVE));
        let text = errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n");
        assert!(text.starts_with("XHSA_RESERVE=\"20\": expected CUS@LEVEL"), "{text}");
        assert!(text.contains("or none (one partition, the whole GPU)"), "{text}");
        assert!(text.contains("else the default (auto@1)"), "{text}");
        let (s, errors) = Settings::load(env(&[("XHSA_CONFIG", "/c.toml")]), file("reserve = 20"));
        assert_eq!(s.reserve, Some(crate::partition::DEFAULT_RESERVE));
        assert!(errors[0].to_string().contains("/c.toml: reserve"), "{errors:?}");
        assert!(errors[0].to_string().contains("CUS@LEVEL"), "{errors:?}");
    }

    #[test]
    fn log_filter_accepts_levels_and_xhsa_target_lists() {
        assert_eq!(log_filter(None), ("warn".to_string(), None));
        assert_eq!(log_filter(Some("  ")), ("warn".to_string(), None), "blank counts as unset");
        for (given, installed) in [
            ("info", "info"),
            ("DEBUG", "DEBUG"),
            ("off", "off"),
            (" warn , xhsa::scheduler=debug ,", "warn,xhsa::scheduler=debug"),
            ("xhsa=trace", "xhsa=trace"),
            ("xhsa::entry::queues = Info", "xhsa::entry::queues=Info"),
        ] {
            let (filter, error) = log_filter(Some(given));
            assert_eq!(error, None, "{given:?}");
            assert_eq!(filter, installed);
            assert!(
                tracing_subscriber::EnvFilter::try_new(&filter).is_ok(),
                "{filter:?} is a valid EnvFilter"
            );
        }
    }

    #[test]
    fn log_filter_refuses_what_would_silence_libxhsa_and_falls_back_to_warn() {
        // What EnvFilter itself takes (as a target name): the reason for this check.
        assert!(tracing_subscriber::EnvFilter::try_new("infoo").is_ok());
        for (given, problem) in [
            ("infoo", "\"infoo\" is not a level"),
            ("info,debugg", "\"debugg\" is not a level"),
            ("xhsa", "\"xhsa\" is not a level"),
            ("3", "\"3\" is not a level"),
            ("xhsa=verbose", "\"verbose\" is not a level"),
            ("xhs=debug", "\"xhs\" is not xhsa or a path under it"),
            ("hip=info", "\"hip\" is not xhsa or a path under it"),
            ("xhsa::=info", "is not xhsa or a path under it"),
            ("xhsa[queue]=debug", "is not xhsa or a path under it"),
            ("=info", "\"\" is not xhsa or a path under it"),
            (" , ", "no directive"),
        ] {
            let (filter, error) = log_filter(Some(given));
            assert_eq!(filter, "warn", "{given:?}");
            let Some(e) = error else { panic!("{given:?} accepted") };
            let text = e.to_string();
            assert!(
                text.starts_with(&format!("XHSA_LOG={given:?}: ")),
                "names the variable and the value: {text}"
            );
            assert!(text.contains(problem), "{given:?}: {text}");
            assert!(
                text.contains("accepted: a level (off, error, warn, info, debug, trace"),
                "names the accepted forms: {text}"
            );
            assert!(text.ends_with("; using warn"), "{text}");
        }
    }

    #[test]
    fn board_place_settings() {
        let (s, errors) = Settings::load(env(&[]), |_| panic!("no file"));
        assert!(errors.is_empty());
        assert_eq!(s.board_dir, PathBuf::from("/dev/shm"));
        assert_eq!(s.config.board_group, None);
        let (s, _) = Settings::load(env(&[("XHSA_BOARD_DIR", "/run/xhsa")]), |_| panic!("no file"));
        assert_eq!(s.board_dir, PathBuf::from("/run/xhsa"));
        let (c, errors) = Config::parse("board_dir = \"/srv/xhsa\"", "f");
        assert!(errors.is_empty());
        assert_eq!(
            Settings::combine(EnvSettings::default(), c.clone()).board_dir,
            PathBuf::from("/srv/xhsa")
        );
        let env_dir = EnvSettings { board_dir: Some("/run/xhsa".into()), ..EnvSettings::default() };
        assert_eq!(
            Settings::combine(env_dir, c).board_dir,
            PathBuf::from("/run/xhsa"),
            "the environment wins"
        );
        for bad in ["board_dir = \"relative/dir\"", "board_dir = 3", "board_dir = \"\""] {
            let (c, errors) = Config::parse(bad, "f");
            assert_eq!(c.board_dir, None, "{bad}");
            assert!(errors[0].to_string().contains("absolute directory path"), "{}", errors[0]);
        }
        let (c, errors) = Config::parse("board_group = \"mlusers\"", "f");
        assert!(errors.is_empty());
        assert_eq!(c.board_group, Some(GroupSpec::Name("mlusers".into())));
        let (c, _) = Config::parse("board_group = 1001", "f");
        assert_eq!(c.board_group, Some(GroupSpec::Id(1001)));
        let (c, errors) = Config::parse("control_max_level = -3", "f");
        assert!(errors.is_empty());
        assert_eq!(c.control_max_level, Some(lvl(-3)));
        let capped = Settings::combine(EnvSettings::default(), c);
        assert_eq!(capped.control_allows(1000, lvl(-3)), Ok(()));
        assert_eq!(
            capped.control_allows(1000, lvl(-2)),
            Err(lvl(-3)),
            "a non-root user above the cap"
        );
        assert_eq!(capped.control_allows(0, lvl(255)), Ok(()), "root is never capped");
        let open = Settings::combine(EnvSettings::default(), Config::default());
        assert_eq!(open.control_allows(1000, lvl(255)), Ok(()), "no cap unless configured");
        for bad in ["control_max_level = 256", "control_max_level = \"high\""] {
            let (c, errors) = Config::parse(bad, "f");
            assert_eq!(c.control_max_level, None, "{bad}");
            assert!(
                errors[0].to_string().contains("-256..=255")
                    || errors[0].to_string().contains("expected"),
                "{}",
                errors[0]
            );
        }
        for bad in ["board_group = -1", "board_group = \"\"", "board_group = [1]"] {
            let (c, errors) = Config::parse(bad, "f");
            assert_eq!(c.board_group, None, "{bad}");
            assert_eq!(errors.len(), 1, "{bad}");
            assert!(
                errors[0].to_string().contains("group name (string) or a numeric gid"),
                "{}",
                errors[0]
            );
        }
    }

    #[test]
    fn priority_range_is_xscheds() {
        for (text, level) in [
            ("-256", Some(-256)),
            ("255", Some(255)),
            ("+3", Some(3)),
            ("0", Some(0)),
            ("256", None),
            ("-257", None),
        ] {
            let (e, errors) = EnvSettings::from_lookup(env(&[("XHSA_PRIORITY", text)]));
            assert_eq!(e.priority, level.map(lvl), "{text}");
            assert_eq!(errors.is_empty(), level.is_some(), "{text}");
        }
    }

    #[test]
    fn malformed_values_are_reported_and_ignored() {
        let (e, errors) = EnvSettings::from_lookup(env(&[
            ("XHSA_PRIORITY", "high"),
            ("XHSA_WINDOW", "0"),
            ("XHSA_DISABLE", "maybe"),
        ]));
        assert_eq!(e, EnvSettings::default());
        let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(text.len(), 3, "{text:?}");
        assert_eq!(
            text[0],
            "XHSA_PRIORITY=\"high\": expected an integer in -256..=255 (higher is more urgent); \
             using the config file's priority, else 0"
        );
        assert_eq!(
            text[1],
            "XHSA_WINDOW=\"0\": expected an integer in 1..=1024; using the config file's window, else 2"
        );
        assert!(text[2]
            .starts_with("XHSA_DISABLE=\"maybe\": expected one of 0, 1, true, false, yes, no"));
        for bad in ["1025", "-1", "2.5", "2 3", "0x10", "99999999999999999999999"] {
            let (e, errors) = EnvSettings::from_lookup(env(&[("XHSA_WINDOW", bad)]));
            assert_eq!((e.window, errors.len()), (None, 1), "{bad}");
        }
    }

    #[test]
    fn empty_values_count_as_unset() {
        let (e, errors) = EnvSettings::from_lookup(env(&[
            ("XHSA_PRIORITY", ""),
            ("XHSA_WINDOW", "  "),
            ("XHSA_CONFIG", ""),
        ]));
        assert!(errors.is_empty());
        assert_eq!(e, EnvSettings::default());
    }

    #[test]
    fn bools() {
        for t in ["1", "true", "TRUE", "yes", " Yes "] {
            assert_eq!(parse_bool(t), Some(true), "{t}");
        }
        for f in ["0", "false", "No", "no"] {
            assert_eq!(parse_bool(f), Some(false), "{f}");
        }
        for bad in ["", "2", "on", "y", "truee"] {
            assert_eq!(parse_bool(bad), None, "{bad}");
        }
    }

    #[test]
    fn aliases() {
        let (e, errors) = EnvSettings::from_lookup(env(&[
            ("XSCHED_AUTO_XQUEUE_PRIORITY", "7"),
            ("XSCHED_PASSTHROUGH_LIBS", "librccl.so"),
        ]));
        assert!(errors.is_empty());
        assert_eq!(e.priority, Some(lvl(7)));
        assert_eq!(e.passthrough_libs.entries(), &["librccl.so"]);
        // Both set: XHSA_ wins, a differing alias is reported.
        let (e, errors) = EnvSettings::from_lookup(env(&[
            ("XHSA_PRIORITY", "1"),
            ("XSCHED_AUTO_XQUEUE_PRIORITY", "7"),
        ]));
        assert_eq!(e.priority, Some(lvl(1)));
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].setting, "XSCHED_AUTO_XQUEUE_PRIORITY");
        assert!(errors[0].to_string().contains("XHSA_PRIORITY is also set"));
        let (_, errors) = EnvSettings::from_lookup(env(&[
            ("XHSA_PRIORITY", "1"),
            ("XSCHED_AUTO_XQUEUE_PRIORITY", " 1"),
        ]));
        assert!(errors.is_empty(), "equal values are no conflict");
        // A malformed alias names the alias.
        let (e, errors) = EnvSettings::from_lookup(env(&[("XSCHED_AUTO_XQUEUE_PRIORITY", "300")]));
        assert_eq!(e.priority, None);
        assert_eq!(errors[0].setting, "XSCHED_AUTO_XQUEUE_PRIORITY");
    }

    #[cfg(unix)]
    #[test]
    fn non_utf8_values() {
        use std::os::unix::ffi::OsStringExt;
        let bad = OsString::from_vec(vec![b'1', 0xff]);
        let bad2 = bad.clone();
        let (e, errors) = EnvSettings::from_lookup(move |k| match k {
            "XHSA_WINDOW" => Some(bad.clone()),
            "XHSA_CONFIG" => Some(bad2.clone()),
            _ => None,
        });
        assert_eq!(e.window, None);
        assert_eq!(errors.len(), 1);
        assert!(errors[0].problem.contains("UTF-8"));
        assert!(e.config_path.is_some(), "a path need not be UTF-8");
    }

    const FULL: &str = r#"
        priority = -3
        window = 4
        passthrough_libs = ["libhipblas.so", "librocblas.so.4, libMIOpen"]

        [[process]]
        name = "inference-server"
        priority = 10

        [[process]]
        name = "/usr/bin/python3.10"
        priority = 5

        [[library]]
        name = "librccl.so"
        priority = 20
    "#;

    #[test]
    fn config_full() {
        let (c, errors) = Config::parse(FULL, "xhsa.toml");
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(c.priority, Some(lvl(-3)));
        assert_eq!(c.window.map(WindowSize::get), Some(4));
        assert_eq!(
            c.passthrough_libs.entries(),
            &["libhipblas.so", "librocblas.so.4", "libMIOpen"]
        );
        assert_eq!(
            c.process_rules,
            vec![
                Rule { name: "inference-server".into(), priority: lvl(10) },
                Rule { name: "/usr/bin/python3.10".into(), priority: lvl(5) }
            ]
        );
        assert_eq!(c.library_rules, vec![Rule { name: "librccl.so".into(), priority: lvl(20) }]);
        let (c, errors) = Config::parse("passthrough_libs = \"a.so, b.so\"", "x");
        assert!(errors.is_empty());
        assert_eq!(c.passthrough_libs.entries(), &["a.so", "b.so"]);
        assert_eq!(Config::parse("", "x"), (Config::default(), vec![]));
    }

    #[test]
    fn config_unknown_keys_name_the_key_and_the_accepted_ones() {
        let (c, errors) = Config::parse(
            "windw = 3\npriority = 1\n[[process]]\nname = \"a\"\npriority = 2\nnice = 1\n",
            "/etc/xhsa.toml",
        );
        assert_eq!(c.priority, Some(lvl(1)));
        assert_eq!(c.process_rules.len(), 1, "the rule's valid keys are still used");
        let mut text: Vec<String> = errors.iter().map(ToString::to_string).collect();
        text.sort();
        assert_eq!(text.len(), 2);
        assert_eq!(
            text[1],
            "/etc/xhsa.toml: windw=\"3\": unknown key `windw`; accepted keys: `priority`, `window`, \
             `passthrough_libs`, `board_dir`, `board_group`, `control_max_level`, `reserve`, `policy`, `process`, `library`; ignoring it"
        );
        assert_eq!(
            text[0],
            "/etc/xhsa.toml: process[0].nice=\"1\": unknown key `nice`; accepted keys: `name`, `priority`; ignoring it"
        );
    }

    #[test]
    fn config_malformed_values() {
        let text = r#"
            priority = 300
            window = "two"
            passthrough_libs = [1, "ok.so"]
            [[process]]
            name = "a"
            [[process]]
            priority = 1
            [[process]]
            name = ""
            priority = 1
            [[library]]
            name = "l.so"
            priority = -999
            [[library]]
            name = "good.so"
            priority = 4
        "#;
        let (c, errors) = Config::parse(text, "f");
        assert_eq!(c.priority, None);
        assert_eq!(c.window, None);
        assert_eq!(c.passthrough_libs.entries(), &["ok.so"]);
        assert!(c.process_rules.is_empty());
        assert_eq!(c.library_rules, vec![Rule { name: "good.so".into(), priority: lvl(4) }]);
        // Keys are visited in name order; entries of an array in file order.
        let settings: Vec<&str> = errors.iter().map(|e| e.setting.as_str()).collect();
        assert_eq!(
            settings,
            [
                "f: library[0].priority",
                "f: passthrough_libs[0]",
                "f: priority",
                "f: process[0]",
                "f: process[1]",
                "f: process[2].name",
                "f: window",
            ]
        );
        assert!(errors[3].problem.contains("missing `priority`"));
        assert!(errors[4].problem.contains("missing `name`"));
        // Wrong shapes.
        let (c, errors) = Config::parse("process = 3\nlibrary = [1]\npassthrough_libs = 2", "f");
        assert!(
            c.process_rules.is_empty()
                && c.library_rules.is_empty()
                && c.passthrough_libs.is_empty()
        );
        assert_eq!(errors.len(), 3);
    }

    #[test]
    fn config_syntax_errors_and_unreadable_files() {
        let (c, errors) = Config::parse("priority = = 3", "/etc/xhsa.toml");
        assert_eq!(c, Config::default());
        assert_eq!(errors.len(), 1);
        assert!(errors[0].to_string().starts_with("/etc/xhsa.toml: not a valid TOML file"));
        assert!(errors[0].fallback.contains("ignoring the whole file"));
        let (c, errors) = Config::load(Path::new("/nope.toml"), |_| {
            Err(std::io::Error::from(std::io::ErrorKind::NotFound))
        });
        assert_eq!(c, Config::default());
        assert!(errors[0]
            .to_string()
            .starts_with("XHSA_CONFIG=/nope.toml: cannot read the config file"));
    }

    #[test]
    fn settings_combine_env_over_config() {
        let read = |p: &Path| {
            assert_eq!(p, Path::new("/etc/xhsa.toml"));
            Ok(FULL.to_string())
        };
        let (s, errors) = Settings::load(
            env(&[("XHSA_CONFIG", "/etc/xhsa.toml"), ("XHSA_PASSTHROUGH_LIBS", "librccl.so")]),
            read,
        );
        assert!(errors.is_empty());
        assert_eq!(s.window.get(), 4, "config window when the environment has none");
        assert_eq!(
            s.passthrough.entries(),
            &["librccl.so", "libhipblas.so", "librocblas.so.4", "libMIOpen"]
        );
        let (s, _) =
            Settings::load(env(&[("XHSA_CONFIG", "/etc/xhsa.toml"), ("XHSA_WINDOW", "16")]), read);
        assert_eq!(s.window.get(), 16, "environment over config");
        let (s, _) = Settings::load(
            env(&[("XHSA_CONFIG", "/etc/xhsa.toml"), ("XHSA_WINDOW", "junk")]),
            read,
        );
        assert_eq!(s.window.get(), 4, "a malformed variable falls back to the config");
        let (s, errors) = Settings::load(
            env(&[("XHSA_CONFIG", "/etc/xhsa.toml"), ("XHSA_DISABLE", "1")]),
            |_| panic!("not read"),
        );
        assert!(s.disable && errors.is_empty());
        assert_eq!(s.config, Config::default());
    }

    #[test]
    fn process_identity_matching() {
        let id = ProcessIdentity {
            exe: Some("/usr/bin/python3.10".into()),
            comm: Some("inference-serve".into()),
        };
        assert!(id.matches("python3.10"));
        assert!(id.matches("/usr/bin/python3.10"));
        assert!(!id.matches("/opt/bin/python3.10"));
        assert!(!id.matches("python3"));
        assert!(id.matches("inference-serve"));
        assert!(id.matches("inference-server"), "comm is truncated to 15 bytes");
        assert!(!id.matches("inference-serv"));
        let short = ProcessIdentity { exe: None, comm: Some("app".into()) };
        assert!(short.matches("app") && !short.matches("apple"));
        assert!(!ProcessIdentity::default().matches("app"));
    }

    #[test]
    fn precedence() {
        let (config, errors) = Config::parse(FULL, "x");
        assert!(errors.is_empty());
        let server = ProcessIdentity { exe: Some("/srv/inference-server".into()), comm: None };
        let other = ProcessIdentity { exe: Some("/usr/bin/other".into()), comm: None };
        let rccl = Some("/opt/rocm/lib/librccl.so.1.0.60102");
        let inputs = |env, process, library| PriorityInputs {
            stream: StreamPriority::Normal,
            env,
            config: &config,
            process,
            library,
        };

        // 1. The environment wins over everything in the file.
        assert_eq!(
            resolve_level(&inputs(Some(lvl(-1)), &server, rccl)),
            (lvl(-1), PrioritySource::Environment)
        );
        // 2. Library rule over process rule.
        assert_eq!(
            resolve_level(&inputs(None, &server, rccl)),
            (lvl(20), PrioritySource::LibraryRule("librccl.so".into()))
        );
        assert_eq!(
            resolve_level(&inputs(
                None,
                &server,
                Some("file:///opt/rocm/lib/librccl.so.1#offset=1&size=2")
            ))
            .0,
            lvl(20)
        );
        // 3. Process rule.
        let hip = Some("/opt/rocm/lib/libamdhip64.so.6");
        assert_eq!(
            resolve_level(&inputs(None, &server, hip)),
            (lvl(10), PrioritySource::ProcessRule("inference-server".into()))
        );
        assert_eq!(resolve_level(&inputs(None, &server, None)).0, lvl(10));
        // 4. Config default.
        assert_eq!(
            resolve_level(&inputs(None, &other, hip)),
            (lvl(-3), PrioritySource::ConfigDefault)
        );
        // 5. Built-in default.
        let empty = Config::default();
        let i = PriorityInputs {
            stream: StreamPriority::High,
            env: None,
            config: &empty,
            process: &other,
            library: rccl,
        };
        assert_eq!(resolve_level(&i), (Level::DEFAULT, PrioritySource::BuiltinDefault));
        assert_eq!(effective_priority(&i), Priority::new(Level::DEFAULT, StreamPriority::High));

        // The stream priority orders within a level, never across.
        let s = Settings { env_priority: None, config: config.clone(), ..Settings::default() };
        let server_low = s.priority_for(StreamPriority::Low, &server, None);
        let other_high = s.priority_for(StreamPriority::High, &other, None);
        assert!(server_low > other_high);
        assert!(s.priority_for(StreamPriority::High, &server, None) > server_low);
    }

    proptest! {
        /// Arbitrary environments never panic, and every variable set to something unusable is
        /// reported under its own name.
        #[test]
        fn arbitrary_environment_never_panics(
            priority in proptest::option::of(".{0,12}"),
            window in proptest::option::of(".{0,12}"),
            disable in proptest::option::of(".{0,6}"),
            libs in proptest::option::of(".{0,40}"),
        ) {
            let mut vars = Vec::new();
            if let Some(v) = &priority { vars.push(("XHSA_PRIORITY", v.as_str())); }
            if let Some(v) = &window { vars.push(("XHSA_WINDOW", v.as_str())); }
            if let Some(v) = &disable { vars.push(("XHSA_DISABLE", v.as_str())); }
            if let Some(v) = &libs { vars.push(("XHSA_PASSTHROUGH_LIBS", v.as_str())); }
            let (e, errors) = EnvSettings::from_lookup(env(&vars));
            if let Some(v) = &priority {
                let ok = v.trim().is_empty() || parse_level(v).is_some();
                prop_assert_eq!(ok, !errors.iter().any(|e| e.setting == "XHSA_PRIORITY"));
                prop_assert_eq!(e.priority, parse_level(v));
            }
            if let Some(v) = &window {
                let ok = v.trim().is_empty() || parse_window(v).is_some();
                prop_assert_eq!(ok, !errors.iter().any(|e| e.setting == "XHSA_WINDOW"));
            }
            prop_assert!(!errors.iter().any(|e| e.setting == "XHSA_PASSTHROUGH_LIBS"));
        }

        /// Arbitrary config text never panics.
        #[test]
        fn arbitrary_config_never_panics(text in "[a-z_\\[\\]=\" 0-9\\n,.-]{0,80}") {
            let _ = Config::parse(&text, "fuzz");
        }

        #[test]
        fn integer_priorities_in_range_parse(n in -256i64..=255) {
            let (e, errors) = EnvSettings::from_lookup(env(&[("XHSA_PRIORITY", &n.to_string())]));
            prop_assert!(errors.is_empty());
            prop_assert_eq!(e.priority.map(Level::get), Some(n as i32));
        }
    }
}
