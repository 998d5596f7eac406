//! The host CPU's fused multiply-add and wide vectors for the interpreter's double-precision
//! lanes.
//!
//! The emulator is built for the x86-64 baseline, which has no FMA instruction: `f64::mul_add`
//! there is a call into the runtime library per value (a fifth of the time of rocRAND's
//! double-precision kernels went to it). Where the CPU has FMA (detected once at run time), the
//! 64 lanes of a wave are computed by a copy of the loop compiled with it, four lanes per
//! instruction. Both give the IEEE fused multiply-add, rounded once. Joining a VGPR pair's
//! dwords into 64-bit lanes and splitting results back (most of the rest of a double-precision
//! instruction's time) likewise runs in a copy compiled with AVX2 where the CPU has it.

use crate::isa::wave::LANES;

/// `out[l] = a[l] * b[l] + c[l]`, rounded once, for the 64 lanes (f64 bit patterns).
#[inline]
pub fn fma_lanes(a: &[u64; LANES], b: &[u64; LANES], c: &[u64; LANES], out: &mut [u64; LANES]) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("fma") && std::is_x86_feature_detected!("avx2") {
        // SAFETY: the only requirement of calling a function compiled with target features is
        // that the CPU has them: both were detected just above.
        unsafe { fma_lanes_x86(a, b, c, out) };
        return;
    }
    fma_lanes_portable(a, b, c, out);
}

#[inline(always)]
fn fma_lanes_portable(
    a: &[u64; LANES],
    b: &[u64; LANES],
    c: &[u64; LANES],
    out: &mut [u64; LANES],
) {
    for l in 0..LANES {
        let (x, y, z) = (f64::from_bits(a[l]), f64::from_bits(b[l]), f64::from_bits(c[l]));
        out[l] = x.mul_add(y, z).to_bits();
    }
}

/// The same loop compiled with FMA and AVX2 (`mul_add` becomes `vfmadd`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "fma,avx2")]
fn fma_lanes_x86(a: &[u64; LANES], b: &[u64; LANES], c: &[u64; LANES], out: &mut [u64; LANES]) {
    fma_lanes_portable(a, b, c, out);
}

/// `out[l] = ((lo[l] | hi[l] << 32) & and) ^ xor`: a VGPR pair's 64 lanes as 64-bit values
/// (the register file keeps each dword of a pair as its own 64 lanes), with a float source's
/// `abs` (`and`) and `neg` (`xor`) on the sign bit.
#[inline]
pub fn join_lanes(lo: &[u32], hi: &[u32], and: u64, xor: u64, out: &mut [u64; LANES]) {
    let lo: &[u32; LANES] = lo[..LANES].try_into().expect("64 lanes");
    let hi: &[u32; LANES] = hi[..LANES].try_into().expect("64 lanes");
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the only requirement of calling a function compiled with target features is
        // that the CPU has them: AVX2 was detected just above.
        unsafe { join_lanes_x86(lo, hi, and, xor, out) };
        return;
    }
    join_lanes_portable(lo, hi, and, xor, out);
}

#[inline(always)]
fn join_lanes_portable(
    lo: &[u32; LANES],
    hi: &[u32; LANES],
    and: u64,
    xor: u64,
    out: &mut [u64; LANES],
) {
    for l in 0..LANES {
        out[l] = ((u64::from(lo[l]) | u64::from(hi[l]) << 32) & and) ^ xor;
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn join_lanes_x86(
    lo: &[u32; LANES],
    hi: &[u32; LANES],
    and: u64,
    xor: u64,
    out: &mut [u64; LANES],
) {
    join_lanes_portable(lo, hi, and, xor, out);
}

/// The inverse of [`join_lanes`]: 64-bit lane values split into the pair's dwords.
#[inline]
pub fn split_lanes(res: &[u64; LANES], lo: &mut [u32; LANES], hi: &mut [u32; LANES]) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: as in `join_lanes`: AVX2 was detected just above.
        unsafe { split_lanes_x86(res, lo, hi) };
        return;
    }
    split_lanes_portable(res, lo, hi);
}

#[inline(always)]
fn split_lanes_portable(res: &[u64; LANES], lo: &mut [u32; LANES], hi: &mut [u32; LANES]) {
    for l in 0..LANES {
        lo[l] = res[l] as u32;
        hi[l] = (res[l] >> 32) as u32;
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn split_lanes_x86(res: &[u64; LANES], lo: &mut [u32; LANES], hi: &mut [u32; LANES]) {
    split_lanes_portable(res, lo, hi);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_join_and_split_with_the_sign_modifiers() {
        let lo: [u32; LANES] = std::array::from_fn(|l| 0x1000_0000 + l as u32);
        let hi: [u32; LANES] = std::array::from_fn(|l| (l as u32) << 26 | 7);
        let mut out = [0; LANES];
        join_lanes(&lo, &hi, !(1 << 63), 0, &mut out);
        for l in 0..LANES {
            assert_eq!(
                out[l],
                (u64::from(hi[l]) << 32 | u64::from(lo[l])) & !(1 << 63),
                "lane {l}"
            );
        }
        join_lanes(&lo, &hi, u64::MAX, 1 << 63, &mut out);
        let (mut l2, mut h2) = ([0; LANES], [0; LANES]);
        split_lanes(&out, &mut l2, &mut h2);
        assert_eq!(l2, lo);
        assert_eq!(h2, hi.map(|h| h ^ 0x8000_0000));
    }

    #[test]
    fn lanes_are_fused_and_rounded_once() {
        // (1 + 2^-30)^2 - 1 - 2^-29 = 2^-60 exactly: a rounded product would lose it.
        let e = 2f64.powi(-30);
        let a = [(1.0 + e).to_bits(); LANES];
        let c: [f64; LANES] =
            std::array::from_fn(|l| -(1.0 + 2.0 * e) * if l % 2 == 0 { 1.0 } else { 2.0 });
        let mut out = [0; LANES];
        fma_lanes(&a, &a, &c.map(f64::to_bits), &mut out);
        for l in 0..LANES {
            assert_eq!(f64::from_bits(out[l]), (1.0 + e).mul_add(1.0 + e, c[l]), "lane {l}");
        }
        assert_eq!(f64::from_bits(out[0]), 2f64.powi(-60));
        assert_ne!(f64::from_bits(out[0]), (1.0 + e) * (1.0 + e) + c[0]);
    }
}
