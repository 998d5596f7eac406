//! The vector ALU's double-precision fast path: the f64 opcodes of the device libraries' math
//! and of rocRAND's samplers (add, multiply, fused multiply-add, min/max, `ldexp`, the division
//! macro's `v_div_scale`/`v_rcp`/`v_div_fmas`/`v_div_fixup`) with a VGPR pair destination and
//! no DPP, SDWA or output modifier; `abs`/`neg` on the sources are applied (the division macro
//! negates). Sources are read as 64 lanes of f64 at once and results written as a block; fused
//! multiply-adds use the CPU's FMA over all lanes where it has one (`sys::cpu`). rocRAND's
//! Poisson test ran its f64 instructions at 3-6 M wave-instructions/s through the general path
//! (`valu::vop`), whose semantics these restate exactly (the tests compare the two on random
//! operands). Chosen once per decoded instruction ([`handler`]).

use super::valu::{blend, lanes};
use super::vop::{div_scale_f64, fixup64, fma_scaled, ldexp64};
use super::{Ctx, ExecError, Handler, Step};
use crate::isa::decode::names::vop3 as o;
use crate::isa::decode::{Family, Inst};
use crate::isa::operand::{self, Ty};
use crate::isa::wave::{Apertures, Wave, LANES};
use crate::sys::cpu::{fma_lanes, join_lanes, split_lanes};

const SIGN: u64 = 1 << 63;

/// Whether `i` is in the form the fast path covers: sources `sources` (an f64 op may have a
/// 32-bit one, `ldexp`'s exponent) neither AGPRs nor selected halves.
fn plain(i: &Inst) -> bool {
    matches!(i.family, Family::Vop1 | Family::Vop2 | Family::Vop3)
        && i.dpp.is_none()
        && i.sdwa.is_none()
        && (i.op_sel | i.omod) == 0
        && !i.clamp
        && operand::is_vgpr(i.dst)
        && i.src[..3].iter().all(|&c| !operand::is_agpr(c))
}

/// An op computed lane by lane from `$n` sources (`|a| f64 expression`, `a` the lanes' f64
/// source values).
macro_rules! lanewise {
    ($n:literal, |$a:ident| $e:expr) => {
        (|w: &mut Wave, i: &Inst, c: &mut Ctx| {
            let exec = w.exec();
            let [s0, s1, s2, out] = &mut *c.lanes;
            for (k, x) in [&mut *s0, &mut *s1, &mut *s2].into_iter().enumerate().take($n) {
                source(w, i, k, &c.apertures, x);
            }
            for l in 0..LANES {
                let $a = [f64::from_bits(s0[l]), f64::from_bits(s1[l]), f64::from_bits(s2[l])];
                out[l] = f64::to_bits($e);
            }
            write(w, i, exec, out);
            Ok(Step::Next)
        }) as Handler
    };
}

/// The fast handler of `i` (opcode `op` in the VOP3 numbering), if it has one.
pub fn handler(i: &Inst, op: u16) -> Option<Handler> {
    if !plain(i) {
        return None;
    }
    Some(match op {
        o::V_ADD_F64 => lanewise!(2, |a| a[0] + a[1]),
        o::V_MUL_F64 => lanewise!(2, |a| a[0] * a[1]),
        o::V_MIN_F64 => lanewise!(2, |a| a[0].min(a[1])),
        o::V_MAX_F64 => lanewise!(2, |a| a[0].max(a[1])),
        o::V_RCP_F64 => lanewise!(1, |a| 1.0 / a[0]),
        o::V_DIV_FIXUP_F64 => lanewise!(3, |a| fixup64(a[0], a[1], a[2])),
        o::V_FMA_F64 => fma as Handler,
        o::V_FMAC_F64 => fmac as Handler,
        o::V_DIV_FMAS_F64 => div_fmas as Handler,
        o::V_LDEXP_F64 => ldexp as Handler,
        o::V_DIV_SCALE_F64 => div_scale as Handler,
        _ => return None,
    })
}

/// Source `k`'s 64 lanes as f64, with its `abs`/`neg`: a VGPR pair (one the wave does not
/// have reads 0, as in the general path), or an SGPR pair or constant splat.
#[inline(always)]
fn source(w: &Wave, i: &Inst, k: usize, ap: &Apertures, out: &mut [u64; LANES]) {
    let and = if i.abs >> k & 1 == 1 { !SIGN } else { u64::MAX };
    let xor = if i.neg >> k & 1 == 1 { SIGN } else { 0 };
    source_code(w, i.src[k], i.literal, ap, and, xor, out);
}

#[inline(always)]
fn source_code(
    w: &Wave,
    code: u16,
    literal: u32,
    ap: &Apertures,
    and: u64,
    xor: u64,
    out: &mut [u64; LANES],
) {
    if operand::is_vgpr(code) {
        let r = usize::from(code - operand::VGPR0) * LANES;
        if let Some(pair) = w.v.get(r..r + 2 * LANES) {
            let (lo, hi) = pair.split_at(LANES);
            join_lanes(lo, hi, and, xor, out);
            return;
        }
        out.fill(xor);
    } else {
        out.fill((w.sread(code, literal, Ty::F64, ap) & and) ^ xor);
    }
}

/// Writes the active lanes of `res` to the destination VGPR pair (nothing when the wave lacks
/// either register, as in the general path).
#[inline(always)]
fn write(w: &mut Wave, i: &Inst, exec: u64, res: &[u64; LANES]) {
    let r = usize::from(i.dst - operand::VGPR0) * LANES;
    let Some(pair) = w.v.get_mut(r..r + 2 * LANES) else { return };
    let (lo, hi) = pair.split_at_mut(LANES);
    let lo: &mut [u32; LANES] = lo.try_into().expect("64 lanes");
    let hi: &mut [u32; LANES] = hi.try_into().expect("64 lanes");
    if exec == u64::MAX {
        split_lanes(res, lo, hi);
    } else {
        let mut l32 = [0u32; LANES];
        let mut h32 = [0u32; LANES];
        split_lanes(res, &mut l32, &mut h32);
        blend(lo, exec, &l32);
        blend(hi, exec, &h32);
    }
}

fn fma(w: &mut Wave, i: &Inst, c: &mut Ctx) -> Result<Step, ExecError> {
    let exec = w.exec();
    let [a, b, d, out] = &mut *c.lanes;
    source(w, i, 0, &c.apertures, a);
    source(w, i, 1, &c.apertures, b);
    source(w, i, 2, &c.apertures, d);
    fma_lanes(a, b, d, out);
    write(w, i, exec, out);
    Ok(Step::Next)
}

/// `v_fmac_f64`: src2 is the destination (without modifiers).
fn fmac(w: &mut Wave, i: &Inst, c: &mut Ctx) -> Result<Step, ExecError> {
    let exec = w.exec();
    let [a, b, d, out] = &mut *c.lanes;
    source(w, i, 0, &c.apertures, a);
    source(w, i, 1, &c.apertures, b);
    source_code(w, i.dst, i.literal, &c.apertures, u64::MAX, 0, d);
    fma_lanes(a, b, d, out);
    write(w, i, exec, out);
    Ok(Step::Next)
}

/// `v_div_fmas_f64`: fma, and in lanes whose VCC is set the scaled fma of `vop::div_fmas_f64`.
fn div_fmas(w: &mut Wave, i: &Inst, c: &mut Ctx) -> Result<Step, ExecError> {
    let exec = w.exec();
    let vcc = w.vcc();
    let [a, b, d, out] = &mut *c.lanes;
    source(w, i, 0, &c.apertures, a);
    source(w, i, 1, &c.apertures, b);
    source(w, i, 2, &c.apertures, d);
    fma_lanes(a, b, d, out);
    for l in lanes(vcc & exec) {
        let (x, y, z) = (f64::from_bits(a[l]), f64::from_bits(b[l]), f64::from_bits(d[l]));
        let k = if super::vop::exponent64(z) > 1023 { 128 } else { -128 };
        out[l] = fma_scaled(x, y, z, k).to_bits();
    }
    write(w, i, exec, out);
    Ok(Step::Next)
}

/// `v_ldexp_f64`: src1 is a 32-bit integer (no float modifier applies to it).
fn ldexp(w: &mut Wave, i: &Inst, c: &mut Ctx) -> Result<Step, ExecError> {
    let exec = w.exec();
    let [a, e, _, out] = &mut *c.lanes;
    source(w, i, 0, &c.apertures, a);
    let code = i.src[1];
    if operand::is_vgpr(code) {
        let r = usize::from(code - operand::VGPR0) * LANES;
        match w.v.get(r..r + LANES) {
            Some(x) => {
                for l in 0..LANES {
                    e[l] = u64::from(x[l]);
                }
            }
            None => e.fill(0),
        }
    } else {
        e.fill(w.sread(code, i.literal, Ty::B32, &c.apertures));
    }
    for l in 0..LANES {
        out[l] = ldexp64(f64::from_bits(a[l]), e[l] as u32 as i32).to_bits();
    }
    write(w, i, exec, out);
    Ok(Step::Next)
}

/// `v_div_scale_f64`: D and the lanes' VCC bits (to `sdst`, active lanes only).
fn div_scale(w: &mut Wave, i: &Inst, c: &mut Ctx) -> Result<Step, ExecError> {
    let r = usize::from(i.dst - operand::VGPR0) * LANES;
    if r + 2 * LANES > w.v.len() {
        // The general path writes the half the wave has.
        return super::vop::div_scale(w, i, c, true);
    }
    let exec = w.exec();
    let [a, b, d, out] = &mut *c.lanes;
    source(w, i, 0, &c.apertures, a);
    source(w, i, 1, &c.apertures, b);
    source(w, i, 2, &c.apertures, d);
    // `vop::div_scale_f64`'s shortcut for every lane at once (integer tests on the exponent
    // fields, which vectorise): both operands normal, den < 2^1022, the exponents' difference
    // in [-1021, 768); D is S0, or S0 * 2^128 for a numerator below 2^-969 (exact by the
    // exponent field while S0's stays normal). The other lanes take the full branches.
    let mut slow = 0u64;
    for l in 0..LANES {
        let (en, ed) = ((d[l] >> 52 & 0x7ff) as i64, (b[l] >> 52 & 0x7ff) as i64);
        let es = (a[l] >> 52 & 0x7ff) as i64;
        let up = en <= 53;
        let ok = (1..=2046).contains(&en)
            && (1..=2044).contains(&ed)
            && (-1021..768).contains(&(en - ed))
            && (!up || (1..=2046 - 128).contains(&es));
        out[l] = if up { a[l] + (128 << 52) } else { a[l] };
        slow |= u64::from(!ok) << l;
    }
    let mut vcc = 0u64;
    for l in lanes(slow) {
        let (x, y, z) = (f64::from_bits(a[l]), f64::from_bits(b[l]), f64::from_bits(d[l]));
        let (r, v) = div_scale_f64(x, y, z);
        out[l] = r.to_bits();
        vcc |= u64::from(v) << l;
    }
    write(w, i, exec, out);
    w.set_s64(i.sdst, vcc & exec);
    Ok(Step::Next)
}

/// `v_pk_mov_b32` (VOP3P): D.lo = src0's dword `op_sel[0]`, D.hi = src1's dword `op_sel[1]`,
/// for the plain form (VGPR pair destination, no AGPR source); the compiler's 64-bit move.
pub fn pk_mov_handler(i: &Inst) -> Option<Handler> {
    (i.family == Family::Vop3p
        && operand::is_vgpr(i.dst)
        && i.src[..2].iter().all(|&c| !operand::is_agpr(c)))
    .then_some(pk_mov as Handler)
}

fn pk_mov(w: &mut Wave, i: &Inst, c: &mut Ctx) -> Result<Step, ExecError> {
    let r = usize::from(i.dst - operand::VGPR0) * LANES;
    if r + 2 * LANES > w.v.len() {
        // The general path writes the half the wave has.
        return (super::vop::vop3p(i.op).expect("v_pk_mov_b32 has a general handler"))(w, i, c);
    }
    let exec = w.exec();
    let [lo, hi, ..] = &mut *c.lanes32;
    for (k, half) in [(0usize, &mut *lo), (1, &mut *hi)] {
        let code = i.src[k];
        let sel = usize::from(i.op_sel >> k & 1);
        if operand::is_vgpr(code) {
            let s = usize::from(code - operand::VGPR0) * LANES;
            if s + 2 * LANES <= w.v.len() {
                half.copy_from_slice(&w.v[s + sel * LANES..s + (sel + 1) * LANES]);
            } else {
                half.fill(0);
            }
        } else {
            // As `vop::pk_src`: an inline float constant is an f32 (its high dword 0), anything
            // else a 64-bit scalar source.
            let ty =
                if operand::inline_constant(code, Ty::F32).is_some() { Ty::F32 } else { Ty::B64 };
            half.fill((w.sread(code, i.literal, ty, &c.apertures) >> (32 * sel)) as u32);
        }
    }
    let (dlo, dhi) = w.v[r..r + 2 * LANES].split_at_mut(LANES);
    blend(dlo, exec, &lo[..]);
    blend(dhi, exec, &hi[..]);
    Ok(Step::Next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::isa::exec::vop;
    use crate::isa::exec::TestRng as Rng;
    use crate::isa::lds::Lds;
    use crate::isa::memory::Memory;
    use crate::sys::devmem::fake::FakeMemory;

    /// A double whose exponent is anywhere, or near 1, or a special value.
    fn value(r: &mut Rng) -> u64 {
        let x = r.next_u64();
        match x % 16 {
            0 => 0,
            1 => 0x7ff0_0000_0000_0000,
            2 => 0x7ff8_0000_0000_0000 | (x >> 20 & 0xff),
            3 => x & ((1 << 52) - 1), // denormal
            4..=9 => (x & (SIGN | ((1 << 52) - 1))) | (1023 - 40 + (x >> 52) % 80) << 52,
            _ => x,
        }
    }

    /// A source code: a VGPR pair (sometimes one the wave does not have), an SGPR pair, an
    /// inline constant (integer or float) or the literal.
    fn source_code(r: &mut Rng) -> u16 {
        match r.next_u64() % 8 {
            0 => (r.next_u64() % 100) as u16 & !1,
            1 => 128 + (r.next_u64() % 81) as u16,
            2 => 240 + (r.next_u64() % 9) as u16,
            3 => operand::LITERAL,
            4 => operand::VGPR0 + 7,
            _ => operand::VGPR0 + (r.next_u64() % 7) as u16,
        }
    }

    /// Every opcode with a fast handler, in plain instances over random registers, sources,
    /// modifiers and EXEC and VCC masks: the fast path leaves the wave exactly as the general
    /// path does (NaN payloads aside).
    #[test]
    fn the_fast_path_computes_what_the_general_path_does() {
        let mem = FakeMemory::default();
        let none = |_: u64, _: u64| false;
        let memory = Memory::new(&mem, &none);
        let mut lds = Lds::new(0);
        let mut ctx = Ctx::for_test(&memory, &mut lds);
        let mut r = Rng(0x2545_f491_4f6c_dd1d);
        let mut covered = 0;
        let mut nan_payloads = 0;
        for op in 0..0x400u16 {
            let mut i = Inst::probe(Family::Vop3, op);
            i.name = Family::Vop3.name(op).unwrap_or("?");
            i.dst = operand::VGPR0 + 2;
            i.src = [operand::VGPR0, operand::VGPR0 + 2, operand::VGPR0 + 4, 0];
            let Some(fast) = handler(&i, op) else { continue };
            let general = vop::valu(op).expect("a fast opcode has a general handler");
            covered += 1;
            for round in 0..400 {
                let mut w = Wave::new(8, 0, 0);
                for k in 0..4 {
                    for l in 0..LANES {
                        let v = value(&mut r);
                        w.v[2 * k * LANES + l] = v as u32;
                        w.v[(2 * k + 1) * LANES + l] = (v >> 32) as u32;
                    }
                }
                for k in 0..64 {
                    let v = value(&mut r);
                    w.s[2 * k] = v as u32;
                    w.s[2 * k + 1] = (v >> 32) as u32;
                }
                // ldexp's exponents: small ones too.
                if round % 2 == 0 {
                    for x in w.v[LANES * 2..LANES * 4].iter_mut() {
                        *x = (*x % 2200).wrapping_sub(1100);
                    }
                }
                let exec = match round % 4 {
                    0 => u64::MAX,
                    1 => 0,
                    _ => r.next_u64(),
                };
                w.set_exec(exec);
                w.set_s64(operand::VCC_LO, r.next_u64());
                i.dst = if round % 17 == 0 {
                    operand::VGPR0 + 7
                } else {
                    operand::VGPR0 + (r.next_u64() % 7) as u16
                };
                i.src = [source_code(&mut r), source_code(&mut r), source_code(&mut r), 0];
                i.literal = r.next_u64() as u32;
                i.abs = (r.next_u64() % 8) as u8;
                i.neg = (r.next_u64() % 8) as u8;
                i.sdst = [operand::VCC_LO, 10, 20][(r.next_u64() % 3) as usize];
                if handler(&i, op).is_none() {
                    continue;
                }
                let mut wf = w.clone();
                let (a, b) = (fast(&mut wf, &i, &mut ctx), general(&mut w, &i, &mut ctx));
                assert_eq!(a, b, "{}", i.name);
                let nan_only = wf.v.iter().zip(&w.v).enumerate().all(|(k, (x, y))| {
                    x == y || {
                        let (l, reg) = (k % LANES, k / LANES);
                        let pair = |v: &Vec<u32>, base: usize| {
                            f64::from_bits(
                                u64::from(v[base * LANES + l])
                                    | u64::from(v[(base + 1) * LANES + l]) << 32,
                            )
                        };
                        let base = usize::from(i.dst - operand::VGPR0);
                        (reg == base || reg == base + 1)
                            && pair(&wf.v, base).is_nan()
                            && pair(&w.v, base).is_nan()
                    }
                });
                if wf.v != w.v && nan_only {
                    nan_payloads += 1;
                }
                assert!(
                    (wf.v == w.v || nan_only) && wf.s == w.s && wf.scc == w.scc,
                    "{} differs: sources {:?}, abs {} neg {}, literal {:#x}, exec {exec:#x}",
                    i.name,
                    i.src,
                    i.abs,
                    i.neg,
                    i.literal
                );
            }
        }
        assert!(covered >= 11, "only {covered} opcodes have a fast handler");
        // NaN payloads may differ, but not often: most NaN results agree bit for bit.
        assert!(nan_payloads < 200, "{nan_payloads} instructions differ in NaN payloads");
    }

    /// `v_pk_mov_b32`'s fast form against its general handler: random sources (VGPR pairs,
    /// one the wave lacks, SGPR pairs, inline constants, the literal), `op_sel`, EXEC, and
    /// destinations overlapping the sources.
    #[test]
    fn pk_mov_computes_what_the_general_path_does() {
        let mem = FakeMemory::default();
        let none = |_: u64, _: u64| false;
        let memory = Memory::new(&mem, &none);
        let mut lds = Lds::new(0);
        let mut ctx = Ctx::for_test(&memory, &mut lds);
        let op = crate::isa::decode::names::vop3p::V_PK_MOV_B32;
        let general = vop::vop3p(op).expect("general handler");
        let mut r = Rng(0x1234_5678_9abc_def1);
        for round in 0..2000 {
            let mut i = Inst::probe(Family::Vop3p, op);
            i.dst = operand::VGPR0 + (r.next_u64() % 8) as u16;
            i.src = [source_code(&mut r), source_code(&mut r), 0, 0];
            i.literal = r.next_u64() as u32;
            i.op_sel = (r.next_u64() % 4) as u8;
            let fast = pk_mov_handler(&i).expect("plain form");
            let mut w = Wave::new(8, 0, 0);
            for x in w.v.iter_mut() {
                *x = r.next_u64() as u32;
            }
            for x in w.s.iter_mut() {
                *x = r.next_u64() as u32;
            }
            w.set_exec(if round % 3 == 0 { u64::MAX } else { r.next_u64() });
            let mut wf = w.clone();
            assert_eq!(fast(&mut wf, &i, &mut ctx), general(&mut w, &i, &mut ctx));
            assert!(wf.v == w.v, "sources {:?} op_sel {} dst {}", i.src, i.op_sel, i.dst);
        }
    }

    #[test]
    fn modified_agpr_or_dpp_forms_take_the_general_path() {
        let mut i = Inst::probe(Family::Vop3, o::V_ADD_F64);
        i.dst = operand::VGPR0;
        i.src = [operand::VGPR0, operand::VGPR0 + 2, 0, 0];
        i.neg = 3;
        assert!(handler(&i, o::V_ADD_F64).is_some());
        for change in 0..4 {
            let mut j = i.clone();
            match change {
                0 => j.omod = 1,
                1 => j.clamp = true,
                2 => j.src[1] = operand::AGPR0,
                _ => j.dst = operand::AGPR0,
            }
            assert!(handler(&j, o::V_ADD_F64).is_none(), "change {change}");
        }
    }
}
