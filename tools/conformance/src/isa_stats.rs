//! The interpreter's work in a run, from the emulator's debug log (`XHSA_EMU_LOG=debug`): each
//! executed dispatch part logs `xhsa-emu: executed kernel=K ... instructions=N us=T` (N wave
//! instructions, T microseconds from the part's start to its end on an interpreter thread; newer
//! emulators add `cpu_us=C`, the interpreter thread's CPU time over the part).

use std::collections::BTreeMap;

#[derive(Debug, Default, Clone, PartialEq)]
pub struct IsaStats {
    /// Dispatch parts executed.
    pub parts: u64,
    /// Wave instructions executed.
    pub instructions: u64,
    /// Sum over parts of their time on an interpreter thread (µs; parts on two threads overlap).
    pub part_us: u64,
    /// Sum over parts of their interpreter thread's CPU time (µs; 0 when the log has none).
    pub cpu_us: u64,
    /// Per kernel: (instructions, µs), the largest first when listed.
    pub kernels: BTreeMap<String, (u64, u64)>,
}

fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let at = line.find(&format!(" {key}="))? + key.len() + 2;
    line[at..].split_whitespace().next()
}

impl IsaStats {
    /// Reads the `executed` lines of a debug log.
    pub fn parse(log: &str) -> IsaStats {
        let mut s = IsaStats::default();
        for line in log.lines().filter(|l| l.contains("xhsa-emu: executed")) {
            let (Some(n), Some(us)) = (
                field(line, "instructions").and_then(|v| v.parse::<u64>().ok()),
                field(line, "us").and_then(|v| v.parse::<u64>().ok()),
            ) else {
                continue;
            };
            s.parts += 1;
            s.instructions += n;
            s.part_us += us;
            s.cpu_us += field(line, "cpu_us").and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
            let k = field(line, "kernel").unwrap_or("?").to_string();
            let e = s.kernels.entry(k).or_default();
            e.0 += n;
            e.1 += us;
        }
        s
    }

    /// Wave instructions per second of part time (one interpreter thread's rate, averaged).
    pub fn rate(&self) -> f64 {
        if self.part_us == 0 {
            0.0
        } else {
            self.instructions as f64 / (self.part_us as f64 * 1e-6)
        }
    }

    /// Wave instructions per CPU second of the interpreter threads (what a loaded machine does
    /// not stretch); 0 when the log has no CPU times.
    pub fn cpu_rate(&self) -> f64 {
        if self.cpu_us == 0 {
            0.0
        } else {
            self.instructions as f64 / (self.cpu_us as f64 * 1e-6)
        }
    }

    /// The `n` kernels with the most instructions: (name, instructions, µs).
    pub fn top(&self, n: usize) -> Vec<(&str, u64, u64)> {
        let mut v: Vec<(&str, u64, u64)> =
            self.kernels.iter().map(|(k, &(i, us))| (k.as_str(), i, us)).collect();
        v.sort_by_key(|e| std::cmp::Reverse(e.1));
        v.truncate(n);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn executed_lines_are_summed_per_kernel() {
        let log = "2026-01-01T00:00:00Z DEBUG xhsa-emu: ALLOC_MEMORY_OF_GPU va 0x1\n\
                   2026-01-01T00:00:00Z DEBUG xhsa-emu: executed kernel=_ZL4fillPj part=0 parts=2 workgroups=2 waves=8 instructions=1000 us=10\n\
                   2026-01-01T00:00:00Z DEBUG xhsa-emu: executed kernel=_ZL4fillPj part=1 parts=2 workgroups=2 waves=8 instructions=3000 us=30 cpu_us=20\n\
                   2026-01-01T00:00:00Z DEBUG xhsa-emu: executed kernel=gemm workgroups=1 waves=4 instructions=500 us=5\n";
        let s = IsaStats::parse(log);
        assert_eq!((s.parts, s.instructions, s.part_us, s.cpu_us), (3, 4500, 45, 20));
        assert!((s.rate() - 1e8).abs() < 1.0, "{}", s.rate());
        assert!((s.cpu_rate() - 2.25e8).abs() < 1.0, "{}", s.cpu_rate());
        assert_eq!(s.top(1), vec![("_ZL4fillPj", 4000, 40)]);
    }
}
