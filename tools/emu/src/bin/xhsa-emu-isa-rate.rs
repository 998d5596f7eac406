//! `xhsa-emu-isa-rate CODE_OBJECT [--rounds N]`: the ISA interpreter's speed, in
//! wave-instructions per second on one core, for the kernels of `tools/emu/tests/isa/alu_loop.hip`
//! built into CODE_OBJECT (`hipcc --genco --offload-arch=gfx90a`). `./x bench` runs it. Each
//! figure is the median of the rounds; the ALU loops' results are checked against the CPU, so
//! a fast wrong interpreter does not print a rate.
//!
//! Not a test: it prints figures and asserts nothing about them.

use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use xhsa_emu::isa::host::{CodeObject, HostRig};

#[derive(Parser)]
#[command(
    name = "xhsa-emu-isa-rate",
    about = "The ISA interpreter's rate in wave-instructions per second (a benchmark: prints figures)"
)]
struct Args {
    /// Code object built from tools/emu/tests/isa/alu_loop.hip for gfx90a.
    code_object: std::path::PathBuf,
    /// Rounds per kernel; each figure is their median.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    rounds: u32,
    /// Run only the kernels whose name contains this (for profiling one of them).
    #[arg(long)]
    only: Option<String>,
}

/// The CPU's result of `isa_alu_loop` for work-item `t` (and of `isa_divergent_loop` for a
/// work-item that runs the loop).
fn alu_expected(t: u32, iters: u32) -> u32 {
    let mut x = t + 1;
    for k in 0..iters {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        x = x.wrapping_mul(2_654_435_761).wrapping_add(k);
    }
    x
}

/// The CPU's result of `isa_f64_loop` for work-item `t`, as the kernel computes it (each step
/// rounded once; `x * 0.25` is exact, so the compiler's fused `y + x * 0.25` is the same).
fn f64_expected(t: u32, iters: u32) -> f64 {
    let mut x = f64::from(t).mul_add(2f64.powi(-10), 1.0);
    let mut y = 0.5;
    for _ in 0..iters {
        x = x.mul_add(0.9990234375, 0.0078125);
        y += x * 0.25;
        y /= x + 1.0;
    }
    x + y
}

fn main() -> ExitCode {
    let args = Args::parse();
    let elf = match std::fs::read(&args.code_object) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("xhsa-emu-isa-rate: cannot read {}: {e}", args.code_object.display());
            return ExitCode::from(2);
        }
    };
    let code = match CodeObject::load(&elf) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("xhsa-emu-isa-rate: {}: {e} (expected a gfx90a code object built from tools/emu/tests/isa/alu_loop.hip)", args.code_object.display());
            return ExitCode::from(2);
        }
    };
    let mut rig = HostRig::new(code);
    let n = 64 * 256usize;
    let out = rig.alloc(n * 8);
    let table = rig.upload(&[1u32, 2, 3, 4]);
    /// A CPU check of the output: the first wrong work-item.
    type Check = fn(&[u32]) -> Option<usize>;
    /// Label, kernel, arguments, grid, workgroup, CPU check.
    type Case<'a> = (&'a str, &'a str, Vec<u64>, u32, u16, Option<Check>);
    let alu: Check =
        |got| got.iter().enumerate().position(|(t, &g)| g != alu_expected(t as u32, 200));
    let divergent: Check = |got| {
        got.iter().enumerate().position(|(t, &g)| {
            g != if t % 3 == 0 { t as u32 + 1 } else { alu_expected(t as u32, 200) }
        })
    };
    let f64_check: Check = |got| {
        got.chunks_exact(2).enumerate().position(|(t, p)| {
            (u64::from(p[0]) | u64::from(p[1]) << 32) != f64_expected(t as u32, 1000).to_bits()
        })
    };
    let cases: [Case; 6] = [
        (
            "ALU loop (xorshift/multiply, full EXEC)",
            "isa_alu_loop",
            vec![out, 200],
            n as u32,
            256,
            Some(alu),
        ),
        (
            "ALU loop, a third of the lanes off (partial EXEC)",
            "isa_divergent_loop",
            vec![out, 200],
            n as u32,
            256,
            Some(divergent),
        ),
        ("scalar ALU loop", "isa_salu_loop", vec![out, 20_000], 64 * 32, 64, None),
        (
            "vector ALU loop (32-bit logic, shifts, adds)",
            "isa_valu_loop",
            vec![out, 20_000],
            64 * 32,
            64,
            None,
        ),
        ("scalar load loop", "isa_smem_loop", vec![out, table, 20_000], 64 * 32, 64, None),
        (
            "double-precision loop (add, mul, fma, division)",
            "isa_f64_loop",
            vec![out, 1000],
            64 * 32,
            64,
            Some(f64_check),
        ),
    ];
    let mut failed = false;
    for (label, kernel, kargs, grid, wg, check) in cases {
        if args.only.as_deref().is_some_and(|o| !kernel.contains(o)) {
            continue;
        }
        let mut rates = Vec::new();
        let mut instructions = 0;
        for _ in 0..args.rounds {
            let t = Instant::now();
            match rig.run(kernel, &kargs, [grid, 1, 1], [wg, 1, 1]) {
                Ok(s) => {
                    rates.push(s.instructions as f64 / t.elapsed().as_secs_f64());
                    instructions = s.instructions;
                }
                Err(e) => {
                    eprintln!("xhsa-emu-isa-rate: {kernel}: {e}");
                    failed = true;
                    break;
                }
            }
            if let Some(check) = check {
                let words = if kernel == "isa_f64_loop" { 2 } else { 1 };
                let got: Vec<u32> = rig.download(out, words * grid as usize);
                if let Some(t) = check(&got) {
                    eprintln!(
                        "xhsa-emu-isa-rate: {kernel}: wrong result for work-item {t}: {:#x}",
                        got[words * t]
                    );
                    failed = true;
                    break;
                }
            }
        }
        if rates.len() == args.rounds as usize {
            rates.sort_by(f64::total_cmp);
            let median = rates[rates.len() / 2];
            let goal = if kernel == "isa_alu_loop" { " (goal >= 20 M/s on one core)" } else { "" };
            println!(
                "ISA interpreter, {label}: {:.1} M wave-instructions/s{goal}, median of {} rounds of {instructions} wave-instructions{}",
                median / 1e6,
                args.rounds,
                if check.is_some() { ", results checked" } else { "" }
            );
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
