//! The error mapping of `Kfd` on an fd that is not `/dev/kfd`: every ioctl fails with `ENOTTY`
//! and the message names the ioctl. (The safe methods are covered by the unit tests in
//! `src/kfd.rs`; the `unsafe fn`s are here so that the crate's only `unsafe` block stays its
//! `ioctl(2)` call.)

use std::fs::File;

use nix::errno::Errno;
use xhsa_ioctl::abi::*;
use xhsa_ioctl::{Kfd, KfdError};

fn dev_null() -> Kfd {
    Kfd::from_fd(File::open("/dev/null").expect("open /dev/null").into())
}

#[test]
fn get_queue_wave_state_names_the_ioctl() {
    let kfd = dev_null();
    let mut ctl_stack = vec![0u8; 4096];
    // SAFETY: /dev/null has no ioctls; the kernel answers ENOTTY without touching the buffer.
    let err = unsafe { kfd.get_queue_wave_state(1, &mut ctl_stack) }.unwrap_err();
    assert_eq!(err.errno, Errno::ENOTTY);
    assert!(err.to_string().starts_with("AMDKFD_IOC_GET_QUEUE_WAVE_STATE failed with ENOTTY"));
}

fn raw_ioctl<A: IoctlArgs + Default>(kfd: &Kfd) -> KfdError {
    let mut args = A::default();
    // SAFETY: /dev/null has no ioctls; nothing in `args` is dereferenced.
    unsafe { kfd.ioctl(&mut args) }.unwrap_err()
}

#[test]
fn every_request_through_the_generic_call_fails_with_enotty_naming_it() {
    let kfd = dev_null();
    let errors = [
        raw_ioctl::<GetVersionArgs>(&kfd),
        raw_ioctl::<CreateQueueArgs>(&kfd),
        raw_ioctl::<DestroyQueueArgs>(&kfd),
        raw_ioctl::<SetMemoryPolicyArgs>(&kfd),
        raw_ioctl::<GetClockCountersArgs>(&kfd),
        raw_ioctl::<GetProcessAperturesArgs>(&kfd),
        raw_ioctl::<UpdateQueueArgs>(&kfd),
        raw_ioctl::<CreateEventArgs>(&kfd),
        raw_ioctl::<DestroyEventArgs>(&kfd),
        raw_ioctl::<SetEventArgs>(&kfd),
        raw_ioctl::<ResetEventArgs>(&kfd),
        raw_ioctl::<WaitEventsArgs>(&kfd),
        raw_ioctl::<DbgRegisterArgs>(&kfd),
        raw_ioctl::<DbgUnregisterArgs>(&kfd),
        raw_ioctl::<DbgAddressWatchArgs>(&kfd),
        raw_ioctl::<DbgWaveControlArgs>(&kfd),
        raw_ioctl::<SetScratchBackingVaArgs>(&kfd),
        raw_ioctl::<GetTileConfigArgs>(&kfd),
        raw_ioctl::<SetTrapHandlerArgs>(&kfd),
        raw_ioctl::<GetProcessAperturesNewArgs>(&kfd),
        raw_ioctl::<AcquireVmArgs>(&kfd),
        raw_ioctl::<AllocMemoryOfGpuArgs>(&kfd),
        raw_ioctl::<FreeMemoryOfGpuArgs>(&kfd),
        raw_ioctl::<MapMemoryToGpuArgs>(&kfd),
        raw_ioctl::<UnmapMemoryFromGpuArgs>(&kfd),
        raw_ioctl::<SetCuMaskArgs>(&kfd),
        raw_ioctl::<GetQueueWaveStateArgs>(&kfd),
        raw_ioctl::<GetDmabufInfoArgs>(&kfd),
        raw_ioctl::<ImportDmabufArgs>(&kfd),
        raw_ioctl::<AllocQueueGwsArgs>(&kfd),
        raw_ioctl::<SmiEventsArgs>(&kfd),
        raw_ioctl::<SvmArgs>(&kfd),
        raw_ioctl::<SetXnackModeArgs>(&kfd),
        raw_ioctl::<CriuArgs>(&kfd),
        raw_ioctl::<GetAvailableMemoryArgs>(&kfd),
        raw_ioctl::<ExportDmabufArgs>(&kfd),
        raw_ioctl::<RuntimeEnableArgs>(&kfd),
        raw_ioctl::<DbgTrapArgs>(&kfd),
    ];
    assert_eq!(errors.len(), Request::ALL.len());
    for (err, req) in errors.iter().zip(Request::ALL) {
        assert_eq!(err.request, Some(req));
        assert_eq!(err.errno, Errno::ENOTTY, "{err}");
        assert_eq!(err.ioctl, req.name());
        let text = err.to_string();
        assert!(
            text.starts_with(&format!("{} failed with ENOTTY: not supported", req.name())),
            "{text}"
        );
    }
}

#[test]
fn dbg_trap_eperm_explains_the_permission_rule() {
    let err =
        KfdError::ioctl(Request::DbgTrap, Some(KFD_IOC_DBG_TRAP_SUSPEND_QUEUES), Errno::EPERM);
    assert_eq!(
        err.to_string(),
        "AMDKFD_IOC_DBG_TRAP(SUSPEND_QUEUES) failed with EPERM: not permitted: debug trap not \
         enabled for this hardware op (the target's runtime has not called \
         AMDKFD_IOC_RUNTIME_ENABLE) or target is not your process/ptrace child"
    );
    let source = std::error::Error::source(&err).expect("the errno is the source");
    assert_eq!(source.to_string(), Errno::EPERM.to_string());
}
