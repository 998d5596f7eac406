//! The vector ALU's fast path: the common 32-bit integer opcodes in their plain form (VGPR
//! destination, 32-bit sources, no DPP, SDWA, input or output modifiers), computed on `u32`
//! lanes in loops the compiler vectorises; also the add/sub family with a carry out (and in)
//! and `v_mad_u64_u32`, which the random-number and 64-bit address arithmetic of AMD's
//! libraries is made of (rocRAND's test programs spent a fifth of their time in their general
//! handlers). Chosen once per decoded instruction
//! ([`handler`]); everything else goes through the general path (`valu::vop`), whose
//! semantics these restate exactly (the tests compare the two on random operands).

use super::valu::blend;
use super::{Ctx, ExecError, Handler, Step};
use crate::isa::decode::names::vop3 as o;
use crate::isa::decode::{Family, Inst};
use crate::isa::operand::{self, Ty};
use crate::isa::wave::{Apertures, Wave, LANES};

/// Whether `i` is in the form the fast path covers.
fn plain(i: &Inst, sources: usize) -> bool {
    matches!(i.family, Family::Vop1 | Family::Vop2 | Family::Vop3)
        && i.dpp.is_none()
        && i.sdwa.is_none()
        && (i.abs | i.neg | i.op_sel | i.omod) == 0
        && !i.clamp
        && operand::is_vgpr(i.dst)
        && i.src[..sources].iter().all(|&c| !operand::is_agpr(c))
}

macro_rules! fast {
    ($n:literal, |$a:ident| $e:expr) => {
        Some((
            $n,
            (|w: &mut Wave, i: &Inst, c: &mut Ctx| run::<$n>(w, i, c, |$a: [u32; 3]| $e))
                as Handler,
        ))
    };
}

/// A shift `f(src1, src0 & 31)`: by a constant amount (the usual case) one shift for all lanes,
/// which vectorises; by a VGPR, lane by lane.
macro_rules! shift {
    (|$x:ident, $n:ident| $e:expr) => {
        Some((
            2,
            (|w: &mut Wave, i: &Inst, c: &mut Ctx| {
                if operand::is_vgpr(i.src[0]) {
                    run::<2>(w, i, c, |a: [u32; 3]| {
                        let ($x, $n) = (a[1], a[0] & 31);
                        $e
                    })
                } else {
                    let $n = w.sread(i.src[0], i.literal, Ty::B32, &c.apertures) as u32 & 31;
                    run::<2>(w, i, c, |a: [u32; 3]| {
                        let $x = a[1];
                        $e
                    })
                }
            }) as Handler,
        ))
    };
}

/// An add or subtract with a carry (borrow) out to `sdst`, and with `CIN` one in from src2's
/// SGPR pair: `f(src0, src1, carry in) -> (result, carry out)`.
macro_rules! carry {
    ($cin:literal, |$a:ident, $b:ident, $c:ident| $e:expr) => {
        Some((
            2,
            (|w: &mut Wave, i: &Inst, c: &mut Ctx| {
                run_carry::<$cin>(w, i, c, |$a: u32, $b: u32, $c: u32| $e)
            }) as Handler,
        ))
    };
}

/// The fast handler of `i` (opcode `op` in the VOP3 numbering), if it has one.
pub fn handler(i: &Inst, op: u16) -> Option<Handler> {
    let (sources, h) = match op {
        o::V_MOV_B32 => fast!(1, |a| a[0]),
        o::V_NOT_B32 => fast!(1, |a| !a[0]),
        o::V_AND_B32 => fast!(2, |a| a[0] & a[1]),
        o::V_OR_B32 => fast!(2, |a| a[0] | a[1]),
        o::V_XOR_B32 => fast!(2, |a| a[0] ^ a[1]),
        o::V_XNOR_B32 => fast!(2, |a| !(a[0] ^ a[1])),
        o::V_ADD_U32 => fast!(2, |a| a[0].wrapping_add(a[1])),
        o::V_SUB_U32 => fast!(2, |a| a[0].wrapping_sub(a[1])),
        o::V_SUBREV_U32 => fast!(2, |a| a[1].wrapping_sub(a[0])),
        o::V_LSHLREV_B32 => shift!(|x, n| x << n),
        o::V_LSHRREV_B32 => shift!(|x, n| x >> n),
        o::V_ASHRREV_I32 => shift!(|x, n| ((x as i32) >> n) as u32),
        o::V_MIN_U32 => fast!(2, |a| a[0].min(a[1])),
        o::V_MAX_U32 => fast!(2, |a| a[0].max(a[1])),
        o::V_MIN_I32 => fast!(2, |a| (a[0] as i32).min(a[1] as i32) as u32),
        o::V_MAX_I32 => fast!(2, |a| (a[0] as i32).max(a[1] as i32) as u32),
        o::V_MUL_LO_U32 => fast!(2, |a| a[0].wrapping_mul(a[1])),
        o::V_MUL_U32_U24 => fast!(2, |a| (a[0] & 0xff_ffff).wrapping_mul(a[1] & 0xff_ffff)),
        o::V_ADD3_U32 => fast!(3, |a| a[0].wrapping_add(a[1]).wrapping_add(a[2])),
        o::V_LSHL_ADD_U32 => fast!(3, |a| (a[0] << (a[1] & 31)).wrapping_add(a[2])),
        o::V_ADD_LSHL_U32 => fast!(3, |a| a[0].wrapping_add(a[1]) << (a[2] & 31)),
        o::V_LSHL_OR_B32 => fast!(3, |a| (a[0] << (a[1] & 31)) | a[2]),
        o::V_AND_OR_B32 => fast!(3, |a| (a[0] & a[1]) | a[2]),
        o::V_OR3_B32 => fast!(3, |a| a[0] | a[1] | a[2]),
        o::V_XAD_U32 => fast!(3, |a| (a[0] ^ a[1]).wrapping_add(a[2])),
        o::V_BFI_B32 => fast!(3, |a| (a[0] & a[1]) | (!a[0] & a[2])),
        o::V_BFE_U32 => fast!(3, |a| {
            let (off, wd) = (a[1] & 31, a[2] & 31);
            if wd == 0 {
                0
            } else {
                (a[0] >> off) & ((1 << wd) - 1)
            }
        }),
        o::V_BFE_I32 => fast!(3, |a| {
            let (off, wd) = (a[1] & 31, a[2] & 31);
            if wd == 0 {
                0
            } else {
                (((a[0] >> off) << (32 - wd)) as i32 >> (32 - wd)) as u32
            }
        }),
        o::V_ADD_CO_U32 => carry!(false, |a, b, _c| {
            let (r, o) = a.overflowing_add(b);
            (r, o)
        }),
        o::V_SUB_CO_U32 => carry!(false, |a, b, _c| a.overflowing_sub(b)),
        o::V_SUBREV_CO_U32 => carry!(false, |a, b, _c| b.overflowing_sub(a)),
        o::V_ADDC_CO_U32 => carry!(true, |a, b, c| {
            let t = u64::from(a) + u64::from(b) + u64::from(c);
            (t as u32, t >> 32 != 0)
        }),
        o::V_SUBB_CO_U32 => carry!(true, |a, b, c| (
            a.wrapping_sub(b).wrapping_sub(c),
            u64::from(b) + u64::from(c) > u64::from(a)
        )),
        o::V_SUBBREV_CO_U32 => carry!(true, |a, b, c| (
            b.wrapping_sub(a).wrapping_sub(c),
            u64::from(a) + u64::from(c) > u64::from(b)
        )),
        o::V_MAD_U64_U32 => Some((2, mad_u64_u32 as Handler)),
        o::V_CNDMASK_B32 => Some((2, cndmask as Handler)),
        _ => None,
    }?;
    plain(i, sources).then_some(h)
}

/// Runs a carry op over the 64 lanes; the carry mask has the active lanes' bits only.
#[inline(always)]
fn run_carry<const CIN: bool>(
    w: &mut Wave,
    i: &Inst,
    c: &mut Ctx,
    f: impl Fn(u32, u32, u32) -> (u32, bool),
) -> Result<Step, ExecError> {
    let exec = w.exec();
    let ap = c.apertures;
    let cin = if CIN { w.sread(i.src[2], i.literal, Ty::B64, &ap) } else { 0 };
    let [s0, s1, _, res] = &mut *c.lanes32;
    let mut cout = 0u64;
    {
        let x0 = source(w, i, 0, &ap, s0);
        let x1 = source(w, i, 1, &ap, s1);
        let (x0, x1) = (&x0[..LANES], &x1[..LANES]);
        for (l, o) in res.iter_mut().enumerate() {
            let (r, co) = f(x0[l], x1[l], (cin >> l & 1) as u32);
            *o = r;
            cout |= u64::from(co) << l;
        }
    }
    write_dst(w, i, exec, res);
    w.set_s64(i.sdst, cout & exec);
    Ok(Step::Next)
}

/// `v_mad_u64_u32`: D (a VGPR pair) = src0 * src1 + src2 (64 bits: a VGPR pair, an SGPR pair
/// or a constant), the carry out of bit 63 to `sdst`.
fn mad_u64_u32(w: &mut Wave, i: &Inst, c: &mut Ctx) -> Result<Step, ExecError> {
    let exec = w.exec();
    let ap = c.apertures;
    // src2's 64 lanes: a VGPR pair in place (one the wave does not have reads 0), else a splat.
    let acc: [u64; LANES] = {
        let code = i.src[2];
        let mut v = [0u64; LANES];
        if operand::is_vgpr(code) {
            let r = usize::from(code - operand::VGPR0) * LANES;
            if let (Some(lo), Some(hi)) = (w.v.get(r..r + LANES), w.v.get(r + LANES..r + 2 * LANES))
            {
                for ((o, l), h) in v.iter_mut().zip(lo).zip(hi) {
                    *o = u64::from(*l) | u64::from(*h) << 32;
                }
            }
        } else if !operand::is_agpr(code) {
            v.fill(w.sread(code, i.literal, Ty::B64, &ap));
        } else {
            let r = usize::from(code - operand::AGPR0) * LANES;
            if let (Some(lo), Some(hi)) = (w.a.get(r..r + LANES), w.a.get(r + LANES..r + 2 * LANES))
            {
                for ((o, l), h) in v.iter_mut().zip(lo).zip(hi) {
                    *o = u64::from(*l) | u64::from(*h) << 32;
                }
            }
        }
        v
    };
    let [s0, s1, lo, hi] = &mut *c.lanes32;
    let mut cout = 0u64;
    {
        let x0 = source(w, i, 0, &ap, s0);
        let x1 = source(w, i, 1, &ap, s1);
        let (x0, x1) = (&x0[..LANES], &x1[..LANES]);
        for l in 0..LANES {
            let p = u128::from(x0[l]) * u128::from(x1[l]) + u128::from(acc[l]);
            lo[l] = p as u32;
            hi[l] = (p >> 32) as u32;
            cout |= u64::from(p >> 64 != 0) << l;
        }
    }
    // The pair, as the general path writes it: each half where the wave has the register.
    for l in super::valu::lanes(exec) {
        w.set_reg(i.dst, l, lo[l]);
        w.set_reg(i.dst + 1, l, hi[l]);
    }
    w.set_s64(i.sdst, cout & exec);
    Ok(Step::Next)
}

/// `v_cndmask_b32`: src1 in the lanes whose bit of the mask (VCC, or the e64 form's SGPR pair
/// in src2) is set, src0 in the others.
fn cndmask(w: &mut Wave, i: &Inst, c: &mut Ctx) -> Result<Step, ExecError> {
    let exec = w.exec();
    let ap = c.apertures;
    let m = w.sread(i.src[2], i.literal, Ty::B64, &ap);
    let [s0, s1, _, res] = &mut *c.lanes32;
    {
        let x0 = source(w, i, 0, &ap, s0);
        let x1 = source(w, i, 1, &ap, s1);
        res.copy_from_slice(&x0[..LANES]);
        blend(&mut res[..], m, &x1[..LANES]);
    }
    write_dst(w, i, exec, res);
    Ok(Step::Next)
}

/// Writes the active lanes of `res` to the destination VGPR (none when the wave lacks it).
#[inline(always)]
fn write_dst(w: &mut Wave, i: &Inst, exec: u64, res: &[u32; LANES]) {
    let r = usize::from(i.dst - operand::VGPR0) * LANES;
    if let Some(d) = w.v.get_mut(r..r + LANES) {
        if exec == u64::MAX {
            d.copy_from_slice(&res[..]);
        } else {
            blend(d, exec, &res[..]);
        }
    }
}

/// Source `k`'s 64 lanes: a VGPR in place, or a constant (SGPR, inline constant, literal)
/// splat into `splat`. A register the wave does not have reads 0, as in the general path.
#[inline(always)]
fn source<'a>(
    w: &'a Wave,
    i: &Inst,
    k: usize,
    ap: &Apertures,
    splat: &'a mut [u32; LANES],
) -> &'a [u32] {
    let code = i.src[k];
    if operand::is_vgpr(code) {
        let r = usize::from(code - operand::VGPR0) * LANES;
        if let Some(s) = w.v.get(r..r + LANES) {
            return s;
        }
        splat.fill(0);
    } else {
        splat.fill(w.sread(code, i.literal, Ty::B32, ap) as u32);
    }
    splat
}

/// Runs `f` over the 64 lanes of `N` sources and writes the active lanes of the destination.
#[inline(always)]
fn run<const N: usize>(
    w: &mut Wave,
    i: &Inst,
    c: &mut Ctx,
    f: impl Fn([u32; 3]) -> u32,
) -> Result<Step, ExecError> {
    static ZERO: [u32; LANES] = [0; LANES];
    let exec = w.exec();
    let ap = c.apertures;
    let [s0, s1, s2, res] = &mut *c.lanes32;
    {
        let x0 = source(w, i, 0, &ap, s0);
        let x1: &[u32] = if N > 1 { source(w, i, 1, &ap, s1) } else { &ZERO };
        let x2: &[u32] = if N > 2 { source(w, i, 2, &ap, s2) } else { &ZERO };
        let (x0, x1, x2) = (&x0[..LANES], &x1[..LANES], &x2[..LANES]);
        for (l, o) in res.iter_mut().enumerate() {
            *o = f([x0[l], x1[l], x2[l]]);
        }
    }
    write_dst(w, i, exec, res);
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

    /// A source code: a VGPR (sometimes one the wave does not have), an SGPR, an inline
    /// constant (integer or float) or the literal.
    fn source_code(r: &mut Rng) -> u16 {
        match r.next_u64() % 8 {
            0 => (r.next_u64() % 102) as u16,
            1 => 128 + (r.next_u64() % 81) as u16,
            2 => 240 + (r.next_u64() % 9) as u16,
            3 => operand::LITERAL,
            4 => operand::VGPR0 + 200,
            _ => operand::VGPR0 + (r.next_u64() % 8) as u16,
        }
    }

    /// Every opcode with a fast handler, in plain instances over random registers, sources
    /// and EXEC masks (full, partial, empty): the fast path leaves the wave exactly as the
    /// general path does.
    #[test]
    fn the_fast_path_computes_what_the_general_path_does() {
        let mem = FakeMemory::default();
        let none = |_: u64, _: u64| false;
        let memory = Memory::new(&mem, &none);
        let mut lds = Lds::new(0);
        let mut ctx = Ctx::for_test(&memory, &mut lds);
        let mut r = Rng(0x2545_f491_4f6c_dd1d);
        let mut covered = 0;
        for op in 0..0x400u16 {
            let mut i = Inst::probe(Family::Vop3, op);
            i.name = Family::Vop3.name(op).unwrap_or("?");
            i.dst = operand::VGPR0 + 3;
            i.src = [operand::VGPR0, operand::VGPR0 + 1, operand::VGPR0 + 2, 0];
            let Some(fast) = handler(&i, op) else { continue };
            let general = vop::valu(op).expect("a fast opcode has a general handler");
            covered += 1;
            for round in 0..200 {
                let mut w = Wave::new(8, 0, 0);
                for x in w.v.iter_mut() {
                    *x = r.next_u64() as u32;
                }
                for x in w.s.iter_mut() {
                    *x = r.next_u64() as u32;
                }
                // Small values too, so that shift amounts and bit-field widths cover their range.
                if round % 2 == 0 {
                    for x in w.v.iter_mut() {
                        *x %= 40;
                    }
                }
                let exec = match round % 4 {
                    0 => u64::MAX,
                    1 => 0,
                    _ => r.next_u64(),
                };
                w.set_exec(exec);
                i.dst = if round % 17 == 0 {
                    operand::VGPR0 + 250
                } else {
                    operand::VGPR0 + (r.next_u64() % 8) as u16
                };
                i.src = [source_code(&mut r), source_code(&mut r), source_code(&mut r), 0];
                i.literal = r.next_u64() as u32;
                if handler(&i, op).is_none() {
                    continue; // not plain (an AGPR source cannot come up here; kept for safety)
                }
                let mut wf = w.clone();
                let (a, b) = (fast(&mut wf, &i, &mut ctx), general(&mut w, &i, &mut ctx));
                assert_eq!(a, b, "{}", i.name);
                assert!(
                    wf.v == w.v && wf.s == w.s && wf.scc == w.scc,
                    "{} differs: sources {:?}, literal {:#x}, exec {exec:#x}",
                    i.name,
                    i.src,
                    i.literal
                );
            }
        }
        assert!(covered >= 25, "only {covered} opcodes have a fast handler");
    }

    #[test]
    fn modified_or_agpr_forms_take_the_general_path() {
        let mut i = Inst::probe(Family::Vop3, o::V_XOR_B32);
        i.dst = operand::VGPR0;
        i.src = [operand::VGPR0, operand::VGPR0 + 1, 0, 0];
        assert!(handler(&i, o::V_XOR_B32).is_some());
        for change in 0..4 {
            let mut j = i.clone();
            match change {
                0 => j.neg = 1,
                1 => j.clamp = true,
                2 => j.src[1] = operand::AGPR0,
                _ => j.dst = operand::AGPR0,
            }
            assert!(handler(&j, o::V_XOR_B32).is_none(), "change {change}");
        }
    }
}
