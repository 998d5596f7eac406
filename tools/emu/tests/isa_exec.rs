//! The ISA interpreter on real code: kernels built with `hipcc --offload-arch=gfx90a` (the
//! device code of tests/programs/isa_exec.hip, which the end-to-end test also runs as a HIP
//! program), loaded from their code object and dispatched over host buffers, their results
//! checked against the CPU. They fail, saying so, when hipcc is not installed. The gfx942
//! tests build with the ROCm 6.4 root's hipcc (`./x setup`) and fail without it.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use xhsa_emu::isa::host::{CodeObject, HostRig};
use xhsa_emu::isa::target::Target;
use xhsa_emu::isa::IsaError;

/// Whether hipcc runs: asked once per test process (`hipcc --version` takes about 0.4 s, and
/// every test asks).
fn have_hipcc() -> bool {
    static HAVE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAVE.get_or_init(|| {
        Command::new("hipcc").arg("--version").output().is_ok_and(|o| o.status.success())
    })
}

/// Builds the device code of `src` for `arch` into a code object (cached by content and arch
/// in the target's temporary directory): gfx90a with the host's hipcc, gfx942 with the ROCm
/// 6.4 root's (through `xhsa-emu run --rocm 6.4`, the worktree bound in).
fn code_object(src: &Path, arch: &str) -> PathBuf {
    code_object_by(src, arch, arch != "gfx90a")
}

/// As [`code_object`], with the ROCm 6.4 root's hipcc when `rocm64` (any arch), else the host's.
fn code_object_by(src: &Path, arch: &str, rocm64: bool) -> PathBuf {
    code_object_with(src, arch, if rocm64 { Some("6.4") } else { None }, &[])
}

/// As [`code_object`], with the hipcc of the ROCm root `rocm` ("6.4", "7.2"; the host's when
/// `None`) and `flags` after `-O3` (so an `-O0` there wins).
fn code_object_with(src: &Path, arch: &str, rocm: Option<&str>, flags: &[&str]) -> PathBuf {
    let data = std::fs::read(src).unwrap();
    let mut h = support::Fnv::default();
    h.feed(&data);
    h.feed(arch.as_bytes());
    if let Some(v) = rocm {
        // "rocm64" alone keeps the cache names of the builds before other roots and flags.
        h.feed(if v == "6.4" { b"rocm64".as_slice() } else { v.as_bytes() });
    }
    for f in flags {
        h.feed(b"\0");
        h.feed(f.as_bytes());
    }
    let h = h.0;
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("{}-{arch}-{h:016x}.hsaco", src.file_stem().unwrap().to_string_lossy()));
    if !out.exists() {
        // Tests run in threads of one process: each build gets its own temporary name.
        static BUILDS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let tmp = out.with_extension(format!(
            "tmp{}-{}",
            std::process::id(),
            BUILDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let mut cmd = match rocm {
            None => Command::new("hipcc"),
            Some(v) => {
                let repo =
                    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap();
                let mut c = Command::new(env!("CARGO_BIN_EXE_xhsa-emu"));
                c.args(["run", "--rocm", v, "--bind"]).arg(&repo);
                c.args(["--", "hipcc"]);
                c
            }
        };
        let st = cmd
            .args(["--genco", "--no-gpu-bundle-output", &format!("--offload-arch={arch}"), "-O3"])
            .args(flags)
            .arg("-o")
            .arg(&tmp)
            .arg(src)
            .status()
            .expect("run hipcc");
        assert!(st.success(), "hipcc --offload-arch={arch} {flags:?} {}", src.display());
        std::fs::rename(&tmp, &out).unwrap();
    }
    out
}

/// A rig over the device code of `src` (relative to this crate).
struct Rig;

impl Rig {
    /// Built for gfx90a by the host's hipcc, which `./x setup` installs: without it the test
    /// fails, saying so (it never passes without having run). Always `Some`.
    #[allow(clippy::new_ret_no_self)]
    fn new(src: &str) -> Option<HostRig> {
        assert!(have_hipcc(), "hipcc is not installed: run ./x setup (Debian package hipcc, tools/debian-packages.txt)");
        Some(Rig::load(src, "gfx90a"))
    }

    /// Built for gfx942 by the ROCm 6.4 root's hipcc: needs the root (`./x setup`), as the
    /// other ROCm 6.4 tests do; without it the test fails and says so.
    fn gfx942(src: &str) -> HostRig {
        if let Err(e) = xhsa_emu::launcher::rocm::root(
            xhsa_emu::launcher::rocm::Rocm::V6_4,
            std::env::var_os(xhsa_emu::launcher::rocm::ROOT_VAR),
        ) {
            panic!("{e}");
        }
        let r = Rig::load(src, "gfx942");
        assert_eq!(r.code().target(), Target::Gfx942);
        r
    }

    fn load(src: &str, arch: &str) -> HostRig {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(src);
        let elf = std::fs::read(code_object(&path, arch)).unwrap();
        HostRig::new(CodeObject::load(&elf).unwrap())
    }

    /// Built for gfx90a by the ROCm 6.4 root's hipcc (clang 21 and its device libraries, as
    /// AMD's 6.4 libraries are): needs the root, as [`Rig::gfx942`].
    fn gfx90a_rocm64(src: &str) -> HostRig {
        if let Err(e) = xhsa_emu::launcher::rocm::root(
            xhsa_emu::launcher::rocm::Rocm::V6_4,
            std::env::var_os(xhsa_emu::launcher::rocm::ROOT_VAR),
        ) {
            panic!("{e}");
        }
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(src);
        let elf = std::fs::read(code_object_by(&path, "gfx90a", true)).unwrap();
        let r = HostRig::new(CodeObject::load(&elf).unwrap());
        assert_eq!(r.code().target(), Target::Gfx90a);
        r
    }
}

const PROGRAM: &str = "../../tests/programs/isa_exec.hip";

/// The kernels of tests/programs/isa_exec.hip on the rig, each against the CPU.
fn vector_add(r: &mut HostRig) {
    let n = 1000usize;
    let a: Vec<f32> = (0..n).map(|i| 0.5 * i as f32).collect();
    let b: Vec<f32> = (0..n).map(|i| 1000.0 - i as f32).collect();
    let (da, db) = (r.upload(&a), r.upload(&b));
    let dc = r.upload(&vec![-1.0f32; n + 64]);
    let stats = r.run("isa_vadd", &[da, db, dc, n as u64], [1024, 1, 1], [256, 1, 1]).unwrap();
    let c: Vec<f32> = r.download(dc, n + 64);
    for i in 0..n {
        assert_eq!(c[i], a[i] + b[i], "c[{i}]");
    }
    assert!(c[n..].iter().all(|&x| x == -1.0), "work-items past n must not store");
    assert_eq!(stats.workgroups, 4);
    assert_eq!(stats.waves, 16);
}

fn lds_reduction(r: &mut HostRig) {
    let n: usize = 256 * 5 + 77;
    let blocks = n.div_ceil(256);
    let input: Vec<u32> = (0..n as u32).map(|i| i * 7 + 3).collect();
    let din = r.upload(&input);
    let dout = r.alloc(blocks * 4);
    r.run("isa_lds_reduce", &[din, dout, n as u64], [blocks as u32 * 256, 1, 1], [256, 1, 1])
        .unwrap();
    let out: Vec<u32> = r.download(dout, blocks);
    for b in 0..blocks {
        let want: u32 = input[b * 256..((b + 1) * 256).min(n)].iter().sum();
        assert_eq!(out[b], want, "block {b}");
    }
}

fn shuffle(r: &mut HostRig) {
    let n = 512usize;
    let input: Vec<i32> = (0..n as i32).map(|i| i * 3 + 1).collect();
    let din = r.upload(&input);
    let dout = r.alloc(n * 4);
    r.run("isa_shfl", &[din, dout, 5], [n as u32, 1, 1], [256, 1, 1]).unwrap();
    let out: Vec<i32> = r.download(dout, n);
    for i in 0..n {
        assert_eq!(out[i], input[(i / 64) * 64 + (i % 64 + 5) % 64], "out[{i}]");
    }
}

fn atomic_sum(r: &mut HostRig) {
    let n = 3000usize;
    let input: Vec<u32> = (0..n as u32).map(|i| i % 13 + 1).collect();
    let din = r.upload(&input);
    let dtotal = r.alloc(4);
    r.run("isa_atomic_sum", &[din, dtotal, n as u64], [3072, 1, 1], [128, 1, 1]).unwrap();
    assert_eq!(r.download::<u32>(dtotal, 1)[0], input.iter().sum::<u32>());
}

fn fp64(r: &mut HostRig) {
    let n = 700usize;
    let x: Vec<f64> = (0..n).map(|i| 1.5 * i as f64 + 0.25).collect();
    let dx = r.upload(&x);
    let dy = r.alloc(n * 8);
    let dr = r.alloc(n * 4);
    r.run("isa_fp64", &[dx, dy, dr, n as u64], [704, 1, 1], [64, 1, 1]).unwrap();
    let y: Vec<f64> = r.download(dy, n);
    let ri: Vec<i32> = r.download(dr, n);
    for i in 0..n {
        assert_eq!(y[i], x[i].sqrt().mul_add(2.5, i as f64), "y[{i}]");
        assert_eq!(ri[i], (x[i] * 0.5) as i32 - i as i32, "r[{i}]");
    }
}

fn private_array(r: &mut HostRig) {
    let n = 1000usize;
    let idx: Vec<i32> = (0..n as i32).map(|i| (i * 37 + 11) % 1009).collect();
    let didx = r.upload(&idx);
    let dout = r.upload(&vec![-1i32; n + 24]);
    r.run("isa_private", &[didx, dout, n as u64], [1024, 1, 1], [128, 1, 1]).unwrap();
    let out: Vec<i32> = r.download(dout, n + 24);
    for i in 0..n {
        let want: i32 = (0..n.min(8)).map(|k| i as i32 * (idx[(i + k) % n] % 40) + 1).sum();
        assert_eq!(out[i], want, "out[{i}]");
    }
    assert!(out[n..].iter().all(|&x| x == -1), "work-items past n must not store");
}

#[test]
fn vector_add_computes_right_results() {
    let Some(mut r) = Rig::new(PROGRAM) else { return };
    vector_add(&mut r);
}

#[test]
fn lds_reduction_with_barriers_computes_right_sums() {
    let Some(mut r) = Rig::new(PROGRAM) else { return };
    lds_reduction(&mut r);
}

#[test]
fn shuffle_reads_other_lanes() {
    let Some(mut r) = Rig::new(PROGRAM) else { return };
    shuffle(&mut r);
}

#[test]
fn atomic_add_sums_every_element() {
    let Some(mut r) = Rig::new(PROGRAM) else { return };
    atomic_sum(&mut r);
}

#[test]
fn fp64_sqrt_and_conversions() {
    let Some(mut r) = Rig::new(PROGRAM) else { return };
    fp64(&mut r);
}

#[test]
fn private_arrays_in_scratch_memory() {
    let Some(mut r) = Rig::new(PROGRAM) else { return };
    private_array(&mut r);
}

/// The same kernels built for gfx942 (CDNA3: its own opcode tables, v_lshl_add_u64 address
/// arithmetic, architected flat scratch with SCRATCH instructions).
#[test]
fn gfx942_kernels_compute_right_results() {
    let mut r = Rig::gfx942(PROGRAM);
    vector_add(&mut r);
    lds_reduction(&mut r);
    shuffle(&mut r);
    atomic_sum(&mut r);
    fp64(&mut r);
    private_array(&mut r);
}

#[test]
fn an_unimplemented_instruction_fails_the_dispatch_naming_it() {
    let Some(mut r) = Rig::new("tests/isa/unimplemented.hip") else { return };
    let out = r.alloc(256);
    let err = r.run("isa_unimplemented", &[out], [64, 1, 1], [64, 1, 1]).unwrap_err();
    match &err {
        IsaError::Unimplemented { name, .. } => assert_eq!(*name, "s_rfe_b64"),
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("s_rfe_b64"), "{err}");
}

#[test]
fn an_access_outside_mapped_memory_is_a_fault() {
    let Some(mut r) = Rig::new(PROGRAM) else { return };
    let n = 64usize;
    let da = r.upload(&vec![1.0f32; n]);
    let err = r.run("isa_vadd", &[da, 0x10, da, n as u64], [64, 1, 1], [64, 1, 1]).unwrap_err();
    assert!(matches!(err, IsaError::Fault(f) if f.addr == 0x10 && !f.write), "{err:?}");
}

/// The interpreter's rate on ALU code, in wave-instructions per second (printed; the assertion
/// only guards against a pathological slowdown on a loaded 2-core machine).
#[test]
fn alu_rate() {
    let Some(mut r) = Rig::new("tests/isa/alu_loop.hip") else { return };
    let (n, iters) = (64 * 256usize, 200u32);
    let out = r.alloc(n * 4);
    let t = std::time::Instant::now();
    let s = r.run("isa_alu_loop", &[out, u64::from(iters)], [n as u32, 1, 1], [256, 1, 1]).unwrap();
    let secs = t.elapsed().as_secs_f64();
    let got: Vec<u32> = r.download(out, n);
    for (i, &g) in got.iter().enumerate() {
        let mut x = i as u32 + 1;
        for k in 0..iters {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x = x.wrapping_mul(2_654_435_761).wrapping_add(k);
        }
        assert_eq!(g, x, "out[{i}]");
    }
    let rate = s.instructions as f64 / secs;
    eprintln!(
        "ISA interpreter: {} wave-instructions in {:.3} s = {:.1} M wave-instructions/s",
        s.instructions,
        secs,
        rate / 1e6
    );
    assert!(rate > 100_000.0, "{rate}");
    // Per instruction class (scalar ALU, vector ALU, scalar loads), over more rounds.
    let table = r.upload(&[1u32, 2, 3, 4]);
    for (kernel, args) in [
        ("isa_salu_loop", vec![out, 20_000]),
        ("isa_valu_loop", vec![out, 20_000]),
        ("isa_smem_loop", vec![out, table, 20_000]),
    ] {
        let t = std::time::Instant::now();
        let s = r.run(kernel, &args, [64 * 32, 1, 1], [64, 1, 1]).unwrap();
        let secs = t.elapsed().as_secs_f64();
        eprintln!(
            "ISA interpreter, {kernel}: {} wave-instructions in {secs:.3} s = {:.1} M/s",
            s.instructions,
            s.instructions as f64 / secs / 1e6
        );
    }
}

// ---- Matrix fused multiply-add (v_mfma_*) ----
//
// The layouts below are the CDNA2 ISA's, written out per shape as AMD's Matrix Instruction
// Calculator (`matrix_calculator.py -a CDNA2 -i OPCODE -d`) states them; the check is a plain
// matrix multiply of the matrices those layouts place in the registers.

const MFMA: &str = "tests/isa/mfma.hip";

#[derive(Clone, Copy, Debug, PartialEq)]
enum El {
    F32,
    F16,
    Bf16,
    I8,
    F64,
}

impl El {
    fn bits(self) -> usize {
        match self {
            El::F32 => 32,
            El::F16 | El::Bf16 => 16,
            El::I8 => 8,
            El::F64 => 64,
        }
    }
}

/// An MFMA opcode: name, M (= N), K, blocks, input element type.
#[derive(Clone, Copy, Debug)]
struct Mm {
    name: &'static str,
    m: usize,
    k: usize,
    blocks: usize,
    el: El,
}

const MFMAS: [Mm; 27] = [
    Mm { name: "f32_32x32x1f32", m: 32, k: 1, blocks: 2, el: El::F32 },
    Mm { name: "f32_16x16x1f32", m: 16, k: 1, blocks: 4, el: El::F32 },
    Mm { name: "f32_4x4x1f32", m: 4, k: 1, blocks: 16, el: El::F32 },
    Mm { name: "f32_32x32x2f32", m: 32, k: 2, blocks: 1, el: El::F32 },
    Mm { name: "f32_16x16x4f32", m: 16, k: 4, blocks: 1, el: El::F32 },
    Mm { name: "f32_32x32x4f16", m: 32, k: 4, blocks: 2, el: El::F16 },
    Mm { name: "f32_16x16x4f16", m: 16, k: 4, blocks: 4, el: El::F16 },
    Mm { name: "f32_4x4x4f16", m: 4, k: 4, blocks: 16, el: El::F16 },
    Mm { name: "f32_32x32x8f16", m: 32, k: 8, blocks: 1, el: El::F16 },
    Mm { name: "f32_16x16x16f16", m: 16, k: 16, blocks: 1, el: El::F16 },
    Mm { name: "i32_32x32x4i8", m: 32, k: 4, blocks: 2, el: El::I8 },
    Mm { name: "i32_16x16x4i8", m: 16, k: 4, blocks: 4, el: El::I8 },
    Mm { name: "i32_4x4x4i8", m: 4, k: 4, blocks: 16, el: El::I8 },
    Mm { name: "i32_32x32x8i8", m: 32, k: 8, blocks: 1, el: El::I8 },
    Mm { name: "i32_16x16x16i8", m: 16, k: 16, blocks: 1, el: El::I8 },
    Mm { name: "f32_32x32x4bf16_1k", m: 32, k: 4, blocks: 2, el: El::Bf16 },
    Mm { name: "f32_16x16x4bf16_1k", m: 16, k: 4, blocks: 4, el: El::Bf16 },
    Mm { name: "f32_4x4x4bf16_1k", m: 4, k: 4, blocks: 16, el: El::Bf16 },
    Mm { name: "f32_32x32x8bf16_1k", m: 32, k: 8, blocks: 1, el: El::Bf16 },
    Mm { name: "f32_16x16x16bf16_1k", m: 16, k: 16, blocks: 1, el: El::Bf16 },
    Mm { name: "f32_32x32x2bf16", m: 32, k: 2, blocks: 2, el: El::Bf16 },
    Mm { name: "f32_16x16x2bf16", m: 16, k: 2, blocks: 4, el: El::Bf16 },
    Mm { name: "f32_4x4x2bf16", m: 4, k: 2, blocks: 16, el: El::Bf16 },
    Mm { name: "f32_32x32x4bf16", m: 32, k: 4, blocks: 1, el: El::Bf16 },
    Mm { name: "f32_16x16x8bf16", m: 16, k: 8, blocks: 1, el: El::Bf16 },
    Mm { name: "f64_16x16x4f64", m: 16, k: 4, blocks: 1, el: El::F64 },
    Mm { name: "f64_4x4x4f64", m: 4, k: 4, blocks: 4, el: El::F64 },
];

impl Mm {
    fn get(name: &str) -> Mm {
        *MFMAS.iter().find(|m| m.name == name).unwrap()
    }

    /// Elements of A per lane (E) and 32-bit words of A per lane.
    fn per_lane(&self) -> usize {
        self.m * self.k * self.blocks / 64
    }

    fn ab_words(&self) -> usize {
        (self.per_lane() * self.el.bits()).div_ceil(32)
    }

    fn cd_words(&self) -> usize {
        self.m * self.m * self.blocks / 64 * if self.el == El::F64 { 2 } else { 1 }
    }

    /// The lane of A[i][k] of block b (B[k][j] with j for i) and the element's bit offset in
    /// the lane's words. The calculator's "A[i][k].block Lane" per shape.
    fn ab(&self, i: usize, k: usize, b: usize) -> (usize, usize) {
        let e = self.per_lane();
        let lane = match (self.el, self.m, self.blocks) {
            (El::F64, 16, 1) => 16 * k + i,
            (El::F64, 4, 4) => 4 * b + 16 * k + i,
            (_, 32, 2) => 32 * b + i,
            (_, 16, 4) => 16 * b + i,
            (_, 4, 16) => 4 * b + i,
            (_, 32, 1) => 32 * (k / e) + i,
            (_, 16, 1) => 16 * (k / e) + i,
            s => panic!("{s:?}"),
        };
        (lane, (k % e) * self.el.bits())
    }

    /// The first word (register) and lane of C/D[i][j] of block b: the calculator's "C or
    /// D[i][j].block GPR / Lane" per shape.
    fn cd(&self, i: usize, j: usize, b: usize) -> (usize, usize) {
        match (self.el, self.m) {
            (El::F64, 16) => (2 * (i / 4), 16 * (i % 4) + j),
            (El::F64, 4) => (0, 16 * (i % 4) + 4 * b + j),
            (_, 32) => (16 * b + 4 * (i / 8) + i % 4, (32 * (i / 4)) % 64 + j),
            (_, 16) => (4 * b + i % 4, 16 * (i / 4) + j),
            (_, 4) => (i, 4 * b + j),
            s => panic!("{s:?}"),
        }
    }

    /// An element's bits as a number (inputs).
    fn value(&self, bits: u64) -> f64 {
        match self.el {
            El::F32 => f64::from(f32::from_bits(bits as u32)),
            El::F16 => f64::from(xhsa_emu::isa::fp16::f16_to_f32(bits as u16)),
            El::Bf16 => f64::from(f32::from_bits((bits as u32) << 16)),
            El::I8 => f64::from(bits as u8 as i8),
            El::F64 => f64::from_bits(bits),
        }
    }

    /// The bits of an input element holding `v` (exact for the small integers used).
    fn encode(&self, v: i64) -> u64 {
        match self.el {
            El::F32 => u64::from((v as f32).to_bits()),
            El::F16 => u64::from(xhsa_emu::isa::fp16::f32_to_f16(v as f32)),
            El::Bf16 => u64::from((v as f32).to_bits() >> 16),
            El::I8 => u64::from(v as i8 as u8),
            El::F64 => (v as f64).to_bits(),
        }
    }
}

/// Reads `bits` bits at bit offset `off` of a lane's words.
fn field(words: &[u32], off: usize, bits: usize) -> u64 {
    let lo =
        u64::from(words[off / 32]) | words.get(off / 32 + 1).map_or(0, |w| u64::from(*w) << 32);
    let v = lo >> (off % 32);
    if bits == 64 {
        v
    } else {
        v & ((1 << bits) - 1)
    }
}

fn set_field(words: &mut [u32], off: usize, bits: usize, v: u64) {
    for b in 0..bits {
        let (w, s) = ((off + b) / 32, (off + b) % 32);
        words[w] = (words[w] & !(1 << s)) | (((v >> b) & 1) as u32) << s;
    }
}

/// The B lane `blgp` makes lane l read (the CDNA2 ISA's BLGP patterns).
fn blgp_source(l: usize, blgp: u8) -> usize {
    match blgp {
        0 => l,
        1 => l % 32,
        2 => 32 + l % 32,
        3 => (l + 16) % 64,
        4 => l % 16,
        5 => 16 + l % 16,
        6 => 32 + l % 16,
        _ => 48 + l % 16,
    }
}

/// Runs kernel `kernel` (opcode `mm`, modifiers cbsz/abid/blgp) on inputs of small integers
/// (i8: any byte) and checks every D element against C + A x B computed from the matrices the
/// layouts put in the registers. `c_const`: the kernel's C is this constant, not the c buffer.
fn check_mfma(
    r: &mut HostRig,
    kernel: &str,
    mm: Mm,
    (cbsz, abid, blgp): (u8, u8, u8),
    c_const: Option<f64>,
    seed: u64,
) {
    let mut rng = seed | 1;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let (e, bits, aw, cw) = (mm.per_lane(), mm.el.bits(), mm.ab_words(), mm.cd_words());
    // A, B words: every element a small integer (any byte for i8).
    let mut words = |_: ()| {
        let mut w = vec![0u32; 64 * aw];
        for l in 0..64 {
            for x in 0..e {
                let v = if mm.el == El::I8 {
                    (next() % 256) as i64 - 128
                } else {
                    (next() % 9) as i64 - 4
                };
                set_field(&mut w[l * aw..(l + 1) * aw], x * bits, bits, mm.encode(v));
            }
        }
        w
    };
    let (aw_, bw_) = (words(()), words(()));
    let mut cwords = vec![0u32; 64 * cw];
    let mut cval = vec![0f64; mm.blocks * mm.m * mm.m];
    for b in 0..mm.blocks {
        for i in 0..mm.m {
            for j in 0..mm.m {
                let v = (next() % 201) as i64 - 100;
                let (reg, lane) = mm.cd(i, j, b);
                let bitsv: u64 = match mm.el {
                    El::I8 => u64::from(v as i32 as u32),
                    El::F64 => (v as f64).to_bits(),
                    _ => u64::from((v as f32).to_bits()),
                };
                cwords[lane * cw + reg] = bitsv as u32;
                if mm.el == El::F64 {
                    cwords[lane * cw + reg + 1] = (bitsv >> 32) as u32;
                }
                cval[(b * mm.m + i) * mm.m + j] = c_const.unwrap_or(v as f64);
            }
        }
    }
    let (da, db, dc) = (r.upload(&aw_), r.upload(&bw_), r.upload(&cwords));
    let dd = r.alloc(64 * cw * 4);
    r.run(kernel, &[da, db, dc, dd], [64, 1, 1], [64, 1, 1])
        .unwrap_or_else(|e| panic!("{kernel}: {e}"));
    let got: Vec<u32> = r.download(dd, 64 * cw);
    let a = |i: usize, k: usize, b: usize| {
        let (l, off) = mm.ab(i, k, b);
        mm.value(field(&aw_[l * aw..(l + 1) * aw], off, bits))
    };
    let bm = |k: usize, j: usize, b: usize| {
        let (l, off) = mm.ab(j, k, b);
        let l = blgp_source(l, blgp);
        mm.value(field(&bw_[l * aw..(l + 1) * aw], off, bits))
    };
    for b in 0..mm.blocks {
        let ab = (b >> cbsz << cbsz) + usize::from(abid);
        for i in 0..mm.m {
            for j in 0..mm.m {
                let mut want = cval[(b * mm.m + i) * mm.m + j];
                for k in 0..mm.k {
                    want += a(i, k, ab) * bm(k, j, b);
                }
                let (reg, lane) = mm.cd(i, j, b);
                let g = &got[lane * cw + reg..];
                let have = match mm.el {
                    El::I8 => f64::from(g[0] as i32),
                    El::F64 => f64::from_bits(u64::from(g[0]) | u64::from(g[1]) << 32),
                    _ => f64::from(f32::from_bits(g[0])),
                };
                assert_eq!(
                    have, want,
                    "{kernel}: D[{i}][{j}] of block {b} (register {reg}, lane {lane})"
                );
            }
        }
    }
}

#[test]
fn mfma_every_gfx90a_opcode_multiplies_in_the_isa_layouts() {
    let Some(mut r) = Rig::new(MFMA) else { return };
    for (n, mm) in MFMAS.iter().enumerate() {
        check_mfma(
            &mut r,
            &format!("mfma_{}_0_0_0", mm.name),
            *mm,
            (0, 0, 0),
            None,
            0x1234 + n as u64,
        );
    }
}

#[test]
fn mfma_broadcast_modifiers_cbsz_abid_blgp() {
    let Some(mut r) = Rig::new(MFMA) else { return };
    for (name, mods) in [
        ("f32_32x32x1f32", (1, 1, 3)),
        ("f32_16x16x1f32", (2, 3, 1)),
        ("f32_4x4x4f16", (4, 9, 6)),
        ("i32_16x16x4i8", (1, 0, 2)),
        ("f32_16x16x4f32", (0, 0, 7)),
        ("f32_32x32x2bf16", (0, 0, 5)),
    ] {
        let kernel = format!("mfma_{name}_{}_{}_{}", mods.0, mods.1, mods.2);
        check_mfma(&mut r, &kernel, Mm::get(name), mods, None, 99);
    }
    // BLGP is not defined for gfx90a's f64 opcodes: refused, naming the instruction.
    let (a, d) = (r.alloc(64 * 8), r.alloc(64 * 32));
    match r.run("mfma_f64_16x16x4f64_0_0_1", &[a, a, d, d], [64, 1, 1], [64, 1, 1]) {
        Err(IsaError::Unimplemented { name, .. }) => assert_eq!(name, "v_mfma_f64_16x16x4f64"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn mfma_with_accumulation_registers_and_a_constant_c() {
    let Some(mut r) = Rig::new(MFMA) else { return };
    check_mfma(&mut r, "mfma_agpr_16x16x4f32", Mm::get("f32_16x16x4f32"), (0, 0, 0), None, 7);
    check_mfma(&mut r, "mfma_agpr_32x32x8f16", Mm::get("f32_32x32x8f16"), (0, 0, 0), None, 8);
    check_mfma(&mut r, "mfma_const_c_4x4x1f32", Mm::get("f32_4x4x1f32"), (0, 0, 0), Some(1.0), 9);
}

/// Non-integer f32 inputs: each D element within f32 rounding of the exact product sum.
#[test]
fn mfma_f32_rounding_stays_within_an_ulp_per_step() {
    let Some(mut r) = Rig::new(MFMA) else { return };
    let mut x = 0x9e37_79b9u32;
    let mut f = || {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        (x % 20001) as f32 / 10000.0 - 1.0
    };
    let (a, b, c): (Vec<f32>, Vec<f32>, Vec<f32>) = (
        (0..64).map(|_| f()).collect(),
        (0..64).map(|_| f()).collect(),
        (0..256).map(|_| f()).collect(),
    );
    let (da, db, dc) = (r.upload(&a), r.upload(&b), r.upload(&c));
    let dd = r.alloc(256 * 4);
    r.run("mfma_f32_16x16x4f32_0_0_0", &[da, db, dc, dd], [64, 1, 1], [64, 1, 1]).unwrap();
    let d: Vec<f32> = r.download(dd, 256);
    let mm = Mm::get("f32_16x16x4f32");
    for i in 0..16 {
        for j in 0..16 {
            let (reg, lane) = mm.cd(i, j, 0);
            let mut want = f64::from(c[lane * 4 + reg]);
            for k in 0..4 {
                want += f64::from(a[mm.ab(i, k, 0).0]) * f64::from(b[mm.ab(j, k, 0).0]);
            }
            let have = f64::from(d[lane * 4 + reg]);
            assert!(
                (have - want).abs() <= 4.0 * f64::from(f32::EPSILON) * 4.0,
                "D[{i}][{j}] = {have}, want {want}"
            );
        }
    }
}

// ---- Dot products, mixed-precision FMA, packed f32 constants (tests/isa/vop3p.hip) ----

fn f16(x: f32) -> u32 {
    u32::from(xhsa_emu::isa::fp16::f32_to_f16(x))
}

fn h(bits: u32) -> f32 {
    xhsa_emu::isa::fp16::f16_to_f32(bits as u16)
}

/// Runs a one-wave kernel of tests/isa/vop3p.hip on per-lane words a, b, c; returns `per`
/// result words per lane.
fn lanes3(r: &mut HostRig, kernel: &str, a: &[u32], b: &[u32], c: &[u32], per: usize) -> Vec<u32> {
    let (da, db, dc) = (r.upload(a), r.upload(b), r.upload(c));
    let dd = r.alloc(64 * 4 * per);
    r.run(kernel, &[da, db, dc, dd], [64, 1, 1], [64, 1, 1])
        .unwrap_or_else(|e| panic!("{kernel}: {e}"));
    r.download(dd, 64 * per)
}

/// Deterministic words: xorshift32 from `seed`.
fn words(seed: u32, n: usize) -> Vec<u32> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        })
        .collect()
}

/// Packed f16 pairs of small integers and halves (products and sums stay exact).
fn f16_pairs(seed: u32) -> Vec<u32> {
    words(seed, 64)
        .iter()
        .map(|w| f16((w % 17) as f32 / 2.0 - 4.0) | f16(((w >> 8) % 13) as f32 - 6.0) << 16)
        .collect()
}

fn elems(v: u32, bits: u32, signed: bool) -> Vec<i64> {
    (0..32 / bits)
        .map(|k| {
            let f = (v >> (k * bits)) & (((1u64 << bits) - 1) as u32);
            if signed {
                i64::from(((f << (32 - bits)) as i32) >> (32 - bits))
            } else {
                i64::from(f)
            }
        })
        .collect()
}

fn dot(x: u32, y: u32, bits: u32, signed: bool) -> i64 {
    elems(x, bits, signed).iter().zip(elems(y, bits, signed)).map(|(p, q)| p * q).sum()
}

#[test]
fn dot_products_of_every_width() {
    let Some(mut r) = Rig::new("tests/isa/vop3p.hip") else { return };
    let (a, b) = (words(11, 64), words(12, 64));
    // Accumulators near the i32/u32 limits in some lanes, so that clamp saturates.
    let c: Vec<u32> = words(13, 64)
        .iter()
        .enumerate()
        .map(|(l, w)| {
            if l % 4 == 0 {
                0x7fff_fff0
            } else if l % 4 == 1 {
                0x8000_0010
            } else {
                w % 1000
            }
        })
        .collect();
    for (kernel, bits, signed, clamp) in [
        ("dot2_i32_i16", 16, true, false),
        ("dot2_i32_i16_clamp", 16, true, true),
        ("dot2_u32_u16", 16, false, false),
        ("dot4_i32_i8", 8, true, false),
        ("dot4_u32_u8", 8, false, false),
        ("dot4_u32_u8_clamp", 8, false, true),
        ("dot8_i32_i4", 4, true, false),
        ("dot8_u32_u4", 4, false, false),
        ("dot2c_i32_i16", 16, true, false),
        ("dot4c_i32_i8", 8, true, false),
        ("dot8c_i32_i4", 4, true, false),
    ] {
        let d = lanes3(&mut r, kernel, &a, &b, &c, 1);
        for l in 0..64 {
            let acc = if signed { i64::from(c[l] as i32) } else { i64::from(c[l]) };
            let sum = dot(a[l], b[l], bits, signed) + acc;
            let want = match (clamp, signed) {
                (false, _) => sum as u32,
                (true, true) => sum.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32 as u32,
                (true, false) => sum.clamp(0, i64::from(u32::MAX)) as u32,
            };
            assert_eq!(d[l], want, "{kernel} lane {l}: {:#x} . {:#x} + {:#x}", a[l], b[l], c[l]);
        }
    }
    let d = lanes3(&mut r, "dot4c_i32_i8_dpp", &a, &b, &c, 1);
    for l in 0..64 {
        assert_eq!(
            d[l],
            (dot(a[l ^ 1], b[l], 8, true) + i64::from(c[l] as i32)) as u32,
            "dpp lane {l}"
        );
    }
}

#[test]
fn f16_dot_products_with_half_selection_and_negation() {
    let Some(mut r) = Rig::new("tests/isa/vop3p.hip") else { return };
    let (a, b) = (f16_pairs(21), f16_pairs(22));
    let c: Vec<u32> =
        words(23, 64).iter().map(|w| ((w % 9) as f32 * 0.25 - 1.0).to_bits()).collect();
    let lo = |x: u32| h(x & 0xffff);
    let hi = |x: u32| h(x >> 16);
    let cases: [(&str, &dyn Fn(usize) -> f32); 4] = [
        ("dot2_f32_f16", &|l| lo(a[l]) * lo(b[l]) + hi(a[l]) * hi(b[l]) + f32::from_bits(c[l])),
        // op_sel:[1,0,0] op_sel_hi:[0,1,1] neg_lo:[0,1,0]: low products from a's high half and
        // b's low half negated, high ones from a's low half and b's high half.
        ("dot2_f32_f16_mods", &|l| {
            hi(a[l]) * -lo(b[l]) + lo(a[l]) * hi(b[l]) + f32::from_bits(c[l])
        }),
        ("dot2_f32_f16_clamp", &|l| {
            (lo(a[l]) * lo(b[l]) + hi(a[l]) * hi(b[l]) + f32::from_bits(c[l])).clamp(0.0, 1.0)
        }),
        ("dot2c_f32_f16", &|l| lo(a[l]) * lo(b[l]) + hi(a[l]) * hi(b[l]) + f32::from_bits(c[l])),
    ];
    for (kernel, want) in cases {
        let d = lanes3(&mut r, kernel, &a, &b, &c, 1);
        for (l, x) in d.iter().enumerate() {
            assert_eq!(f32::from_bits(*x), want(l), "{kernel} lane {l}");
        }
    }
}

#[test]
fn fma_mix_reads_f32_or_either_f16_half() {
    let Some(mut r) = Rig::new("tests/isa/vop3p.hip") else { return };
    let (a, b) = (f16_pairs(31), f16_pairs(32));
    let fl: Vec<u32> =
        words(33, 64).iter().map(|w| ((w % 33) as f32 * 0.125 - 2.0).to_bits()).collect();
    let c = f16_pairs(34);
    let lo = |x: u32| h(x & 0xffff);
    let hi = |x: u32| h(x >> 16);
    let f = f32::from_bits;
    let d = lanes3(&mut r, "fma_mix_f32", &fl, &fl, &fl, 1);
    for l in 0..64 {
        assert_eq!(f(d[l]), f(fl[l]).mul_add(f(fl[l]), f(fl[l])), "fma_mix_f32 lane {l}");
    }
    let d = lanes3(&mut r, "fma_mix_f32_f16s", &a, &b, &c, 1);
    for l in 0..64 {
        assert_eq!(
            f(d[l]),
            (-hi(a[l])).mul_add(lo(b[l]).abs(), hi(c[l])),
            "fma_mix_f32_f16s lane {l}"
        );
    }
    let d = lanes3(&mut r, "fma_mix_f32_mixed", &fl, &b, &fl, 1);
    for l in 0..64 {
        assert_eq!(f(d[l]), f(fl[l]).mul_add(hi(b[l]), -f(fl[l])), "fma_mix_f32_mixed lane {l}");
    }
    // mixlo/mixhi: D is also the f32 addend; the other half of D is kept. Addends with a zero
    // low half (small integers as f32) and results exact in f16.
    let acc: Vec<u32> = words(35, 64).iter().map(|w| ((w % 16) as f32 - 8.0).to_bits()).collect();
    let d = lanes3(&mut r, "fma_mixlo_f16", &a, &b, &acc, 1);
    for l in 0..64 {
        let want = f16(lo(a[l]).mul_add(lo(b[l]), f(acc[l])));
        assert_eq!(d[l], (acc[l] & 0xffff_0000) | want, "fma_mixlo_f16 lane {l}");
    }
    let d = lanes3(&mut r, "fma_mixhi_f16", &a, &b, &acc, 1);
    for l in 0..64 {
        let want = f16(hi(a[l]).mul_add(hi(b[l]), f(acc[l])).clamp(0.0, 1.0));
        assert_eq!(d[l], (acc[l] & 0xffff) | want << 16, "fma_mixhi_f16 lane {l}");
    }
}

#[test]
fn packed_f32_inline_constants_are_f32_in_the_low_dword() {
    let Some(mut r) = Rig::new("tests/isa/vop3p.hip") else { return };
    let a: Vec<u32> = (0..64).map(|l| (l as f32 * 0.75 - 3.0).to_bits()).collect();
    let b: Vec<u32> = (0..64).map(|l| (l as f32 * -1.5 + 7.0).to_bits()).collect();
    let f = f32::from_bits;
    let d = lanes3(&mut r, "pk_fma_f32_const", &a, &b, &a, 2);
    for l in 0..64 {
        assert_eq!(
            (f(d[2 * l]), f(d[2 * l + 1])),
            (f(a[l]).mul_add(2.0, -4.0), f(b[l]).mul_add(2.0, -4.0)),
            "lane {l}"
        );
    }
    // op_sel:[1,0] op_sel_hi:[0,0] neg_hi:[1,0]: low = b + 0.5, high = -a + 0.5.
    let d = lanes3(&mut r, "pk_add_f32_const_swap", &a, &b, &a, 2);
    for l in 0..64 {
        assert_eq!((f(d[2 * l]), f(d[2 * l + 1])), (f(b[l]) + 0.5, -f(a[l]) + 0.5), "lane {l}");
    }
}

// ---- Typed buffers (MTBUF) and scalar atomics (tests/isa/buffer.hip) ----

#[test]
fn typed_buffer_loads_convert_each_format() {
    let Some(mut r) = Rig::new("tests/isa/buffer.hip") else { return };
    let f = f32::from_bits;
    let src = words(41, 64 * 8);
    let run = |r: &mut HostRig, k: &str, out_words: usize| {
        let (ds, dout) = (r.upload(&src), r.alloc(64 * 4 * out_words));
        r.run(k, &[ds, dout], [64, 1, 1], [64, 1, 1]).unwrap_or_else(|e| panic!("{k}: {e}"));
        r.download::<u32>(dout, 64 * out_words)
    };
    let d = run(&mut r, "tbuf_load_unorm8888", 4);
    for l in 0..64 {
        for k in 0..4 {
            let want = if l < 48 { ((src[l] >> (8 * k)) & 0xff) as f32 / 255.0 } else { 0.0 };
            assert_eq!(f(d[4 * l + k]), want, "unorm8888 lane {l} component {k}");
        }
    }
    let d = run(&mut r, "tbuf_load_sint1616_idx", 2);
    for l in 0..64 {
        assert_eq!(
            (d[2 * l], d[2 * l + 1]),
            (src[l] as u16 as i16 as i32 as u32, (src[l] >> 16) as u16 as i16 as i32 as u32),
            "sint1616 lane {l}"
        );
    }
    let d = run(&mut r, "tbuf_load_float32_offsets", 1);
    for l in 0..64 {
        assert_eq!(d[l], src[8 * l + 6], "float32 lane {l}");
    }
    let d = run(&mut r, "tbuf_load_xyzw_from_f16x2", 4);
    for l in 0..64 {
        let want = [h(src[l] & 0xffff).to_bits(), h(src[l] >> 16).to_bits(), 0, 1.0f32.to_bits()];
        // NaN payloads survive the f16 -> f32 conversion bit for bit.
        assert_eq!(d[4 * l..4 * l + 4], want, "f16x2 as xyzw lane {l}");
    }
    let d = run(&mut r, "tbuf_load_d16_f16x4", 2);
    for l in 0..64 {
        assert_eq!((d[2 * l], d[2 * l + 1]), (src[2 * l], src[2 * l + 1]), "d16 lane {l}");
    }
}

#[test]
fn typed_buffer_stores_convert_each_format() {
    let Some(mut r) = Rig::new("tests/isa/buffer.hip") else { return };
    let vals: Vec<u32> = (0..256).map(|k| ((k % 23) as f32 / 10.0 - 1.1).to_bits()).collect();
    let (ds, dout) = (r.upload(&vals), r.alloc(64 * 4));
    r.run("tbuf_store_snorm8888", &[ds, dout], [64, 1, 1], [64, 1, 1]).unwrap();
    let d: Vec<u32> = r.download(dout, 64);
    for l in 0..64 {
        for k in 0..4 {
            let v = f64::from(f32::from_bits(vals[4 * l + k])).clamp(-1.0, 1.0) * 127.0;
            let want = (v.round_ties_even() as i32 as u32) & 0xff;
            assert_eq!((d[l] >> (8 * k)) & 0xff, want, "snorm8888 lane {l} component {k} ({v})");
        }
    }
    let ints = words(51, 128);
    let (ds, dout) = (r.upload(&ints), r.alloc(64 * 4));
    r.run("tbuf_store_uint1616", &[ds, dout], [64, 1, 1], [64, 1, 1]).unwrap();
    let d: Vec<u32> = r.download(dout, 64);
    for l in 0..64 {
        assert_eq!(
            d[l],
            (ints[2 * l] & 0xffff) | (ints[2 * l + 1] & 0xffff) << 16,
            "uint1616 lane {l}"
        );
    }
}

#[test]
fn scalar_atomics_update_memory_and_return_old_values() {
    let Some(mut r) = Rig::new("tests/isa/buffer.hip") else { return };
    let n = 6u32;
    let p = r.upload(&[100u32, 0, 0xffff_ffff, 0, 7, 0x100, 0, 0]);
    let out = r.alloc(n as usize * 5 * 4);
    r.run("s_atomics", &[p, out], [64 * n, 1, 1], [64, 1, 1]).unwrap();
    let m: Vec<u32> = r.download(p, 6);
    let o: Vec<u32> = r.download(out, n as usize * 5);
    let total: u32 = (1..=n).sum();
    assert_eq!(m[0], 100 + total, "s_atomic_add");
    assert_eq!(m[1], (0..n).map(|wg| wg * 7 % 5).max().unwrap(), "s_atomic_umax");
    let m64 = u64::from(m[2]) | u64::from(m[3]) << 32;
    assert_eq!(m64, 0xffff_ffff + u64::from(n) * (1 << 32) + u64::from(total), "s_atomic_add_x2");
    assert_eq!(m[5], 0x100 | ((1 << n) - 1), "s_buffer_atomic_or");
    // Old values: every wave saw a distinct earlier state.
    let mut olds: Vec<u32> = (0..n as usize).map(|w| o[5 * w]).collect();
    olds.sort_unstable();
    olds.dedup();
    assert_eq!(olds.len(), n as usize);
    assert!(olds.iter().all(|&x| (100..100 + total).contains(&x)), "{olds:?}");
    // Exactly one compare-and-swap won (it saw 7); the others saw its value.
    let winners: Vec<usize> = (0..n as usize).filter(|&w| o[5 * w + 3] == 7).collect();
    assert_eq!(winners.len(), 1, "{o:?}");
    assert_eq!(m[4], 1000 + winners[0] as u32);
    assert!((0..n as usize).filter(|w| *w != winners[0]).all(|w| o[5 * w + 3] == m[4]));
}

// ---- Legacy multiply-add, packing conversions, SADs, f16 multiply-adds, LDS append/consume
// (tests/isa/vop3_misc.hip) ----

const MISC: &str = "tests/isa/vop3_misc.hip";

/// Same bits, or both NaN (a NaN's payload is not checked).
fn same_f32(x: u32, y: u32) -> bool {
    x == y || (f32::from_bits(x).is_nan() && f32::from_bits(y).is_nan())
}

/// Operands that meet every special case: ±0, ±inf, NaN, a denormal, the largest finite, and
/// ordinary values with full mantissas.
const SPECIAL_F32: [f32; 8] =
    [0.0, -0.0, f32::INFINITY, f32::NAN, 1.3333334, -3.1415925, 1.0e-40, f32::MAX];

#[test]
fn legacy_multiplies_give_zero_for_zero_times_anything() {
    let Some(mut r) = Rig::new(MISC) else { return };
    // Every pair of SPECIAL_F32 (lane l: a = [l % 8], b = [l / 8]); addends with full mantissas
    // (an unfused mad rounds the product first: a fused one differs in some lanes) and -0, -inf.
    let a: Vec<u32> = (0..64).map(|l| SPECIAL_F32[l % 8].to_bits()).collect();
    let b: Vec<u32> = (0..64).map(|l| SPECIAL_F32[l / 8].to_bits()).collect();
    let c: Vec<u32> = words(51, 64)
        .iter()
        .enumerate()
        .map(|(l, w)| match l % 5 {
            0 => (-0.0f32).to_bits(),
            1 => f32::NEG_INFINITY.to_bits(),
            _ => (((w % 2001) as f32 - 1000.0) / 7.0).to_bits(),
        })
        .collect();
    let f = f32::from_bits;
    let legacy = |x: f32, y: f32| if x == 0.0 || y == 0.0 { 0.0 } else { x * y };
    let d = lanes3(&mut r, "mul_legacy_f32", &a, &b, &c, 1);
    for l in 0..64 {
        let want = legacy(f(a[l]), f(b[l])).to_bits();
        assert!(
            same_f32(d[l], want),
            "mul_legacy lane {l}: {} * {} = {}, want {}",
            f(a[l]),
            f(b[l]),
            f(d[l]),
            f(want)
        );
    }
    let d = lanes3(&mut r, "mad_legacy_f32", &a, &b, &c, 1);
    for l in 0..64 {
        let want = (legacy(f(a[l]), f(b[l])) + f(c[l])).to_bits();
        assert!(
            same_f32(d[l], want),
            "mad_legacy lane {l}: {} * {} + {} = {}, want {}",
            f(a[l]),
            f(b[l]),
            f(c[l]),
            f(d[l]),
            f(want)
        );
    }
    // Finite operands with full mantissas: the product is rounded before the add (a fused
    // multiply-add differs in some lanes).
    let fin = |seed: u32| -> Vec<u32> {
        words(seed, 64)
            .iter()
            .map(|w| (((w % 200_001) as f32 - 100_000.0) / 997.0).to_bits())
            .collect()
    };
    let (fa, fb, fc) = (fin(52), fin(53), fin(54));
    let d = lanes3(&mut r, "mad_legacy_f32", &fa, &fb, &fc, 1);
    for l in 0..64 {
        assert_eq!(d[l], (f(fa[l]) * f(fb[l]) + f(fc[l])).to_bits(), "mad_legacy finite lane {l}");
    }
    // -S0: -(+0) is -0, still zero: the product stays +0 (so +0 + -0 = +0).
    let d = lanes3(&mut r, "mad_legacy_f32_neg", &a, &b, &c, 1);
    for l in 0..64 {
        let want = (legacy(-f(a[l]), f(b[l])) + f(c[l])).to_bits();
        assert!(
            same_f32(d[l], want),
            "mad_legacy -a lane {l}: {} * {} + {} = {}, want {}",
            -f(a[l]),
            f(b[l]),
            f(c[l]),
            f(d[l]),
            f(want)
        );
    }
}

/// Floats for the packing conversions: the special ones, out-of-range ones and values spread
/// over [-1.5, 1.5] (scaled by 32767 or 65535 they fall between integers on both sides of .5).
fn pack_inputs(seed: u32) -> Vec<u32> {
    words(seed, 64)
        .iter()
        .enumerate()
        .map(|(l, w)| match l {
            0..=7 => SPECIAL_F32[l].to_bits(),
            8 => (-0.0f32).to_bits(),
            9 => f32::NEG_INFINITY.to_bits(),
            10 => 1.0f32.to_bits(),
            11 => (-1.0f32).to_bits(),
            12 => 2.5f32.to_bits(),
            13 => (-7.0f32).to_bits(),
            _ => ((*w % 30001) as f32 / 10000.0 - 1.5).to_bits(),
        })
        .collect()
}

/// Round half to even on f64 (the test's own).
fn rne(x: f64) -> f64 {
    let r = x.round();
    if (x - x.trunc()).abs() == 0.5 {
        2.0 * (x / 2.0).round()
    } else {
        r
    }
}

fn snorm(x: f32) -> u32 {
    if x.is_nan() {
        0
    } else {
        rne(f64::from(x.clamp(-1.0, 1.0)) * 32767.0) as i32 as u32 & 0xffff
    }
}

fn unorm(x: f32) -> u32 {
    if x.is_nan() {
        0
    } else {
        rne(f64::from(x.clamp(0.0, 1.0)) * 65535.0) as u32
    }
}

#[test]
fn packing_conversions_saturate_and_round() {
    let Some(mut r) = Rig::new(MISC) else { return };
    let (a, b) = (pack_inputs(61), pack_inputs(62).into_iter().rev().collect::<Vec<_>>());
    let f = f32::from_bits;
    let d = lanes3(&mut r, "cvt_pknorm_i16_f32", &a, &b, &a, 1);
    for l in 0..64 {
        assert_eq!(
            d[l],
            snorm(f(a[l])) | snorm(f(b[l])) << 16,
            "pknorm_i16_f32 lane {l}: {} {}",
            f(a[l]),
            f(b[l])
        );
    }
    let d = lanes3(&mut r, "cvt_pknorm_u16_f32", &a, &b, &a, 1);
    for l in 0..64 {
        assert_eq!(
            d[l],
            unorm(f(a[l])) | unorm(f(b[l])) << 16,
            "pknorm_u16_f32 lane {l}: {} {}",
            f(a[l]),
            f(b[l])
        );
    }
    // f16 forms: each word holds two f16 values (the low ones from a, the high ones from b's
    // values), the special f16 values among them.
    let ha: Vec<u32> = (0..64).map(|l| f16(f(a[l])) | f16(f(b[l])) << 16).collect();
    let hb: Vec<u32> = (0..64)
        .map(|l| {
            f16(f(b[(l + 7) % 64]))
                | f16(f(a[(l + 3) % 64])) << 16
                | if l == 20 { 0x7e00 } else { 0 }
        })
        .collect();
    let d = lanes3(&mut r, "cvt_pknorm_i16_f16", &ha, &hb, &ha, 1);
    for l in 0..64 {
        assert_eq!(
            d[l],
            snorm(h(ha[l] & 0xffff)) | snorm(h(hb[l] & 0xffff)) << 16,
            "pknorm_i16_f16 lane {l}"
        );
    }
    let d = lanes3(&mut r, "cvt_pknorm_u16_f16_hi", &ha, &hb, &ha, 1);
    for l in 0..64 {
        assert_eq!(
            d[l],
            unorm(h(ha[l] >> 16)) | unorm(h(hb[l] >> 16)) << 16,
            "pknorm_u16_f16 op_sel lane {l}"
        );
    }
    // Integer packs: boundaries and random words.
    let edges = [
        0u32,
        1,
        0x7fff,
        0x8000,
        0xffff,
        0x1_0000,
        0x7fff_ffff,
        0x8000_0000,
        0xffff_ffff,
        0xffff_8000,
        0xffff_7fff,
        0xffff_ffff - 0x8000,
    ];
    let ia: Vec<u32> = words(63, 64)
        .iter()
        .enumerate()
        .map(|(l, w)| if l < edges.len() { edges[l] } else { *w >> (l % 20) })
        .collect();
    let ib: Vec<u32> = ia.iter().rev().copied().collect();
    let d = lanes3(&mut r, "cvt_pk_u16_u32", &ia, &ib, &ia, 1);
    for l in 0..64 {
        assert_eq!(
            d[l],
            ia[l].min(0xffff) | ib[l].min(0xffff) << 16,
            "pk_u16_u32 lane {l}: {:#x} {:#x}",
            ia[l],
            ib[l]
        );
    }
    let d = lanes3(&mut r, "cvt_pk_i16_i32", &ia, &ib, &ia, 1);
    let s16 = |x: u32| (x as i32).clamp(-32768, 32767) as u32 & 0xffff;
    for l in 0..64 {
        assert_eq!(
            d[l],
            s16(ia[l]) | s16(ib[l]) << 16,
            "pk_i16_i32 lane {l}: {:#x} {:#x}",
            ia[l],
            ib[l]
        );
    }
    // v_cvt_pk_u8_f32: S0 to u8 (saturated, nearest even: 2.5 -> 2, 3.5 -> 4) into byte
    // S1[1:0] of S2.
    let fa: Vec<u32> = words(64, 64)
        .iter()
        .enumerate()
        .map(|(l, w)| match l {
            0..=7 => SPECIAL_F32[l].to_bits(),
            8 => 2.5f32.to_bits(),
            9 => 3.5f32.to_bits(),
            10 => 254.5f32.to_bits(),
            11 => 255.5f32.to_bits(),
            12 => (-0.5f32).to_bits(),
            13 => 0.5f32.to_bits(),
            _ => ((*w % 3200) as f32 / 10.0 - 20.0).to_bits(),
        })
        .collect();
    let sel = words(65, 64);
    let dst = words(66, 64);
    let d = lanes3(&mut r, "cvt_pk_u8_f32", &fa, &sel, &dst, 1);
    for l in 0..64 {
        let x = f(fa[l]);
        let byte = if x.is_nan() { 0 } else { rne(f64::from(x.clamp(0.0, 255.0))) as u32 };
        let sh = 8 * (sel[l] & 3);
        assert_eq!(d[l], (dst[l] & !(0xff << sh)) | byte << sh, "pk_u8_f32 lane {l}: {x}");
    }
}

/// f32 to f16 rounding toward zero (the test's own): the nearest-even result, stepped back
/// toward zero when it lies farther from zero than x.
fn f16_rtz(x: f32) -> u32 {
    let r = f16(x);
    if x.is_finite() && f64::from(h(r)).abs() > f64::from(x).abs() {
        r - 1
    } else {
        r
    }
}

#[test]
fn pkrtz_rounds_toward_zero() {
    let Some(mut r) = Rig::new(MISC) else { return };
    let mut a = pack_inputs(71);
    // Overflow (65520 rounds to inf to nearest, to 65504 toward zero), f16 denormals, values
    // below f16's smallest denormal, ordinary values with full mantissas.
    for (l, x) in
        [65520.0f32, -65520.0, 70000.0, 3.0e-6, -3.0e-6, 1.0e-8, 65504.0, 0.1, -0.1, 1.0009766]
            .iter()
            .enumerate()
    {
        a[14 + l] = x.to_bits();
    }
    let b: Vec<u32> = a.iter().rev().copied().collect();
    let f = f32::from_bits;
    let d = lanes3(&mut r, "cvt_pkrtz_f16_f32", &a, &b, &a, 1);
    for l in 0..64 {
        let want = f16_rtz(f(a[l])) | f16_rtz(f(b[l])) << 16;
        let same = |x: u32, y: u32| x == y || (h(x).is_nan() && h(y).is_nan());
        assert!(
            same(d[l] & 0xffff, want & 0xffff) && same(d[l] >> 16, want >> 16),
            "pkrtz lane {l}: {} {} -> {:#x}, want {want:#x}",
            f(a[l]),
            f(b[l]),
            d[l]
        );
    }
}

fn sad_bytes(x: u32, y: u32, masked: bool) -> u32 {
    (0..4)
        .map(|k| ((x >> (8 * k)) & 0xff, (y >> (8 * k)) & 0xff))
        .filter(|(_, q)| !masked || *q != 0)
        .map(|(p, q)| p.abs_diff(q))
        .sum()
}

#[test]
fn sums_of_absolute_differences_wrap_and_mask() {
    let Some(mut r) = Rig::new(MISC) else { return };
    let a = words(81, 64);
    // References with zero bytes in some lanes (for the masked forms).
    let b: Vec<u32> = words(82, 64)
        .iter()
        .enumerate()
        .map(|(l, w)| w & [0xffff_ffff, 0xff00_ff00, 0x00ff_ff00, 0x0000_00ff][l % 4])
        .collect();
    // Accumulators near the top so that the 32-bit sums wrap.
    let c: Vec<u32> = words(83, 64)
        .iter()
        .enumerate()
        .map(|(l, w)| if l % 3 == 0 { 0xffff_ff00 | (w & 0xff) } else { *w })
        .collect();
    type Sad = dyn Fn(u32, u32, u32) -> u32;
    let cases: [(&str, &Sad); 5] = [
        ("sad_u8", &|x, y, z| sad_bytes(x, y, false).wrapping_add(z)),
        ("sad_hi_u8", &|x, y, z| (sad_bytes(x, y, false) << 16).wrapping_add(z)),
        ("sad_u16", &|x, y, z| {
            (x & 0xffff)
                .abs_diff(y & 0xffff)
                .wrapping_add((x >> 16).abs_diff(y >> 16))
                .wrapping_add(z)
        }),
        ("sad_u32", &|x, y, z| x.abs_diff(y).wrapping_add(z)),
        ("msad_u8", &|x, y, z| sad_bytes(x, y, true).wrapping_add(z)),
    ];
    for (kernel, want) in cases {
        let d = lanes3(&mut r, kernel, &a, &b, &c, 1);
        for l in 0..64 {
            assert_eq!(
                d[l],
                want(a[l], b[l], c[l]),
                "{kernel} lane {l}: {:#x} {:#x} {:#x}",
                a[l],
                b[l],
                c[l]
            );
        }
    }
    // Quad SADs: a 64-bit S0 per lane, 16-bit (or 32-bit) accumulators, some near the top.
    let a2 = words(84, 128);
    let c2: Vec<u32> = words(85, 128)
        .iter()
        .enumerate()
        .map(|(k, w)| if k % 3 == 0 { w | 0xff00_ff00 } else { *w })
        .collect();
    for (kernel, masked) in [("qsad_pk_u16_u8", false), ("mqsad_pk_u16_u8", true)] {
        let d = lanes3(&mut r, kernel, &a2, &b, &c2, 2);
        for l in 0..64 {
            let s0 = u64::from(a2[2 * l]) | u64::from(a2[2 * l + 1]) << 32;
            let s2 = u64::from(c2[2 * l]) | u64::from(c2[2 * l + 1]) << 32;
            let mut want = 0u64;
            for k in 0..4 {
                let acc = (s2 >> (16 * k)) as u32 & 0xffff;
                want |= u64::from((sad_bytes((s0 >> (8 * k)) as u32, b[l], masked) + acc) & 0xffff)
                    << (16 * k);
            }
            let have = u64::from(d[2 * l]) | u64::from(d[2 * l + 1]) << 32;
            assert_eq!(have, want, "{kernel} lane {l}: {s0:#x} {:#x} {s2:#x}", b[l]);
        }
    }
    let c4: Vec<u32> = words(86, 256)
        .iter()
        .enumerate()
        .map(|(k, w)| if k % 5 == 0 { 0xffff_fff0 | (w & 0xf) } else { *w })
        .collect();
    let d = lanes3(&mut r, "mqsad_u32_u8", &a2, &b, &c4, 4);
    for l in 0..64 {
        let s0 = u64::from(a2[2 * l]) | u64::from(a2[2 * l + 1]) << 32;
        for k in 0..4 {
            let want = sad_bytes((s0 >> (8 * k)) as u32, b[l], true).wrapping_add(c4[4 * l + k]);
            assert_eq!(d[4 * l + k], want, "mqsad_u32_u8 lane {l} word {k}: {s0:#x} {:#x}", b[l]);
        }
    }
}

/// The f16 nearest to `x` (ties to even), by search among the neighbours of the f32 path's
/// candidate (the test's own correctly rounded f64 -> f16).
fn f16_nearest(x: f64) -> u32 {
    let c = f16(x as f32);
    if !x.is_finite() || h(c).is_infinite() {
        return c;
    }
    let mut best = c;
    for n in [c.wrapping_sub(1) & 0xffff, (c + 1) & 0xffff] {
        if h(n).is_nan() || h(n).is_infinite() || (h(n) < 0.0) != (h(c) < 0.0) {
            continue;
        }
        let (dn, db) = ((f64::from(h(n)) - x).abs(), (f64::from(h(best)) - x).abs());
        if dn < db || (dn == db && n & 1 == 0) {
            best = n;
        }
    }
    best
}

#[test]
fn f16_multiply_adds_mac_madmk_madak_pk_fmac() {
    let Some(mut r) = Rig::new(MISC) else { return };
    // f16 values with full mantissas in [-8, 8] (products and sums round), a few specials.
    let val = |w: u32, l: usize| match l % 16 {
        0 => 0x7c00, // inf
        1 => 0x8000, // -0
        2 => 0x0001, // smallest denormal
        3 => 0x7bff, // 65504
        _ => f16((w % 16001) as f32 / 1000.0 - 8.0 + 1.0 / 1024.0),
    };
    let pairs = |seed: u32| -> Vec<u32> {
        words(seed, 64)
            .iter()
            .enumerate()
            .map(|(l, w)| val(*w, l) | val(w >> 7, l + 5) << 16)
            .collect()
    };
    let (a, b, c) = (pairs(91), pairs(92), pairs(93));
    let mad = |x: u32, y: u32, z: u32| f16(h(f16(h(x) * h(y))) + h(z));
    let fma =
        |x: u32, y: u32, z: u32| f16_nearest(f64::from(h(x)) * f64::from(h(y)) + f64::from(h(z)));
    let same = |x: u32, y: u32| x == y || (h(x).is_nan() && h(y).is_nan());
    let lo = |x: u32| x & 0xffff;
    let hi = |x: u32| x >> 16;
    // v_mac_f16: D.lo = a.lo * b.lo + D.lo (product rounded first), D.hi zeroed.
    let d = lanes3(&mut r, "mac_f16", &a, &b, &c, 1);
    for l in 0..64 {
        let want = mad(lo(a[l]), lo(b[l]), lo(c[l]));
        assert!(
            hi(d[l]) == 0 && same(lo(d[l]), want),
            "mac_f16 lane {l}: {:#x} {:#x} {:#x} -> {:#x}, want {want:#x}",
            a[l],
            b[l],
            c[l],
            d[l]
        );
    }
    let k = 0x4100; // 2.5
    let d = lanes3(&mut r, "madmk_f16", &a, &b, &c, 1);
    for l in 0..64 {
        let want = mad(lo(a[l]), k, lo(b[l]));
        assert!(
            hi(d[l]) == 0 && same(lo(d[l]), want),
            "madmk_f16 lane {l}: -> {:#x}, want {want:#x}",
            d[l]
        );
    }
    let k = 0xbd00; // -1.25
    let d = lanes3(&mut r, "madak_f16", &a, &b, &c, 1);
    for l in 0..64 {
        let want = mad(lo(a[l]), lo(b[l]), k);
        assert!(
            hi(d[l]) == 0 && same(lo(d[l]), want),
            "madak_f16 lane {l}: -> {:#x}, want {want:#x}",
            d[l]
        );
    }
    // v_pk_fmac_f16: both halves fused and rounded once.
    let d = lanes3(&mut r, "pk_fmac_f16", &a, &b, &c, 1);
    for l in 0..64 {
        let (wl, wh) = (fma(lo(a[l]), lo(b[l]), lo(c[l])), fma(hi(a[l]), hi(b[l]), hi(c[l])));
        assert!(
            same(lo(d[l]), wl) && same(hi(d[l]), wh),
            "pk_fmac_f16 lane {l}: {:#x} {:#x} {:#x} -> {:#x}, want {wl:#x} {wh:#x}",
            a[l],
            b[l],
            c[l],
            d[l]
        );
    }
}

#[test]
fn lds_append_and_consume_count_active_lanes() {
    let Some(mut r) = Rig::new(MISC) else { return };
    let a = vec![1000u32, 2000, 3000, 4000];
    let b = words(101, 64);
    let d = lanes3(&mut r, "append_consume", &a, &b, &a, 4);
    // Counters at M0 (8) + offset: ds_append offset:4 is cnt[3], ds_consume (offset 0) cnt[2].
    let odd = b.iter().filter(|w| *w & 1 == 1).count() as u32;
    let two = b.iter().filter(|w| *w & 3 == 2).count() as u32;
    assert!(odd > 0 && two > 0 && odd + two < 64);
    for l in 0..64 {
        assert_eq!(d[4 * l], 4000, "first append returns the old value to every lane (lane {l})");
        let want1 = if b[l] & 1 == 1 { 3000 } else { 0xdead_beef };
        let want2 = if b[l] & 3 == 2 { 4064 } else { 0xdead_beef };
        assert_eq!((d[4 * l + 1], d[4 * l + 2]), (want1, want2), "lane {l} (b {:#x})", b[l]);
    }
    let cnt: Vec<u32> = (0..4).map(|l| d[4 * l + 3]).collect();
    assert_eq!(cnt, [1000, 2000, 3000 - odd, 4000 + 64 + two]);
}

#[test]
fn gfx9_16_bit_multiply_adds_keep_the_other_half() {
    let Some(mut r) = Rig::new(MISC) else { return };
    let (a, b, c) = (words(111, 64), words(112, 64), words(113, 64));
    let old = |l: usize| c[l] ^ 0xa5a5_a5a5;
    let lo = |x: u32| x & 0xffff;
    let hi = |x: u32| x >> 16;
    let keep_lo = |l: usize, v: u32| (old(l) & 0xffff_0000) | (v & 0xffff);
    let keep_hi = |l: usize, v: u32| (old(l) & 0xffff) | v << 16;
    let i16_ = |x: u32| i64::from(x as u16 as i16);
    let d = lanes3(&mut r, "mad_u16", &a, &b, &c, 1);
    for l in 0..64 {
        assert_eq!(
            d[l],
            keep_lo(l, lo(a[l]).wrapping_mul(lo(b[l])).wrapping_add(lo(c[l]))),
            "mad_u16 lane {l}"
        );
    }
    // op_sel:[1,0,1,1]: a's high half * b's low half + c's high half, saturated, into D's high half.
    let d = lanes3(&mut r, "mad_u16_hi_clamp", &a, &b, &c, 1);
    for l in 0..64 {
        let v =
            (u64::from(hi(a[l])) * u64::from(lo(b[l])) + u64::from(hi(c[l]))).min(0xffff) as u32;
        assert_eq!(d[l], keep_hi(l, v), "mad_u16 op_sel clamp lane {l}");
    }
    // Small factors in some lanes so that not every clamped result saturates.
    let bs: Vec<u32> =
        b.iter().enumerate().map(|(l, w)| if l % 2 == 0 { w & 0xff0f } else { *w }).collect();
    let d = lanes3(&mut r, "mad_i16", &a, &bs, &c, 1);
    for l in 0..64 {
        assert_eq!(
            d[l],
            keep_lo(l, (i16_(a[l]) * i16_(bs[l]) + i16_(c[l])) as u32),
            "mad_i16 lane {l}"
        );
    }
    let d = lanes3(&mut r, "mad_i16_clamp", &a, &bs, &c, 1);
    for l in 0..64 {
        let v = (i16_(a[l]) * i16_(bs[l]) + i16_(c[l])).clamp(-32768, 32767) as u32;
        assert_eq!(d[l], keep_lo(l, v), "mad_i16 clamp lane {l}");
    }
    let d = lanes3(&mut r, "mad_i32_i16", &a, &b, &c, 1);
    for l in 0..64 {
        assert_eq!(
            d[l],
            (i16_(a[l]) * i16_(b[l]) + i64::from(c[l] as i32)) as u32,
            "mad_i32_i16 lane {l}"
        );
    }
    // f16: full-mantissa values in [-8, 8] in both halves.
    let pairs = |seed: u32| -> Vec<u32> {
        words(seed, 64)
            .iter()
            .map(|w| {
                f16((w % 16001) as f32 / 1000.0 - 8.0)
                    | f16(((w >> 14) % 16001) as f32 / 1000.0 - 8.0) << 16
            })
            .collect()
    };
    let (fa, fb, fc) = (pairs(114), pairs(115), pairs(116));
    let mad = |x: u32, y: u32, z: u32| f16(h(f16(h(x) * h(y))) + h(z));
    let d = lanes3(&mut r, "mad_f16", &fa, &fb, &fc, 1);
    for l in 0..64 {
        assert_eq!(
            d[l],
            (old_of(&fc, l) & 0xffff_0000) | mad(lo(fa[l]), lo(fb[l]), lo(fc[l])),
            "mad_f16 lane {l}"
        );
    }
    // op_sel:[0,1,0,1], -S1: a.lo * -b.hi + c.lo into D's high half.
    let d = lanes3(&mut r, "mad_f16_hi", &fa, &fb, &fc, 1);
    for l in 0..64 {
        assert_eq!(
            d[l],
            (old_of(&fc, l) & 0xffff) | mad(lo(fa[l]), hi(fb[l]) ^ 0x8000, lo(fc[l])) << 16,
            "mad_f16 op_sel lane {l}"
        );
    }
    let d = lanes3(&mut r, "fma_f16", &fa, &fb, &fc, 1);
    for l in 0..64 {
        let want = f16_nearest(
            f64::from(h(lo(fa[l]))) * f64::from(h(lo(fb[l]))) + f64::from(h(lo(fc[l]))),
        );
        assert_eq!(d[l], (old_of(&fc, l) & 0xffff_0000) | want, "fma_f16 lane {l}");
    }
    // div_fixup: a quotient estimate, special denominators and numerators in some lanes.
    let specials = [0x0000u32, 0x8000, 0x7c00, 0xfc00, 0x7e00];
    let den: Vec<u32> = (0..64).map(|l| if l < 20 { specials[l % 5] } else { lo(fb[l]) }).collect();
    let num: Vec<u32> =
        (0..64).map(|l| if l < 20 { specials[l / 5 % 5] } else { lo(fc[l]) }).collect();
    let d = lanes3(&mut r, "div_fixup_f16", &fa, &den, &num, 1);
    for l in 0..64 {
        let (q, dn, nm) = (h(lo(fa[l])), h(den[l]), h(num[l]));
        let neg = dn.is_sign_negative() != nm.is_sign_negative();
        let want = if dn.is_nan()
            || nm.is_nan()
            || (dn == 0.0 && nm == 0.0)
            || (dn.is_infinite() && nm.is_infinite())
        {
            f32::NAN
        } else if dn == 0.0 || nm.is_infinite() {
            if neg {
                f32::NEG_INFINITY
            } else {
                f32::INFINITY
            }
        } else if dn.is_infinite() || nm == 0.0 {
            if neg {
                -0.0
            } else {
                0.0
            }
        } else if neg {
            -q.abs()
        } else {
            q.abs()
        };
        let have = lo(d[l]);
        assert_eq!(hi(d[l]), hi(old_of(&num, l)), "div_fixup_f16 keeps the high half (lane {l})");
        assert!(
            have == f16(want) || (h(have).is_nan() && want.is_nan()),
            "div_fixup_f16 lane {l}: {q} {dn} {nm} -> {have:#x}, want {want}"
        );
    }
}

/// gfx9's VOP3-only 16-bit `v_min3/max3/med3_{u16,i16,f16}` and `v_add/sub_i16` (rocPRIM's
/// block scan of `unsigned char` with `maximum` stopped at `v_max3_u16`): op_sel picks the
/// source halves and D's half, the other half of D is kept, `clamp` saturates the signed sum,
/// and the f16 forms take `neg`/`abs`. Operands: both signs, equal halves in some lanes.
#[test]
fn gfx9_16_bit_min_max_med3_and_signed_add_keep_the_other_half() {
    let Some(mut r) = Rig::new(MISC) else { return };
    let (a, b, c) = (words(121, 64), words(122, 64), words(123, 64));
    // Some lanes with equal operands (ties) and small values.
    let b: Vec<u32> =
        b.iter().enumerate().map(|(l, w)| if l % 5 == 0 { a[l] } else { *w }).collect();
    let old = |l: usize| c[l] ^ 0xa5a5_a5a5;
    let lo = |x: u32| x & 0xffff;
    let hi = |x: u32| x >> 16;
    let keep_lo = |l: usize, v: u32| (old(l) & 0xffff_0000) | (v & 0xffff);
    let keep_hi = |l: usize, v: u32| (old(l) & 0xffff) | (v & 0xffff) << 16;
    let s = |x: u32| i32::from(x as u16 as i16);
    fn med<T: Ord + Copy>(x: T, y: T, z: T) -> T {
        x.max(y).min(x.min(y).max(z))
    }
    let check = |name: &str, d: &[u32], want: &dyn Fn(usize) -> u32| {
        for l in 0..64 {
            assert_eq!(d[l], want(l), "{name} lane {l}: {:#x} {:#x} {:#x}", a[l], b[l], c[l]);
        }
    };
    let d = lanes3(&mut r, "max3_u16", &a, &b, &c, 1);
    check("max3_u16", &d, &|l| keep_lo(l, lo(a[l]).max(lo(b[l])).max(lo(c[l]))));
    let d = lanes3(&mut r, "min3_u16_hi", &a, &b, &c, 1);
    check("min3_u16 op_sel", &d, &|l| keep_hi(l, hi(a[l]).min(lo(b[l])).min(hi(c[l]))));
    let d = lanes3(&mut r, "med3_u16", &a, &b, &c, 1);
    check("med3_u16", &d, &|l| keep_lo(l, med(lo(a[l]), lo(b[l]), lo(c[l]))));
    let d = lanes3(&mut r, "max3_i16", &a, &b, &c, 1);
    check("max3_i16", &d, &|l| keep_lo(l, s(a[l]).max(s(b[l])).max(s(c[l])) as u32));
    let d = lanes3(&mut r, "min3_i16", &a, &b, &c, 1);
    check("min3_i16", &d, &|l| keep_lo(l, s(a[l]).min(s(b[l])).min(s(c[l])) as u32));
    let d = lanes3(&mut r, "med3_i16_hi", &a, &b, &c, 1);
    check("med3_i16 op_sel", &d, &|l| {
        keep_hi(l, med(s(a[l]), s(b[l] >> 16), s(c[l] >> 16)) as u32)
    });
    let d = lanes3(&mut r, "add_i16_clamp", &a, &b, &c, 1);
    check("add_i16 clamp", &d, &|l| keep_lo(l, (s(a[l]) + s(b[l])).clamp(-32768, 32767) as u32));
    let d = lanes3(&mut r, "sub_i16_hi", &a, &b, &c, 1);
    check("sub_i16 op_sel", &d, &|l| keep_hi(l, (s(a[l] >> 16) - s(b[l])) as u32));
    // f16: values in [-8, 8] in both halves (no NaN), ties in some lanes.
    let pairs = |w: &[u32]| -> Vec<u32> {
        w.iter()
            .map(|w| {
                f16((w % 16001) as f32 / 1000.0 - 8.0)
                    | f16(((w >> 16) % 161) as f32 / 10.0 - 8.0) << 16
            })
            .collect()
    };
    let (fa, fb, fc) = (pairs(&a), pairs(&b), pairs(&c));
    let old = |l: usize| fc[l] ^ 0xa5a5_a5a5;
    let keep_lo = |l: usize, v: u32| (old(l) & 0xffff_0000) | (v & 0xffff);
    let keep_hi = |l: usize, v: u32| (old(l) & 0xffff) | (v & 0xffff) << 16;
    let fmed = |x: f32, y: f32, z: f32| x.max(y).min(x.min(y).max(z));
    let d = lanes3(&mut r, "max3_f16", &fa, &fb, &fc, 1);
    for l in 0..64 {
        let want = h(lo(fa[l])).max(-h(lo(fb[l]))).max(h(lo(fc[l])));
        assert_eq!(d[l], keep_lo(l, f16(want)), "max3_f16 neg lane {l}");
    }
    let d = lanes3(&mut r, "min3_f16_hi", &fa, &fb, &fc, 1);
    for l in 0..64 {
        let want = h(hi(fa[l])).min(h(hi(fb[l]))).min(h(lo(fc[l])));
        assert_eq!(d[l], keep_hi(l, f16(want)), "min3_f16 op_sel lane {l}");
    }
    let d = lanes3(&mut r, "med3_f16", &fa, &fb, &fc, 1);
    for l in 0..64 {
        let want = fmed(h(lo(fa[l])), h(lo(fb[l])), h(lo(fc[l])).abs());
        assert_eq!(d[l], keep_lo(l, f16(want)), "med3_f16 abs lane {l}");
    }
}

/// D's value before a `KD` kernel of tests/isa/vop3_misc.hip ran (c ^ 0xa5a5a5a5).
/// gfx9's VI-era 16-bit multiply-adds (`v_mad_legacy_u16`/`_i16`, which hipcc emits for
/// gfx942 byte arithmetic): the sum in D's low half, the high half zeroed, clamp saturating.
#[test]
fn legacy_16_bit_multiply_adds_zero_the_high_half() {
    let Some(mut r) = Rig::new(MISC) else { return };
    let (a, b, c) = (words(121, 64), words(122, 64), words(123, 64));
    let lo = |x: u32| x & 0xffff;
    let i16_ = |x: u32| i64::from(x as u16 as i16);
    // Small factors in some lanes so that not every clamped result saturates.
    let bs: Vec<u32> =
        b.iter().enumerate().map(|(l, w)| if l % 2 == 0 { w & 0xff0f } else { *w }).collect();
    let d = lanes3(&mut r, "mad_legacy_u16", &a, &bs, &c, 1);
    for l in 0..64 {
        assert_eq!(
            d[l],
            lo(a[l]).wrapping_mul(lo(bs[l])).wrapping_add(lo(c[l])) & 0xffff,
            "mad_legacy_u16 lane {l}"
        );
    }
    let d = lanes3(&mut r, "mad_legacy_u16_clamp", &a, &bs, &c, 1);
    for l in 0..64 {
        assert_eq!(
            d[l],
            (u64::from(lo(a[l])) * u64::from(lo(bs[l])) + u64::from(lo(c[l]))).min(0xffff) as u32,
            "mad_legacy_u16 clamp lane {l}"
        );
    }
    let d = lanes3(&mut r, "mad_legacy_i16", &a, &bs, &c, 1);
    for l in 0..64 {
        assert_eq!(
            d[l],
            (i16_(a[l]) * i16_(bs[l]) + i16_(c[l])) as u32 & 0xffff,
            "mad_legacy_i16 lane {l}"
        );
    }
    let d = lanes3(&mut r, "mad_legacy_i16_clamp", &a, &bs, &c, 1);
    for l in 0..64 {
        assert_eq!(
            d[l],
            (i16_(a[l]) * i16_(bs[l]) + i16_(c[l])).clamp(-32768, 32767) as u32 & 0xffff,
            "mad_legacy_i16 clamp lane {l}"
        );
    }
}

fn old_of(c: &[u32], l: usize) -> u32 {
    c[l] ^ 0xa5a5_a5a5
}

#[test]
fn vop1_norm_conversions_and_byte_saturation() {
    let Some(mut r) = Rig::new(MISC) else { return };
    let f = f32::from_bits;
    let (a, b) = (pack_inputs(121), pack_inputs(122));
    // Low halves from a's values, high halves from b's (their f16 roundings, specials included).
    let x: Vec<u32> = (0..64)
        .map(|l| f16(f(a[l])) | f16(f(b[l])) << 16 | if l == 30 { 0x7e00 } else { 0 })
        .collect();
    let d = lanes3(&mut r, "cvt_norm_i16_f16", &x, &x, &x, 1);
    for l in 0..64 {
        assert_eq!(d[l], snorm(h(x[l] & 0xffff)), "norm_i16_f16 lane {l}: {}", h(x[l] & 0xffff));
    }
    let d = lanes3(&mut r, "cvt_norm_u16_f16", &x, &x, &x, 1);
    for l in 0..64 {
        assert_eq!(d[l], unorm(h(x[l] & 0xffff)), "norm_u16_f16 lane {l}: {}", h(x[l] & 0xffff));
    }
    // SDWA: the high half of S0, negated.
    let d = lanes3(&mut r, "cvt_norm_i16_f16_hi", &x, &x, &x, 1);
    for l in 0..64 {
        assert_eq!(d[l], snorm(-h(x[l] >> 16)), "norm_i16_f16 -hi lane {l}: {}", h(x[l] >> 16));
    }
    let edges =
        [0u32, 0x00ff_0100, 0xffff_8000, 0x7fff_0001, 0x00fe_00ff, 0x0100_ffff, 0x8000_7fff];
    let w: Vec<u32> = words(123, 64)
        .iter()
        .enumerate()
        .map(|(l, v)| {
            if l < edges.len() {
                edges[l]
            } else if l % 2 == 0 {
                v & 0x01ff_01ff
            } else {
                *v
            }
        })
        .collect();
    let sat = |v: u32| ((v as u16 as i16).clamp(0, 255)) as u32;
    let d = lanes3(&mut r, "sat_pk_u8_i16", &w, &w, &w, 1);
    for l in 0..64 {
        assert_eq!(d[l], sat(w[l]) | sat(w[l] >> 16) << 8, "sat_pk_u8_i16 lane {l}: {:#x}", w[l]);
    }
}

const WAITING: &str = "tests/isa/waiting.hip";

#[test]
fn workgroups_that_wait_on_later_ones_run_side_by_side() {
    let Some(mut r) = Rig::new(WAITING) else { return };
    // Workgroup k waits for workgroup k + 1: run one after another, the first never ends.
    // With `s_sleep` in its loop a waiting wave gives its turn up at each sleep; without, it
    // spins through its quantum (2^18 instructions) before the next workgroup may start, which
    // costs a quantum per waiting wave per round (fewer workgroups there).
    const QUANTUM: u64 = 1 << 18;
    for (sleep, n) in [(1u64, 40usize), (0, 8)] {
        let flags = r.alloc(n * 4);
        // `int n, int sleep` share the second 8-byte argument slot.
        let st = r
            .run(
                "isa_reverse_chain",
                &[flags, n as u64 | sleep << 32],
                [64 * n as u32, 1, 1],
                [64, 1, 1],
            )
            .unwrap();
        let f: Vec<i32> = r.download(flags, n);
        let want: Vec<i32> = (0..n).map(|k| (n - k) as i32).collect();
        assert_eq!(f, want, "sleep={sleep}");
        assert_eq!(st.workgroups, n as u64);
        if sleep == 1 {
            assert!(
                st.instructions < QUANTUM,
                "sleeping waves spun: {} instructions",
                st.instructions
            );
        } else {
            assert!(
                st.instructions >= (n as u64 - 1) * QUANTUM,
                "spinning waves gave their turn up early: {} instructions",
                st.instructions
            );
        }
    }
}

/// Workgroups that all wait for the last to arrive (a barrier on a counter, as hipCUB's
/// `GridBarrier`) are all resident after a few rounds: while none ends, the workgroups started
/// double each round, so the spinning costs about 3n quanta, not the n^2 / 2 of one more a round.
#[test]
fn workgroups_waiting_for_the_last_are_started_in_doubling_rounds() {
    let Some(mut r) = Rig::new(WAITING) else { return };
    const QUANTUM: u64 = 1 << 18;
    let n = 24usize;
    let count = r.alloc(4);
    let out = r.alloc(n * 4);
    let st = r
        .run("isa_count_barrier", &[count, out, n as u64], [64 * n as u32, 1, 1], [64, 1, 1])
        .unwrap();
    let seen: Vec<i32> = r.download(out, n);
    assert_eq!(seen, vec![n as i32; n], "a workgroup left the barrier early");
    assert_eq!(st.workgroups, n as u64);
    // Resident 1, 2, 4, 8, 16, then all 24, the last round's 23 spinning before the last
    // arrives: 54 quanta (one more a round: 1 + 2 + ... + 23 = 276).
    assert!(
        st.instructions <= 3 * n as u64 * QUANTUM,
        "the waiting workgroups were started one a round: {} quanta",
        st.instructions / QUANTUM
    );
}

/// A dispatch shared out among threads (as the device model's interpreter threads share one:
/// every n-th workgroup each) runs every workgroup once, and global atomics from all of them
/// on the same words lose no update (a plain read-modify-write would: two threads hammer the
/// same words here).
#[test]
fn a_dispatch_shared_out_among_threads_runs_every_workgroup_once_and_its_atomics_all_land() {
    let Some(mut r) = Rig::new(WAITING) else { return };
    let (groups, items, rounds) = (37usize, 128usize, 8u64);
    for threads in [1u32, 2, 3] {
        r.threads = threads;
        let counts = r.alloc(3 * 4);
        let sum64 = r.alloc(8);
        let fsum = r.alloc(4);
        let marks = r.alloc(groups * 4);
        let st = r
            .run(
                "isa_atomic_counts",
                &[counts, sum64, fsum, marks, rounds],
                [(groups * items) as u32, 1, 1],
                [items as u16, 1, 1],
            )
            .unwrap();
        assert_eq!(st.workgroups, groups as u64, "threads={threads}");
        assert_eq!(st.waves, (groups * items / 64) as u64, "threads={threads}");
        assert_eq!(
            r.download::<i32>(marks, groups),
            vec![1; groups],
            "threads={threads}: each workgroup once"
        );
        let n = (groups * items) as u64;
        let c: Vec<u32> = r.download(counts, 3);
        assert_eq!(
            c,
            vec![(n * rounds) as u32, n as u32 - 1, (n * rounds) as u32],
            "threads={threads}: add, max, CAS increments"
        );
        assert_eq!(
            r.download::<u64>(sum64, 1)[0],
            rounds * n * (n - 1) / 2,
            "threads={threads}: 64-bit adds"
        );
        assert_eq!(
            r.download::<f32>(fsum, 1)[0],
            (n * rounds) as f32,
            "threads={threads}: float adds"
        );
    }
}

#[test]
fn a_cooperative_grid_sync_is_a_gws_barrier_for_the_whole_grid() {
    let Some(mut r) = Rig::new(WAITING) else { return };
    // 8 workgroups of 256 work-items (4 waves each): 32 waves in the barrier's two uses.
    let n = 8usize;
    let data = r.alloc(n * 4);
    let out = r.alloc(2 * n * 4);
    r.run("isa_grid_sync", &[data, out], [256 * n as u32, 1, 1], [256, 1, 1]).unwrap();
    let o: Vec<i32> = r.download(out, 2 * n);
    let sum: i32 = (0..n as i32).map(|k| 3 * k + 1).sum();
    for k in 0..n {
        assert_eq!(
            o[2 * k],
            3 * ((k + 1) % n) as i32 + 1,
            "workgroup {k} read its neighbour's value after the sync"
        );
        assert_eq!(o[2 * k + 1], sum, "workgroup {k} saw every value");
    }
    assert_eq!(r.download::<i32>(data, n), vec![-1; n], "the second sync completed");
}

#[test]
fn a_grid_sync_larger_than_the_device_holds_is_an_error_not_a_hang() {
    let Some(mut r) = Rig::new(WAITING) else { return };
    // One CU holds two workgroups of 16 waves (32 waves per CU): the third never starts.
    r.cus = 1;
    let n = 3usize;
    let data = r.alloc(n * 4);
    let out = r.alloc(2 * n * 4);
    let err =
        r.run("isa_grid_sync", &[data, out], [1024 * n as u32, 1, 1], [1024, 1, 1]).unwrap_err();
    let IsaError::Illegal { message, .. } = &err else { panic!("{err:?}") };
    assert!(
        message.contains("ds_gws_barrier")
            && message.contains("2 workgroups are resident")
            && message.contains("1 more cannot start"),
        "{message}"
    );
    // Two workgroups fit: the same kernel completes.
    let n = 2usize;
    let (data, out) = (r.alloc(n * 4), r.alloc(2 * n * 4));
    r.run("isa_grid_sync", &[data, out], [1024 * n as u32, 1, 1], [1024, 1, 1]).unwrap();
    assert_eq!(r.download::<i32>(out, 2 * n), vec![4, 5, 1, 5]);
}

#[test]
fn a_wave_waiting_for_the_host_sleeps_until_the_host_writes() {
    let Some(mut r) = Rig::new(WAITING) else { return };
    let flag = r.alloc(4);
    let out = r.alloc(4);
    let writer = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(300));
        // SAFETY: `flag` is a 4-byte buffer of the rig, alive until the kernel below ends.
        let host = unsafe { xhsa_emu::sys::devmem::HostMemory::new() };
        xhsa_emu::sys::devmem::DeviceMemory::write(&host, flag, &21i32.to_le_bytes());
    });
    let cpu = cpu_time();
    let started = std::time::Instant::now();
    let st = r.run("isa_wait_for_host", &[flag, out], [64, 1, 1], [64, 1, 1]).unwrap();
    let (wall, cpu) = (started.elapsed(), cpu_time() - cpu);
    writer.join().unwrap();
    assert_eq!(r.download::<i32>(out, 1), vec![42]);
    assert!(wall >= std::time::Duration::from_millis(250), "{wall:?}");
    // The waiting wave sleeps: a few thousand loop turns, far less CPU than wall time.
    assert!(st.instructions < 200_000, "{} wave-instructions while waiting", st.instructions);
    assert!(cpu < wall / 3, "cpu {cpu:?} for {wall:?} of waiting");
}

#[test]
fn s_sendmsg_interrupt_reaches_the_host_with_m0s_low_byte() {
    let Some(mut r) = Rig::new(WAITING) else { return };
    let out = r.alloc(128 * 4);
    r.run("isa_interrupt", &[out], [128, 1, 1], [128, 1, 1]).unwrap();
    assert_eq!(r.interrupts, vec![0x34, 0x34], "one per wave");
    assert_eq!(r.download::<i32>(out, 128), vec![1; 128]);
}

/// CPU time of the calling thread (the interpreter runs a dispatch on it).
fn cpu_time() -> std::time::Duration {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap().split_whitespace().collect();
    // utime and stime are fields 14 and 15 (1-based, counting pid and comm): 11 and 12 here.
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    std::time::Duration::from_millis(ticks * 10)
}

// ---- Double-precision math library calls (tests/isa/fp64_math.hip) ----

/// Units in the last place between two doubles (0 for the same value or both NaN, a large
/// number when one is NaN or they differ in sign).
fn ulps(x: f64, y: f64) -> u64 {
    if x.is_nan() && y.is_nan() || x == y {
        return 0;
    }
    if x.is_nan() || y.is_nan() || x.is_sign_negative() != y.is_sign_negative() {
        return u64::MAX;
    }
    x.to_bits().abs_diff(y.to_bits())
}

/// Operands for the double math: ordinary values over many magnitudes, large arguments (for
/// sin/cos/tan: Payne-Hanek reduction through v_trig_preop_f64), tiny and denormal values,
/// values near overflow, and exact cases.
fn fp64_operands(n: usize) -> (Vec<f64>, Vec<f64>) {
    let w = words(77, 2 * n);
    let mut xs = Vec::with_capacity(n);
    let mut ys = Vec::with_capacity(n);
    for i in 0..n {
        let (u, v) = (w[2 * i], w[2 * i + 1]);
        let frac = |s: u32| 1.0 + f64::from(s % 1_000_003) / 1_000_003.0;
        let sign = |s: u32| if s & 1 == 1 { -1.0 } else { 1.0 };
        let x = match i % 8 {
            // Magnitudes 2^-60 .. 2^60.
            0..=3 => sign(u >> 7) * frac(u) * 2f64.powi((u % 121) as i32 - 60),
            // Large: 2^20 .. 2^1000.
            4 => sign(u >> 7) * frac(u) * 2f64.powi(20 + (u % 981) as i32),
            // Tiny and denormal: 2^-1070 .. 2^-900.
            5 => sign(u >> 7) * frac(u) * 2f64.powi(-1070 + (u % 171) as i32),
            // Near the top of the range.
            6 => sign(u >> 7) * frac(u) * 2f64.powi(1000 + (u % 23) as i32),
            _ => f64::from(u % 2001) - 1000.0,
        };
        let y = match i % 5 {
            // Exponents and divisors: -700 .. 700.
            0 | 1 => (f64::from(v % 1_400_001) - 700_000.0) / 1000.0,
            2 => sign(v >> 7) * frac(v) * 2f64.powi((v % 41) as i32 - 20),
            3 => sign(v >> 7) * frac(v) * 2f64.powi((v % 2001) as i32 - 1000),
            _ => f64::from(v % 41) - 20.0,
        };
        xs.push(x);
        ys.push(y);
    }
    (xs, ys)
}

fn frexp_host(x: f64) -> (f64, i32) {
    if x == 0.0 || !x.is_finite() {
        return (x, 0);
    }
    let mut e = 0;
    let mut m = x;
    while m.abs() >= 1.0 {
        m /= 2.0;
        e += 1;
    }
    while m.abs() < 0.5 {
        m *= 2.0;
        e -= 1;
    }
    (m, e)
}

const FP64_MATH: &str = "tests/isa/fp64_math.hip";

/// Built by the host's hipcc (ROCm 5.2's device libraries).
#[test]
fn fp64_math_agrees_with_the_host() {
    let Some(mut r) = Rig::new(FP64_MATH) else { return };
    fp64_math(&mut r);
}

/// Built by the ROCm 6.4 root's hipcc (its device libraries, clang 21), for gfx90a and gfx942.
#[test]
fn fp64_math_built_by_rocm64_agrees_with_the_host() {
    fp64_math(&mut Rig::gfx90a_rocm64(FP64_MATH));
    fp64_math(&mut Rig::gfx942(FP64_MATH));
}

fn fp64_math(r: &mut HostRig) {
    let (bad_total, report, _) = fp64_math_lanes(r);
    assert!(bad_total == 0, "{report}");
}

/// Runs tests/isa/fp64_math.hip over 4096 lanes; returns the number of wrong results, a report
/// naming the first of each function, and the wrong lanes as (function, lane).
fn fp64_math_lanes(r: &mut HostRig) -> (usize, String, Vec<(&'static str, usize)>) {
    const N_OUT: usize = 24;
    let n = 4096usize;
    let (xs, ys) = fp64_operands(n);
    let (dx, dy) = (r.upload(&xs), r.upload(&ys));
    let dout = r.alloc(n * N_OUT * 8);
    r.run("fp64_math", &[dx, dy, dout, n as u64], [n as u32, 1, 1], [256, 1, 1]).unwrap();
    let out: Vec<f64> = r.download(dout, n * N_OUT);
    // The host's libm (glibc: within an ulp or two) and OCML (documented to 1-4 ulp for
    // these): allowed apart by `tol` ulps; division, sqrt, fma, conversions, ldexp, frexp and
    // fmod are exact on both.
    type F = fn(f64, f64) -> f64;
    let funcs: [(&str, F, u64); N_OUT] = [
        ("div", |a, b| a / b, 0),
        ("sqrt", |a, _| a.abs().sqrt(), 0),
        ("exp", |_, b| b.exp(), 2),
        ("log", |a, _| a.abs().ln(), 2),
        ("sin", |a, _| a.sin(), 2),
        ("cos", |a, _| a.cos(), 2),
        ("log1p", |a, _| a.abs().ln_1p(), 2),
        ("rcp", |a, _| 1.0 / a, 0),
        ("rsqrt", |a, _| 1.0 / a.abs().sqrt(), 2),
        ("pow", |a, b| a.abs().powf(b), 2),
        ("tan", |a, _| a.tan(), 3),
        ("atan2", |a, b| a.atan2(b), 3),
        ("cbrt", |a, _| a.cbrt(), 2),
        ("exp2", |_, b| b.exp2(), 2),
        ("expm1", |_, b| b.exp_m1(), 2),
        ("fma", |a, b| a.mul_add(b, a), 0),
        ("f32 round trip", |a, _| f64::from(a as f32), 0),
        ("ldexp", |a, b| libm_ldexp(a, b as i32), 0),
        ("frexp mantissa", |a, _| frexp_host(a).0, 0),
        ("frexp exponent", |a, _| f64::from(frexp_host(a).1), 0),
        ("fmod", |a, b| a % b, 0),
        ("tanh", |_, b| b.tanh(), 2),
        ("erf", |_, b| libm_erf(b), 2),
        ("log10", |a, _| a.abs().log10(), 2),
    ];
    let mut report = String::new();
    let mut bad_total = 0;
    let mut wrong = Vec::new();
    for (k, (name, f, tol)) in funcs.iter().enumerate() {
        let mut bad = Vec::new();
        for i in 0..n {
            let (a, b) = (xs[i], ys[i]);
            let want = f(a, b);
            let got = out[i * N_OUT + k];
            if ulps(got, want) > *tol {
                bad.push((i, a, b, got, want));
                wrong.push((*name, i));
            }
        }
        if !bad.is_empty() {
            bad_total += bad.len();
            let (i, a, b, got, want) = bad[0];
            report.push_str(&format!("{name}: {} of {n} lanes wrong, first lane {i}: ({a:e}, {b:e}) gave {got:e}, want {want:e}\n", bad.len()));
        }
    }
    (bad_total, report, wrong)
}

/// tests/isa/fp64_math.hip built by `rocm`'s hipcc ("6.4", "7.2"; the host's for `None`) for
/// `arch` with `flags`: the code object's path and a rig over it.
fn fp64_math_variant(rocm: Option<&str>, arch: &str, flags: &[&str]) -> (PathBuf, HostRig) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(FP64_MATH);
    let co = code_object_with(&path, arch, rocm, flags);
    let elf = std::fs::read(&co).unwrap();
    let mut r = HostRig::new(CodeObject::load(&elf).unwrap());
    // HIP's default stack for kernels with calls: 1 KiB per work-item.
    r.private_segment = 1024;
    (co, r)
}

/// Runs each wave of tests/isa/fp64_math.hip holding one of `lanes` with a tracer that writes
/// those lanes' registers before and after every VALU instruction, and checks the trace with
/// tools/emu/isa-gen/trace_check.py: an independent model of each instruction from the ISA's
/// definitions (exact rational arithmetic rounded once, operands read from llvm-objdump's
/// disassembly, 2/pi from Machin's formula). Returns the checker's report (its line `lanes with a
/// difference: N` and the first differing instruction of each such lane).
fn fp64_math_trace_check(co: &Path, r: &mut HostRig, lanes: &[usize], work: &Path) -> String {
    use std::collections::HashMap;
    use std::io::Write;
    use xhsa_emu::isa::dispatch::{set_tracer, TracePoint};
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("isa-gen/trace_check.py");
    let dis = Command::new("llvm-objdump-15").args(["-d", "--mcpu=gfx90a"]).arg(co).output();
    let dis = dis.expect("llvm-objdump-15 (Debian llvm-15, tools/debian-packages.txt)");
    assert!(dis.status.success(), "llvm-objdump-15 -d {}", co.display());
    let (dis_path, trace_path) = (work.with_extension("s"), work.with_extension("trace"));
    std::fs::write(&dis_path, &dis.stdout).unwrap();
    let spec = Command::new("python3").arg(&script).arg("spec").arg(&dis_path).output().unwrap();
    assert!(
        spec.status.success(),
        "trace_check.py spec: {}",
        String::from_utf8_lossy(&spec.stderr)
    );
    let mut regs: HashMap<u64, (Vec<u16>, Vec<usize>)> = HashMap::new();
    for line in String::from_utf8(spec.stdout).unwrap().lines() {
        let mut p = line.split(' ');
        let pc = u64::from_str_radix(p.next().unwrap(), 16).unwrap();
        let list = |s: Option<&str>| -> Vec<usize> {
            s.unwrap_or("")
                .split(',')
                .filter(|x| !x.is_empty())
                .map(|x| x.parse().unwrap())
                .collect()
        };
        let ss = list(p.next()).into_iter().map(|x| x as u16).collect();
        regs.insert(pc, (ss, list(p.next())));
    }
    let base = r.code().base();
    let out = std::sync::Arc::new(std::sync::Mutex::new(std::io::BufWriter::new(
        std::fs::File::create(&trace_path).unwrap(),
    )));
    let (xs, ys) = fp64_operands(4096);
    let waves: std::collections::BTreeSet<usize> = lanes.iter().map(|l| l / 64).collect();
    for w in waves {
        let traced: u64 = lanes.iter().filter(|l| *l / 64 == w).fold(0, |m, l| m | 1 << (l % 64));
        let (regs, out2) = (regs.clone(), out.clone());
        set_tracer(Some(Box::new(move |wave, pc, _inst, at| {
            let Some((ss, vs)) = regs.get(&(pc - base)) else { return };
            let mut o = out2.lock().unwrap();
            for l in (0..64).filter(|l| traced >> l & 1 == 1) {
                let s: Vec<String> =
                    ss.iter().map(|&k| format!("{:x}", wave.s[k as usize])).collect();
                let v: Vec<String> = vs.iter().map(|&k| format!("{:x}", wave.vr(k, l))).collect();
                let at = if at == TracePoint::Before { "B" } else { "A" };
                let (lane, exec) = (w * 64 + l, wave.exec() >> l & 1);
                writeln!(
                    o,
                    "{at} {lane} {:x} {exec} s:{} v:{}",
                    pc - base,
                    s.join(","),
                    v.join(",")
                )
                .unwrap();
            }
        })));
        // The wave's 64 lanes alone (their operands at the same lane numbers).
        let (dx, dy) = (r.upload(&xs[w * 64..w * 64 + 64]), r.upload(&ys[w * 64..w * 64 + 64]));
        let dout = r.alloc(64 * 24 * 8);
        let res = r.run("fp64_math", &[dx, dy, dout, 64], [64, 1, 1], [64, 1, 1]);
        set_tracer(None);
        res.unwrap();
    }
    out.lock().unwrap().flush().unwrap();
    let check = Command::new("python3")
        .arg(&script)
        .arg("check")
        .arg(&dis_path)
        .arg(&trace_path)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&trace_path);
    assert!(
        check.status.success(),
        "trace_check.py check: {}",
        String::from_utf8_lossy(&check.stderr)
    );
    String::from_utf8(check.stdout).unwrap()
}

/// The functions a compile option makes wrong, and that the emulator is not the cause: built
/// with the host's hipcc (ROCm 5.2's device libraries), every option but two gives all 4096
/// lanes right; `-ffp-contract=fast` (which lets the backend fuse any multiply and add,
/// OCML's error-free products and double-double sums included) makes sin, cos and tan of
/// large arguments wrong, and pow and tanh by a few ulps; `-ffast-math` more besides
/// (no infinities or NaNs, approximate functions). For the wrong lanes of the first waves the
/// tracer's check finds every executed instruction's result equal to the ISA's definition:
/// the same IEEE arithmetic gives the same wrong answer.
#[test]
fn fp64_math_under_compile_options_is_wrong_only_where_the_compiled_code_is() {
    assert!(have_hipcc(), "hipcc is not installed: run ./x setup");
    for flags in [
        // -O0 keeps calls and a dynamic stack, whose objects' flat addresses come from
        // s_getreg of SH_MEM_BASES (it read 0: the first store went to address 0x1f0).
        &["-O0"][..],
        &["-O1"],
        &["-fno-finite-math-only"],
        &["-fgpu-flush-denormals-to-zero"],
        &["-munsafe-fp-atomics"],
        &["-fno-hip-fp32-correctly-rounded-divide-sqrt"],
    ] {
        let (_, mut r) = fp64_math_variant(None, "gfx90a", flags);
        let (bad, report, _) = fp64_math_lanes(&mut r);
        assert_eq!(bad, 0, "{flags:?}:\n{report}");
    }
    let work = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("fp64-trace-{}", std::process::id()));
    for (flags, allowed) in [
        (&["-ffp-contract=fast"][..], &["sin", "cos", "tan", "pow", "tanh"][..]),
        (&["-ffast-math"], &[][..]),
    ] {
        let (co, mut r) = fp64_math_variant(None, "gfx90a", flags);
        let (bad, report, wrong) = fp64_math_lanes(&mut r);
        assert!(bad > 0, "{flags:?}: every lane right, the compiled code changed?");
        if !allowed.is_empty() {
            assert!(wrong.iter().all(|(f, _)| allowed.contains(f)), "{flags:?}:\n{report}");
        }
        assert!(wrong.iter().filter(|(f, _)| *f == "sin").count() > 1000, "{flags:?}:\n{report}");
        // The wrong lanes of the first four waves that have any.
        let mut lanes: Vec<usize> = wrong.iter().map(|w| w.1).collect();
        lanes.sort_unstable();
        lanes.dedup();
        let waves: std::collections::BTreeSet<usize> =
            lanes.iter().map(|l| l / 64).take(4).collect();
        lanes.retain(|l| waves.contains(&(l / 64)));
        let check = fp64_math_trace_check(&co, &mut r, &lanes, &work);
        let checked: usize = check
            .lines()
            .find_map(|l| l.strip_prefix("checked: "))
            .and_then(|l| l.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        assert!(checked > 10_000, "{flags:?}: the checker checked {checked} results\n{check}");
        assert!(
            check.contains("lanes with a difference: 0\n"),
            "{flags:?}: an instruction differs from the ISA\n{check}"
        );
    }
}

/// Diagnosis: `XHSA_FP64_TRACE="ROOT[/ARCH]:FLAGS"` (ROOT host, 6.4 or 7.2), optionally
/// `XHSA_FP64_TRACE_FUNCS=sin,cos`: checks every wrong lane of that build with
/// [`fp64_math_trace_check`] and prints the checker's report.
#[test]
#[ignore = "a diagnosis tool: run with --ignored and XHSA_FP64_TRACE"]
fn fp64_math_trace() {
    let v = std::env::var("XHSA_FP64_TRACE").expect("XHSA_FP64_TRACE=ROOT[/ARCH]:FLAGS");
    let only: Option<Vec<String>> = std::env::var("XHSA_FP64_TRACE_FUNCS")
        .ok()
        .map(|f| f.split(',').map(String::from).collect());
    let (root, flags) = v.split_once(':').unwrap();
    let (root, arch) = root.split_once('/').unwrap_or((root, "gfx90a"));
    let flags: Vec<&str> = flags.split_whitespace().collect();
    let rocm = if root == "host" { None } else { Some(root) };
    let (co, mut r) = fp64_math_variant(rocm, arch, &flags);
    let (_, report, wrong) = fp64_math_lanes(&mut r);
    eprintln!("{report}");
    let mut lanes: Vec<usize> = wrong
        .iter()
        .filter(|(f, _)| only.as_ref().is_none_or(|o| o.iter().any(|x| x == f)))
        .map(|w| w.1)
        .collect();
    lanes.sort_unstable();
    lanes.dedup();
    let work = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("fp64-trace-{}", std::process::id()));
    println!("{}", fp64_math_trace_check(&co, &mut r, &lanes, &work));
}

/// Diagnosis: `XHSA_FP64_VARIANTS="host:-ffast-math;6.4:-O1;7.2/gfx942:"` builds and runs
/// each variant of tests/isa/fp64_math.hip, printing its wrong lanes per function.
#[test]
#[ignore = "a diagnosis tool: run with --ignored and XHSA_FP64_VARIANTS"]
fn fp64_math_variants() {
    let spec =
        std::env::var("XHSA_FP64_VARIANTS").expect("XHSA_FP64_VARIANTS=ROOT[/ARCH]:FLAGS;...");
    for v in spec.split(';') {
        let (root, flags) = v.split_once(':').unwrap();
        let (root, arch) = root.split_once('/').unwrap_or((root, "gfx90a"));
        let flags: Vec<&str> = flags.split_whitespace().collect();
        let rocm = if root == "host" { None } else { Some(root) };
        let (_, mut r) = fp64_math_variant(rocm, arch, &flags);
        let (bad, report, wrong) = fp64_math_lanes(&mut r);
        let lanes: std::collections::BTreeSet<usize> = wrong.iter().map(|w| w.1).collect();
        println!(
            "VARIANT {root}/{arch} {flags:?}: {bad} wrong results in {} lanes\n{report}",
            lanes.len()
        );
    }
}

/// ldexp from the host's C library.
fn libm_ldexp(x: f64, e: i32) -> f64 {
    extern "C" {
        fn ldexp(x: f64, e: i32) -> f64;
    }
    // SAFETY: ldexp(3) is a pure function of its arguments.
    unsafe { ldexp(x, e) }
}

/// erf from the host's C library.
fn libm_erf(x: f64) -> f64 {
    extern "C" {
        fn erf(x: f64) -> f64;
    }
    // SAFETY: erf(3) is a pure function of its argument.
    unsafe { erf(x) }
}

/// `v_cndmask_b32_e64` with abs/neg on its sources: the modifiers act on bit 31 of the selected
/// word (as on an f32), for any bits (NaNs and integers too). rocSPARSE's conjugate transpose
/// csrmv selects `x` or `-x` this way; the modifiers were ignored before.
#[test]
fn cndmask_applies_its_source_modifiers() {
    let Some(mut r) = Rig::new(MISC) else { return };
    let mask: u64 = 0x00ff_00ff_0f0f_3333;
    let a = words(61, 64);
    let b = words(62, 64);
    let c = vec![0u32; 64];
    type Want = fn(u32, u32, bool) -> u32;
    let cases: [(&str, Want); 3] = [
        ("cndmask_neg1", |x, y, s| if s { y ^ 1 << 31 } else { x }),
        ("cndmask_abs0_neg1", |x, y, s| if s { y ^ 1 << 31 } else { x & !(1 << 31) }),
        ("cndmask_negabs0", |x, y, s| if s { y } else { x | 1 << 31 }),
    ];
    for (k, want) in cases {
        let d = lanes3(&mut r, k, &a, &b, &c, 1);
        for l in 0..64 {
            assert_eq!(
                d[l],
                want(a[l], b[l], mask >> l & 1 == 1),
                "{k} lane {l}: a {:#x} b {:#x}",
                a[l],
                b[l]
            );
        }
    }
}

/// MUBUF range checking of raw buffers (stride 0): the SGPR offset counts (soffset + offset <
/// num_records), and multi-dword accesses are checked per dword; out of range, loads read 0
/// and stores write nothing. Tensile's GEMM kernels step through matrix rows with soffset and
/// rely on the check to read zeros past the matrix (rocBLAS's NaN guard bytes came through
/// before: gemm_small NaN results).
#[test]
fn raw_buffer_range_checks_count_soffset_and_each_dword() {
    let Some(mut r) = Rig::new("tests/isa/buffer.hip") else { return };
    let src: Vec<u32> = (0..512).map(|k| 0x1000 + k).collect();
    let dsrc = r.upload(&src);
    // soffset 64, 256 bytes: lanes 0..47 read dword 16 + lane, the rest 0.
    let dout = r.upload(&vec![0xdeadu32; 64]);
    r.run("buf_load_soffset", &[dsrc, dout, 64 | 256 << 32], [64, 1, 1], [64, 1, 1]).unwrap();
    let out: Vec<u32> = r.download(dout, 64);
    for l in 0..64 {
        let want = if 64 + 4 * l < 256 { src[16 + l] } else { 0 };
        assert_eq!(out[l], want, "buffer_load_dword soffset 64 lane {l}");
    }
    // dwordx4 with 16 * 32 + 8 bytes: lanes 0..31 whole, lane 32 its first two dwords.
    let records = 16 * 32 + 8;
    let dout = r.upload(&vec![0xdeadu32; 256]);
    r.run("buf_load_x4_records", &[dsrc, dout, records], [64, 1, 1], [64, 1, 1]).unwrap();
    let out: Vec<u32> = r.download(dout, 256);
    for (k, &got) in out.iter().enumerate() {
        let want = if 4 * k < records as usize { src[k] } else { 0 };
        assert_eq!(got, want, "buffer_load_dwordx4 dword {k} (lane {})", k / 4);
    }
    let ddst = r.upload(&vec![0xdeadu32; 256]);
    r.run("buf_store_x4_records", &[ddst, records], [64, 1, 1], [64, 1, 1]).unwrap();
    let out: Vec<u32> = r.download(ddst, 256);
    for (k, &got) in out.iter().enumerate() {
        let want = if 4 * k < records as usize { k as u32 } else { 0xdead };
        assert_eq!(got, want, "buffer_store_dwordx4 dword {k} (lane {})", k / 4);
    }
}

/// D16 loads (`global_load_short_d16`, `*_d16_hi`, the buffer forms) zero the half of the
/// register they do not write: with SRAM ECC on (the emulated devices report
/// `gfx90a:sramecc+`) the unused bits are not preserved. Tensile's half-precision kernels `v_or`
/// a `_d16` and a `_d16_hi` result; kept bits gave rocBLAS f16 gemm_small -90.375 for -90.
#[test]
fn d16_loads_zero_the_half_they_do_not_write() {
    let Some(mut r) = Rig::new("tests/isa/buffer.hip") else { return };
    let src: Vec<u32> = (0..64).map(|k| 0x8001_0001u32.wrapping_mul(k + 3)).collect();
    let halves: Vec<u16> = src.iter().flat_map(|w| [*w as u16, (*w >> 16) as u16]).collect();
    let dsrc = r.upload(&src);
    let dout = r.alloc(64 * 16);
    r.run("load_d16_zero_other_half", &[dsrc, dout], [64, 1, 1], [64, 1, 1]).unwrap();
    let out: Vec<u32> = r.download(dout, 256);
    for l in 0..64 {
        let h = u32::from(halves[l]);
        assert_eq!(out[4 * l..4 * l + 4], [h, h << 16, h, h << 16], "lane {l}");
    }
}

/// Waves of a workgroup leave a barrier together, as on a compute unit: all read an LDS word
/// before work-item 0 overwrites it twenty-odd instructions later (tests/isa/lockstep.hip). Run
/// one wave to its next barrier at a time, waves 1.. read the new word: rocSOLVER's potf2 small
/// kernel then divided by the square root of the square root of the diagonal (POTRF n >= 66
/// with more than one wave: relative error 4e2 where 4e-7 is right).
#[test]
fn waves_leave_a_barrier_together() {
    let Some(mut r) = Rig::new("tests/isa/lockstep.hip") else { return };
    r.group_segment = 64;
    for wg in [64u16, 128, 256, 1024] {
        let dout = r.upload(&vec![0u32; usize::from(wg)]);
        r.run("read_then_overwrite", &[dout], [u32::from(wg), 1, 1], [wg, 1, 1]).unwrap();
        let out: Vec<u32> = r.download(dout, usize::from(wg));
        let late: Vec<usize> = (0..usize::from(wg)).filter(|&t| out[t] != 7).collect();
        assert!(
            late.is_empty(),
            "workgroup of {wg}: {} work-items read the overwritten word (first {:?})",
            late.len(),
            &late[..late.len().min(4)]
        );
    }
}
