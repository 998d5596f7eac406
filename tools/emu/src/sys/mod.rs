//! The emulator's operating-system edge: futexes, the doorbell trap, raw device memory access,
//! the shared areas between processes, processes and descriptors, signals. Every `unsafe` of
//! the emulator outside its ABI layer (the thunk crate) lives here, each with its `// SAFETY:`
//! argument; other modules call the `unsafe fn`s here only under their `# Safety` obligation.

pub mod bytes;
pub mod cpu;
pub mod devmem;
pub mod doorbell;
pub mod futex;
pub mod mem;
pub mod process;
pub mod rdebug;
pub mod shm;
pub mod signal;
pub mod sock;
