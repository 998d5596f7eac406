//! The ISA interpreter on real code: kernels built with `hipcc --offload-arch=gfx90a` (the
//! device code of tests/programs/isa_exec.hip, which the end-to-end test also runs as a HIP
//! program), loaded from their code object and dispatched over host buffers, their results
//! checked against the CPU. Skipped, with a message, when hipcc is not installed.

use std::path::{Path, PathBuf};
use std::process::Command;

use xhsa_emu::isa::{self, IsaError, Launch};
use xhsa_emu::kernels::naming::kernel_symbols;
use xhsa_emu::kernels::Dispatch;
use xhsa_emu::sys::devmem::HostMemory;

fn have_hipcc() -> bool {
    Command::new("hipcc").arg("--version").output().is_ok_and(|o| o.status.success())
}

/// Builds the device code of `src` into a code object (cached by content in the target's
/// temporary directory).
fn code_object(src: &Path) -> PathBuf {
    let data = std::fs::read(src).unwrap();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in &data {
        h = (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3);
    }
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{}-{h:016x}.hsaco", src.file_stem().unwrap().to_string_lossy()));
    if !out.exists() {
        let tmp = out.with_extension(format!("tmp{}", std::process::id()));
        let st = Command::new("hipcc")
            .args(["--genco", "--no-gpu-bundle-output", "--offload-arch=gfx90a", "-O3", "-o"])
            .arg(&tmp)
            .arg(src)
            .status()
            .expect("run hipcc");
        assert!(st.success(), "hipcc {}", src.display());
        std::fs::rename(&tmp, &out).unwrap();
    }
    out
}

/// A code object loaded at a host address: its PT_LOAD segments at their virtual addresses.
struct Loaded {
    image: Vec<u64>,
    kernels: Vec<(u64, String)>,
}

impl Loaded {
    fn new(path: &Path) -> Loaded {
        let elf = std::fs::read(path).unwrap();
        let u16_at = |o: usize| u16::from_le_bytes(elf[o..o + 2].try_into().unwrap());
        let u64_at = |o: usize| u64::from_le_bytes(elf[o..o + 8].try_into().unwrap());
        let (phoff, phentsize, phnum) = (u64_at(0x20) as usize, usize::from(u16_at(0x36)), usize::from(u16_at(0x38)));
        let segs: Vec<(usize, usize, usize, usize)> = (0..phnum)
            .map(|k| phoff + k * phentsize)
            .filter(|&p| u32::from_le_bytes(elf[p..p + 4].try_into().unwrap()) == 1)
            .map(|p| (u64_at(p + 8) as usize, u64_at(p + 16) as usize, u64_at(p + 32) as usize, u64_at(p + 40) as usize))
            .collect();
        let size = segs.iter().map(|s| s.1 + s.3).max().unwrap();
        let mut image = vec![0u64; size.div_ceil(8) + 1];
        // SAFETY: the Vec<u64> is `image.len() * 8` bytes long and exclusively borrowed here.
        let bytes = unsafe { std::slice::from_raw_parts_mut(image.as_mut_ptr().cast::<u8>(), image.len() * 8) };
        for (off, vaddr, filesz, _) in &segs {
            bytes[*vaddr..vaddr + filesz].copy_from_slice(&elf[*off..off + filesz]);
        }
        Loaded { image, kernels: kernel_symbols(&elf) }
    }

    fn base(&self) -> u64 {
        self.image.as_ptr() as u64
    }

    fn kernel(&self, name_part: &str) -> u64 {
        let (v, _) = self.kernels.iter().find(|(_, n)| n.contains(name_part)).unwrap_or_else(|| panic!("{name_part} in {:?}", self.kernels));
        self.base() + v
    }

    fn range(&self) -> (u64, u64) {
        (self.base(), self.image.len() as u64 * 8)
    }
}

/// Host buffers the device may touch, and a dispatch over them.
struct Rig {
    code: Loaded,
    buffers: Vec<Vec<u64>>,
}

impl Rig {
    fn new(src: &str) -> Option<Rig> {
        if !have_hipcc() {
            eprintln!("SKIP: hipcc not installed (Debian package hipcc)");
            return None;
        }
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(src);
        Some(Rig { code: Loaded::new(&code_object(&path)), buffers: Vec::new() })
    }

    /// A zeroed buffer of `bytes`; returns its address.
    fn alloc(&mut self, bytes: usize) -> u64 {
        self.buffers.push(vec![0u64; bytes.div_ceil(8).max(1)]);
        self.buffers.last().unwrap().as_ptr() as u64
    }

    fn upload<T: Copy>(&mut self, data: &[T]) -> u64 {
        let a = self.alloc(std::mem::size_of_val(data));
        // SAFETY: `a` is a fresh buffer of at least that many bytes.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr().cast::<u8>(), a as *mut u8, std::mem::size_of_val(data)) };
        a
    }

    fn download<T: Copy + Default>(&self, addr: u64, n: usize) -> Vec<T> {
        let mut v = vec![T::default(); n];
        // SAFETY: `addr` is one of this rig's buffers holding at least n values of T.
        unsafe { std::ptr::copy_nonoverlapping(addr as *const T, v.as_mut_ptr(), n) };
        v
    }

    /// Dispatches kernel `name` with `args` (8-byte kernarg slots) over `grid` work-items in
    /// workgroups of `wg`.
    fn run(&mut self, name: &str, args: &[u64], grid: [u32; 3], wg: [u16; 3]) -> Result<isa::Stats, IsaError> {
        let kernarg = self.upload(&[args, &[0u64; 32][..]].concat());
        let mut packet = [0u8; 64];
        packet[0..2].copy_from_slice(&(2u16 | 3 << 9 | 3 << 11).to_le_bytes());
        packet[2..4].copy_from_slice(&(if grid[2] > 1 { 3u16 } else if grid[1] > 1 { 2 } else { 1 }).to_le_bytes());
        for k in 0..3 {
            packet[4 + 2 * k..6 + 2 * k].copy_from_slice(&wg[k].to_le_bytes());
            packet[12 + 4 * k..16 + 4 * k].copy_from_slice(&grid[k].to_le_bytes());
        }
        let ko = self.code.kernel(name);
        packet[32..40].copy_from_slice(&ko.to_le_bytes());
        packet[40..48].copy_from_slice(&kernarg.to_le_bytes());
        let packet_addr = self.upload(&packet);
        let d = Dispatch { kernel_object: ko, grid, wg, kernarg, group_segment: 0, private_segment: 0 };
        let mut ranges: Vec<(u64, u64)> = self.buffers.iter().map(|b| (b.as_ptr() as u64, b.len() as u64 * 8)).collect();
        ranges.push(self.code.range());
        let accessible = |a: u64, l: u64| ranges.iter().any(|&(s, n)| a >= s && a + l <= s + n);
        let launch = Launch { dispatch: &d, packet: packet_addr, queue: 0, dispatch_id: 1 };
        isa::run(&launch, &HostMemory, &accessible, &|| 0)
    }
}

const PROGRAM: &str = "../../tests/programs/isa_exec.hip";

#[test]
fn vector_add_computes_right_results() {
    let Some(mut r) = Rig::new(PROGRAM) else { return };
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

#[test]
fn lds_reduction_with_barriers_computes_right_sums() {
    let Some(mut r) = Rig::new(PROGRAM) else { return };
    let n: usize = 256 * 5 + 77;
    let blocks = n.div_ceil(256);
    let input: Vec<u32> = (0..n as u32).map(|i| i * 7 + 3).collect();
    let din = r.upload(&input);
    let dout = r.alloc(blocks * 4);
    r.run("isa_lds_reduce", &[din, dout, n as u64], [blocks as u32 * 256, 1, 1], [256, 1, 1]).unwrap();
    let out: Vec<u32> = r.download(dout, blocks);
    for b in 0..blocks {
        let want: u32 = input[b * 256..((b + 1) * 256).min(n)].iter().sum();
        assert_eq!(out[b], want, "block {b}");
    }
}

#[test]
fn shuffle_reads_other_lanes() {
    let Some(mut r) = Rig::new(PROGRAM) else { return };
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

#[test]
fn atomic_add_sums_every_element() {
    let Some(mut r) = Rig::new(PROGRAM) else { return };
    let n = 3000usize;
    let input: Vec<u32> = (0..n as u32).map(|i| i % 13 + 1).collect();
    let din = r.upload(&input);
    let dtotal = r.alloc(4);
    r.run("isa_atomic_sum", &[din, dtotal, n as u64], [3072, 1, 1], [128, 1, 1]).unwrap();
    assert_eq!(r.download::<u32>(dtotal, 1)[0], input.iter().sum::<u32>());
}

#[test]
fn fp64_sqrt_and_conversions() {
    let Some(mut r) = Rig::new(PROGRAM) else { return };
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

#[test]
fn an_unimplemented_instruction_fails_the_dispatch_naming_it() {
    let Some(mut r) = Rig::new("tests/isa/unimplemented.hip") else { return };
    let out = r.alloc(256);
    let err = r.run("isa_unimplemented", &[out], [64, 1, 1], [64, 1, 1]).unwrap_err();
    match &err {
        IsaError::Unimplemented { name, .. } => assert_eq!(*name, "v_sat_pk_u8_i16"),
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("v_sat_pk_u8_i16"), "{err}");
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
    eprintln!("ISA interpreter: {} wave-instructions in {:.3} s = {:.1} M wave-instructions/s", s.instructions, secs, rate / 1e6);
    assert!(rate > 100_000.0, "{rate}");
}
