//! xhsa-emu — an emulated AMD Instinct GPU that stands in for `libhsakmt.so.1` under the real,
//! unmodified ROCr, HIP and ROCm libraries.
//!
//! What it is: a thunk layer (the `hsaKmt*` ABI, in the `hsakmt` cdylib crate beside this one)
//! that speaks KFD uapi to an emulated KFD, and a device model behind it: an MI308X-shaped GPU
//! (80 CUs, reported as gfx90a) whose packet processor reads the real AQL and SDMA queues ROCr
//! creates, runs CPU models of known kernels or executes the others' gfx90a code on its ISA
//! interpreter ([`isa`]), and charges modelled time for every kernel.
//!
//! What it is not: a timing simulator of the ISA (time comes from the timing model, not from
//! instructions), nor part of libxhsa, which never knows it runs on an emulator.

pub mod config;
pub mod cp;
pub mod device;
pub mod isa;
pub mod kernels;
pub mod kfd;
pub mod launcher;
pub mod shared;
pub mod sys;
