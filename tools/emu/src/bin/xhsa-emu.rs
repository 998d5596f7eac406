//! `xhsa-emu`: run a program on the emulated GPU(s), or describe the emulated device.
//! See `xhsa_emu::launcher`.

fn main() -> std::process::ExitCode {
    xhsa_emu::launcher::main(xhsa_emu::launcher::cli::parse())
}
