//! xhsa-monitor: the one library behind `xhsa-top` and `xhsactl`, which see and steer every
//! libxhsa queue on a GPU through the per-GPU boards in shared memory (`docs/board.md`).
//!
//! What it is: readers and controllers of the boards, with thin front ends over them, the way
//! amdgpu_top keeps all device logic in one library —
//!
//! - [`snapshot`]: consistent copies (per-slot seqlock reads, never disturbing the writers) of
//!   every board in a directory, as GPUs → processes → queues;
//! - [`json`]: a snapshot as JSON (`xhsa-top --json`, `xhsactl list --json`);
//! - [`text`]: a snapshot as a plain table (`xhsa-top --once`, `xhsactl list`);
//! - [`metrics`]: the Prometheus text exposition and its small HTTP server (`xhsactl metrics`);
//! - [`control`]: requests to the owning processes (priority overrides, pause, resume) and the
//!   cleaning of boards whose processes died (`xhsactl`);
//! - [`config_check`]: `XHSA_CONFIG` files checked with libxhsa's own parser, with line and
//!   column (`xhsactl check-config`).
//!
//! What it is not: a scheduler or a daemon. It changes nothing itself: the owning process of a
//! queue applies every request (its libxhsa watcher reads the board's control words), and only
//! users who may write the board file (its owner, or its group) can send one.
//!
//! The terminal UI lives in the `xhsa-top` binary (`src/bin/xhsa-top.rs`, ratatui over
//! crossterm); `xhsactl` is `src/bin/xhsactl.rs`.
#![forbid(unsafe_code)]

pub mod config_check;
pub mod control;
pub mod json;
pub mod metrics;
pub mod snapshot;
pub mod text;

/// The board directory as libxhsa finds it: `XHSA_BOARD_DIR`, else `/dev/shm`.
pub fn default_board_dir() -> std::path::PathBuf {
    match std::env::var_os(xhsa_model::settings::config::ENV_BOARD_DIR) {
        Some(d) if !d.to_string_lossy().trim().is_empty() => std::path::PathBuf::from(d),
        _ => std::path::PathBuf::from(xhsa_model::settings::config::DEFAULT_BOARD_DIR),
    }
}
