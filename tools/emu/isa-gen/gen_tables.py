#!/usr/bin/env python3
"""Generates tools/emu/src/isa/decode/names.rs: the gfx90a opcode names of every encoding
family the interpreter decodes, asked of LLVM's disassembler (llvm-mc-15 -disassemble
-mcpu=gfx90a) opcode by opcode. Nothing of LLVM's source is used: each opcode number of a family
is encoded with fixed operands (a few operand patterns, for opcodes that accept only some) and
the mnemonic the disassembler prints is recorded; opcodes it rejects under every pattern are not
gfx90a instructions and are left out.

Run from anywhere: python3 tools/emu/isa-gen/gen_tables.py > tools/emu/src/isa/decode/names.rs

gfx942 (tools/emu/src/isa/decode/names942.rs) from the ROCm 6.4 root's llvm-mc 21 (`./x setup`
builds the root; run its llvm-mc through the root's dynamic loader, no chroot needed):

    R=${XHSA_ROCM64_ROOT:-/var/lib/xhsa/rocm-6.4}
    python3 tools/emu/isa-gen/gen_tables.py --mcpu gfx942 --llvm-mc "$R/lib64/ld-linux-x86-64.so.2 \
        --library-path $R/usr/lib/llvm-21/lib:$R/usr/lib/x86_64-linux-gnu $R/usr/lib/llvm-21/bin/llvm-mc" \
        > tools/emu/src/isa/decode/names942.rs
"""
import argparse
import re
import subprocess
import sys

ARGS = argparse.ArgumentParser()
ARGS.add_argument("--mcpu", default="gfx90a")
ARGS.add_argument("--llvm-mc", default="llvm-mc-15", help="the command (split at spaces)")
ARGS = ARGS.parse_args()
LLVM_MC = ARGS.llvm_mc.split()
MCPU = ARGS.mcpu


def le(*words):
    return " ".join("0x%02x" % ((w >> (8 * i)) & 0xFF) for w in words for i in range(4))


MARKER = 0xBEE50065  # s_mov_b32 s101, s101: ends each probe's output


def disassemble(lines):
    """Mnemonic of each line of hex bytes, or None where the disassembler rejects its first word.

    Each probe is followed by a marker instruction, so that the bytes of a rejected probe that
    the disassembler decodes on its own are not taken for the next probe's."""
    text = "\n".join(l + " " + le(0xBF800000, 0xBF800000, MARKER) for l in lines) + "\n"
    out = subprocess.run(LLVM_MC + ["-disassemble", "-arch=amdgcn", "-mcpu=" + MCPU],
                         input=text, capture_output=True, text=True)
    bad = {int(m.group(1)) for m in re.finditer(r"<stdin>:(\d+):1: warning: invalid instruction encoding", out.stderr)}
    blocks, cur = [], []
    for l in out.stdout.splitlines():
        l = l.strip()
        if not l or l.startswith(".text"):
            continue
        if l == "s_mov_b32 s101, s101":
            blocks.append(cur)
            cur = []
        else:
            cur.append(l)
    if len(blocks) != len(lines):
        # A probe swallowed its marker (e.g. it takes a literal): ask one probe at a time.
        return [disassemble([l])[0] for l in lines] if len(lines) > 1 else [None]
    return [None if (i + 1 in bad or not blocks[i]) else blocks[i][0].split()[0] for i in range(len(lines))]


def strip(m):
    return re.sub(r"_(e32|e64|sdwa|dpp)$", "", m)


def family(name, nops, encode, **fields):
    """encode(op, **operands) -> hex line; every combination of the candidate operand values
    (each field's list) is tried until the disassembler accepts the opcode."""
    import itertools
    names = {}
    keys = list(fields)
    for combo in itertools.product(*(fields[k] for k in keys)):
        todo = [op for op in range(nops) if op not in names]
        if not todo:
            break
        kw = dict(zip(keys, combo))
        got = disassemble([encode(op, **kw) for op in todo])
        for op, m in zip(todo, got):
            if m is not None:
                names[op] = strip(m)
    return name, names


V = lambda r: 256 + r

S = [2, 0]
VV = [V(2), 0]
FAMILIES = [
    family("SOP2", 0x60, lambda op, d, a, b: le(0x80000000 | op << 23 | d << 16 | b << 8 | a), d=[6, 0], a=[4, 0], b=[2, 0]),
    family("SOPK", 0x1d, lambda op, d, lit: le(0xB0000000 | op << 23 | d << 16, *lit), d=[6, 0], lit=[[], [0]]),
    family("SOP1", 256, lambda op, d, a: le(0xBE800000 | d << 16 | op << 8 | a), d=[6, 0], a=[4, 0]),
    family("SOPC", 128, lambda op, a, b: le(0xBF000000 | op << 16 | b << 8 | a), a=[4, 0], b=[2, 0]),
    family("SOPP", 128, lambda op: le(0xBF800000 | op << 16)),
    family("SMEM", 256, lambda op, d, b, imm: le(0xC0000000 | op << 18 | imm << 17 | d << 6 | b, 0),
           d=[8, 0], b=[2, 0], imm=[1, 0]),
    family("VOP1", 128, lambda op, d, a: le(0x7E000000 | d << 17 | op << 9 | a), d=[4, 0], a=[V(2), 2, 0]),
    family("VOP2", 0x3e, lambda op, d, a, b, lit: le(op << 25 | d << 17 | b << 9 | a, *lit),
           d=[6, 0], a=[V(4), 4], b=[2, 0], lit=[[], [0]]),
    family("VOPC", 256, lambda op, a, b: le(0x7C000000 | op << 17 | b << 9 | a), a=[V(4), 4, 0], b=[2, 0]),
    family("VOP3", 1024, lambda op, d, a, b, c: le(0xD0000000 | op << 16 | d, c << 18 | b << 9 | a),
           d=[8, 0], a=[V(2), 2, 0], b=[V(4), 4, 0], c=[V(6), 0]),
    family("VOP3P", 128, lambda op, d, a, b, c: le(0xD3800000 | op << 16 | d, c << 18 | b << 9 | a),
           d=[8, 0], a=[V(2), 0], b=[V(4), 0], c=[V(6), 0]),
    family("DS", 256, lambda op, gds, d, x, y, a: le(0xD8000000 | op << 17 | gds << 16, d << 24 | y << 16 | x << 8 | a),
           gds=[0, 1], d=[8, 0], x=[4, 0], y=[6, 0], a=[2, 0]),
    family("FLAT", 128, lambda op, d, x, a: le(0xDC000000 | op << 18, d << 24 | x << 8 | a), d=[8, 0], x=[4, 0], a=[2, 0]),
    family("GLOBAL", 128, lambda op, d, x, a, s: le(0xDC000000 | op << 18 | 2 << 14, d << 24 | s << 16 | x << 8 | a),
           d=[8, 0], x=[4, 0], a=[2, 0], s=[0x7F, 4]),
    family("SCRATCH", 128, lambda op, d, x, a, s: le(0xDC000000 | op << 18 | 1 << 14, d << 24 | s << 16 | x << 8 | a),
           d=[8, 0], x=[4, 0], a=[2, 0], s=[0x7F, 4]),
    family("MUBUF", 128, lambda op, d, a, offen, lds: le(0xE0000000 | op << 18 | lds << 16 | offen << 12, 0x80 << 24 | 1 << 16 | d << 8 | a),
           d=[8, 0], a=[2, 0], offen=[1, 0], lds=[0, 1]),
    family("MTBUF", 16, lambda op, d: le(0xE8000000 | 1 << 19 | op << 15 | 1 << 12, 0x80 << 24 | 1 << 16 | d << 8 | 2), d=[8, 0]),
]

VERSION = subprocess.run(LLVM_MC + ["--version"], capture_output=True, text=True).stdout
VERSION = re.search(r"LLVM version (\d+)", VERSION).group(1)
print("//! %s opcode names per encoding family: GENERATED by `tools/emu/isa-gen/gen_tables.py`" % MCPU)
print("//! from LLVM's disassembler (llvm-mc-%s, -mcpu=%s), opcode by opcode; do not edit." % (VERSION, MCPU))
print("//! Each family has a sorted `(opcode, name)` table and one constant per opcode in a module of")
print("//! the family's name. VOP1, VOP2 and VOPC opcodes also appear in VOP3, at their e64 numbers.")
print()
total = 0
for name, names in FAMILIES:
    total += len(names)
    print("/// %s: %d opcodes." % (name, len(names)))
    print("pub static %s: &[(u16, &str)] = &[" % name)
    for op in sorted(names):
        print("    (0x%x, \"%s\")," % (op, names[op]))
    print("];")
    print()
for name, names in FAMILIES:
    print("/// Opcode numbers of %s." % name)
    print("#[allow(dead_code)]")
    print("pub mod %s {" % name.lower())
    seen = set()
    for op in sorted(names):
        const = names[op].upper()
        if const in seen:
            const = "%s_%X" % (const, op)  # a second opcode with the same mnemonic
        seen.add(const)
        print("    pub const %s: u16 = 0x%x;" % (const, op))
    print("}")
    print()
print("generated %d opcodes" % total, file=sys.stderr)
