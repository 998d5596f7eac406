//! The host CPU's fused multiply-add for the interpreter's double-precision lanes.
//!
//! The emulator is built for the x86-64 baseline, which has no FMA instruction: `f64::mul_add`
//! there is a call into the runtime library per value (a fifth of the time of rocRAND's
//! double-precision kernels went to it). Where the CPU has FMA (detected once at run time), the
//! 64 lanes of a wave are computed by a copy of the loop compiled with it, four lanes per
//! instruction. Both give the IEEE fused multiply-add, rounded once.

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

#[cfg(test)]
mod tests {
    use super::*;

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
