#!/usr/bin/env python3
"""Checks an interpreter trace instruction by instruction against an independent model.

The model is written from the CDNA2/CDNA3 ISA definitions, not from the interpreter: every
floating-point result is computed exactly (Python's Fraction) and rounded once to nearest even
by the code below, operands and modifiers are read from llvm-objdump's disassembly (not from the
interpreter's decoder), and v_trig_preop_f64's bits of 2/pi are computed here from Machin's
formula (the interpreter's table was computed with mpmath).

  trace_check.py spec DISASM > SPEC      registers each VALU instruction reads and writes
  trace_check.py check DISASM TRACE      first instruction per lane whose traced result differs

DISASM is `llvm-objdump -d --mcpu=gfx90a CODE_OBJECT`. TRACE is what the host rig's tracer
writes with SPEC (tools/emu/tests/isa_exec.rs, fp64_math_trace): lines
`B|A LANE PC EXEC s:HEX,... v:HEX,...`, the registers in SPEC's order, before and after each
instruction the lane's wave executed.
"""
import re
import sys
from fractions import Fraction
from math import isqrt

# ---- IEEE binary formats, exact rounding ----------------------------------------------------

def p2(k):
    """2^k as an exact Fraction."""
    return Fraction(1 << k) if k >= 0 else Fraction(1, 1 << -k)


F64 = (53, -1022, 1023, 11)
F32 = (24, -126, 127, 8)


def decode(bits, fmt):
    p, emin, emax, ew = fmt
    mb = p - 1
    sign = bits >> (mb + ew) & 1
    e = bits >> mb & ((1 << ew) - 1)
    m = bits & ((1 << mb) - 1)
    if e == (1 << ew) - 1:
        return ("nan" if m else "inf", sign)
    if e == 0:
        v = Fraction(m, 1) * p2(emin - mb)
    else:
        v = Fraction(m | 1 << mb) * p2(e - 1 + emin - mb)
    return (-v if sign else v, sign)


def encode_inf(sign, fmt):
    p, _, _, ew = fmt
    return sign << (p - 1 + ew) | ((1 << ew) - 1) << (p - 1)


def rnd(q, fmt, zero_sign=0):
    """The value q rounded to nearest even in fmt, as bits (exact zero gets zero_sign)."""
    p, emin, emax, ew = fmt
    mb = p - 1
    if q == 0:
        return zero_sign << (mb + ew)
    sign = 1 if q < 0 else 0
    a = -q if sign else q
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if p2(e) > a:
        e -= 1
    qe = max(e, emin) - mb  # the quantum's exponent
    scaled = a / p2(qe)
    n = scaled.numerator // scaled.denominator
    rem = scaled - n
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and n & 1):
        n += 1
    if n >= 1 << p:  # carried into a new binade
        n >>= 1
        qe += 1
    if n < 1 << mb:  # subnormal (or zero after rounding)
        return sign << (mb + ew) | n
    be = qe + mb - emin + 1
    if be >= (1 << ew) - 1:
        return encode_inf(sign, fmt)
    return sign << (mb + ew) | be << mb | (n - (1 << mb))


QNAN64 = 0x7FF8000000000000
QNAN32 = 0x7FC00000


def as_float(bits, fmt):
    import struct

    if fmt is F64:
        return struct.unpack("<d", struct.pack("<Q", bits))[0]
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def from_float(x, fmt):
    import struct

    if fmt is F64:
        return struct.unpack("<Q", struct.pack("<d", x))[0]
    return struct.unpack("<I", struct.pack("<f", x))[0]


def is_nan(bits, fmt):
    return decode(bits, fmt)[0] == "nan"


def arith(kind, args, fmt):
    """add, mul, fma of bits args: IEEE result bits (a NaN result is compared as any NaN)."""
    vals = [decode(b, fmt) for b in args]
    if any(v == "nan" for v, _ in vals) or any(v == "inf" for v, _ in vals):
        fl = [as_float(b, fmt) for b in args]
        if kind == "add":
            r = fl[0] + fl[1]
        elif kind == "mul":
            r = fl[0] * fl[1]
        elif vals[0][0] not in ("nan", "inf") and vals[1][0] not in ("nan", "inf"):
            r = fl[2]  # a finite exact product plus an infinite (or NaN) addend
        else:
            prod = fl[0] * fl[1]
            if prod != prod and not any(x != x for x in fl):
                r = float("nan")  # 0 * inf
            else:
                r = prod + fl[2]
        return from_float(r, fmt) if r == r else (QNAN64 if fmt is F64 else QNAN32)
    x = [v for v, _ in vals]
    s = [sg for _, sg in vals]
    if kind == "add":
        q = x[0] + x[1]
        zs = s[0] & s[1]
    elif kind == "mul":
        q = x[0] * x[1]
        zs = s[0] ^ s[1]
    else:
        q = x[0] * x[1] + x[2]
        zs = (s[0] ^ s[1]) & s[2] if x[0] * x[1] == 0 and x[2] == 0 else 0
    return rnd(q, fmt, zs)


# ---- 2/pi for v_trig_preop_f64 --------------------------------------------------------------


def two_over_pi_bits(n):
    """The first n fraction bits of 2/pi, from pi by Machin's formula in integer arithmetic
    (64 guard bits)."""
    m = n + 64
    one = 1 << (m + 32)

    def atan_inv(x):
        total = term = one // x
        x2, k, sign = x * x, 1, -1
        while term:
            term //= x2
            total += sign * (term // (2 * k + 1))
            sign, k = -sign, k + 1
        return total

    pi = (16 * atan_inv(5) - 4 * atan_inv(239)) >> 32  # pi * 2^m
    return (1 << (n + 1 + m)) // pi  # 2/pi * 2^n


TWO_OVER_PI_1201 = None


def trig_preop(x, sel):
    """CDNA ISA V_TRIG_PREOP_F64: 53 bits of 2/pi's 1201-bit table, shifted by sel * 53 (plus
    the exponent of x above 1077), scaled by 2^(-53 - shift) (2^128 more for exponents >= 1968)."""
    global TWO_OVER_PI_1201
    if TWO_OVER_PI_1201 is None:
        TWO_OVER_PI_1201 = two_over_pi_bits(1201)
    exp = x >> 52 & 0x7FF
    shift = (sel & 31) * 53
    if exp > 1077:
        shift += exp - 1077
    seg = (TWO_OVER_PI_1201 << shift) >> (1201 - 53) & ((1 << 53) - 1)
    scale = -53 - shift
    if exp >= 1968:
        scale += 128
    return rnd(Fraction(seg) * p2(scale), F64)


# ---- disassembly ----------------------------------------------------------------------------

LINE = re.compile(r"^\s+([a-z_0-9]+)\s*(.*?)\s*//\s*([0-9A-F]+):")

SPECIAL = {"vcc": [106, 107], "vcc_lo": [106], "vcc_hi": [107], "exec": [126, 127],
           "exec_lo": [126], "exec_hi": [127], "m0": [124]}


def parse_disasm(path):
    insts = {}
    for line in open(path):
        m = LINE.match(line)
        if not m:
            continue
        name, ops, addr = m.group(1), m.group(2), int(m.group(3), 16)
        mods = []
        # trailing modifiers (clamp, mul:2, div:2, op_sel...) are separated by spaces
        parts = ops.split(", ")
        last = parts[-1].split(" ") if parts and parts[-1] else []
        if len(last) > 1:
            parts[-1] = last[0]
            mods = last[1:]
        insts[addr] = (name, [p for p in parts if p], mods)
    return insts


def operand(tok):
    """(kind, regs or value, neg, abs): kind 's', 'v', 'a', 'const', 'lit'."""
    neg = ab = False
    t = tok
    if t.startswith("-") and (t[1:2] in ("v", "s", "|") or t[1:].startswith(("vcc", "exec", "neg", "abs"))):
        neg, t = True, t[1:]
    if t.startswith("|") and t.endswith("|"):
        ab, t = True, t[1:-1]
    m = re.fullmatch(r"([sva])(\d+)", t)
    if m:
        return (m.group(1), [int(m.group(2))], neg, ab)
    m = re.fullmatch(r"([sva])\[(\d+):(\d+)\]", t)
    if m:
        return (m.group(1), list(range(int(m.group(2)), int(m.group(3)) + 1)), neg, ab)
    if t in SPECIAL:
        return ("s", SPECIAL[t], neg, ab)
    if t.startswith("0x"):
        return ("lit", int(t, 16), neg, ab)
    try:
        return ("const", int(t), neg, ab)
    except ValueError:
        pass
    try:
        return ("const", float(t), neg, ab)
    except ValueError:
        return ("other", t, neg, ab)


def spec(disasm):
    for addr, (name, ops, _) in sorted(parse_disasm(disasm).items()):
        if not name.startswith("v_"):
            continue
        ss, vs = [], []
        for o in ops:
            k, regs, _, _ = operand(o)
            if k == "s":
                ss += regs
            elif k == "v":
                vs += regs
        ss += [106, 107]  # vcc: implicit reader/writer of cndmask, div_fmas, e32 compares
        print(f"{addr:x} {','.join(map(str, ss))} {','.join(map(str, vs))}")


# ---- the model ------------------------------------------------------------------------------

INLINE_F64 = {0.5: 0x3FE0000000000000, -0.5: 0xBFE0000000000000, 1.0: 0x3FF0000000000000,
              -1.0: 0xBFF0000000000000, 2.0: 0x4000000000000000, -2.0: 0xC000000000000000,
              4.0: 0x4010000000000000, -4.0: 0xC010000000000000,
              0.15915494: 0x3FC45F306DC9C882}
INLINE_F32 = {0.5: 0x3F000000, -0.5: 0xBF000000, 1.0: 0x3F800000, -1.0: 0xBF800000,
              2.0: 0x40000000, -2.0: 0xC0000000, 4.0: 0x40800000, -4.0: 0xC0800000,
              0.15915494: 0x3E22F983}


class Unmodelled(Exception):
    pass


def value(op, st, width, flt):
    """Operand bits (width 32 or 64) from the state dict {('s'|'v', n): u32}; flt applies
    neg/abs as float sign bit operations."""
    k, r, neg, ab = op
    if k in ("s", "v"):
        lo = st[(k, r[0])]
        v = lo | (st[(k, r[1])] << 32 if width == 64 and len(r) > 1 else 0)
    elif k == "const":
        if isinstance(r, float):
            v = (INLINE_F64 if width == 64 else INLINE_F32)[r]
        else:
            v = r & ((1 << width) - 1)
    elif k == "lit":
        v = r << 32 if width == 64 and flt else r
    else:
        raise Unmodelled(f"operand {r}")
    top = 1 << (width - 1)
    if flt and ab:
        v &= ~top
    if flt and neg:
        v ^= top
    return v


def classify(bits):
    v, s = decode(bits, F64)
    if v == "nan":
        return 1 if bits >> 51 & 1 else 0
    if v == "inf":
        return 2 if s else 9
    if v == 0:
        return 5 if s else 6
    if abs(v) < Fraction(2) ** -1022:
        return 4 if s else 7
    return 3 if s else 8


def cmp64(kind, a, b):
    x, y = as_float(a, F64), as_float(b, F64)
    return {"lt": x < y, "le": x <= y, "gt": x > y, "ge": x >= y, "eq": x == y,
            "lg": x < y or x > y, "o": x == x and y == y, "u": x != x or y != y,
            "neq": not x == y, "nlt": not x < y, "nle": not x <= y, "ngt": not x > y,
            "nge": not x >= y, "nlg": not (x < y or x > y)}[kind]


def model(name, ops, st, lane, mods=()):
    """Returns (dest operand, width, bits, tolerance_ulps) or a mask bit for compares."""
    base = re.sub(r"_e(32|64)$", "", name)
    d = operand(ops[0])
    f64 = lambda k: value(operand(ops[k]), st, 64, True)
    u32 = lambda k: value(operand(ops[k]), st, 32, False)
    f32 = lambda k: value(operand(ops[k]), st, 32, True)
    if base in ("v_add_f64", "v_mul_f64"):
        return d, 64, arith(base[2:5], [f64(1), f64(2)], F64), 0
    if base == "v_fma_f64":
        return d, 64, arith("fma", [f64(1), f64(2), f64(3)], F64), 0
    if base == "v_fmac_f64":
        acc = value(d, st, 64, False)
        return d, 64, arith("fma", [f64(1), f64(2), acc], F64), 0
    if base == "v_mul_f32":
        return d, 32, arith("mul", [f32(1), f32(2)], F32), 0
    if base in ("v_min_f64", "v_max_f64"):
        a, b = f64(1), f64(2)
        if is_nan(a, F64) or is_nan(b, F64):
            r = b if is_nan(a, F64) else a
        else:
            x, y = as_float(a, F64), as_float(b, F64)
            if x == y == 0:
                neg_a = a >> 63
                r = (a if neg_a else b) if base == "v_min_f64" else (b if neg_a else a)
            else:
                r = a if (x < y) == (base == "v_min_f64") else b
        return d, 64, r, 0
    if base == "v_ldexp_f64":
        a, e = f64(1), u32(2)
        e = e - (1 << 32) if e >> 31 else e
        v, s = decode(a, F64)
        if v in ("nan", "inf") or v == 0:
            return d, 64, a, 0
        return d, 64, rnd(v * p2(max(-3000, min(3000, e))), F64), 0
    if base in ("v_floor_f64", "v_trunc_f64", "v_ceil_f64", "v_rndne_f64", "v_fract_f64"):
        a = f64(1)
        v, s = decode(a, F64)
        if v in ("nan", "inf"):
            if base == "v_fract_f64":
                return d, 64, QNAN64 if v == "inf" else a, 0
            return d, 64, a, 0
        fl = v.numerator // v.denominator
        if base == "v_floor_f64":
            r = Fraction(fl)
        elif base == "v_ceil_f64":
            r = Fraction(-((-v.numerator) // v.denominator))
        elif base == "v_trunc_f64":
            r = Fraction(int(v))
        elif base == "v_rndne_f64":
            r = Fraction(round(v))  # Python rounds halves to even
        else:
            fr = rnd(v - fl, F64)
            return d, 64, min(fr, 0x3FEFFFFFFFFFFFFF) if not fr >> 63 else fr, 0
        return d, 64, rnd(r, F64, s), 0
    if base in ("v_frexp_mant_f64", "v_frexp_exp_i32_f64"):
        a = f64(1)
        v, s = decode(a, F64)
        if v in ("nan", "inf") or v == 0:
            return (d, 64, a, 0) if "mant" in base else (d, 32, 0, 0)
        e = abs(v).numerator.bit_length() - abs(v).denominator.bit_length()
        if p2(e) > abs(v):
            e -= 1
        if "mant" in base:
            return d, 64, rnd(v / p2(e + 1), F64), 0
        return d, 32, (e + 1) & 0xFFFFFFFF, 0
    if base in ("v_rcp_f64", "v_rsq_f64", "v_sqrt_f64"):
        a = f64(1)
        v, s = decode(a, F64)
        if v in ("nan", "inf") or v == 0 or v < 0:
            raise Unmodelled(f"{base} of a special operand")
        if base == "v_rcp_f64":
            q = 1 / v
        else:
            # sqrt to 1200 bits by the integer square root (far below half an ulp of error)
            k = 1200
            root = Fraction(isqrt(v.numerator * (1 << (2 * k)) // v.denominator), 1 << k)
            q = root if base == "v_sqrt_f64" else 1 / root
        return d, 64, rnd(q, F64), 1  # the hardware's ~1 ulp
    if base == "v_div_scale_f64":
        # the CDNA ISA's pseudocode; D is the first operand, VCC the second (an SGPR pair)
        s0, den, num = f64(2), f64(3), f64(4)
        (vd, _), (vn, _), (v0, _) = decode(den, F64), decode(num, F64), decode(s0, F64)
        if any(v in ("nan", "inf") for v in (vd, vn, v0)):
            raise Unmodelled("v_div_scale_f64 of a special operand")
        ex = lambda b: b >> 52 & 0x7FF
        tiny = Fraction(1, 1 << 1022)
        sub = lambda q: q != 0 and abs(q) < tiny
        rq = lambda q: decode(rnd(q, F64), F64)[0]  # the quotients as rounded f64 values
        up = lambda: rnd(v0 * p2(128), F64)
        dn = lambda: rnd(v0 * p2(-128), F64)
        if vn == 0 or vd == 0:
            r, vcc = QNAN64, 0
        elif ex(num) - ex(den) >= 768:
            r, vcc = (up() if s0 == den else s0), 1
        elif sub(vd):
            r, vcc = up(), 0
        elif sub(rq(1 / vd)) and sub(rq(vn / vd)):
            r, vcc = (up() if s0 == den else s0), 1
        elif sub(rq(1 / vd)):
            r, vcc = dn(), 0
        elif sub(rq(vn / vd)):
            r, vcc = (up() if s0 == num else s0), 1
        elif ex(num) <= 53:
            r, vcc = up(), 0
        else:
            r, vcc = s0, 0
        return [(d, 64, r, 0), (("mask", operand(ops[1])), 1, vcc, 0)], None, None, None
    if base == "v_div_fmas_f64":
        a, b, c = f64(1), f64(2), f64(3)
        vals = [decode(x, F64)[0] for x in (a, b, c)]
        if any(v in ("nan", "inf") for v in vals):
            raise Unmodelled("v_div_fmas_f64 of a special operand")
        vcc = (st[("s", 106)] | st[("s", 107)] << 32) >> lane & 1
        q = vals[0] * vals[1] + vals[2]
        if vcc:
            q *= p2(128 if (c >> 52 & 0x7FF) > 1023 else -128)
        return d, 64, rnd(q, F64), 0
    if base == "v_div_fixup_f64":
        q, den, num = f64(1), f64(2), f64(3)
        vals = [decode(x, F64)[0] for x in (q, den, num)]
        if any(v in ("nan", "inf") or v == 0 for v in vals):
            raise Unmodelled("v_div_fixup_f64 of a special operand")
        sign = (den ^ num) >> 63
        return d, 64, (q & ~(1 << 63)) | sign << 63, 0
    if base == "v_pk_mov_b32":
        sel = [0, 1]
        for m in mods:
            if m.startswith("op_sel:["):
                sel = [int(x) for x in m[len("op_sel:["):-1].split(",")]
        def half(k, hi):
            o = operand(ops[k])
            if o[0] != "v":
                raise Unmodelled("v_pk_mov_b32 of a non-VGPR")
            return st[("v", o[1][hi if len(o[1]) > 1 else 0])]
        return d, 64, half(1, sel[0]) | half(2, sel[1]) << 32, 0
    if base in ("v_add_u32", "v_sub_u32", "v_subrev_u32", "v_lshlrev_b32", "v_mul_lo_u32"):
        a, b = u32(1), u32(2)
        r = {"v_add_u32": a + b, "v_sub_u32": a - b, "v_subrev_u32": b - a,
             "v_lshlrev_b32": b << (a & 31), "v_mul_lo_u32": a * b}[base]
        return d, 32, r & 0xFFFFFFFF, 0
    if base == "v_trig_preop_f64":
        return d, 64, trig_preop(f64(1), u32(2)), 0
    if base == "v_cvt_f64_i32":
        x = u32(1)
        return d, 64, rnd(Fraction(x - (1 << 32) if x >> 31 else x), F64), 0
    if base == "v_cvt_f64_f32":
        v, s = decode(f32(1), F32)
        if v in ("nan", "inf"):
            raise Unmodelled("cvt of a special")
        return d, 64, rnd(v, F64, s), 0
    if base == "v_cvt_f32_f64":
        v, s = decode(f64(1), F64)
        if v in ("nan", "inf"):
            raise Unmodelled("cvt of a special")
        return d, 32, rnd(v, F32, s), 0
    if base == "v_cvt_i32_f64":
        v, s = decode(f64(1), F64)
        if v == "nan":
            return d, 32, 0, 0
        if v == "inf":
            return d, 32, 0x80000000 if s else 0x7FFFFFFF, 0
        i = max(-(1 << 31), min((1 << 31) - 1, int(v)))
        return d, 32, i & 0xFFFFFFFF, 0
    if base == "v_cmp_class_f64":
        return ("mask", d), 1, (u32(2) >> classify(f64(1))) & 1, 0
    m = re.fullmatch(r"v_cmp_([a-z]+)_f64", base)
    if m:
        return ("mask", d), 1, int(cmp64(m.group(1), f64(1), f64(2))), 0
    if base == "v_cndmask_b32":
        if len(ops) == 4:
            sel = value(operand(ops[3]), st, 64, False) >> lane & 1
        else:
            sel = (st[("s", 106)] | st[("s", 107)] << 32) >> lane & 1
        return d, 32, value(operand(ops[2 if sel else 1]), st, 32, True), 0
    if base == "v_mov_b32":
        return d, 32, u32(1), 0
    if base in ("v_and_b32", "v_or_b32", "v_xor_b32"):
        a, b = u32(1), u32(2)
        return d, 32, {"v_and_b32": a & b, "v_or_b32": a | b, "v_xor_b32": a ^ b}[base], 0
    if base == "v_bfi_b32":
        a, b, c = u32(1), u32(2), u32(3)
        return d, 32, (a & b) | (~a & c) & 0xFFFFFFFF, 0
    raise Unmodelled(base)


def check(disasm, trace):
    insts = parse_disasm(disasm)
    spec_regs = {}
    for addr, (name, ops, _) in insts.items():
        if not name.startswith("v_"):
            continue
        ss, vs = [], []
        for o in ops:
            k, regs, _, _ = operand(o)
            if k == "s":
                ss += regs
            elif k == "v":
                vs += regs
        spec_regs[addr] = (ss + [106, 107], vs)
    before = {}
    checked, unmodelled, first_bad = {}, {}, {}
    for line in open(trace):
        parts = line.split()
        at, lane, pc, exe = parts[0], int(parts[1]), int(parts[2], 16), int(parts[3])
        ss, vs = spec_regs[pc]
        sv = [int(x, 16) for x in parts[4][2:].split(",") if x]
        vv = [int(x, 16) for x in parts[5][2:].split(",") if x] if len(parts) > 5 else []
        st = {("s", r): x for r, x in zip(ss, sv)}
        st.update({("v", r): x for r, x in zip(vs, vv)})
        if at == "B":
            before[lane] = (pc, exe, st)
            continue
        bpc, bexe, bst = before.pop(lane)
        assert bpc == pc
        if not bexe or lane in first_bad:
            continue
        name, ops, mods = insts[pc]
        if mods and name != "v_pk_mov_b32":
            unmodelled[name + " " + " ".join(mods)] = unmodelled.get(name + " " + " ".join(mods), 0) + 1
            continue
        try:
            res = model(name, ops, bst, lane % 64, mods)
        except Unmodelled as e:
            unmodelled[str(e)] = unmodelled.get(str(e), 0) + 1
            continue
        outs = res[0] if isinstance(res[0], list) else [res]
        checked[name] = checked.get(name, 0) + 1
        for d, width, want, tol in outs:
            if d[0] == "mask":
                got = value(d[1], st, 64, False) >> (lane % 64) & 1
            else:
                got = value(d, st, width, False)
            fmt = F64 if width == 64 else F32
            ok = got == want
            if not ok and width in (32, 64) and d[0] != "mask":
                if is_nan(got, fmt) and is_nan(want, fmt):
                    ok = True
                elif tol and abs(got - want) <= tol and got >> (width - 1) == want >> (width - 1):
                    ok = True
            if not ok:
                first_bad[lane] = f"lane {lane}: {pc:#x} {name} {', '.join(ops)}: got {got:#x}, the ISA gives {want:#x}"
                break
    return checked, unmodelled, first_bad


def main():
    if sys.argv[1] == "spec":
        spec(sys.argv[2])
        return
    checked, unmodelled, bad = check(sys.argv[2], sys.argv[3])
    print("checked:", sum(checked.values()), "instructions;", ", ".join(f"{k} {v}" for k, v in sorted(checked.items())))
    print("not modelled (not checked):", ", ".join(f"{k} {v}" for k, v in sorted(unmodelled.items())))
    print("lanes with a difference:", len(bad))
    for k in sorted(bad):
        print(bad[k])


if __name__ == "__main__":
    main()
