//! The Linux ioctl request encoding: `_IOC(dir, type, nr, size)` from
//! `include/uapi/asm-generic/ioctl.h`, as `const fn`s so that every `AMDKFD_IOC_*` number in
//! [`super::request`] follows from `size_of` of its argument struct.
//!
//! A request number packs four fields, low bits first:
//!
//! | field  | bits (generic) | meaning                                             |
//! |--------|----------------|-----------------------------------------------------|
//! | `nr`   | 0..8           | command number within the driver (`0x01..=0x26`)    |
//! | `type` | 8..16          | driver letter, `'K'` for amdkfd                     |
//! | `size` | 16..30         | `sizeof` the argument struct                        |
//! | `dir`  | 30..32         | who copies: none, user→kernel, kernel→user, or both |
//!
//! powerpc, mips and sparc use 13 size bits and 3 direction bits with other direction values;
//! the constants below follow the target so the numbers are right there too.

/// The type of an ioctl request number as `ioctl(2)` takes it (`unsigned long` in glibc).
pub type RawRequest = libc::c_ulong;

#[cfg(not(any(
    target_arch = "powerpc",
    target_arch = "powerpc64",
    target_arch = "mips",
    target_arch = "mips32r6",
    target_arch = "mips64",
    target_arch = "mips64r6",
    target_arch = "sparc",
    target_arch = "sparc64"
)))]
mod arch {
    pub const IOC_SIZEBITS: u32 = 14;
    pub const IOC_DIRBITS: u32 = 2;
    pub const IOC_NONE: u32 = 0;
    pub const IOC_WRITE: u32 = 1;
    pub const IOC_READ: u32 = 2;
}

#[cfg(any(
    target_arch = "powerpc",
    target_arch = "powerpc64",
    target_arch = "mips",
    target_arch = "mips32r6",
    target_arch = "mips64",
    target_arch = "mips64r6",
    target_arch = "sparc",
    target_arch = "sparc64"
))]
mod arch {
    pub const IOC_SIZEBITS: u32 = 13;
    pub const IOC_DIRBITS: u32 = 3;
    pub const IOC_NONE: u32 = 1;
    pub const IOC_WRITE: u32 = 4;
    pub const IOC_READ: u32 = 2;
}

pub use arch::{IOC_DIRBITS, IOC_NONE, IOC_READ, IOC_SIZEBITS, IOC_WRITE};

/// Width of the `nr` field.
pub const IOC_NRBITS: u32 = 8;
/// Width of the `type` field.
pub const IOC_TYPEBITS: u32 = 8;
/// Bit position of the `nr` field.
pub const IOC_NRSHIFT: u32 = 0;
/// Bit position of the `type` field.
pub const IOC_TYPESHIFT: u32 = IOC_NRSHIFT + IOC_NRBITS;
/// Bit position of the `size` field.
pub const IOC_SIZESHIFT: u32 = IOC_TYPESHIFT + IOC_TYPEBITS;
/// Bit position of the `dir` field.
pub const IOC_DIRSHIFT: u32 = IOC_SIZESHIFT + IOC_SIZEBITS;

/// The direction of an ioctl's argument copy, named after the macro that makes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IocDir {
    /// `_IO`: no argument is copied.
    None,
    /// `_IOW`: the kernel reads the argument (user → kernel).
    Write,
    /// `_IOR`: the kernel writes the argument (kernel → user).
    Read,
    /// `_IOWR`: both.
    ReadWrite,
}

impl IocDir {
    /// The value of the `dir` field.
    pub const fn bits(self) -> u32 {
        match self {
            IocDir::None => IOC_NONE,
            IocDir::Write => IOC_WRITE,
            IocDir::Read => IOC_READ,
            IocDir::ReadWrite => IOC_READ | IOC_WRITE,
        }
    }

    /// The direction whose `dir` field is `bits`, if any.
    pub const fn from_bits(bits: u32) -> Option<IocDir> {
        if bits == IOC_NONE {
            Some(IocDir::None)
        } else if bits == IOC_WRITE {
            Some(IocDir::Write)
        } else if bits == IOC_READ {
            Some(IocDir::Read)
        } else if bits == IOC_READ | IOC_WRITE {
            Some(IocDir::ReadWrite)
        } else {
            None
        }
    }
}

/// `_IOC(dir, type, nr, size)`. Panics (at compile time, in a `const`) if `size` does not fit
/// the size field, as the kernel's `_IOC_TYPECHECK` would refuse to compile.
pub const fn ioc(dir: IocDir, ty: u8, nr: u8, size: usize) -> RawRequest {
    assert!(size < (1 << IOC_SIZEBITS), "ioctl argument too large for the size field");
    let raw = (dir.bits() << IOC_DIRSHIFT)
        | ((ty as u32) << IOC_TYPESHIFT)
        | ((nr as u32) << IOC_NRSHIFT)
        | ((size as u32) << IOC_SIZESHIFT);
    raw as RawRequest
}

/// `_IO(type, nr)`.
pub const fn io(ty: u8, nr: u8) -> RawRequest {
    ioc(IocDir::None, ty, nr, 0)
}

/// `_IOR(type, nr, T)`.
pub const fn ior<T>(ty: u8, nr: u8) -> RawRequest {
    ioc(IocDir::Read, ty, nr, core::mem::size_of::<T>())
}

/// `_IOW(type, nr, T)`.
pub const fn iow<T>(ty: u8, nr: u8) -> RawRequest {
    ioc(IocDir::Write, ty, nr, core::mem::size_of::<T>())
}

/// `_IOWR(type, nr, T)`.
pub const fn iowr<T>(ty: u8, nr: u8) -> RawRequest {
    ioc(IocDir::ReadWrite, ty, nr, core::mem::size_of::<T>())
}

/// The four fields of a request number, as `_IOC_DIR`, `_IOC_TYPE`, `_IOC_NR` and
/// `_IOC_SIZE` extract them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IocFields {
    /// The raw `dir` field (see [`IocDir::from_bits`]).
    pub dir: u32,
    /// The driver letter.
    pub ty: u8,
    /// The command number.
    pub nr: u8,
    /// The argument size in bytes.
    pub size: usize,
}

impl IocFields {
    /// Splits `raw` into its fields. Bits above the `dir` field (possible in a 64-bit
    /// `unsigned long`) are ignored, as the kernel's `unsigned int cmd` drops them.
    pub const fn decode(raw: RawRequest) -> IocFields {
        let raw = raw as u32;
        IocFields {
            dir: (raw >> IOC_DIRSHIFT) & ((1 << IOC_DIRBITS) - 1),
            ty: ((raw >> IOC_TYPESHIFT) & ((1 << IOC_TYPEBITS) - 1)) as u8,
            nr: ((raw >> IOC_NRSHIFT) & ((1 << IOC_NRBITS) - 1)) as u8,
            size: ((raw >> IOC_SIZESHIFT) & ((1 << IOC_SIZEBITS) - 1)) as usize,
        }
    }

    /// The direction, if the `dir` field holds a valid one.
    pub const fn direction(&self) -> Option<IocDir> {
        IocDir::from_bits(self.dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_like_the_kernel_macros() {
        // _IOR('K', 1, 8 bytes) and _IOWR('K', 2, 96 bytes) on x86-64, aarch64, riscv64.
        if IOC_SIZEBITS == 14 {
            assert_eq!(ioc(IocDir::Read, b'K', 0x01, 8), 0x8008_4B01);
            assert_eq!(ioc(IocDir::ReadWrite, b'K', 0x02, 96), 0xC060_4B02);
            assert_eq!(ioc(IocDir::Write, b'K', 0x07, 24), 0x4018_4B07);
            assert_eq!(io(b'K', 0x30), 0x0000_4B30);
        }
    }

    #[test]
    fn decode_inverts_encode() {
        for dir in [IocDir::None, IocDir::Write, IocDir::Read, IocDir::ReadWrite] {
            for (nr, size) in [(0u8, 0usize), (1, 8), (0x26, 32), (0xff, (1 << IOC_SIZEBITS) - 1)] {
                let f = IocFields::decode(ioc(dir, b'K', nr, size));
                assert_eq!(f.direction(), Some(dir));
                assert_eq!((f.ty, f.nr, f.size), (b'K', nr, size));
            }
        }
    }
}
