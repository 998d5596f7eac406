//! CPU models of the project's own test kernels (`tests/kernels/*.hip`, `extern "C"`, so the
//! symbol names are unmangled). Each model computes exactly what the GPU code computes for the
//! dispatched grid: work-item `i` of the x dimension handles element `i`.
//!
//! Kernel arguments (byte offsets in the kernarg segment, as clang lays them out):
//! - `xhsa_vadd(const float* a @0, const float* b @8, float* c @16, u32 n @24)`: c = a + b
//! - `xhsa_saxpy(float a @0, const float* x @8, float* y @16, u32 n @24)`: y = a·x + y
//! - `xhsa_matmul(const float* A @0, const float* B @8, float* C @16, u32 n @24)`: C = A·B,
//!   n×n row-major, one work-item per element of C (x = column, y = row)
//! - `xhsa_synthetic(u64 wg_ns @0)`: no memory effect; each workgroup runs `wg_ns`
//! - `xhsa_synthetic_p(u64 wg_ns @0, u64 util_permille @8, u64 bytes_per_wg @16)`: as
//!   `xhsa_synthetic`, with a contention profile: each workgroup uses `util_permille` / 1000 of
//!   its CU's pipe and moves `bytes_per_wg` bytes of HBM (docs/timing-model-contention.md)
//! - `xhsa_null()`: no memory effect, shortest possible run

use super::{no_profile, streaming_wg_ns, Fault, KernelCtx, Model};
use crate::device::Profile;

fn vadd(ctx: &KernelCtx) -> Result<(), Fault> {
    let (a, b, c, n) = (ctx.arg_u64(0)?, ctx.arg_u64(8)?, ctx.arg_u64(16)?, ctx.arg_u32(24)?);
    let m = ctx.dispatch.grid[0].min(n) as usize;
    let (x, y) = (ctx.read_f32s(a, m)?, ctx.read_f32s(b, m)?);
    let out: Vec<f32> = x.iter().zip(&y).map(|(p, q)| p + q).collect();
    ctx.write_f32s(c, &out)
}

fn saxpy(ctx: &KernelCtx) -> Result<(), Fault> {
    let (a, xp, yp, n) = (ctx.arg_f32(0)?, ctx.arg_u64(8)?, ctx.arg_u64(16)?, ctx.arg_u32(24)?);
    let m = ctx.dispatch.grid[0].min(n) as usize;
    let x = ctx.read_f32s(xp, m)?;
    let mut y = ctx.read_f32s(yp, m)?;
    for (yi, xi) in y.iter_mut().zip(&x) {
        *yi = a.mul_add(*xi, *yi);
    }
    ctx.write_f32s(yp, &y)
}

fn matmul(ctx: &KernelCtx) -> Result<(), Fault> {
    let (a, b, c, n) =
        (ctx.arg_u64(0)?, ctx.arg_u64(8)?, ctx.arg_u64(16)?, ctx.arg_u32(24)? as usize);
    let (cols, rows) =
        ((ctx.dispatch.grid[0] as usize).min(n), (ctx.dispatch.grid[1] as usize).min(n));
    let ma = ctx.read_f32s(a, n * n)?;
    let mb = ctx.read_f32s(b, n * n)?;
    let mut mc = ctx.read_f32s(c, n * n)?;
    for r in 0..rows {
        for col in 0..cols {
            mc[r * n + col] = (0..n).map(|k| ma[r * n + k] * mb[k * n + col]).sum();
        }
    }
    ctx.write_f32s(c, &mc)
}

fn none(_: &KernelCtx) -> Result<(), Fault> {
    Ok(())
}

fn elementwise_ns(ctx: &KernelCtx) -> Result<u64, Fault> {
    // Three 4-byte streams per work-item.
    Ok(streaming_wg_ns(u64::from(ctx.dispatch.work_items_per_wg()) * 12))
}

fn matmul_ns(ctx: &KernelCtx) -> Result<u64, Fault> {
    // n multiply-adds per work-item at ~1 per ns per lane-group of 64.
    let n = u64::from(ctx.arg_u32(24)?);
    let items = u64::from(ctx.dispatch.work_items_per_wg());
    Ok((n * items / 64).max(1_000))
}

fn synthetic_ns(ctx: &KernelCtx) -> Result<u64, Fault> {
    ctx.arg_u64(0)
}

fn synthetic_profile(ctx: &KernelCtx) -> Result<Profile, Fault> {
    let util = ctx.arg_u64(8)?.min(1000) as f32 / 1000.0;
    Ok(Profile { cu_util: util, hbm_bytes: ctx.arg_u64(16)? })
}

fn null_ns(_: &KernelCtx) -> Result<u64, Fault> {
    Ok(1_000)
}

pub static MODELS: &[Model] = &[
    Model { name: "xhsa_vadd", run: vadd, wg_ns: elementwise_ns, profile: no_profile },
    Model { name: "xhsa_saxpy", run: saxpy, wg_ns: elementwise_ns, profile: no_profile },
    Model { name: "xhsa_matmul", run: matmul, wg_ns: matmul_ns, profile: no_profile },
    Model { name: "xhsa_synthetic", run: none, wg_ns: synthetic_ns, profile: no_profile },
    Model { name: "xhsa_synthetic_p", run: none, wg_ns: synthetic_ns, profile: synthetic_profile },
    Model { name: "xhsa_null", run: none, wg_ns: null_ns, profile: no_profile },
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::Dispatch;
    use crate::sys::devmem::{fake::FakeMemory, DeviceMemory};

    fn ctx<'a>(
        d: &'a Dispatch,
        m: &'a FakeMemory,
        ok: &'a dyn Fn(u64, u64) -> bool,
    ) -> KernelCtx<'a> {
        KernelCtx { dispatch: d, mem: m, accessible: ok }
    }

    fn put_f32s(m: &FakeMemory, addr: u64, v: &[f32]) {
        let b: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        m.write(addr, &b);
    }

    #[test]
    fn vadd_adds_only_the_covered_elements() {
        let m = FakeMemory::default();
        put_f32s(&m, 0x1000, &[1.0, 2.0, 3.0]);
        put_f32s(&m, 0x2000, &[10.0, 20.0, 30.0]);
        put_f32s(&m, 0x3000, &[0.0, 0.0, -1.0]);
        m.write(0x100, &0x1000u64.to_le_bytes());
        m.write(0x108, &0x2000u64.to_le_bytes());
        m.write(0x110, &0x3000u64.to_le_bytes());
        m.write(0x118, &3u32.to_le_bytes());
        let d = Dispatch {
            kernel_object: 1,
            grid: [2, 1, 1],
            wg: [64, 1, 1],
            kernarg: 0x100,
            group_segment: 0,
            private_segment: 0,
        };
        let ok = |_, _| true;
        vadd(&ctx(&d, &m, &ok)).unwrap();
        let c = ctx(&d, &m, &ok).read_f32s(0x3000, 3).unwrap();
        assert_eq!(c, vec![11.0, 22.0, -1.0]);
    }

    #[test]
    fn matmul_matches_the_definition() {
        let m = FakeMemory::default();
        put_f32s(&m, 0x1000, &[1.0, 2.0, 3.0, 4.0]);
        put_f32s(&m, 0x2000, &[5.0, 6.0, 7.0, 8.0]);
        for (off, v) in [(0u64, 0x1000u64), (8, 0x2000), (16, 0x3000)] {
            m.write(0x100 + off, &v.to_le_bytes());
        }
        m.write(0x118, &2u32.to_le_bytes());
        let d = Dispatch {
            kernel_object: 1,
            grid: [2, 2, 1],
            wg: [16, 16, 1],
            kernarg: 0x100,
            group_segment: 0,
            private_segment: 0,
        };
        let ok = |_, _| true;
        matmul(&ctx(&d, &m, &ok)).unwrap();
        assert_eq!(ctx(&d, &m, &ok).read_f32s(0x3000, 4).unwrap(), vec![19.0, 22.0, 43.0, 50.0]);
    }

    #[test]
    fn synthetic_p_reads_its_profile() {
        let m = FakeMemory::default();
        for (off, v) in [(0u64, 5000u64), (8, 400), (16, 65536)] {
            m.write(0x100 + off, &v.to_le_bytes());
        }
        let d = Dispatch {
            kernel_object: 1,
            grid: [64, 1, 1],
            wg: [64, 1, 1],
            kernarg: 0x100,
            group_segment: 0,
            private_segment: 0,
        };
        let ok = |_, _| true;
        assert_eq!(synthetic_ns(&ctx(&d, &m, &ok)).unwrap(), 5000);
        assert_eq!(
            synthetic_profile(&ctx(&d, &m, &ok)).unwrap(),
            Profile { cu_util: 0.4, hbm_bytes: 65536 }
        );
    }

    #[test]
    fn an_unmapped_pointer_is_a_fault() {
        let m = FakeMemory::default();
        m.write(0x100, &0xdead_0000u64.to_le_bytes());
        let d = Dispatch {
            kernel_object: 1,
            grid: [4, 1, 1],
            wg: [4, 1, 1],
            kernarg: 0x100,
            group_segment: 0,
            private_segment: 0,
        };
        let ok = |a: u64, _| a < 0x1000;
        let e = vadd(&ctx(&d, &m, &ok)).unwrap_err();
        assert_eq!(e.addr, 0xdead_0000);
    }
}
