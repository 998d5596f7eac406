//! The decoder against LLVM's disassembler: for random instruction words of every encoding
//! family, whenever LLVM accepts the words, the decoder must name the same instruction with the
//! same length (literal, DPP and SDWA words included).
//!
//! - gfx90a against llvm-mc-15 `-mcpu=gfx90a` (a fixed seed: about 6500 of the 21000 probes are
//!   valid instructions); skipped, with a message, when llvm-mc-15 is not installed.
//! - gfx942 against the ROCm 6.4 root's llvm-mc 21 `-mcpu=gfx942` (fewer probes, asked in large
//!   batches: a few seconds); needs the root (`./x setup`), as the other ROCm 6.4 tests do:
//!   without it the test fails and says so.
//!
//! llvm-mc's answers are kept in the tests' scratch directory (`target/tmp`), keyed by the
//! llvm-mc (its command line and `--version`), the CPU and the probes: a run with all three
//! unchanged compares the decoder with the answers llvm-mc gave before instead of asking it
//! again (about ten seconds, most of it llvm-mc-15's crashes and the reruns they cost).

mod support;

use std::ffi::OsString;
use std::process::Command;

use support::Fnv;
use xhsa_emu::isa::decode::decode_for;
use xhsa_emu::isa::target::Target;

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) as u32
    }
}

fn hex(words: &[u32]) -> String {
    words
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .map(|b| format!("0x{b:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// An llvm-mc to ask: its command line before the options, the CPU, and how many probes one
/// run takes.
struct Mc {
    cmd: Vec<OsString>,
    cpu: &'static str,
    batch: usize,
    /// The hash of the command line, its `--version` and the CPU: what the kept answers are
    /// keyed by besides the probes (see [`answers`]).
    id: Fnv,
}

impl Mc {
    fn new(cmd: Vec<OsString>, cpu: &'static str, batch: usize) -> Mc {
        let version = Command::new(&cmd[0])
            .args(&cmd[1..])
            .arg("--version")
            .output()
            .expect("run llvm-mc --version");
        let mut id = Fnv::default();
        for c in &cmd {
            id.feed(c.as_encoded_bytes());
            id.feed(b"\0");
        }
        id.feed(&version.stdout);
        id.feed(cpu.as_bytes());
        Mc { cmd, cpu, batch, id }
    }
}

/// [`llvm`]'s answers for `probes`, from the scratch directory when this llvm-mc was asked
/// about these probes for this CPU before (see the module's doc); asked and kept otherwise.
fn answers(mc: &Mc, probes: &[Vec<u32>]) -> Vec<Option<(String, usize)>> {
    let mut h = Fnv(mc.id.0);
    for p in probes {
        for w in p {
            h.feed(&w.to_le_bytes());
        }
        h.feed(b";");
    }
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("isa_decode-{}-{:016x}.txt", mc.cpu, h.0));
    let parse = |l: &str| -> Option<Option<(String, usize)>> {
        if l == "-" {
            return Some(None);
        }
        let (m, n) = l.split_once(' ')?;
        Some(Some((m.to_string(), n.parse().ok()?)))
    };
    if let Ok(text) = std::fs::read_to_string(&path) {
        // A file that does not parse or does not match the probes' count is asked again.
        if let Some(kept) =
            text.lines().map(parse).collect::<Option<Vec<_>>>().filter(|k| k.len() == probes.len())
        {
            return kept;
        }
    }
    let theirs = llvm(mc, probes);
    let text: String = theirs
        .iter()
        .map(|t| t.as_ref().map_or("-\n".to_string(), |(m, n)| format!("{m} {n}\n")))
        .collect();
    // Written whole, then renamed: a run stopped half-way leaves no partial file.
    let tmp = path.with_extension(format!("{}.tmp", std::process::id()));
    if std::fs::write(&tmp, text).is_ok() {
        let _ = std::fs::rename(&tmp, &path);
    }
    theirs
}

/// LLVM's view of one probe: Some((mnemonic without _e32/_e64/_sdwa/_dpp, bytes)) or None;
/// bytes is 0 when LLVM's re-encoding (`-show-encoding`) is not the probe's own bytes (it
/// re-encodes a literal that holds an inline value as the inline constant, say), so the length
/// it shows is not what it decoded.
fn llvm(mc: &Mc, probes: &[Vec<u32>]) -> Vec<Option<(String, usize)>> {
    // llvm-mc-15 crashes on some words (some MFMA and SDWA ones), losing its whole output
    // (stdout is buffered). Its warnings go to stderr unbuffered: after each probe's line comes
    // a line with an invalid word, whose warning says that llvm-mc got past the probe; a crash
    // is at the probe after the last such warning. That probe is left out and the probes
    // before and after it are asked again (two runs per crash; splitting into tenths had cost
    // twenty). Batches of `mc.batch`.
    if probes.is_empty() {
        return Vec::new();
    }
    if probes.len() > mc.batch {
        return probes.chunks(mc.batch).flat_map(|c| llvm(mc, c)).collect();
    }
    // Each probe is followed by two s_nop (room for an instruction the probe's last word
    // starts) and a marker (s_mov_b32 s101, s101), so the output splits per probe; probe k is
    // on line 2k + 1, its "got past" line (0xffffffff, invalid) on line 2k + 2.
    let marker = 0xBEE5_0065u32;
    let input: String = probes
        .iter()
        .map(|p| {
            format!(
                "{} {}\n{}\n",
                hex(p),
                hex(&[0xBF80_0000, 0xBF80_0000, marker]),
                hex(&[u32::MAX])
            )
        })
        .collect();
    let mut child = Command::new(&mc.cmd[0])
        .args(&mc.cmd[1..])
        .args(["-disassemble", "-show-encoding", "-arch=amdgcn", &format!("-mcpu={}", mc.cpu)])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run llvm-mc");
    use std::io::Write;
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Lines whose first word llvm-mc found invalid.
    let bad: std::collections::HashSet<usize> = stderr
        .lines()
        .filter_map(|l| l.strip_prefix("<stdin>:"))
        .filter_map(|l| l.split_once(':'))
        .filter(|(_, rest)| rest.starts_with("1: warning"))
        .filter_map(|(n, _)| n.parse().ok())
        .collect();
    let mut blocks: Vec<Vec<(String, Vec<u8>)>> = vec![Vec::new()];
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with(".text") {
            continue;
        }
        let (text, enc) = line.split_once("; encoding:").unwrap_or((line, ""));
        let m = text.split_whitespace().next().unwrap_or("").to_string();
        if m == "s_mov_b32" && text.contains("s101, s101") {
            blocks.push(Vec::new());
            continue;
        }
        let enc: Vec<u8> = enc
            .split(|c: char| !c.is_ascii_hexdigit() && c != 'x')
            .filter_map(|t| t.strip_prefix("0x"))
            .filter_map(|t| u8::from_str_radix(t, 16).ok())
            .collect();
        blocks.last_mut().unwrap().push((m, enc));
    }
    if blocks.len() != probes.len() + 1 {
        // Some probe's output did not split at its marker: llvm-mc crashed at the probe after
        // the last one it got past.
        if probes.len() == 1 {
            return vec![None];
        }
        let at = (1..=probes.len()).rev().find(|k| bad.contains(&(2 * k))).unwrap_or(0);
        if at >= probes.len() {
            // It got past every probe: not a crash; ask in tenths.
            return probes.chunks(probes.len().div_ceil(10)).flat_map(|c| llvm(mc, c)).collect();
        }
        let mut out = llvm(mc, &probes[..at]);
        out.push(None);
        out.extend(llvm(mc, &probes[at + 1..]));
        return out;
    }
    (0..probes.len())
        .map(|k| {
            if bad.contains(&(2 * k + 1)) {
                return None;
            }
            blocks[k].first().map(|(m, enc)| {
                let m = ["_e32", "_e64", "_sdwa", "_dpp"]
                    .iter()
                    .fold(m.clone(), |m, s| m.strip_suffix(s).map(str::to_string).unwrap_or(m));
                let own: Vec<u8> = probes[k].iter().flat_map(|w| w.to_le_bytes()).collect();
                (m, if own.starts_with(enc) { enc.len() } else { 0 })
            })
        })
        .collect()
}

#[test]
fn decoder_agrees_with_llvm_on_random_words_of_every_family() {
    assert!(
        Command::new("llvm-mc-15").arg("--version").output().is_ok(),
        "llvm-mc-15 is not installed: run ./x setup (Debian package llvm-15, tools/debian-packages.txt)"
    );
    let mc = Mc::new(vec!["llvm-mc-15".into()], "gfx90a", 100);
    let checked = agree(&mc, Target::Gfx90a, 1500);
    assert!(checked > 5000, "only {checked} probes were valid instructions");
}

/// The ROCm 6.4 root's llvm-mc 21, run through the root's dynamic loader (no chroot needed).
fn llvm_mc_21() -> Vec<OsString> {
    let root = xhsa_emu::launcher::rocm::root(
        xhsa_emu::launcher::rocm::Rocm::V6_4,
        std::env::var_os(xhsa_emu::launcher::rocm::ROOT_VAR),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let r = |p: &str| root.join(p).into_os_string();
    let mut libs = r("usr/lib/llvm-21/lib");
    libs.push(":");
    libs.push(r("usr/lib/x86_64-linux-gnu"));
    vec![
        r("lib64/ld-linux-x86-64.so.2"),
        "--library-path".into(),
        libs,
        r("usr/lib/llvm-21/bin/llvm-mc"),
    ]
}

#[test]
fn gfx942_decoder_agrees_with_llvm_mc_21_on_random_words_of_every_family() {
    let mc = Mc::new(llvm_mc_21(), "gfx942", 2000);
    let checked = agree(&mc, Target::Gfx942, 600);
    assert!(checked > 2000, "only {checked} probes were valid instructions");
}

/// Asks `mc` about `per_family` random probes of each family prefix and compares the decoder
/// for `target`; returns how many probes were valid instructions.
fn agree(mc: &Mc, target: Target, per_family: usize) -> usize {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    // Family prefixes: (mask of fixed bits, value).
    let prefixes: [(u32, u32); 14] = [
        (0x8000_0000, 0x0000_0000), // VOP2 (and VOP1/VOPC inside)
        (0xfe00_0000, 0x7e00_0000), // VOP1
        (0xfe00_0000, 0x7c00_0000), // VOPC
        (0xc000_0000, 0x8000_0000), // SOP2/SOPK/SOP1/SOPC/SOPP
        (0xff80_0000, 0xbe80_0000), // SOP1
        (0xff80_0000, 0xbf00_0000), // SOPC
        (0xff80_0000, 0xbf80_0000), // SOPP
        (0xfc00_0000, 0xc000_0000), // SMEM
        (0xfc00_0000, 0xd000_0000), // VOP3
        (0xff80_0000, 0xd380_0000), // VOP3P
        (0xfc00_0000, 0xd800_0000), // DS
        (0xfc00_0000, 0xdc00_0000), // FLAT/GLOBAL/SCRATCH
        (0xfc00_0000, 0xe000_0000), // MUBUF
        (0xfc00_0000, 0xe800_0000), // MTBUF
    ];
    let mut checked = 0;
    let mut mismatches = Vec::new();
    for &(mask, value) in &prefixes {
        let probes: Vec<Vec<u32>> = (0..per_family)
            .map(|k| {
                let mut w0 = (rng.next() & !mask) | value;
                // Bias a third of the VOP1/VOP2/VOPC probes towards DPP (250), SDWA (249) and
                // literal (255) sources.
                if value < 0x8000_0000 && k % 3 == 0 {
                    w0 = (w0 & !0x1ff) | [249, 250, 255][k % 9 / 3];
                }
                vec![w0, rng.next(), rng.next()]
            })
            .collect();
        let theirs = answers(mc, &probes);
        for (p, t) in probes.iter().zip(theirs) {
            let Some((name, bytes)) = t else { continue };
            checked += 1;
            match decode_for(target, p) {
                Ok(i) if i.name == name && (bytes == 0 || usize::from(i.len) == bytes) => {}
                Ok(i) => mismatches.push(format!(
                    "{}: llvm {name} ({bytes} bytes), decoder {} ({} bytes)",
                    hex(p),
                    i.name,
                    i.len
                )),
                Err(e) => mismatches
                    .push(format!("{}: llvm {name} ({bytes} bytes), decoder error {e}", hex(p))),
            }
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} of {checked} differ:\n{}",
        mismatches.len(),
        mismatches.iter().take(40).cloned().collect::<Vec<_>>().join("\n")
    );
    eprintln!("{target}: {checked} instructions decoded as llvm-mc ({}) does", mc.cpu);
    checked
}
