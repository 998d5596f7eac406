//! The emulator's operating-system edge: futexes, the doorbell trap, raw device memory access.
//! Every `unsafe` of the device side lives here, each with its `// SAFETY:` argument.

pub mod devmem;
pub mod doorbell;
pub mod futex;
pub mod mem;
pub mod rdebug;
pub mod sock;
