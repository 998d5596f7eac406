//! The conformance run (`./x conformance`): AMD's library test suites, as Debian packages them
//! (`tools/conformance/packages.txt`), on the emulated MI308X under ROCm 6.4 with `--isa gfx90a`,
//! natively and under libxhsa (`LD_PRELOAD`, `HSA_TOOLS_LIB`), a filtered selection of each
//! within a time limit (`tools/conformance/suites.txt`). A test that fails natively is an
//! emulator defect (a real gfx90a passes these suites); one that passes natively and fails under
//! libxhsa is a libxhsa defect. The contention run ([`contention`]) runs two suites at once on
//! one emulated GPU under libxhsa at a high and a low priority, and compares each with its solo
//! run. rocThrust's programs use Thrust's own driver ([`thrust`]); a sweep of a large program
//! runs a spread sample of its tests ([`sample`]). See docs/emulator.md, "Conformance run".

pub mod contention;
pub mod gtest;
pub mod isa_stats;
pub mod run;
pub mod sample;
pub mod suites;
pub mod table;
pub mod thrust;
